"""Long-run averages on MDPs on the command line: PRISM's output for
`Smin/Smax` and `R{..}min/max=? [ S ]`, the certified bound, the fallback
line when linear programming takes over, and the error for `S=?`."""

from __future__ import annotations

from lra_models import HAND_MDP as MDP

from jaxmc.cli import main


# by hand (tests/lra_models.py): 1/2, 0, (2 + 1) / 2, (0 + 0.5) / 2
PROPS = 'Smax=? [ "one" ]\nSmin=? [ "one" ]\nR{"r"}max=? [ S ]\nR{"r"}min=? [ S ]\n'


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_values_and_bounds(capsys, tmp_path):
    (tmp_path / "m.nm").write_text(MDP)
    (tmp_path / "m.props").write_text(PROPS)
    code, out, err = run(capsys, tmp_path / "m.nm", tmp_path / "m.props")
    assert code == 0, err
    got = [ln for ln in out.splitlines() if ln.startswith("Result:")]
    values = [float(ln.split()[1]) for ln in got]
    want = [0.5, 0.0, 1.5, 0.25]
    assert all(abs(v - w) <= 1e-6 * w + 1e-12 for v, w in zip(values, want)), got


def test_linear_programming_fallback_is_printed(capsys, tmp_path):
    walk = (
        "mdp\nmodule m\n s : [0..5] init 0;\n"
        " [f] true -> 0.5:(s'=mod(s+5,6)) + 0.5:(s'=mod(s+1,6));\n"
        " [b] true -> 0.4:(s'=mod(s+1,6)) + 0.6:(s'=mod(s+5,6));\nendmodule\n"
    )
    (tmp_path / "w.nm").write_text(walk)
    code, out, err = run(
        capsys, tmp_path / "w.nm", "--prop", "Smax=? [ s=0 ]", "-maxiters", "3"
    )
    assert code == 0, err
    assert "Fallback: value_iteration: max_iters, 3 iterations" in out
    assert "linear programming took over" in out


def test_direction_required(capsys, tmp_path):
    (tmp_path / "m.nm").write_text(MDP)
    code, out, err = run(capsys, tmp_path / "m.nm", "--prop", 'S=? [ "one" ]')
    assert code == 1
    assert "Smin=?/Smax=?" in err and "hint: write Smax=?" in err
