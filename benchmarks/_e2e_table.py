"""The markdown table of `benchmarks/e2e_gpu.py`: one row per case from
its JSON lines (`python benchmarks/e2e_gpu.py table A.jsonl B.jsonl ...`
merges the lines of several runs, such as the parts of a device plan, into
one table)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


HERE = Path(__file__).resolve().parent


def _g(v, fmt=".2f") -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return " ".join(v.split()).replace("|", "\\|")[:90]
    return format(v, fmt)


def jaxmc_total(j: dict) -> float | None:
    """Parse + build + first check: what Storm's build + check is set against."""
    if "first" not in j:
        return None
    return j["parse_s"] + j["build_s"] + j["first_s"]


def ratio(storm: dict, j: dict) -> float | None:
    t = jaxmc_total(j)
    if t is None or storm.get("check_s") is None:
        return None
    return (storm["build_s"] + storm["check_s"]) / t


def agree(a, b, rtol: float = 1e-5) -> str:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return "—"
    rel = 0.0 if a == b else abs(a - b) / max(abs(a), abs(b), 1e-300)
    return f"{'yes' if rel <= rtol else '**no**'} ({rel:.0e})"


def split(j: dict, key: str) -> str:
    """`compile / precompute / layout / solve` of a check: compile from JAX's
    events (trace + lowering + XLA's compile or cache read, the latter in
    brackets: the persistent cache saves only that), then any other key of
    `CheckResult.timing` (its own compile)."""
    t = dict((j.get(key) or {}).get("timing", {}))
    parts = [_g(j.get(f"{key}_compile_s"))]
    if j.get(f"{key}_xla_compile_s") is not None:
        parts[0] += f" [xla {_g(j[f'{key}_xla_compile_s'])}]"
    parts += [_g(t.pop(k, None)) for k in ("precompute", "layout", "solve")]
    t.pop("total", None)
    extra = ", ".join(f"{k} {_g(v)}" for k, v in t.items())
    return " / ".join(parts) + (f" (jaxmc's: {extra})" if extra else "")


HEAD = (
    "| case | instance | property | states | transitions | jaxmc value | Storm value "
    "| agree | vs Storm sound | method (after fallbacks) / layout | cold wall s "
    "| import / parse / build s | build states/s | build B/state (model / RSS) "
    "| first check s "
    "| first: compile [xla] / precompute / layout / solve | warm check s "
    "| warm: compile [xla] / precompute / layout / solve "
    "| warm process: build / check s (check's split) "
    "| peak RSS / device MB | Storm build / check s | Storm peak MB "
    "| Storm ÷ jaxmc cold | Storm ÷ jaxmc warm process |"
)


def sound_values() -> dict:
    """Storm's sound values by `model | constants | property`, where
    `accuracy.py` has cached them (`accuracy_reference.json`)."""
    path = HERE / "accuracy_reference.json"
    ref = json.loads(path.read_text()) if path.exists() else {}
    return {k: v["value"] for k, v in ref.items() if "value" in v}


def row_md(c: dict, j: dict, w: dict, s: dict, sound=None) -> str:
    first = j.get("first", {})
    instance = f"{Path(c['model']).name} {c['consts']}".strip()
    n = j.get("states") or s.get("states")
    jv = first.get("value", j.get("error"))
    if "value" in first and "error" in j:
        jv = f"{jv:.10g} ({j['error']})"
    sv = s.get("value", s.get("error"))
    if s.get("cached"):
        how = ", beside jaxmc" if s.get("beside_jaxmc") else ""
        sv = f"{_g(sv, '.8g')} (cached {s.get('measured', '?')[:10]}{how})"
    bs = j.get("build_s")
    rate = n / bs if n and bs else None
    bps = "—"
    if n and "model_bytes" in j:
        rss = j["build_rss_mb"] * 2**20
        bps = f"{_g(j['model_bytes'] / n, '.0f')} / {_g(rss / n, '.0f')}"
    mem = f"{_g(j.get('peak_rss_mb'), '.0f')} / {_g(j.get('device_peak_mb'), '.0f')}"
    wp = _g(w.get("error"))
    if "first" in w:
        wp = f"{_g(w['build_s'])} / {_g(w['first_s'])} ({split(w, 'first')})"
    rw = ratio(s, w)
    return (
        f"| {c['label']} | `{instance}` | `{_g(c['prop'])}` | {_g(n, ',')} "
        f"| {_g(j.get('transitions'), ',')} | {_g(jv, '.10g')} | {_g(sv, '.10g')} "
        f"| {agree(first.get('value'), s.get('value'))} "
        f"| {agree(first.get('value'), sound, 1e-6)} "
        f"| {' → '.join([*first.get('attempts', []), _g(first.get('method'))])} "
        f"/ {_g(first.get('layout'))} "
        f"| {_g(j.get('wall_s'), '.1f')} | {_g(j.get('import_s'))} / "
        f"{_g(j.get('parse_s'))} / {_g(bs)} | {_g(rate, '.3g')} | {bps} "
        f"| {_g(j.get('first_s'))} | {split(j, 'first')} "
        f"| {_g(j.get('warm_s'))} | {split(j, 'warm')} | {wp} | {mem} "
        f"| {_g(s.get('build_s'))} / {_g(s.get('check_s'))} "
        f"| {_g(s.get('peak_rss_mb'), '.0f')} | {_g(ratio(s, j), '.2f')}× "
        f"| {_g(rw, '.2f')}{'×' if rw else ''} |"
    )


def table(rows: list[dict]) -> str:
    lines = [HEAD, "|" + "---|" * (HEAD.count("|") - 1)]
    sound = sound_values()
    for r in rows:
        c = r["case"]
        ref = sound.get(f"{c['model']} | {c['consts']} | {c['prop']}")
        lines.append(row_md(c, r["jaxmc"], r.get("warm_process", {}), r["storm"], ref))
    return "\n".join(lines)


def report(rows: list[dict], meta: dict) -> str:
    """The table and the footer saying where and how it was measured."""
    workers = meta.get("storm_workers")
    how = f"in {workers} workers beside jaxmc" if workers else "after each jaxmc case"
    envs = [r["jaxmc"]["environment"] for r in rows if "environment" in r["jaxmc"]]
    device = envs[0].get("device", "—") if envs else "—"
    parts = sorted({str(r.get("meta", meta).get("part")) for r in rows} - {"None"})
    return table(rows) + (
        f"\n\n{meta['size']} size, {meta['date']}; host {meta['host']}; jaxmc device "
        f"{device}; Storm (stormpy {meta['stormpy']}) default engine, {how}"
        + (f"; parts {', '.join(parts)}" if parts else "")
        + "; Storm ÷ jaxmc = Storm build + check over jaxmc parse + build + first "
        "check; agree: jaxmc's first value against Storm's default (1e-5 relative; "
        "Storm's default stops at a 1e-6 relative change, not sound) and against "
        "Storm's sound value where `accuracy_reference.json` has it (1e-6 relative)."
    )


def retable(argv: list[str]) -> int:
    """`table RUN.jsonl...`: one table of the rows of several runs."""
    p = argparse.ArgumentParser(prog="e2e_gpu.py table")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--md", type=Path)
    args = p.parse_args(argv)
    rows = [
        json.loads(line)
        for f in args.runs
        for line in f.read_text().splitlines()
        if line.startswith("{")
    ]
    text = report(rows, rows[0]["meta"]) if rows else "no rows"
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    return 0
