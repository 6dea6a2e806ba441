"""`-exportstrat FILE[:OPTIONS]`: PRISM's strategy files, byte for byte
against the files PRISM's regression suite keeps (`bugfixes/stratgenreach`,
`advgenexplicit`, `advgenexplicit2`), the other formats and options, and
the properties that have no memoryless scheduler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import jaxmc
from jaxmc.cli import main


ROOT = Path(__file__).resolve().parents[2]
BUGFIXES = ROOT / ".." / "shared" / "models" / "prism-tests" / "bugfixes"
ROBOT = ROOT / "examples" / "models" / "robot.nm"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _suite_case(tmp_path, name):
    if not (BUGFIXES / f"{name}.nm").exists():
        pytest.skip("PRISM's regression suite not available")
    for f in BUGFIXES.glob(f"{name}.nm*"):
        shutil.copy(f, tmp_path / f.name)
    args = (tmp_path / f"{name}.nm.props.args").read_text().splitlines()
    return args


@pytest.mark.parametrize(
    "name, expected",
    [
        ("stratgenreach", "stratgenreach.nm.props.strat"),
        ("advgenexplicit", "advgenexplicit.nm.props.adv.tra"),
        ("advgenexplicit2", "advgenexplicit2.nm.props.adv.tra"),
    ],
)
def test_prism_suite_strategy_files(tmp_path, capsys, monkeypatch, name, expected):
    args = _suite_case(tmp_path, name)
    reference = (tmp_path / expected).read_bytes()
    monkeypatch.chdir(tmp_path)
    for line in args:  # each configuration of the .args file
        (tmp_path / expected).unlink()
        switches = [a for a in line.split() if a not in ("-ex", "-sparse", "-nopre")]
        code, out, err = run(capsys, f"{name}.nm", f"{name}.nm.props", *switches)
        assert code == 0, err
        assert (tmp_path / expected).read_bytes() == reference, line


def test_formats_and_options(tmp_path, capsys):
    prop = 'Pmin=? [ F "goal" ]'
    files = {
        "a.txt": "(0)=dash\n(1)=walk\n(3)=stay\n",
        "b.txt:states=false": "0=dash\n1=walk\n3=stay\n",
        "c.txt:type=indices": "0=1\n1=0\n3=0\n",
        "d.tra": "# Transitions (DTMC)\n4 6\n0 2 0.8 dash\n0 3 0.2 dash\n"
        "1 0 0.1 walk\n1 2 0.9 walk\n2 2 1 stay\n3 3 1 stay\n",
        "e.tra:mode=restrict": "# Transitions (MDP)\n4 4 6\n0 0 2 0.8 dash\n"
        "0 0 3 0.2 dash\n1 0 0 0.1 walk\n1 0 2 0.9 walk\n2 0 2 1 stay\n"
        "3 0 3 1 stay\n",
    }
    for spec, text in files.items():
        path = tmp_path / spec.split(":")[0]
        code, out, err = run(capsys, ROBOT, "--prop", prop, "-exportstrat",
                             f"{tmp_path / spec}")  # fmt: skip
        assert code == 0, err
        assert path.read_text() == text, spec
        assert f'Exporting strategy to file "{path}"' in out
    code, out, _ = run(capsys, ROBOT, "--prop", prop, "-exportstrat", "stdout")
    assert "Exporting strategy below:\n(0)=dash\n(1)=walk\n(3)=stay\n" in out


def test_state_order_is_prisms(tmp_path):
    """States are listed in PRISM's (lexicographic) order, not jaxmc's BFS
    order, with their valuations; the actions are the scheduler's."""
    text = """
    mdp
    module m
      x : [0..2] init 2;
      b : bool init true;
      [up]   x<2 -> (x'=x+1);
      [down] x>0 -> 0.5:(x'=x-1) + 0.5:(b'=!b);
      [stop] x=0 -> true;
    endmodule
    """
    model = jaxmc.load_model_string(text)
    result = jaxmc.check(model, "Pmax=? [ F x=0 & !b ]", scheduler=True)
    lines = jaxmc.format_strategy(model, result).splitlines()
    states = [line.split("=")[0] for line in lines]
    key = [tuple(int(v == "true") if v in ("true", "false") else int(v)
                 for v in s[1:-1].split(",")) for s in states]  # fmt: skip
    assert key == sorted(key) and len(key) > 1
    explicit = jaxmc.build(model)
    for line in lines:
        s, act = line.split("=")
        vals = s[1:-1].split(",")
        i = next(
            i
            for i in range(explicit.num_states)
            if explicit.state(i) == {"x": int(vals[0]), "b": vals[1] == "true"}
        )
        assert result.scheduler.actions[i] == act


def test_no_strategy_for_step_bounds_or_dtmcs(tmp_path, capsys):
    out_file = tmp_path / "s.txt"
    code, out, _ = run(capsys, ROBOT, "--prop", 'Pmax=? [ F<=3 "goal" ]',
                       "-exportstrat", out_file)  # fmt: skip
    assert code == 0 and "Result: 0.98" in out
    assert "No strategy exported: a step-bounded property's optimal scheduler" in out
    assert not out_file.exists()
    die = ROOT / "examples" / "models" / "die.pm"
    code, out, _ = run(capsys, die, "--prop", "P=? [ F s=7 ]", "-exportstrat", out_file)
    assert code == 0 and "No strategy exported: only MDPs" in out


def test_bad_options_are_errors(capsys):
    for spec in ("s.txt:type=foo", "s.txt:reach=maybe", "s.dot"):
        code, _, err = run(capsys, ROBOT, "--prop", 'Pmax=? [ F "goal" ]',
                           "-exportstrat", spec)  # fmt: skip
        assert code == 1, spec
        assert "exportstrat" in err or "Dot" in err, err
