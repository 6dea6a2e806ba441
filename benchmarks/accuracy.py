"""Accuracy of jaxmc's default numerics against Storm's sound values, on the
PRISM benchmark models (issue 20).

For each instance (model file, constants, property) of a size:

- jaxmc with default options, in a fresh Python process (cold: imports,
  build, tracing and compilation included; `e2e_gpu.py` times a warm check
  beside it): value, certified bound (`CheckResult.bound`, or `lower` /
  `upper` at the initial state where present; read with `getattr`, so the
  script runs before and after those fields exist), method, the attempts
  that handed over (`attempts`), iterations, status, and the times: import,
  load + build, check, with the check's own split (`CheckResult.timing`);
- Storm's sound value (`../shared/tools/storm_ref.py --solver sound`), read
  from `accuracy_reference.json` beside this script when cached there (a
  sound value holds on every host), else computed and added to it;
- for Herman's ring, the closed form instead (`CLOSED_FORM`: exact, and
  Storm's sound mode does not finish herman 17 in 600 s);
- Storm's default value and time on the same host in the same run
  (`--solver storm-default`);
- the relative error of jaxmc and of Storm's default against the sound value,
  and whether jaxmc's bound is consistent with it: |value - sound| <=
  bound + 1e-6 |sound| (the sound value itself is certified to 1e-6
  relative only).

`--share-build` checks the properties of one model and constants in one
jaxmc process, the model built once (the first property's record is cold,
the others' are warm checks of the same process): for device runs where
builds dominate.

Sizes: `small` (10^4-10^5 states, a quick CPU run), `cpu` (at most 2*10^6
states), `gpu` (the issue's instances, mostly >= 10^6 states). Prints a
markdown table; `--json FILE` writes every record, `--md FILE` the table.

    python benchmarks/accuracy.py --size small
    nice -n 10 python benchmarks/accuracy.py --size cpu --storm-timeout 600
    python benchmarks/accuracy.py --size cpu --reference-only   # fill the cache

Models are looked up by their path under PRISM's examples
(`ctmcs/tandem/tandem.sm`) in `JAXMC_MODELS`, `.bench/models` and
`../shared/models/prism-examples`; crowds, nand and egl (not among PRISM's
examples) under `prism-benchmarks/...` there: `prepare` copies everything a
device run needs into `.bench/` (models, storm_ref.py) and downloads the
wheels the device lacks (stormpy 2.0.0 cp312, its dependency Deprecated,
lark 1.3.1) into `.whl/` (both ignored by git):

    python benchmarks/accuracy.py prepare \\
        --prism-benchmarks /work/.mirror/prismmodelchecker+prism-benchmarks/repo

The GPU run, in device calls from the repository root (after `prepare`;
Storm in 4 worker processes on the host's CPU beside jaxmc on the GPU; a
case starts only before the deadline, the rest are reported "not run
(deadline)": run those in a later call with `--only`). The whole list
does not fit one call's 600 s (the builds of brp and egl alone take much of
it: benchmarks/RESULTS.md): split it by `--only`, and pass `--share-build`
so that two-property models (consensus, csma, egl) build once:

    run(kind="nvidia-h200", timeout_s=600, carry=[".whl", ".bench"], command=
      "python3 -m pip install -q --no-index --no-deps --no-compile "
      "--no-cache-dir --upgrade --target /tmp/site .whl/*.whl && "
      "export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit; "
      "python3 benchmarks/accuracy.py --size gpu --deadline 500 "
      "--jaxmc-timeout 400 --storm-timeout 450 --storm-workers 4 "
      "--share-build --only egl consensus tandem cluster "
      "--json $OUT/accuracy_gpu.json --md $OUT/accuracy_gpu.md "
      "--reference-out $OUT/accuracy_reference.json 2>&1 | tee $OUT/log")

`$OUT/accuracy_reference.json` is the cache plus the sound values computed
there: copy it over `benchmarks/accuracy_reference.json`. csma 4-4 and
firewire delay=36 (> 10^8 states) need the device explorer: `--only csma
firewire --share-build --explorer device` in a call of their own, with
`XLA_PYTHON_CLIENT_MEM_FRACTION=0.95` (csma 4-4's peak device memory is near
an H200's: benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _peers import STORM_REF, host_cpu, storm_available, storm_run  # noqa: E402


REFERENCE = HERE / "accuracy_reference.json"
EXAMPLES = ROOT.parent / "shared" / "models" / "prism-examples"
#: Tolerance of Storm's sound mode (its default precision, relative).
SOUND_RTOL = 1e-6

TANDEM = "ctmcs/tandem/tandem.sm"
CLUSTER = "ctmcs/cluster/cluster.sm"
KANBAN = "ctmcs/kanban/kanban.sm"
FMS = "ctmcs/fms/fms.sm"
BRP = "dtmcs/brp/brp.pm"
ZEROCONF = "mdps/zeroconf/zeroconf.nm"
FIREWIRE = "mdps/firewire/impl/deadline.nm"
CROWDS = "prism-benchmarks/dtmcs/crowds/crowds.pm"
NAND = "prism-benchmarks/dtmcs/nand/nand.pm"
EGL = "prism-benchmarks/dtmcs/egl/egl.pm"

FW_PROP = "Pmin=? [ F ((s1=8) & (s2=7)) | ((s1=7) & (s2=8)) ]"
COIN_P = 'Pmin=? [ F "finished" & "all_coins_equal_1" ]'
COIN_R = 'R{"steps"}max=? [ F "finished" ]'
HERMAN = 'filter(max, R=? [ F "stable" ], "init")'
WLAN = 'R{"time"}max=? [ F s1=12 & s2=12 ]'
ZC = "Pmin=? [ F (l=4 & ip=1) ]"
EGL_P = 'P=? [ F !"knowA" & "knowB" ]'
EGL_R = 'R{"messages_A_needs"}=? [ F phase=4 ]'

#: Exact references where a closed form is known (key -> value, source).
#: Herman's ring with a fair coin: from 3 tokens at distances a, b, c the
#: expected steps to stabilise are 4abc/N (McIver and Morgan, IPL 2005), and
#: the worst initial configuration is 3 tokens spaced as evenly as N allows
#: (the Herman-protocol conjecture, proved by Bruna, Grigore, Kiefer,
#: Ouaknine and Worrell, ICALP 2016): 320/13, 500/15, 720/17.
CLOSED_FORM: dict[str, tuple[float, str]] = {
    f"dtmcs/herman/herman{n}.pm |  | {HERMAN}": (
        4 * a * b * c / n,
        f"closed form 4abc/N = {4 * a * b * c}/{n}",
    )
    for n, (a, b, c) in {13: (4, 4, 5), 15: (5, 5, 5), 17: (6, 6, 5)}.items()
}

#: name -> {size: (model path, constants)}, properties. Sizes in states
#: (PRISM's benchmark tables): small 1e4-1e5, cpu <= 2e6, gpu the issue's.
MODELS: list[tuple[str, dict[str, tuple[str, str]], list[str]]] = [
    (
        "tandem",
        {
            "small": (TANDEM, "c=127"),
            "cpu": (TANDEM, "c=511"),
            "gpu": (TANDEM, "c=2047"),
        },
        ['R{"customers"}=? [ S ]'],
    ),
    (
        "cluster",
        {
            "small": (CLUSTER, "N=32"),
            "cpu": (CLUSTER, "N=128"),
            "gpu": (CLUSTER, "N=464"),
        },
        ['S=? [ "premium" ]'],
    ),
    (
        "kanban",
        {"small": (KANBAN, "t=3"), "cpu": (KANBAN, "t=4"), "gpu": (KANBAN, "t=5")},
        ['R{"throughput"}=? [ S ]'],
    ),
    (
        "fms",
        {"small": (FMS, "n=4"), "cpu": (FMS, "n=7"), "gpu": (FMS, "n=7")},
        ['R{"productivity"}=? [ S ]'],
    ),
    (
        "polling",
        {
            "small": ("ctmcs/polling/poll12.sm", ""),
            "cpu": ("ctmcs/polling/poll16.sm", ""),
            "gpu": ("ctmcs/polling/poll16.sm", ""),
        },
        ["P=? [ !(s=2 & a=1) U (s=1 & a=1) ]"],
    ),
    (
        "consensus",
        {
            "small": ("mdps/consensus/coin4.nm", "K=4"),
            "cpu": ("mdps/consensus/coin6.nm", "K=2"),
            "gpu": ("mdps/consensus/coin6.nm", "K=4"),
        },
        [COIN_P, COIN_R],
    ),
    (
        "zeroconf",
        {
            "small": (ZEROCONF, "reset=false,N=1000,K=2,err=0"),
            "cpu": (ZEROCONF, "reset=false,N=1000,K=8,err=0"),
            "gpu": (ZEROCONF, "reset=false,N=1000,K=8,err=0"),
        },
        [ZC],
    ),
    (
        "wlan",
        {
            "small": ("mdps/wlan/wlan2.nm", "TRANS_TIME_MAX=10"),
            "cpu": ("mdps/wlan/wlan5.nm", "TRANS_TIME_MAX=10"),
            "gpu": ("mdps/wlan/wlan5.nm", "TRANS_TIME_MAX=10"),
        },
        [WLAN],
    ),
    (
        "csma",
        {
            "small": ("mdps/csma/csma2_6.nm", ""),
            "cpu": ("mdps/csma/csma3_4.nm", ""),
            "gpu": ("mdps/csma/csma4_4.nm", ""),
        },
        ['Pmin=? [ F "all_delivered" ]', 'R{"time"}max=? [ F "all_delivered" ]'],
    ),
    (
        "firewire",
        {
            "small": (FIREWIRE, "delay=3,deadline=200,fast=0.5"),
            "cpu": (FIREWIRE, "delay=3,deadline=800,fast=0.5"),
            "gpu": (FIREWIRE, "delay=36,deadline=800,fast=0.5"),
        },
        [FW_PROP],
    ),
    (
        "brp",
        {
            "small": (BRP, "N=1024,MAX=5"),
            "cpu": (BRP, "N=16384,MAX=5"),
            "gpu": (BRP, "N=32768,MAX=5"),
        },
        ["P=? [ F s=5 ]"],
    ),
    (
        "crowds",
        {
            "small": (CROWDS, "TotalRuns=4,CrowdSize=10"),
            "cpu": (CROWDS, "TotalRuns=5,CrowdSize=15"),
            "gpu": (CROWDS, "TotalRuns=6,CrowdSize=20"),
        },
        ["P=? [ F observe0>1 ]"],
    ),
    (
        "nand",
        {
            "small": (NAND, "N=20,K=1"),
            "cpu": (NAND, "N=40,K=1"),
            "gpu": (NAND, "N=60,K=4"),
        },
        ["P=? [ F s=4 & z/N<0.1 ]"],
    ),
    (
        "herman",
        {
            "small": ("dtmcs/herman/herman13.pm", ""),
            "cpu": ("dtmcs/herman/herman15.pm", ""),
            "gpu": ("dtmcs/herman/herman17.pm", ""),
        },
        [HERMAN],
    ),
    (
        "leader_sync",
        {
            "small": ("dtmcs/leader_sync/leader5_5.pm", ""),
            "cpu": ("dtmcs/leader_sync/leader6_8.pm", ""),
            "gpu": ("dtmcs/leader_sync/leader6_8.pm", ""),
        },
        ['R{"num_rounds"}=? [ F "elected" ]'],
    ),
    (
        "egl",
        {
            "small": (EGL, "N=5,L=2"),
            "cpu": (EGL, "N=6,L=8"),
            "gpu": (EGL, "N=8,L=8"),
        },
        [EGL_P, EGL_R],
    ),
]


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # path under PRISM's examples (or prism-benchmarks/...)
    consts: str
    prop: str

    @property
    def key(self) -> str:
        return f"{self.model} | {self.consts} | {self.prop}"


def cases(size: str, only: list[str] | None = None) -> list[Case]:
    """The cases of `size`, in `only`'s order where given."""
    table = {name: (sizes[size], props) for name, sizes, props in MODELS}
    unknown = set(only or ()) - set(table)
    if unknown:
        raise SystemExit(f"unknown model names {sorted(unknown)}: {sorted(table)}")
    out = []
    for name in only or table:
        (model, consts), props = table[name]
        out += [Case(name, model, consts, p) for p in props]
    return out


def model_roots() -> list[Path]:
    roots = [Path(os.environ["JAXMC_MODELS"])] if os.environ.get("JAXMC_MODELS") else []
    return roots + [ROOT / ".bench" / "models", EXAMPLES]


def locate(model: str) -> Path | None:
    for root in model_roots():
        if (root / model).exists():
            return root / model
    return None


# ---- jaxmc, one case per fresh process -----------------------------------


def _initial_bounds(r) -> tuple[float | None, float | None]:
    """`(lower, upper)` of the reported value from per-state bounds: at the
    single initial state, or aggregated as the property's max/min filter
    over the initial states aggregates the values."""
    import numpy as np

    lo, hi = getattr(r, "lower", None), getattr(r, "upper", None)
    if lo is None or hi is None:
        return None, None
    lo = np.asarray(lo)[r.initial_states]
    hi = np.asarray(hi)[r.initial_states]
    if len(lo) == 1:
        return float(lo[0]), float(hi[0])
    text = r.property_text.replace(" ", "")
    if text.startswith("filter(max"):
        return float(lo.max()), float(hi.max())
    if text.startswith("filter(min"):
        return float(lo.min()), float(hi.min())
    return None, None


def _plain(x):
    """JSON-friendly copy of an attempt / status / numpy scalar."""
    if hasattr(x, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in asdict(x).items()}
    if hasattr(x, "name") and hasattr(x, "value") and type(x).__module__ != "builtins":
        return x.name.lower()  # an Enum
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def jaxmc_one(path: str, consts: str, *props: str):
    """Check properties of one model with jaxmc's defaults, the model built
    once: a record per property (the fields the table reads), printed as it
    is done. The first record carries the import and build times; the
    others, `shared_build` and no build time."""
    t0 = time.perf_counter()
    import jax
    from _peers import environment

    import jaxmc

    head: dict = {"import_s": time.perf_counter() - t0}
    head["environment"] = environment()
    head["device"] = str(jax.devices()[0])
    t = time.perf_counter()
    model = jaxmc.load_model(path, consts or None)
    explorer = os.environ.get(EXPLORER_ENV, "auto")
    em = jaxmc.build(model, **({} if explorer == "auto" else {"explorer": explorer}))
    head["build_s"] = time.perf_counter() - t
    head["explorer"] = explorer
    head["states"] = int(em.num_states)
    head["transitions"] = int(em.num_transitions)
    for i, prop in enumerate(props):
        out = dict(head)
        if i:
            out.update(import_s=0.0, build_s=0.0, shared_build=True)
        _check_one(jaxmc, model, prop, out)
        print(json.dumps(out, default=str), flush=True)


def _check_one(jaxmc, model, prop: str, out: dict) -> None:
    t = time.perf_counter()
    try:
        r = jaxmc.check(model, prop)
    except jaxmc.JaxmcError as e:
        out["check_s"] = time.perf_counter() - t
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"[:300]
        return
    out["check_s"] = time.perf_counter() - t
    out["value"] = _plain(r.value)
    for k in ("method", "layout", "status", "iterations", "residual", "precision"):
        out[k] = _plain(getattr(r, k, None))
    out["bound"] = _plain(getattr(r, "bound", None))
    out["bound_gap"] = _plain(getattr(r, "bound_gap", None))
    out["lower"], out["upper"] = _initial_bounds(r)
    out["attempts"] = _plain(list(getattr(r, "attempts", None) or ()))
    out["timing"] = {k: float(v) for k, v in (r.timing or {}).items()}


#: The child's explorer (`--explorer`), passed in its environment.
EXPLORER_ENV = "JAXMC_ACCURACY_EXPLORER"


def run_jaxmc(group: list[Case], timeout: float, explorer: str = "auto") -> list[dict]:
    """`jaxmc_one` in a fresh interpreter on a group of cases of one model
    and constants (one case unless `--share-build`): a record per case.
    Wall time from the start for the first; the check's own for the rest."""
    case = group[0]
    path = locate(case.model)
    if path is None:
        return [{"error": f"model not found: {case.model}"} for _ in group]
    cmd = [sys.executable, __file__, "one", str(path), case.consts]
    cmd += [c.prop for c in group]
    t = time.perf_counter()
    try:
        env = dict(os.environ, **{EXPLORER_ENV: explorer})
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env
        )
        stdout, stderr, code = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        stderr, code = f"timeout after {timeout:.0f} s", None
    wall = time.perf_counter() - t
    recs = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    for i, r in enumerate(recs):
        if i:
            r["wall_s"] = r["check_s"]
        elif len(group) == 1:
            r["wall_s"] = wall
        else:  # (timed from inside: the process went on to the others)
            r["wall_s"] = r["import_s"] + r["build_s"] + r["check_s"]
    if code is None:
        why = {"error": f"timeout after {timeout:.0f} s", "wall_s": timeout}
    else:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        why = {"error": f"exit {code}: {tail[:300]}", "wall_s": wall}
    return recs + [dict(why) for _ in group[len(recs) :]]


# ---- Storm and the reference cache ---------------------------------------


def load_reference(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def save_reference(ref: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def storm_path(model: str) -> Path | None:
    """The model file for Storm: reprinted by `tests/storm_input.py` (the
    Storm oracle's input of the test suite; same declarations, model type
    first, constants and formulas in dependency order), as Storm refuses
    files PRISM reads (firewire's deadline.nm and wlan have no model type,
    zeroconf's comes after a constant, csma defines a constant after its use),
    into the temp dir."""
    path = locate(model)
    if path is None:
        return None
    sys.path.insert(0, str(ROOT / "tests"))
    from storm_input import program_text

    typed = Path(tempfile.gettempdir()) / "jaxmc-accuracy" / model
    typed.parent.mkdir(parents=True, exist_ok=True)
    typed.write_text(program_text(path))
    return typed


def run_storm(case: Case, solver: str, timeout: float) -> dict:
    path = storm_path(case.model)
    if path is None:
        return {"error": f"model not found: {case.model}"}
    if timeout <= 1:
        return {"error": "not run (deadline)"}
    t = time.perf_counter()
    out = storm_run(path, case.consts, case.prop, solver, timeout)
    return dict(out, wall_s=time.perf_counter() - t)


def reference_entry(storm: dict, cpu: str) -> dict:
    keep = ("value", "states", "transitions", "build_s", "check_s", "storm", "error")
    entry = {k: storm[k] for k in keep if k in storm}
    entry.update(date=datetime.date.today().isoformat(), host_cpu=cpu)
    return entry


# ---- the table -------------------------------------------------------------


def rel(a, b) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-300)


def judge(row: dict) -> None:
    """Relative errors against the sound value, and the bound's verdict."""
    j, sound, dflt = row["jaxmc"], row["sound"], row["default"]
    ref = sound.get("value")
    row["rel_err_jaxmc"] = rel(j.get("value"), ref)
    row["rel_err_storm_default"] = rel(dflt.get("value"), ref)
    bound = j.get("bound")
    if bound is None and j.get("lower") is not None:
        v = j.get("value")
        bound = max(v - j["lower"], j["upper"] - v)
    row["bound_used"] = bound
    row["bound_ok"] = None
    if isinstance(bound, (int, float)) and isinstance(ref, (int, float)):
        gap = abs(j["value"] - ref)
        row["bound_ok"] = bool(gap <= bound + SOUND_RTOL * abs(ref))


def _g(v, fmt=".3g") -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return _bars(" ".join(v.split()))[:120]
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, (int, float)):
        return format(v, fmt if isinstance(v, float) or fmt == "," else "")
    return str(v)


def _bars(text: str) -> str:
    return text.replace("|", "\\|")


def _chain(j: dict) -> str:
    parts = [
        f"{a.get('method')}({a.get('status')}, {a.get('iterations')})"
        for a in j.get("attempts") or []
    ]
    return " → ".join(parts + [str(j.get("method"))])


def table(rows: list[dict]) -> str:
    head = (
        "| instance | property | states | jaxmc value | bound | bound ok "
        "| rel. err jaxmc | method chain | iters | jaxmc s (import / build / check "
        "[precompute / layout / solve]) | Storm sound | sound s | Storm default "
        "| rel. err default | default s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        c, j, s, d = r["case"], r["jaxmc"], r["sound"], r["default"]
        t = j.get("timing", {})
        split = " / ".join(
            _g(t.get(k), ".2f") for k in ("precompute", "layout", "solve")
        )
        jt = (
            f"{_g(j.get('wall_s'), '.1f')} ({_g(j.get('import_s'), '.1f')} / "
            f"{_g(j.get('build_s'), '.1f')} / {_g(j.get('check_s'), '.1f')} [{split}])"
            if "wall_s" in j
            else "—"
        )
        if j.get("shared_build") and "check_s" in j:
            jt = f"{_g(j['check_s'], '.1f')} (the model built above) [{split}]"
        jv = j.get("value", j.get("error"))
        stime = s.get("check_s")
        stime = None if stime is None else stime + (s.get("build_s") or 0.0)
        dtime = d.get("check_s")
        dtime = None if dtime is None else dtime + (d.get("build_s") or 0.0)
        sv = s.get("value", s.get("error"))
        if s.get("cached"):
            sv = f"{_g(sv, '.10g')} (cached)"
        elif s.get("source"):
            sv = f"{_g(sv, '.10g')} ({s['source']})"
        lines.append(
            f"| {c['name']} `{(Path(c['model']).name + ' ' + c['consts']).strip()}` "
            f"| `{_bars(c['prop'])}` "
            f"| {_g(j.get('states') or s.get('states'), ',')} | {_g(jv, '.10g')} "
            f"| {_g(r['bound_used'])} | {_g(r['bound_ok'])} | {_g(r['rel_err_jaxmc'])} "
            f"| {_chain(j) if 'value' in j else '—'} "
            f"| {_g(j.get('iterations'))} | {jt} "
            f"| {_g(sv, '.10g')} | {_g(stime, '.1f')} "
            f"| {_g(d.get('value', d.get('error')), '.10g')} "
            f"| {_g(r['rel_err_storm_default'])} | {_g(dtime, '.1f')} |"
        )
    return "\n".join(lines)


def report(doc: dict, md: Path | None = None, js: Path | None = None) -> str:
    """Print (and write) the table of a run's records, with its footer."""
    rows, env, meta = doc["rows"], doc["environment"], doc["meta"]
    storm_version = next(
        (r["default"]["storm"] for r in rows if r["default"].get("storm")), "—"
    )
    workers = meta.get("storm_workers")
    how = f"beside jaxmc, {workers} workers" if workers else "after jaxmc"
    text = table(rows) + (
        f"\n\n{meta['size']} size, {env.get('date', datetime.date.today())}; "
        f"host CPU {meta['host_cpu']} ({meta['cores']} cores); "
        f"jaxmc device {env.get('device', '—')}; Storm {storm_version} ({how})."
    )
    print(text, flush=True)
    if md:
        md.write_text(text + "\n")
    if js:
        js.write_text(json.dumps(doc, indent=1) + "\n")
    return text


def retable(argv: list[str]) -> int:
    """`table RUN.json`: the table again, with sound values cached since."""
    p = argparse.ArgumentParser(prog="accuracy.py table")
    p.add_argument("run", type=Path)
    p.add_argument("--reference", type=Path, default=REFERENCE)
    p.add_argument("--md", type=Path)
    args = p.parse_args(argv)
    doc = json.loads(args.run.read_text())
    ref = load_reference(args.reference)
    for row in doc["rows"]:
        key = Case(**row["case"]).key
        if "value" not in row["sound"] and "value" in ref.get(key, {}):
            row["sound"] = dict(ref[key], cached=True)
        judge(row)
    report(doc, args.md, args.run)
    return 0


# ---- the run ---------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("small", "cpu", "gpu"), default="small")
    p.add_argument(
        "--only", nargs="+", help="model names (tandem, consensus, ...), run in order"
    )
    p.add_argument("--jaxmc-timeout", type=float, default=600.0)
    p.add_argument("--storm-timeout", type=float, default=600.0)
    p.add_argument(
        "--storm-workers",
        type=int,
        default=0,
        help="Storm processes run beside jaxmc (0: Storm after each jaxmc case)",
    )
    p.add_argument("--deadline", type=float, default=float("inf"), help="seconds")
    p.add_argument("--no-jaxmc", action="store_true")
    p.add_argument(
        "--share-build",
        action="store_true",
        help="check a model's properties in one jaxmc process, built once (the "
        "first property's record is cold, the others' warm)",
    )
    p.add_argument(
        "--explorer",
        choices=("auto", "host", "device"),
        default="auto",
        help="jaxmc's state-space explorer (`jaxmc.build(..., explorer=)`; "
        "'device' for csma 4-4 and firewire delay=36 on a GPU)",
    )
    p.add_argument("--no-default", action="store_true", help="skip Storm's default")
    p.add_argument("--no-sound", action="store_true", help="cached sound values only")
    p.add_argument(
        "--reference-only",
        action="store_true",
        help="only compute missing sound values (no jaxmc, no Storm default)",
    )
    p.add_argument(
        "--resound",
        action="store_true",
        help="run Storm's sound mode even where cached (timed in this run)",
    )
    p.add_argument(
        "--retry-missing",
        action="store_true",
        help="retry sound values cached as failed (timeouts)",
    )
    p.add_argument("--reference", type=Path, default=REFERENCE)
    p.add_argument("--reference-out", type=Path, help="default: --reference")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path)
    args = p.parse_args(argv)
    if args.reference_only:
        args.no_jaxmc = args.no_default = True
    start = time.time()
    left = lambda: args.deadline - (time.time() - start)  # noqa: E731
    todo = cases(args.size, args.only)
    ref = load_reference(args.reference)
    ref_out = args.reference_out or args.reference
    if not ref_out.exists():
        save_reference(ref, ref_out)
    cpu = host_cpu()
    storm = storm_available()
    print(json.dumps({"size": args.size, "host_cpu": cpu, "storm": storm}), flush=True)

    lock = threading.Lock()

    def sound_job(case: Case) -> dict:
        if case.key in CLOSED_FORM:
            value, source = CLOSED_FORM[case.key]
            return {"value": value, "source": source}
        cached = ref.get(case.key)
        usable = cached and ("value" in cached or not args.retry_missing)
        if usable and not args.resound:
            return dict(cached, cached=True)
        if not storm:
            return {"error": "Storm not available"}
        if args.no_sound:
            return {"error": "not cached"}
        out = run_storm(case, "sound", min(args.storm_timeout, left()))
        if "value" in out or "timeout" in out.get("error", ""):
            ref[case.key] = reference_entry(out, cpu)
            with lock:  # merged into the file as it is now: runs may overlap
                save_reference(
                    {**load_reference(ref_out), case.key: ref[case.key]}, ref_out
                )
        return out

    def default_job(case: Case) -> dict:
        if args.no_default or not storm:
            return {"error": "not run"}
        return run_storm(case, "storm-default", min(args.storm_timeout, left()))

    pool = cf.ThreadPoolExecutor(max(args.storm_workers, 1))
    futures = {}
    if args.storm_workers > 0:
        for c in todo:
            futures[c] = (pool.submit(sound_job, c), pool.submit(default_job, c))
    meta = {"size": args.size, "host_cpu": cpu, "cores": os.cpu_count()}
    meta["storm_workers"] = args.storm_workers

    def collect(row: dict, c: Case) -> None:
        row["sound"], row["default"] = (f.result() for f in futures[c])
        judge(row)
        print(json.dumps({"case": c.key, **{k: row[k] for k in ("sound", "default")}}))

    def document(rows: list[dict]) -> dict:
        envs = (r["jaxmc"]["environment"] for r in rows if "environment" in r["jaxmc"])
        return {"environment": next(envs, {}), "meta": meta, "rows": rows}

    rows = []
    for group in _groups(todo, args.share_build):
        recs = [{"error": "not run"} for _ in group]
        if not args.no_jaxmc:
            if left() > 1:
                recs = run_jaxmc(group, min(args.jaxmc_timeout, left()), args.explorer)
            else:
                recs = [{"error": "not run (deadline)"} for _ in group]
        for c, rec in zip(group, recs):
            row = {"case": asdict(c), "jaxmc": rec}
            if not args.no_jaxmc:
                print(json.dumps({"case": c.key, "jaxmc": rec}), flush=True)
            if c not in futures:
                futures[c] = (pool.submit(sound_job, c), pool.submit(default_job, c))
            rows.append(row)
            if args.storm_workers == 0:
                collect(row, c)
                if args.json:  # a run cut short still leaves its rows so far
                    args.json.write_text(json.dumps(document(rows), indent=1) + "\n")
    for row, c in zip(rows, todo):
        if "sound" not in row:
            collect(row, c)
    pool.shutdown()
    report(document(rows), args.md, args.json)
    return 0


def _groups(todo: list[Case], share: bool) -> list[list[Case]]:
    """The cases run by one jaxmc process each: one case, or with `share`
    the consecutive cases of one model and constants."""
    groups: list[list[Case]] = []
    for c in todo:
        last = groups[-1][0] if groups else None
        if share and last and (last.model, last.consts) == (c.model, c.consts):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


# ---- preparing a device run ----------------------------------------------

WHEELS = ("stormpy==2.0.0", "Deprecated==3.0.1", "lark==1.3.1")


def prepare(argv: list[str]) -> int:
    """Copy the models and storm_ref.py into `.bench/`, the wheels into `.whl/`."""
    p = argparse.ArgumentParser(prog="accuracy.py prepare")
    p.add_argument(
        "--prism-benchmarks", type=Path, help="a git checkout (for crowds, nand, egl)"
    )
    p.add_argument("--no-wheels", action="store_true")
    args = p.parse_args(argv)
    dest = ROOT / ".bench" / "models"
    for name, sizes, _ in MODELS:
        for model, _ in sizes.values():
            target = dest / model
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if model.startswith("prism-benchmarks/") and args.prism_benchmarks:
                sub = "models/" + model.removeprefix("prism-benchmarks/")
                git = ["git", "-C", str(args.prism_benchmarks), "show", f"HEAD:{sub}"]
                target.write_bytes(
                    subprocess.run(git, check=True, capture_output=True).stdout
                )
            elif locate(model):
                shutil.copyfile(locate(model), target)
            else:
                print(f"missing: {model}", file=sys.stderr)
    shutil.copyfile(STORM_REF, ROOT / ".bench" / "storm_ref.py")
    if not args.no_wheels:
        plats = [
            "manylinux_2_34_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
        ]
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
        ]
        cmd += [
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "-d",
            str(ROOT / ".whl"),
        ]
        for plat in plats + ["any"]:
            cmd += ["--platform", plat]
        subprocess.run(cmd + list(WHEELS), check=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["one"]:
        jaxmc_one(*sys.argv[2:])
    elif sys.argv[1:2] == ["table"]:
        sys.exit(retable(sys.argv[2:]))
    elif sys.argv[1:2] == ["prepare"]:
        sys.exit(prepare(sys.argv[2:]))
    else:
        sys.exit(main())
