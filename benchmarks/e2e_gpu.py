"""End to end, jaxmc against Storm's default engine on the same host: every
PRISM benchmark model of issue 21 at >= 10^6 states (`--size large`), or a
CPU-sized smoke instance of each (`--size small`, same files and
properties).

Each case (one model instance, one property) runs jaxmc in a fresh
interpreter (`child`: cold, with an empty persistent compilation cache of
its own): import, parse (`jaxmc.load_model`), build (`jaxmc.build`), the
first `jaxmc.check` (tracing, compilation and layout included) and a second
check in that process (warm); then, unless `--no-warm-process`, a second
fresh process with that case's compilation cache warm. The child times its
stages from inside (`CheckResult.timing`: precompute / layout / solve, and
every other key jaxmc reports), sums JAX's compile events (trace, lowering,
backend compile or cache retrieval) per stage, and reports peak RSS and the
device's peak memory; the parent adds the wall time from outside.

Storm (`../shared/tools/storm_ref.py --solver storm-default`, a child
process) runs after each jaxmc case, or with `--storm-parallel [N]` in N
workers beside jaxmc from the start (on other cores). Its times are cached
in `--storm-cache FILE` (JSON, keyed by host CPU, Storm version, instance,
property), written to `--storm-cache-out` (default: the same file): a later
run on the same host reuses them (the table says which, measured when), so
that a device call can time jaxmc alone. `--no-jaxmc` only fills the cache.

Output: one JSON line per case (`{"case": ..., "jaxmc": ..., "storm": ...}`)
and a markdown table (`--md FILE`; `--jsonl FILE` for the lines; `table
A.jsonl B.jsonl ...` makes one table of several runs' lines).
`--part K/N` runs the K-th of N parts, balanced by the cases' expected
times (`--plan N` prints the split), `--only` names models or case labels.
The device calls of the whole set: benchmarks/RESULTS.md ("End to end on
every benchmark model").

    python benchmarks/e2e_gpu.py --size small --storm-parallel 1
    python benchmarks/e2e_gpu.py --plan 4
    python benchmarks/e2e_gpu.py --part 1/4 --storm-parallel 6 --deadline 520 \\
        --timeout 240 --storm-cache benchmarks/e2e_storm.json \\
        --storm-cache-out $OUT/e2e_storm.json --md $OUT/e2e.md --jsonl $OUT/e2e.jsonl
    python benchmarks/e2e_gpu.py table e2e_1.jsonl e2e_2.jsonl --md e2e.md
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

import _e2e_table as tables  # noqa: E402
import _peers as peers  # noqa: E402


# ---- the cases -------------------------------------------------------------

#: label; model name; property; large and small instance (file under
#: PRISM's examples, constants); expected jaxmc cold and Storm seconds at
#: large size on one GPU host (issue 21's measurements, guesses where it has
#: none: they only balance `--part`). Small instances are CPU smoke sizes.
TABLE = """
tandem-P; tandem; P=? [ F<=0.25 sc=c ]; ctmcs/tandem/tandem.sm c=2047; \
    ctmcs/tandem/tandem.sm c=7; 25; 250
tandem-S; tandem; R{"customers"}=? [ S ]; ctmcs/tandem/tandem.sm c=2047; \
    ctmcs/tandem/tandem.sm c=7; 25; 250
cluster256; cluster; S=? [ "premium" ]; ctmcs/cluster/cluster.sm N=256; \
    ctmcs/cluster/cluster.sm N=2; 22; 190
cluster464; cluster; S=? [ "premium" ]; ctmcs/cluster/cluster.sm N=464; \
    ctmcs/cluster/cluster.sm N=3; 35; 500
kanban; kanban; R{"throughput"}=? [ S ]; ctmcs/kanban/kanban.sm t=5; \
    ctmcs/kanban/kanban.sm t=1; 35; 40
fms; fms; R{"productivity"}=? [ S ]; ctmcs/fms/fms.sm n=7; ctmcs/fms/fms.sm n=1; 25; 20
polling; polling; P=? [ !(s=2 & a=1) U (s=1 & a=1) ]; ctmcs/polling/poll16.sm; \
    ctmcs/polling/poll3.sm; 27; 21
consensus-P; consensus; Pmin=? [ F "finished" & "all_coins_equal_1" ]; \
    mdps/consensus/coin6.nm K=4; mdps/consensus/coin2.nm K=2; 40; 30
consensus-R; consensus; R{"steps"}max=? [ F "finished" ]; \
    mdps/consensus/coin6.nm K=4; mdps/consensus/coin2.nm K=2; 40; 30
zeroconf; zeroconf; Pmin=? [ F (l=4 & ip=1) ]; \
    mdps/zeroconf/zeroconf.nm reset=false,N=1000,K=8,err=0; \
    mdps/zeroconf/zeroconf.nm reset=false,N=1000,K=1,err=0; 15; 13
wlan; wlan; R{"time"}max=? [ F s1=12 & s2=12 ]; mdps/wlan/wlan5.nm TRANS_TIME_MAX=10; \
    mdps/wlan/wlan0.nm TRANS_TIME_MAX=10; 12; 8
csma-P; csma; Pmin=? [ F "all_delivered" ]; mdps/csma/csma4_4.nm; \
    mdps/csma/csma2_2.nm; 20; 20
csma-R; csma; R{"time"}max=? [ F "all_delivered" ]; mdps/csma/csma4_4.nm; \
    mdps/csma/csma2_2.nm; 20; 20
firewire; firewire; Pmin=? [ F ((s1=8) & (s2=7)) | ((s1=7) & (s2=8)) ]; \
    mdps/firewire/impl/deadline.nm delay=36,deadline=800,fast=0.5; \
    mdps/firewire/impl/deadline.nm delay=3,deadline=200,fast=0.5; 20; 20
brp; brp; P=? [ F s=5 ]; dtmcs/brp/brp.pm N=32768,MAX=5; \
    dtmcs/brp/brp.pm N=16,MAX=2; 150; 15
crowds; crowds; P=? [ F observe0>1 ]; \
    prism-benchmarks/dtmcs/crowds/crowds.pm TotalRuns=6,CrowdSize=20; \
    prism-benchmarks/dtmcs/crowds/crowds.pm TotalRuns=3,CrowdSize=5; 75; 60
nand; nand; P=? [ F s=4 & z/N<0.1 ]; prism-benchmarks/dtmcs/nand/nand.pm N=60,K=4; \
    prism-benchmarks/dtmcs/nand/nand.pm N=5,K=1; 45; 75
herman; herman; filter(max, R=? [ F "stable" ], "init"); dtmcs/herman/herman17.pm; \
    dtmcs/herman/herman5.pm; 175; 145
leader_sync; leader_sync; R{"num_rounds"}=? [ F "elected" ]; \
    dtmcs/leader_sync/leader6_8.pm; dtmcs/leader_sync/leader3_2.pm; 14; 13
egl-P; egl; P=? [ F !"knowA" & "knowB" ]; prism-benchmarks/dtmcs/egl/egl.pm N=8,L=8; \
    prism-benchmarks/dtmcs/egl/egl.pm N=2,L=2; 150; 160
egl-R; egl; R{"messages_A_needs"}=? [ F phase=4 ]; \
    prism-benchmarks/dtmcs/egl/egl.pm N=8,L=8; \
    prism-benchmarks/dtmcs/egl/egl.pm N=2,L=2; 150; 160
"""


@dataclass(frozen=True)
class Case:
    label: str
    name: str
    model: str  # path under PRISM's examples, or prism-benchmarks/...
    consts: str
    prop: str
    est_jaxmc: float
    est_storm: float


def cases(size: str, only: list[str] | None = None) -> list[Case]:
    """The cases of `size`; `only` keeps those whose model name or label it
    lists (in the table's order)."""
    out = []
    for line in TABLE.strip().splitlines():
        label, name, prop, large, small, ej, es = (f.strip() for f in line.split(";"))
        model, _, consts = (large if size == "large" else small).partition(" ")
        out.append(Case(label, name, model, consts, prop, float(ej), float(es)))
    if only:
        known = {c.label for c in out} | {c.name for c in out}
        unknown = sorted(set(only) - known)
        if unknown:
            raise SystemExit(f"unknown cases {unknown}; known: {sorted(known)}")
        out = [c for c in out if c.label in only or c.name in only]
    return out


def cost(c: Case) -> float:
    """A case's weight in `parts`: jaxmc's two processes, one after the
    other, and a share of Storm (beside them, in several workers)."""
    return 1.8 * c.est_jaxmc + c.est_storm / 6


def wall(part: list[Case], warm_process: bool = True, storm_workers: int = 0) -> float:
    """Expected seconds of a run of `part`: jaxmc's processes in turn, Storm
    after each or in `storm_workers` workers beside them."""
    j = sum(c.est_jaxmc * (1.8 if warm_process else 1.0) for c in part)
    s = [c.est_storm for c in part]
    if not storm_workers:
        return j + sum(s)
    return max(j, max(s, default=0.0), sum(s) / storm_workers)


def parts(todo: list[Case], n: int) -> list[list[Case]]:
    """`todo` split into `n` parts of about equal expected time (longest
    first onto the lightest part; the default `cost`, so that calls with
    other options still split alike), each in the table's order."""
    load = [0.0] * n
    bins: list[list[Case]] = [[] for _ in range(n)]
    for c in sorted(todo, key=lambda c: -cost(c)):
        i = load.index(min(load))
        bins[i].append(c)
        load[i] += cost(c)
    order = {c.label: k for k, c in enumerate(todo)}
    return [sorted(b, key=lambda c: order[c.label]) for b in bins]


# ---- jaxmc, one fresh process per case -------------------------------------


def _plain(x):
    """JSON-friendly copy of a status enum / numpy scalar / attempt."""
    if hasattr(x, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in asdict(x).items()}
    if hasattr(x, "name") and hasattr(x, "value") and type(x).__module__ != "builtins":
        return x.name.lower()
    if hasattr(x, "item") and getattr(x, "ndim", 0) == 0:
        return x.item()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _nbytes(em) -> int:
    """Bytes of the explicit model's arrays (its own, not shared numpy views)."""
    total = 0
    for v in vars(em).values():
        for a in v.values() if isinstance(v, dict) else (v,):
            total += int(getattr(a, "nbytes", 0) or 0)
    return total


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(path: str, consts: str, prop: str, cache_dir: str, explorer: str) -> dict:
    """jaxmc on one case in this (fresh) process; its stages timed."""
    t0 = time.perf_counter()
    import jax
    from jax import monitoring

    compile_s: dict[str, float] = {}

    def listen(event: str, duration: float, **_):
        if event.startswith("/jax/core/compile/"):
            key = event.rsplit("/", 1)[-1].removesuffix("_duration")
            compile_s[key] = compile_s.get(key, 0.0) + duration

    monitoring.register_event_duration_secs_listener(listen)
    from _peers import environment

    import jaxmc

    out: dict = {"import_s": time.perf_counter() - t0}
    if cache_dir:
        jaxmc.enable_compilation_cache(cache_dir)
    t = time.perf_counter()
    out["environment"] = environment()  # initialises the backend
    out["backend_s"] = time.perf_counter() - t
    rss0 = _rss_mb()

    def stage(key, f):
        before = dict(compile_s)
        t = time.perf_counter()
        try:
            return f()
        finally:
            out[f"{key}_s"] = time.perf_counter() - t
            spent = {k: v - before.get(k, 0.0) for k, v in compile_s.items()}
            out[f"{key}_compile_s"] = sum(spent.values())
            out[f"{key}_xla_compile_s"] = spent.get("backend_compile", 0.0)
            print(json.dumps(out, default=str), flush=True)  # read if timed out

    opts = {"explorer": explorer} if explorer else {}
    model = stage("parse", lambda: jaxmc.load_model(path, consts or None, **opts))
    em = stage("build", lambda: jaxmc.build(model))
    out["states"], out["transitions"] = int(em.num_states), int(em.num_transitions)
    out["choices"] = int(em.num_choices)
    out["model_bytes"] = _nbytes(em)
    out["build_rss_mb"] = _rss_mb() - rss0
    for key in ("first", "warm"):
        try:
            r = stage(key, lambda: jaxmc.check(model, prop))
        except Exception as e:  # noqa: BLE001 - recorded, as a row of the table
            out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"[:300]
            break
        d = {k: _plain(getattr(r, k, None)) for k in ("value", "method", "layout")}
        d.update(status=_plain(r.status), iterations=_plain(r.iterations))
        d["bound"] = _plain(getattr(r, "bound", None))
        d["attempts"] = [a.get("method") for a in _plain(list(r.attempts or ()))]
        d["timing"] = {k: float(v) for k, v in r.timing.items() if k != "build"}
        out[key] = d
    out["compile_events_s"] = compile_s
    out["peak_rss_mb"] = _rss_mb()
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        out["device_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
    return out


def run_child(c: Case, path: Path, cache: str, timeout: float, explorer: str) -> dict:
    """`child` in a fresh interpreter; the wall time from outside."""
    cmd = [sys.executable, __file__, "child", str(path), c.consts, c.prop, cache]
    cmd.append(explorer)
    t = time.perf_counter()
    try:
        env = dict(os.environ, JAXMC_CACHE_DIR=cache)  # no other cache is warm
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env
        )
        stdout, stderr, rc = p.stdout, p.stderr, p.returncode
        error = f"exit {rc}"
    except subprocess.TimeoutExpired as e:  # the stages it finished
        stdout, stderr, rc = _text(e.stdout), _text(e.stderr), None
        error = f"timeout after {timeout:.0f} s"
    wall = time.perf_counter() - t
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    out = dict(json.loads(lines[-1]) if lines else {}, wall_s=wall)
    if rc != 0:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        out["error"] = f"{error}: {tail[:300]}"
    return out


def _at_deadline(out: dict, budget: float, timeout: float) -> dict:
    """A timeout that came from the run's deadline, not from the per-case
    limit, said so (and not cached as the case's own timeout)."""
    if out.get("error", "").startswith("timeout") and budget < timeout:
        out["error"] = f"stopped by the deadline after {budget:.0f} s"
    return out


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


# ---- Storm and its cache ---------------------------------------------------


def cache_key(host: str, version: str | None, c: Case) -> str:
    return " | ".join((host, f"stormpy {version}", c.model, c.consts, c.prop))


def run_storm(c: Case, path: Path, timeout: float, beside: bool) -> dict:
    if timeout <= 1:
        return {"error": "not run (deadline)"}
    out = peers.storm_finish(
        peers.storm_start(peers.storm_input(path), c.consts, c.prop, "storm-default"),
        timeout,
    )
    now = datetime.datetime.now().isoformat(timespec="seconds")
    return dict(out, measured=now, beside_jaxmc=beside, timeout_s=timeout)


# ---- the run ---------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("large", "small"), default="large")
    p.add_argument("--only", nargs="+", help="model names or case labels")
    p.add_argument("--part", help="K/N: the K-th of N parts (by expected time)")
    p.add_argument("--plan", type=int, metavar="N", help="print N parts and exit")
    p.add_argument("--timeout", type=float, default=240.0, help="per jaxmc process")
    p.add_argument("--storm-timeout", type=float, default=450.0)
    p.add_argument(
        "--storm-parallel",
        type=int,
        nargs="?",
        const=4,
        default=0,
        metavar="N",
        help="run Storm in N workers beside jaxmc from the start (default 4)",
    )
    p.add_argument("--deadline", type=float, default=float("inf"), help="seconds")
    p.add_argument("--no-warm-process", action="store_true")
    p.add_argument("--explorer", default="", help="jaxmc's explorer (default: its own)")
    p.add_argument("--no-jaxmc", action="store_true", help="only Storm (the cache)")
    p.add_argument("--no-storm", action="store_true")
    p.add_argument("--storm-cache", type=Path)
    p.add_argument("--storm-cache-out", type=Path)
    p.add_argument("--storm-refresh", action="store_true", help="ignore the cache")
    p.add_argument("--cache-root", type=Path, help="compilation caches (a temp dir)")
    p.add_argument("--md", type=Path)
    p.add_argument("--jsonl", type=Path)
    args = p.parse_args(argv)
    start = time.time()
    left = lambda: args.deadline - (time.time() - start)  # noqa: E731
    todo = cases(args.size, args.only)
    kw = dict(warm_process=not args.no_warm_process, storm_workers=args.storm_parallel)
    if args.plan:
        for k, b in enumerate(parts(todo, args.plan), 1):
            est = wall(b, **kw)
            print(f"{k}/{args.plan} ~{est:.0f} s: {' '.join(c.label for c in b)}")
        return 0
    if args.part:
        k, n = (int(x) for x in args.part.split("/"))
        todo = parts(todo, n)[k - 1]
    from _gpu_common import find_model

    host, version = (
        f"{peers.host_cpu()} ({os.cpu_count()} cores)",
        peers.storm_version(),
    )
    with_storm = not args.no_storm and peers.storm_available()
    cache = {} if args.storm_refresh else peers.load_cache(args.storm_cache)
    cache_out = args.storm_cache_out or args.storm_cache
    if cache_out and cache_out != args.storm_cache:  # carries the earlier entries
        peers.save_cache(peers.load_cache(args.storm_cache), cache_out)
    meta = {"size": args.size, "host": host, "stormpy": version, "part": args.part}
    meta.update(storm_workers=args.storm_parallel, date=str(datetime.date.today()))
    print(json.dumps({"meta": meta, "cases": [c.label for c in todo]}), flush=True)
    cache_root = args.cache_root or Path(tempfile.mkdtemp(prefix="jaxmc-e2e-"))

    def storm_job(c: Case) -> dict:
        key = cache_key(host, version, c)
        if key in cache:
            return dict(cache[key], cached=True)
        if not with_storm:
            return {"error": "not run"}
        try:
            path = find_model(c.model)
        except FileNotFoundError:
            return {"error": f"model not found: {c.model}"}
        beside = args.storm_parallel > 0 and not args.no_jaxmc
        budget = min(args.storm_timeout, left())
        out = _at_deadline(
            run_storm(c, path, budget, beside), budget, args.storm_timeout
        )
        if cache_out and ("value" in out or out.get("error", "").startswith("timeout")):
            peers.save_cache({key: out}, cache_out)  # its own timeout too
        return out

    def jaxmc_job(c: Case) -> tuple[dict, dict]:
        """The cold process, and the one with its compilation cache warm."""
        try:
            path = find_model(c.model)
        except FileNotFoundError:
            return {"error": f"model not found: {c.model}"}, {}
        if args.no_jaxmc:
            return {"error": "not run"}, {}
        cdir = cache_root / c.label
        shutil.rmtree(cdir, ignore_errors=True)

        def go() -> dict:
            budget = min(args.timeout, left())
            if budget <= 5:
                return {"error": "not run (deadline)"}
            out = run_child(c, path, str(cdir), budget, args.explorer)
            return _at_deadline(out, budget, args.timeout)

        j = go()
        return j, (go() if "first" in j and not args.no_warm_process else {})

    pool = cf.ThreadPoolExecutor(max(args.storm_parallel, 1))
    futures = {}
    if args.storm_parallel or args.no_jaxmc:
        futures = {c.label: pool.submit(storm_job, c) for c in todo}
    rows, lines = [], []
    for c in todo:
        j, w = jaxmc_job(c)
        row = {"case": asdict(c), "jaxmc": j, "warm_process": w}
        print(json.dumps(row, default=str), flush=True)  # kept if the run is cut
        if c.label not in futures:
            futures[c.label] = pool.submit(storm_job, c)
        rows.append(row)
        if not args.storm_parallel:
            row["storm"] = futures[c.label].result()
    for row in rows:
        row["storm"] = futures[row["case"]["label"]].result()
        lines.append(json.dumps({**row, "meta": meta}, default=str))
        print(lines[-1], flush=True)
    pool.shutdown()
    text = tables.report(rows, meta)
    print(text, flush=True)
    if args.md:
        args.md.write_text(text + "\n")
    if args.jsonl:
        args.jsonl.write_text("\n".join(lines) + "\n")
    ok = args.no_jaxmc or all("error" not in r["jaxmc"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(child(*sys.argv[2:7]), default=str), flush=True)
    elif sys.argv[1:2] == ["table"]:
        sys.exit(tables.retable(sys.argv[2:]))
    else:
        sys.exit(main())
