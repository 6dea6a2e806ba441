"""The command line as PRISM users drive it: PRISM's switches matched
exactly (never as prefixes of others), engine and method switches with a
note for what jaxmc does instead, -nofixdl, --prop errors located in the text
as typed, --max-states and exploration progress, and the last-resort handler
(exit 3, a crash report, no traceback)."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc import cli
from jaxmc.cli import main


ROOT = Path(__file__).resolve().parents[2]
DIE = str(ROOT / "examples" / "models" / "die.pm")
DIE_PROPS = str(ROOT / "examples" / "models" / "die.pm.props")
SIX = "P=? [ F s=7 & d=6 ]"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def calls(monkeypatch):
    """The keyword arguments of every `jaxmc.check` call, the fields of its
    `options` included."""
    seen = []
    real = jaxmc.check

    def spy(*a, **kw):
        options = kw.get("options")
        fields = dataclasses.asdict(options) if options is not None else {}
        seen.append({**fields, **kw})
        return real(*a, **kw)

    monkeypatch.setattr(jaxmc, "check", spy)
    return seen


def test_ex_is_the_explicit_engine_not_an_export(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "die.pm"
    model.write_text(Path(DIE).read_text())
    code, out, err = run(capsys, model, "--prop", SIX, "-ex")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["die.pm"]  # nothing written
    assert "note" not in err  # -ex is what jaxmc is
    for typo in ("-exportmode", "-export", "-impor"):  # prefixes are not switches
        with pytest.raises(SystemExit) as e:
            main([str(model), typo, "x"])
        assert e.value.code == 2
        assert "unrecognized arguments" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["die.pm"]


@pytest.mark.parametrize(
    "switch, note",
    [
        ("-s", "-sparse (the sparse engine): jaxmc has one engine"),
        ("-sparse", "-sparse (the sparse engine)"),
        (
            "-h",
            "-hybrid (the hybrid engine): jaxmc has one engine, explicit-state; "
            "ignored",
        ),
        ("-hybrid", "-hybrid (the hybrid engine)"),
        ("-m", "-mtbdd (the MTBDD engine)"),
        ("-mtbdd", "-mtbdd (the MTBDD engine)"),
        (
            "-politer",
            "-politer (policy iteration) is not implemented; MDPs are solved "
            "by value iteration",
        ),
        ("-modpoliter", "-modpoliter (modified policy iteration) is not implemented"),
        ("-lp", "-linprog (linear programming) is not implemented"),
        (
            "-topological",
            "-topological (topological value iteration) is not implemented",
        ),
        ("-nopre", "-nopre: jaxmc always runs the graph precomputation"),
        (
            "-omega",
            "-omega: no over-relaxation method (JOR/SOR) is implemented; ignored",
        ),
    ],
)
def test_switches_jaxmc_does_not_have_give_a_note(capsys, switch, note):
    extra = ["0.9"] if switch == "-omega" else []
    code, out, err = run(capsys, DIE, "--prop", SIX, switch, *extra)
    assert code == 0, err
    assert f"note: {note}" in err
    assert len([ln for ln in err.splitlines() if ln.startswith("note:")]) == 1
    assert "Result: 0.1666" in out


@pytest.mark.parametrize(
    "switch, method, note",
    [
        ("-gs", "gauss_seidel", None),
        ("-gaussseidel", "gauss_seidel", None),
        ("-jac", "jacobi", None),
        ("-pwr", "power", None),
        (
            "-jor",
            "jacobi",
            "-jor (Jacobi over-relaxation) is not implemented; using Jacobi iteration",
        ),
        (
            "-sor",
            "gauss_seidel",
            "-sor (successive over-relaxation) is not implemented; using Gauss-Seidel",
        ),
        ("-bsor", "gauss_seidel", "-bsor (backwards SOR)"),
        (
            "-bgs",
            "gauss_seidel",
            "-bgaussseidel (backwards Gauss-Seidel) is not implemented",
        ),
        (
            "-pgs",
            "gauss_seidel",
            "-pgaussseidel (pseudo-Gauss-Seidel) is not implemented",
        ),
    ],
)
def test_method_switches(capsys, calls, switch, method, note):
    code, out, err = run(capsys, DIE, "--prop", SIX, switch)
    assert code == 0, err
    assert calls[-1]["method"] == method
    if note:
        assert f"note: {note}" in err
    else:
        assert "note:" not in err


def test_e_is_epsilon_and_help_is_dash_help(capsys, calls):
    code, _, err = run(capsys, DIE, "--prop", SIX, "-e", "1e-9", "-rel")
    assert code == 0, err
    assert calls[-1]["epsilon"] == 1e-9 and calls[-1]["relative"]
    code, _, _ = run(capsys, DIE, "--prop", SIX, "-abs")
    assert calls[-1]["relative"] is False
    for flag in ("-help", "--help"):
        with pytest.raises(SystemExit) as e:
            main([flag])
        assert e.value.code == 0
        assert "-hybrid" in capsys.readouterr().out


def test_exact_is_refused(capsys):
    code, _, err = run(capsys, DIE, "--prop", SIX, "-exact")
    assert code == 1
    assert "exact (rational arithmetic) model checking is not supported" in err


DEADLOCKS = """dtmc
module m
  x : [0..20] init 0;
  b : bool init true;
  [] x<5 -> 0.5:(x'=2*x+6) + 0.5:(x'=x+1);
endmodule
"""


def test_nofixdl_lists_deadlock_states(capsys, tmp_path):
    model = tmp_path / "dl.pm"
    model.write_text(DEADLOCKS)
    code, out, err = run(capsys, model, "--prop", "P=? [ F x=6 ]", "-nofixdl")
    assert code == 1
    assert err.startswith(f"{model}:1:1: error: the model has 6 deadlock states")
    assert "(x=6, b=true)" in err and "... and 1 more" in err
    assert "Result:" not in out
    code, out, err = run(capsys, model, "--prop", "P=? [ F x=6 ]", "-fixdl")
    assert code == 0 and "deadlocks in 6 states were fixed" in out
    code, out, _ = run(capsys, model, "--prop", "P=? [ F x=6 ]")  # the default
    assert code == 0 and "Result: 0.5" in out


def test_prop_syntax_error_is_located_in_the_text_as_typed(capsys):
    code, out, err = run(capsys, DIE, DIE_PROPS, "--prop", "P=? [ F s=7 & d=6")
    assert code == 1
    assert err.startswith("<--prop 1>:1:18: syntax error: unexpected end of input")
    assert "';'" not in err and " 1 | P=? [ F s=7 & d=6\n" in err


def test_prop_check_errors_are_located_per_prop(capsys):
    code, out, err = run(
        capsys,
        DIE,
        DIE_PROPS,
        "--prop",
        'P=? [ F "six" ]',
        "--prop",
        "P=? [ F zz=1 ]",
        "--prop",
        'R{"nope"}=? [ F s=7 ]',
        "--prop",
        "P=? [ F s=7 & d=2 ]",
    )
    assert code == 1
    assert "<--prop 1>:1:9: error: type error" in err
    assert "<--prop 2>:1:9: error: unknown identifier `zz`" in err
    assert '<--prop 3>:1:1: error: unknown reward structure "nope"' in err
    assert re.search(r"Model checking: P=\? \[ F s=7 & d=2 \]\nResult: 0\.1666", out)


def test_prop_model_checking_error_is_located_in_its_prop(capsys, tmp_path):
    model = tmp_path / "m.pm"
    model.write_text(
        "dtmc\nmodule m\n  x : [0..1] init 0;\n"
        "  [] true -> 0.5:(x'=0) + 0.5:(x'=1);\nendmodule\n"
    )
    code, _, err = run(
        capsys, model, DIE_PROPS, "--property", "5", "--prop", "R=? [ F x=1 ]"
    )
    assert code == 1
    assert "<--prop 1>:1:1: error: the model has no reward structures" in err


COUNTER = """dtmc
module m
  x : [0..1000000000] init 0;
  [] true -> (x'=min(x+1,1000000000));
endmodule
"""


def test_max_states_names_the_growing_variable(capsys, tmp_path):
    model = tmp_path / "counter.pm"
    model.write_text(COUNTER)
    code, out, err = run(
        capsys, model, "--prop", "P=? [ F x=5 ]", "--max-states", "1000"
    )
    assert code == 1
    assert f"{model}:3:3: error: more than 1,000 states (max_states)" in err
    assert "`x` now 0..999 (declared [0..1000000000])" in err
    assert "--max-states" in err and "Traceback" not in err


def test_progress_lines_on_a_non_terminal_stderr(capsys, tmp_path, monkeypatch):
    from jaxmc.cli import progress
    from jaxmc.explore import builder

    monkeypatch.setattr(builder, "PROGRESS_INTERVAL", 0.0)
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    model = tmp_path / "chain.pm"
    model.write_text(
        "dtmc\nmodule m\n  x : [0..200] init 0;\n  [] x<200 -> (x'=x+1);\n"
        "  [] x=200 -> true;\nendmodule\n"
    )
    code, out, err = run(capsys, model, "--prop", "P=? [ F x=200 ]")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("exploring: ")]
    assert len(lines) > 10 and "\r" not in err
    assert re.fullmatch(
        r"exploring: [\d,]+ states, [\d,]+ levels, [\d,]+ queued, "
        r"[\d,]+ states/s, memory [\d.]+ GiB, [\d.]+ s",
        lines[-1],
    )
    assert err.splitlines()[-1].startswith("explored: 201 states, 201 levels, 0 queued")
    code, _, err = run(capsys, model, "--prop", "P=? [ F x=200 ]", "--quiet")
    assert code == 0 and "exploring" not in err


def test_internal_error_exit_3_with_a_crash_report(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)

    def boom(*a, **kw):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(jaxmc, "check", boom)
    code, _, err = run(capsys, DIE, "--prop", SIX)
    assert code == 3
    assert "internal error: RuntimeError: boom\n" in err and "Traceback" not in err
    (report,) = tmp_path.glob("jaxmc-crash-*.txt")
    assert str(report) in err
    text = report.read_text()
    assert "Traceback" in text and "RuntimeError: boom" in text and "--prop" in text
    for sub, module in (("sweep", cli.sweep), ("plot-matrix", cli.plot)):
        monkeypatch.setattr(module, "run", boom)
        argv = (
            [sub, DIE, "--prop", SIX, "--param", "p=1"]
            if sub == "sweep"
            else [sub, DIE, "-o", str(tmp_path / "x.png")]
        )
        code, _, err = run(capsys, *argv)
        assert code == 3 and "internal error: RuntimeError: boom" in err
        assert "Traceback" not in err


def test_internal_error_in_a_subprocess_has_no_traceback(tmp_path):
    # A broken argument that only fails deep inside: the parser is fine, the
    # run raises a non-Jaxmc error in a fresh process (no monkeypatching).
    code = (
        "import sys, jaxmc, jaxmc.cli as c\n"
        "def boom(*a, **k): raise ZeroDivisionError('deep')\n"
        "jaxmc.load_model = boom\n"
        f"sys.exit(c.main([{DIE!r}, '--prop', 'P=? [ F s=7 ]']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={
            "TMPDIR": str(tmp_path),
            "PATH": "/usr/bin:/bin",
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": str(ROOT),
        },
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("internal error: ZeroDivisionError: deep")
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.glob("jaxmc-crash-*.txt"))


def test_json_unaffected_by_notes(capsys):
    code, out, err = run(capsys, DIE, "--prop", SIX, "-sparse", "--json")
    assert code == 0 and "note: -sparse" in err
    assert json.loads(out)["runs"][0]["properties"][0]["value"] == pytest.approx(
        1 / 6, rel=1e-5
    )


#: Two commands enabled in s=0: a DTMC picks each with probability 1/2, an
#: MDP chooses, a CTMC races them as rates (s=0 -> s=2 at rate 0.5 of 2).
OVERLAP = """dtmc
module m
  s : [0..2] init 0;
  [] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [] s=0 -> (s'=1);
  [] s>0 -> true;
endmodule
"""


def test_model_type_switches_read_a_prism_model_as_that_type(capsys, tmp_path):
    """PRISM's -dtmc/-ctmc/-mdp on a PRISM model (not only on -importmodel)."""
    path = tmp_path / "overlap.pm"
    path.write_text(OVERLAP)
    reach = "P=? [ F s=2 ]"
    code, out, _ = run(capsys, path, "--prop", reach)
    assert code == 0 and "Result: 0.25" in out
    code, out, _ = run(capsys, path, "-mdp", "--prop", "Pmax=? [ F s=2 ]",
                       "--prop", "Pmin=? [ F s=2 ]")  # fmt: skip
    assert code == 0 and "Type:        MDP" in out
    assert re.findall(r"Result: (\S+)", out) == ["0.5", "0.0"]
    code, out, _ = run(capsys, path, "-ctmc", "--prop", "P=? [ F<=1 s=2 ]")
    assert code == 0 and "Type:        CTMC" in out
    value = float(re.search(r"Result: (\S+)", out).group(1))
    assert value == pytest.approx(0.25 * (1 - np.exp(-2.0)), rel=1e-6)
    model = jaxmc.load_model(str(path), model_type="mdp")
    assert model.model_type.value == "mdp"
    with pytest.raises(jaxmc.JaxmcError, match="cannot read a model as"):
        jaxmc.load_model(str(path), model_type="pta")
