"""`--timing` reports compile time apart: for the build and per property."""

from __future__ import annotations

import json
from pathlib import Path

from jaxmc.cli import main


ROOT = Path(__file__).resolve().parents[2]
QUEUE = str(ROOT / "examples" / "models" / "queue.sm")
QUEUE_PROPS = str(ROOT / "examples" / "models" / "queue.sm.props")


def test_timing_has_compile(capsys):
    code = main([QUEUE, QUEUE_PROPS, "--timing"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.split("Timing (seconds):")[1].splitlines()
    build = [x for x in lines if "build state space" in x][0]
    assert "(compile " in build
    props = [x for x in lines if x.strip().startswith("property")]
    assert len(props) == 4 and all("compile " in x for x in props)
    code = main([QUEUE, QUEUE_PROPS, "--json"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["timing"]["build_compile"] >= 0.0
    t = [p["timing"] for p in run["properties"]]
    assert all(x["compile"] >= 0.0 for x in t)
    assert all(
        x["precompute"] + x["layout"] + x["solve"] + x["compile"] <= x["total"]
        for x in t
    )
