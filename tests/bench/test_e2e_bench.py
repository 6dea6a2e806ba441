"""`benchmarks/e2e_gpu.py` on the CPU: its case lists (every model of issue
21, accuracy.py's GPU instances among them), the split into device calls,
the Storm cache, the table's ratios, and its smallest case end to end in a
child process (jaxmc against Storm)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _e2e_table as tables  # noqa: E402
import _peers  # noqa: E402
import accuracy  # noqa: E402
import e2e_gpu  # noqa: E402
from _peers import storm_available  # noqa: E402


EXAMPLES = ROOT.parent / "shared" / "models" / "prism-examples"
needs_models = pytest.mark.skipif(not EXAMPLES.exists(), reason="no ../shared/models")
ISSUE_MODELS = {
    "tandem", "cluster", "kanban", "fms", "polling", "consensus", "zeroconf", "wlan",
    "csma", "firewire", "brp", "crowds", "nand", "herman", "leader_sync", "egl",
}  # fmt: skip


def test_cases_cover_the_issue_and_accuracys_gpu_list():
    large, small = e2e_gpu.cases("large"), e2e_gpu.cases("small")
    assert {c.name for c in large} == ISSUE_MODELS
    assert [c.label for c in large] == [c.label for c in small]
    assert len({c.label for c in large}) == len(large)
    assert [c.prop for c in large] == [c.prop for c in small]
    ours = {(c.model, c.consts, c.prop) for c in large}
    for c in accuracy.cases("gpu"):
        assert (c.model, c.consts, c.prop) in ours, c
    assert ("ctmcs/tandem/tandem.sm", "c=2047", "P=? [ F<=0.25 sc=c ]") in ours
    assert all(c.est_jaxmc > 0 and c.est_storm > 0 for c in large)


def test_only_selects_by_name_or_label_and_refuses_unknown_names():
    got = [c.label for c in e2e_gpu.cases("small", ["egl", "kanban", "tandem-S"])]
    assert got == ["tandem-S", "kanban", "egl-P", "egl-R"]
    with pytest.raises(SystemExit, match="unknown cases"):
        e2e_gpu.cases("small", ["tandme"])


@pytest.mark.parametrize("n", [1, 3, 4, 5])
def test_parts_cover_every_case_once_and_balance(n):
    todo = e2e_gpu.cases("large")
    bins = e2e_gpu.parts(todo, n)
    labels = [c.label for b in bins for c in b]
    assert sorted(labels) == sorted(c.label for c in todo)
    loads = [sum(e2e_gpu.cost(c) for c in b) for b in bins]
    assert max(loads) - min(loads) <= max(e2e_gpu.cost(c) for c in todo)
    walls = [e2e_gpu.wall(b, storm_workers=6) for b in bins]
    assert all(w >= max(c.est_storm for c in b) for w, b in zip(walls, bins))
    assert sum(e2e_gpu.wall(b, False, 0) for b in bins) == pytest.approx(
        sum(c.est_jaxmc + c.est_storm for c in todo)
    )
    order = [c.label for c in todo]
    for b in bins:  # each part in the table's order
        assert [c.label for c in b] == [x for x in order if x in {c.label for c in b}]


def test_storm_cache_is_keyed_by_host_version_and_case_and_merges(tmp_path):
    a, b = e2e_gpu.cases("small")[:2]
    key_a = e2e_gpu.cache_key("CPU X (2 cores)", "2.0.0", a)
    assert key_a != e2e_gpu.cache_key("CPU Y (2 cores)", "2.0.0", a)
    assert key_a != e2e_gpu.cache_key("CPU X (2 cores)", "2.0.1", a)
    assert key_a != e2e_gpu.cache_key("CPU X (2 cores)", "2.0.0", b)
    f = tmp_path / "storm.json"
    _peers.save_cache({key_a: {"value": 0.5}}, f)
    _peers.save_cache({"other": {"value": 1.0}}, f)  # merged, not replaced
    assert _peers.load_cache(f) == {key_a: {"value": 0.5}, "other": {"value": 1.0}}
    assert _peers.load_cache(tmp_path / "absent.json") == {}


def test_table_ratio_is_storm_total_over_jaxmc_parse_build_first_check(monkeypatch):
    c = e2e_gpu.cases("large", ["kanban"])[0]
    key = f"{c.model} | {c.consts} | {c.prop}"
    monkeypatch.setattr(tables, "sound_values", lambda: {key: 0.2501})
    j = {"parse_s": 1.0, "build_s": 3.0, "first_s": 6.0, "states": 100}
    timing = {"layout": 2.0, "compile": 0.7, "total": 5.0}  # jaxmc's own compile too
    first = {"value": 0.25, "timing": timing, "method": "jacobi", "layout": "warp"}
    j.update(first=dict(first, attempts=["bicgstab"]), first_compile_s=1.5)
    j["first_xla_compile_s"] = 1.25
    j.update(model_bytes=4000, build_rss_mb=1.0, wall_s=15.0)
    s = {"value": 0.25 * (1 + 1e-7), "build_s": 10.0, "check_s": 20.0}
    assert tables.ratio(s, j) == pytest.approx(3.0)
    assert tables.ratio({"error": "timeout"}, j) is None
    assert tables.agree(0.25, 0.3).startswith("**no**")
    rows = [{"case": e2e_gpu.asdict(c), "jaxmc": j, "storm": dict(s, cached=True)}]
    lines = tables.table(rows).splitlines()
    cells = [x.strip() for x in lines[2].split("|")[1:-1]]
    head = [x.strip() for x in lines[0].split("|")[1:-1]]
    row = dict(zip(head, cells))
    assert len(cells) == len(head)
    assert row["Storm ÷ jaxmc cold"] == "3.00×"
    assert row["agree"].startswith("yes")  # 1e-7 against Storm's default
    assert row["vs Storm sound"] == "**no** (4e-04)"
    assert row["build states/s"] == "33.3"
    assert row["build B/state (model / RSS)"] == "40 / 10486"
    assert row["first: compile [xla] / precompute / layout / solve"] == (
        "1.50 [xla 1.25] / — / 2.00 / — (jaxmc's: compile 0.70)"
    )
    assert "(cached" in row["Storm value"]
    assert row["method (after fallbacks) / layout"] == "bicgstab → jacobi / warp"


@needs_models
def test_smallest_case_end_to_end_in_child_processes(tmp_path):
    """tandem c=7, cold and warm process, against Storm where installed;
    Storm's time is then cached and a second run reuses it."""
    cache = tmp_path / "storm.json"
    args = ["--size", "small", "--only", "tandem-P", "--storm-cache", str(cache)]
    args += ["--jsonl", str(tmp_path / "out.jsonl"), "--cache-root", str(tmp_path)]
    assert e2e_gpu.main(args) == 0
    (row,) = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    j, w, s = row["jaxmc"], row["warm_process"], row["storm"]
    assert j["states"] == 120 and j["transitions"] == 363  # Storm counts the same below
    assert j["first"]["value"] == j["warm"]["value"] == w["first"]["value"]
    assert j["first_compile_s"] > 0  # the first check compiles
    assert j["wall_s"] > j["import_s"] + j["build_s"] + j["first_s"]
    assert j["peak_rss_mb"] > 0 and j["model_bytes"] > 0
    md = tmp_path / "again.md"  # the table again from the JSON lines
    assert tables.retable([str(tmp_path / "out.jsonl"), "--md", str(md)]) == 0
    assert md.read_text().splitlines()[2].startswith("| tandem-P | `tandem.sm c=7` |")
    if not storm_available():
        return
    assert s["states"] == 120 and not s.get("cached")
    assert s["value"] == pytest.approx(j["first"]["value"], rel=1e-6)
    assert e2e_gpu.main(args + ["--no-jaxmc"]) == 0
    (row,) = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert row["storm"]["cached"] and row["storm"]["value"] == s["value"]


def test_a_timeout_from_the_deadline_is_not_the_cases_own():
    own = e2e_gpu._at_deadline({"error": "timeout after 240 s"}, 240.0, 240.0)
    assert own["error"] == "timeout after 240 s"
    cut = e2e_gpu._at_deadline({"error": "timeout after 37 s"}, 37.0, 240.0)
    assert cut["error"] == "stopped by the deadline after 37 s"
    assert e2e_gpu._at_deadline({"value": 1.0}, 37.0, 240.0) == {"value": 1.0}
