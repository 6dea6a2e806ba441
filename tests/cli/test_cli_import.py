"""-exportmodel / -importmodel with PRISM's file naming: numbered reward
files (`base1.srew`, ...) with the structures' names in their headers, the
combined `.pexp` file, compressed `.gz`/`.xz` files, and clear errors for
what cannot be read."""

import gzip
import lzma
import re

import pytest

from jaxmc.cli import main


MODEL = """mdp
module m
  s : [0..3] init 0;
  [go] s<3 -> 0.5:(s'=s+1) + 0.5:(s'=min(s+2,3));
  [stay] s<3 -> (s'=s);
  [] s=3 -> true;
endmodule
label "end" = s=3;
rewards "time"
  true : 1;
endrewards
rewards "energy"
  [go] true : 2.5;
  s=1 : 0.25;
endrewards
rewards "moves"
  [go] true : 1;
endrewards
"""

PROPS = """
"t": Rmin=? [ F "end" ];
"e": Rmin=? [ F "end" ];
"m": Rmin=? [ F "end" ];
"""


def _props(path):
    text = PROPS.replace('"t": R', 'R{"time"}').replace('"e": R', 'R{"energy"}')
    text = text.replace('"m": R', 'R{"moves"}')
    path.write_text(text)
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def results(out):
    return [float(x) for x in re.findall(r"^Result: (\S+)", out, re.M) if x != "Error"]


@pytest.fixture
def exported(tmp_path, capsys):
    model = tmp_path / "m.nm"
    model.write_text(MODEL)
    props = _props(tmp_path / "m.props")
    code, out, err = run(capsys, model, props, "-exportmodel", tmp_path / "base.all")
    assert code == 0, err
    return tmp_path, props, results(out)


def test_numbered_reward_files_round_trip(exported, capsys):
    tmp_path, props, original = exported
    assert len(original) == 3 and original[0] == pytest.approx(2.25)
    for i, name in enumerate(("time", "energy", "moves"), 1):
        for kind in ("srew", "trew"):
            head = (tmp_path / f"base{i}.{kind}").read_text().splitlines()[0]
            assert head == f'# Reward structure "{name}"'
    assert not (tmp_path / "base.srew").exists()
    code, out, err = run(capsys, "-importmodel", tmp_path / "base.all", props)
    assert code == 0, err
    assert results(out) == pytest.approx(original, rel=1e-9)
    # A subset naming the reward files reads the numbered ones too.
    code, out, err = run(
        capsys, "-importmodel", f"{tmp_path}/base.tra,lab,srew,trew", props
    )
    assert code == 0, err
    assert results(out) == pytest.approx(original, rel=1e-9)


def test_missing_reward_structure_is_an_error(exported, capsys):
    tmp_path, props, _ = exported
    code, out, err = run(
        capsys,
        "-importmodel",
        tmp_path / "base.all",
        "--prop",
        'R{"cost"}=? [ F "end" ]',
        "--prop",
        'Rmin=? [ F "end" ]',
    )
    assert code == 1
    assert 'unknown reward structure "cost"' in err and '"time"' in err
    assert results(out) == pytest.approx([2.25])  # R: the first structure, "time"
    # Without the reward files, no structure: an error, not a silent 0.
    code, out, err = run(capsys, "-importmodel", f"{tmp_path}/base.tra,lab", props)
    assert code == 1 and "Result: 0" not in out
    code, _, err = run(capsys, "-importmodel", f"{tmp_path}/nope.tra,srew", props)
    assert code == 1 and "No such file" in err and "nope1.srew" in err


def test_pexp_and_compressed_files(exported, capsys):
    tmp_path, props, original = exported
    code, out, err = run(
        capsys,
        "-importmodel",
        tmp_path / "base.all",
        "-exportmodel",
        tmp_path / "both.pexp",
    )
    assert code == 0, err
    text = (tmp_path / "both.pexp").read_text()
    assert text.startswith("# Transitions (MDP)\n")
    assert text.count('# Reward structure "energy"') == 2
    code, out, err = run(capsys, "-importmodel", tmp_path / "both.pexp", props)
    assert code == 0, err
    assert results(out) == pytest.approx(original, rel=1e-9)
    with lzma.open(tmp_path / "both.pexp.xz", "wt") as f:
        f.write(text)
    code, out, err = run(capsys, "-importmodel", tmp_path / "both.pexp.xz", props)
    assert code == 0, err
    assert results(out) == pytest.approx(original, rel=1e-9)
    for p in list(tmp_path.glob("base*.*")):
        with gzip.open(f"{p}.gz", "wt") as f:
            f.write(p.read_text())
        p.unlink()
    code, out, err = run(capsys, "-importmodel", tmp_path / "base.all.gz", props)
    assert code == 0, err
    assert results(out) == pytest.approx(original, rel=1e-9)


def test_bad_import_specs_are_clear_errors(tmp_path, capsys):
    code, _, err = run(
        capsys, "-importmodel", f"{tmp_path}/m.tra,foo", "--prop", "true"
    )
    assert code == 1 and "unknown explicit file kind `foo`" in err
    pomdp = tmp_path / "p.pexp"
    pomdp.write_text("# Transitions (POMDP)\n1 1 1 1\n0 0 0 1\n\n# Observations\n")
    code, _, err = run(capsys, "-importmodel", pomdp, "--prop", "true")
    assert code == 1 and "POMDPs) are not supported" in err and "Traceback" not in err
    code, _, err = run(
        capsys,
        "-importmodel",
        tmp_path / "m.tra.gz",
        "--prop",
        "true",
        "-exportmodel",
        tmp_path / "x.all.gz",
    )
    assert code == 1
