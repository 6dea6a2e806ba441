"""`jaxmc sweep`: a property over a grid of parameter values from the
command line (table, JSON, progress, located errors)."""

import json
from pathlib import Path

import numpy as np
import pytest

from jaxmc.cli import main


QUEUE = Path(__file__).resolve().parents[2] / "examples" / "models" / "queue.sm"


def empty(lam, mu, K=10):
    """P(queue empty) in the M/M/1/K queue's steady state."""
    rho = lam / mu
    return (1 - rho) / (1 - rho ** (K + 1))


def test_sweep_grid_table_and_progress(capsys):
    rc = main(
        [
            "sweep",
            str(QUEUE),
            "--prop",
            'S=? [ "empty" ]',
            "--param",
            "lambda=0.5:0.5:1.5",
            "--param",
            "mu=3,4",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0
    assert "6/6 points" in err and "11 states" in err
    lines = out.splitlines()
    assert lines[0].startswith(
        'Sweep of S=? [ "empty" ] over lambda (3) x mu (2) = 6 points'
    )
    assert lines[1].split() == ["lambda", "mu", "Result"]
    rows = [tuple(float(v) for v in ln.split()) for ln in lines[2:]]
    # the last parameter varies fastest, as in PRISM's experiments
    assert [r[:2] for r in rows] == [
        (0.5, 3),
        (0.5, 4),
        (1, 3),
        (1, 4),
        (1.5, 3),
        (1.5, 4),
    ]
    for lam, mu, v in rows:
        assert v == pytest.approx(empty(lam, mu), rel=1e-6)


def test_sweep_json_with_constant(capsys, tmp_path):
    model = tmp_path / "queue.sm"
    model.write_text(
        QUEUE.read_text().replace("const double lambda = 2.0;", "const double lambda;")
    )
    rc = main(
        [
            "sweep",
            str(model),
            "--prop",
            'S=? [ "empty" ]',
            "--param",
            "mu=2,5",
            "--const",
            "lambda=1",
            "--json",
            "-q",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert doc["parameters"] == ["mu"] and doc["states"] == 11 and doc["warnings"] == []
    got = np.array([p["value"] for p in doc["points"]])
    np.testing.assert_allclose(got, [empty(1, 2), empty(1, 5)], rtol=1e-6)


def test_sweep_refuses_value_for_defined_constant(capsys):
    """A value for a constant the file defines is an error, as in PRISM
    ("Constant ... has already been defined")."""
    rc = main(
        [
            "sweep",
            str(QUEUE),
            "--prop",
            'S=? [ "empty" ]',
            "--param",
            "mu=4",
            "--const",
            "lambda=1",
            "-q",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert (
        "constant `lambda` is defined in the file, so it cannot be given a value" in err
    )
    assert "queue.sm:9:1" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "param, message",
    [
        ("lambda", "expected NAME=VALUES"),
        ("lambda=1:0.5:0", "higher than the high value"),
        ("lambda=x", "not a valid double"),
        ("foo=1,2", "not a constant of the model"),
        ("K=1,2", "queue.sm:13:10"),  # in a variable's bound: it would change the graph
    ],
)
def test_sweep_errors_exit_1(capsys, param, message):
    rc = main(
        ["sweep", str(QUEUE), "--prop", 'S=? [ "empty" ]', "--param", param, "-q"]
    )
    _, err = capsys.readouterr()
    assert rc == 1
    assert message in err and "Traceback" not in err


def test_sweep_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(QUEUE), "--param", "mu=3"])  # no --prop
    assert e.value.code == 2
