"""The `jaxmc` command line, run in-process through `jaxmc.cli.main` (plus one
`python -m jaxmc` subprocess): results, JSON, experiments, exit codes,
located errors, convergence failures, explicit import/export, plot-matrix."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmc.cli import main
from jaxmc.cli.args import parser as _parser


ROOT = Path(__file__).resolve().parents[2]
DIE = str(ROOT / "examples" / "models" / "die.pm")
DIE_PROPS = str(ROOT / "examples" / "models" / "die.pm.props")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def results(out: str) -> list[str]:
    # (the value, without the certified bound "(±...)" printed after it)
    return [
        line.split(":", 1)[1].split(" (±")[0].strip()
        for line in out.splitlines()
        if line.startswith("Result:")
    ]


def test_die_properties_file(capsys):
    code, out, err = run(capsys, DIE, DIE_PROPS)
    assert code == 0, err
    assert "Type:        DTMC" in out
    assert "States:      13 (1 initial)" in out
    assert "Transitions: 20" in out
    assert "Time for model construction:" in out
    vals = results(out)
    assert len(vals) == 4
    assert float(vals[0]) == pytest.approx(1 / 6, rel=1e-5)
    assert float(vals[1]) == pytest.approx(1 / 6, rel=1e-5)
    assert vals[2] == "true"
    assert float(vals[3]) == pytest.approx(11 / 3, rel=1e-5)


def test_select_by_name_and_index_and_prop(capsys):
    code, out, _ = run(capsys, DIE, DIE_PROPS, "--property", "flips", "-prop", "1")
    assert code == 0
    assert out.index('"flips"') < out.index('"six"')  # order as asked
    vals = [float(v) for v in results(out)]
    assert vals == pytest.approx([11 / 3, 1 / 6], rel=1e-5)
    code, out, _ = run(capsys, DIE, "--prop", "P=? [ F s=7 & d=3 ]", "-bicgstab")
    assert code == 0
    assert float(results(out)[0]) == pytest.approx(1 / 6, rel=1e-12)


def test_unknown_property_name_is_an_error(capsys):
    code, _, err = run(capsys, DIE, DIE_PROPS, "--property", "nope")
    assert code == 1
    assert 'no property named "nope"' in err and '"six"' in err
    code, _, err = run(capsys, DIE, DIE_PROPS, "--property", "9")
    assert code == 1 and "there is no property 9" in err


def test_json(capsys):
    code, out, _ = run(capsys, DIE, DIE_PROPS, "--json", "--property", "six,3")
    assert code == 0
    doc = json.loads(out)  # nothing but JSON on stdout
    (run_,) = doc["runs"]
    assert run_["model"]["type"] == "DTMC"
    assert run_["model"]["states"] == 13
    assert run_["model"]["initial_states"] == 1
    six, done = run_["properties"]
    assert six["name"] == "six" and six["index"] == 1
    assert six["value"] == pytest.approx(1 / 6, rel=1e-5)
    assert six["status"] == "converged" and six["iterations"] > 0
    assert done["value"] is True
    assert doc["status"] == 0


def test_experiment_table(capsys, tmp_path):
    props = tmp_path / "die.props"
    props.write_text("const int k;\nP=? [ F s=7 & d=k ];\nP=? [ F s=7 & d<=k ];\n")
    code, out, _ = run(capsys, DIE, props, "--const", "k=1:2:5")
    assert code == 0
    assert out.count("Type:        DTMC") == 3  # one summary per setting
    table = out.split("Results for property 2:")[1].splitlines()
    assert table[1].split("\t") == ["k", "Result"]
    rows = [r.split("\t") for r in table[2:5]]
    assert [r[0] for r in rows] == ["1", "3", "5"]
    assert [float(r[1]) for r in rows] == pytest.approx([1 / 6, 3 / 6, 5 / 6], rel=1e-5)
    code, out, _ = run(capsys, DIE, props, "--const", "k=1:2:5", "--json")
    runs = json.loads(out)["runs"]
    assert [r["constants"] for r in runs] == [{"k": 1}, {"k": 3}, {"k": 5}]


def test_timing(capsys):
    code, out, _ = run(capsys, DIE, DIE_PROPS, "--timing", "--property", "1")
    assert code == 0
    timing = out.split("Timing (seconds):")[1]
    assert "parse + check model" in timing and "build state space" in timing
    assert "property 1: total" in timing


def test_broken_model_located_error(capsys, tmp_path):
    broken = tmp_path / "broken.pm"
    broken.write_text(
        "dtmc\nmodule m\n  s : [0..3] init 0;\n  [] s<3 -> (s'=s+1)\nendmodule\n"
    )
    code, out, err = run(capsys, broken, "--prop", "P=? [ F s=3 ]")
    assert code == 1
    assert f"{broken}:4:" in err  # file:line:col
    assert "^" in err  # the caret under the offending line
    assert "Traceback" not in err


def test_bad_property_is_located_and_others_still_run(capsys, tmp_path):
    props = tmp_path / "p.props"
    props.write_text("P=? [ F s=7 & d=6 ];\nP=? [ F x=1 ];\n")
    code, out, err = run(capsys, DIE, props)
    assert code == 1
    assert f"{props}:2:" in err and "unknown identifier" in err
    assert float(results(out)[0]) == pytest.approx(1 / 6, rel=1e-5)


def test_missing_file_exits_1(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "nope.pm")
    assert code == 1 and "nope.pm" in err


def test_convergence_failure_exits_1_with_iterations_and_residual(capsys):
    # (PRISM's criterion: the sound default would hand over to a direct solve)
    code, out, err = run(capsys, DIE, DIE_PROPS, "-maxiters", "2", "--property", "six",
                         "--criterion", "change")  # fmt: skip
    assert code == 1
    assert "did not converge within 2 iterations" in err
    assert "last difference" in err  # the residual
    assert "Result: Error" in out


@pytest.mark.parametrize(
    "argv",
    [[], ["--bogus", DIE], [DIE, "-maxiters", "lots"], [DIE, "-jacobi", "-power"],
     [DIE, "--device", "tpu"], ["-importmodel", "x.tra", "a", "b"]],
)  # fmt: skip
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for action in _parser()._actions:
        for flag in action.option_strings:
            assert flag in text, flag
        assert action.help, action.dest
    for switch in ("-const", "-epsilon", "-maxiters", "-relative", "-absolute",
                   "-jacobi", "-power", "-gaussseidel", "-bicgstab", "-valiter", "-ii",
                   "-exportmodel", "-importmodel", "--device", "--layout",
                   "--precision", "--json", "--timing", "plot-matrix"):  # fmt: skip
        assert switch in text


def test_layout_and_precision(capsys):
    import inspect

    import jaxmc

    params = inspect.signature(jaxmc.check).parameters
    assert "layout" in params
    code, out, _ = run(capsys, DIE, DIE_PROPS, "--layout", "csr", "--precision", "fp64",
                       "--device", "cpu", "--property", "1")  # fmt: skip
    assert code == 0 and float(results(out)[0]) == pytest.approx(1 / 6, rel=1e-5)
    code, _, err = run(capsys, DIE, DIE_PROPS, "--precision", "fp32", "--property", "1")
    if "precision" not in params:  # not in the API yet: refused, never ignored
        assert code == 1 and "not supported yet" in err
    for layout in ("sell", "warp", "warp2"):
        code, out, _ = run(capsys, DIE, DIE_PROPS, "--layout", layout,
                           "--property", "1", "--json")  # fmt: skip
        entry = json.loads(out)["runs"][0]["properties"][0]
        assert code == 0 and entry["value"] == pytest.approx(1 / 6, rel=1e-5)
        assert entry["layout"] == layout
        assert entry["method"] == "bicgstab"  # (the default: certified Krylov)
    with pytest.raises(SystemExit):
        main([DIE, DIE_PROPS, "--layout", "coo"])


def test_timing_breakdown_json(capsys):
    code, out, _ = run(capsys, DIE, DIE_PROPS, "--json", "--property", "1")
    t = json.loads(out)["runs"][0]["properties"][0]["timing"]
    assert code == 0
    for key in ("precompute", "layout", "solve", "total"):
        assert t[key] >= 0.0
    assert t["precompute"] + t["layout"] + t["solve"] <= t["total"]
    code, out, _ = run(capsys, DIE, DIE_PROPS, "--timing", "--property", "1")
    line = [
        x for x in out.split("Timing (seconds):")[1].splitlines() if "property 1" in x
    ][0]
    assert "precompute" in line and "solve" in line and "(bicgstab / csr)" in line


def test_export_then_import(capsys, tmp_path):
    base = tmp_path / "die"
    code, out, _ = run(capsys, DIE, "-exportmodel", f"{base}.all")
    assert code == 0 and "Exported model to" in out
    for ext in ("tra", "sta", "lab"):
        assert (tmp_path / f"die.{ext}").exists()
    code, out, err = run(capsys, "-importmodel", f"{base}.tra,sta,lab", DIE_PROPS,
                         "--property", "six,3")  # fmt: skip
    assert code == 0, err
    assert "States:      13 (1 initial)" in out
    vals = results(out)
    assert float(vals[0]) == pytest.approx(1 / 6, rel=1e-5) and vals[1] == "true"
    code, out, err = run(
        capsys, "-importmodel", f"{base}.all", DIE_PROPS, "--property", "flips"
    )
    assert code == 0, err
    assert float(results(out)[0]) == pytest.approx(11 / 3, rel=1e-5)


def test_plot_matrix(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "die.png"
    code, out, err = run(capsys, "plot-matrix", DIE, "-o", png)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_matrix_without_matplotlib(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code, _, err = run(capsys, "plot-matrix", DIE, "-o", tmp_path / "x.png")
    assert code == 1 and "needs matplotlib" in err and "jaxmc[plot]" in err


def test_python_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "jaxmc", DIE, "--prop", 'P=? [ F s=7 & d=6 ]', "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)["runs"][0]["properties"]
    assert entry["value"] == pytest.approx(1 / 6, rel=1e-5)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxmc"], capture_output=True, text=True
    )
    assert proc.returncode == 2


def test_device_gpu_without_gpu_is_a_clean_error(tmp_path):
    # In a subprocess: the platform must be chosen before JAX starts.
    proc = subprocess.run(
        [sys.executable, "-m", "jaxmc", DIE, "--prop", "P=? [ F s=7 ]",
         "--device", "gpu"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    if proc.returncode == 1:  # no GPU here
        assert "cannot use device 'gpu'" in proc.stderr
    else:
        assert proc.returncode == 0 and "Result: 1.0" in proc.stdout


def test_cli_writes_the_compilation_cache(tmp_path):
    """The CLI turns on JAX's persistent compilation cache in
    `JAXMC_CACHE_DIR`, so a second run of a model compiles nothing."""
    import os

    env = dict(os.environ, JAXMC_CACHE_DIR=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-m", "jaxmc", DIE, "--prop", "P=? [ F s=7 & d=6 ]"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert any((tmp_path / "cache").iterdir())


def test_explorer_switch_builds_on_the_device_the_same_model(capsys, monkeypatch):
    """`--explorer device` reaches the device explorer (JAX's default device:
    the CPU here) and gives the host builder's model and results;
    `--explorer host` the numpy builder; a bad name is an argument error."""
    import jaxmc.explore.device as device

    calls = []
    real = device.explore

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(device, "explore", spy)
    outs = {}
    for explorer in ("host", "device"):
        code, out, err = run(capsys, DIE, DIE_PROPS, "--explorer", explorer)
        assert code == 0, err
        assert "States:      13 (1 initial)" in out and "Transitions: 20" in out
        outs[explorer] = results(out)
    assert calls == [1]  # the device explorer ran once, for "device"
    assert outs["device"] == outs["host"]
    with pytest.raises(SystemExit):
        _parser().parse_args([DIE, "--explorer", "gpu"])
