"""Shared helpers of `benchmarks/spmv.py` and `benchmarks/solve_gpu.py`:
building the benchmark matrices, timing, the device copy bandwidth."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax import lax


jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jaxmc  # noqa: E402
from jaxmc.layout import CSR  # noqa: E402


#: The example folders of the models below, under each root of `model_dirs`.
SUBDIRS = (
    "ctmcs/tandem",
    "ctmcs/cluster",
    "ctmcs/kanban",
    "ctmcs/polling",
    "ctmcs/fms",
    "dtmcs/herman",
    "mdps/consensus",
    "mdps/zeroconf",
)


def model_dirs():
    """Where the PRISM example models are: `JAXMC_MODELS`, `.bench/models`
    (carried to the GPU machine, laid out as PRISM's examples by
    `accuracy.py prepare`), or `../shared/models/prism-examples`; each root
    flat or with the examples' folders."""
    roots = []
    if os.environ.get("JAXMC_MODELS"):
        roots.append(Path(os.environ["JAXMC_MODELS"]))
    roots.append(ROOT / ".bench" / "models")
    roots.append(ROOT.parent / "shared" / "models" / "prism-examples")
    return [d for r in roots for d in (r, *(r / sub for sub in SUBDIRS))]


def find_model(fname: str) -> Path:
    """A model by file name (`tandem.sm`) or by its path under PRISM's
    examples (`ctmcs/tandem/tandem.sm`, `prism-benchmarks/dtmcs/egl/egl.pm`),
    looked up in `model_dirs()`."""
    for d in model_dirs():
        if (d / fname).exists():
            return d / fname
    if "/" in fname:
        return find_model(Path(fname).name)
    raise FileNotFoundError(fname)


#: name -> (file, constants). The small ones are CPU smoke sizes of the
#: GPU rows (same files, same code paths).
MODELS = {
    "tandem31": ("tandem.sm", "c=31"),
    "tandem63": ("tandem.sm", "c=63"),
    "tandem2047": ("tandem.sm", "c=2047"),
    "tandem4095": ("tandem.sm", "c=4095"),
    "cluster256": ("cluster.sm", "N=256"),
    "cluster464": ("cluster.sm", "N=464"),
    "herman9": ("herman9.pm", ""),
    "herman11": ("herman11.pm", ""),
    "herman13": ("herman13.pm", ""),
    "herman15": ("herman15.pm", ""),
    "herman17": ("herman17.pm", ""),
    "kanban2": ("kanban.sm", "t=2"),
    "kanban5": ("kanban.sm", "t=5"),
    "cluster8": ("cluster.sm", "N=8"),
    "cluster16": ("cluster.sm", "N=16"),
    "polling5": ("poll5.sm", ""),
    "polling16": ("poll16.sm", ""),
    "polling18": ("poll18.sm", ""),
    "fms2": ("fms.sm", "n=2"),
    "fms7": ("fms.sm", "n=7"),
    "fms8": ("fms.sm", "n=8"),
    "coin2": ("coin2.nm", "K=2"),
    "coin6": ("coin6.nm", "K=4"),
}


def build(name: str, wait: bool = True):
    """`(model, explicit, build seconds)` for a benchmark model. With
    `JAXMC_BENCH_CACHE` set, the explicit model is pickled there and reused
    by the next script of the same run (the build time reported is then the
    first build's). If `prebuild` is building it (a `NAME.pending` marker in
    the cache), wait for its pickle instead of building it a second time."""
    import pickle

    fname, consts = MODELS[name]
    cache = os.environ.get("JAXMC_BENCH_CACHE")
    path = Path(cache) / f"{name}.pkl" if cache else None
    if path is not None and wait:
        pending = path.with_suffix(".pending")
        t = time.perf_counter()
        while pending.exists() and not path.exists():
            if time_left() <= 0:
                raise TimeoutError(f"{name}: still building at the deadline")
            time.sleep(0.5)
        if pending.exists() or path.exists():
            print(
                f"# {name}: waited {time.perf_counter() - t:.1f}s for the prebuild",
                flush=True,
            )
    if path is not None and path.exists():
        with open(path, "rb") as fh:
            em, tb = pickle.load(fh)
        return None, em, tb
    t = time.perf_counter()
    model = jaxmc.load_model(str(find_model(fname)), consts or None)
    em = jaxmc.build(model)
    tb = time.perf_counter() - t
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump((em, tb), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    return model, em, tb


def prebuild(names: list[str], workers: int = 4) -> None:
    """Build `names` into `JAXMC_BENCH_CACHE` in `workers` parallel processes
    (JAX on the CPU there), so that the host builds of a GPU run overlap each
    other and the measurements. Each name gets a `NAME.pending` marker at
    once, removed when its pickle is written (or its build failed, which is
    then logged and left to the consumer to repeat)."""
    import subprocess

    cache = Path(os.environ["JAXMC_BENCH_CACHE"])
    cache.mkdir(parents=True, exist_ok=True)
    for n in names:
        (cache / f"{n}.pending").touch()
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    todo = list(names)
    running = []
    while todo or running:
        while todo and len(running) < workers:
            n = todo.pop(0)
            cmd = [sys.executable, __file__, "build1", n]
            running.append((n, subprocess.Popen(cmd, env=env), time.perf_counter()))
        for item in list(running):
            n, p, t0 = item
            if p.poll() is not None:
                running.remove(item)
                (cache / f"{n}.pending").unlink(missing_ok=True)
                print(
                    f"# prebuild {n}: rc {p.returncode}, "
                    f"{time.perf_counter() - t0:.1f}s",
                    flush=True,
                )
        time.sleep(0.2)


#: Seconds since the epoch at which the scripts stop starting new work
#: (`JAXMC_BENCH_DEADLINE`), and the most seconds one model may take
#: (`JAXMC_BENCH_MODEL_S`): one slow model must not eat a whole device call.
DEADLINE = float(os.environ.get("JAXMC_BENCH_DEADLINE", "inf"))
MODEL_S = float(os.environ.get("JAXMC_BENCH_MODEL_S", "inf"))


def time_left(model_start: float | None = None) -> float:
    """Seconds left before the run's deadline, or the model's own budget
    (counted from `model_start`, a `time.time()`) if that comes first."""
    left = DEADLINE - time.time()
    if model_start is not None:
        left = min(left, model_start + MODEL_S - time.time())
    return left


def stochastic(em) -> sp.csr_matrix:
    """The model's matrix with every row scaled to sum 1 (the uniformised /
    embedded structure: same non-zeros, bounded iterates)."""
    A = sp.csr_matrix(
        (em.val, em.col, em.row_ptr), shape=(len(em.row_ptr) - 1, em.num_states)
    )
    s = np.asarray(A.sum(axis=1)).ravel()
    A = sp.diags(1.0 / np.where(s > 0, s, 1.0)) @ A
    A = A.tocsr()
    A.sort_indices()
    return A


def to_csr(A: sp.csr_matrix, dtype=np.float64) -> CSR:
    c = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    return c.with_values(jnp.asarray(A.data, dtype=dtype))


def csr_bytes(nnz: int, n: int, m: int, itemsize: int) -> int:
    """Compulsory bytes of one CSR SpMV: values + columns + row pointers, `x`
    read once, `y` written once."""
    return nnz * (itemsize + 4) + 4 * (m + 1) + itemsize * (n + m)


def median_time(run, *args, reps=7) -> float:
    """Median wall seconds of `reps` calls of `run(*args)` after one warm-up."""
    out = run(*args)
    jax.block_until_ready(out)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(run(*args))
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def time_iterations(
    f, x, k: int = 100, reps: int = 7, max_s: float = 0.5, out=None, operands=()
) -> float:
    """Seconds per application of `f` in a jitted loop of `k` applications,
    two per loop trip (the carried vector ping-pongs, no copy). Where one
    application takes more than `max_s / k` (herman's warp kernels: 10-100
    ms), `k` shrinks so that one timed loop stays near `max_s` seconds (the
    trip count is a traced argument: one compilation for both). With a
    list `out`, `f(f(x))` (one loop trip) is appended to it, so a caller can
    check the result without compiling `f` a second time.

    `operands` (the matrix) are passed to `f(x, *operands)` as arguments of
    the jitted loop: closed over, XLA would embed them as constants (GBs at
    tandem c=4095 or herman N=17), which makes compilation slow."""
    import equinox as eqx

    @eqx.filter_jit
    def run(x, trips, operands):
        return lax.fori_loop(0, trips, lambda i, x: f(f(x, *operands), *operands), x)

    one_trip = jnp.asarray(1, jnp.int32)
    y2 = jax.block_until_ready(run(x, one_trip, operands))
    if out is not None:
        out.append(y2)
    t = time.perf_counter()
    jax.block_until_ready(run(x, one_trip, operands))
    one = (time.perf_counter() - t) / 2
    if one * k > max_s:
        k = max(2, int(max_s / one))
        reps = min(reps, 3)
    trips = k // 2
    return median_time(run, x, jnp.asarray(trips, jnp.int32), operands, reps=reps) / (
        trips * 2
    )


def copy_bandwidth(nbytes: int = 2 << 30) -> tuple[float, str]:
    """Device-to-device copy bandwidth (bytes read + written per second)."""
    try:
        import cupy as cp

        a = cp.ones(nbytes // 8, dtype=cp.float64)
        b = cp.empty_like(a)
        for _ in range(3):
            cp.copyto(b, a)
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for _ in range(20):
            cp.copyto(b, a)
        e.record()
        e.synchronize()
        t = cp.cuda.get_elapsed_time(s, e) / 1e3 / 20
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
        return 2 * nbytes / t, "cupy copyto"
    except Exception:  # noqa: BLE001 - no CuPy: measure with XLA
        x = jnp.ones(nbytes // 8)
        t = time_iterations(lambda v: v + 1.0, x, k=20)
        return 2 * nbytes / t, "jax x+1"


def cusparse_time(A: sp.csr_matrix, x: np.ndarray, k: int = 100):
    """`(seconds per SpMV, relative error)` of CuPy's CSR SpMV (cuSPARSE),
    or None without CuPy."""
    try:
        import cupy as cp
        import cupyx.scipy.sparse as csp
    except Exception:  # noqa: BLE001
        return None
    M = csp.csr_matrix(A)
    xg = cp.asarray(x)
    y = M @ xg
    for _ in range(3):
        y = M @ xg
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(5):
        s.record()
        for _ in range(k):
            y = M @ xg
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3 / k)
    ref = A @ x
    err = float(np.abs(cp.asnumpy(y) - ref).max() / max(np.abs(ref).max(), 1e-300))
    del M, xg, y
    cp.get_default_memory_pool().free_all_blocks()
    return statistics.median(ts), err


def device_name() -> str:
    d = jax.devices()[0]
    return f"{getattr(d, 'device_kind', d.platform)} (jax {jax.__version__})"


def too_padded(
    csr_lengths: np.ndarray, limit_bytes: float = 8e9, limit_factor: float = 8.0
) -> bool:
    """Whether plain ELL (every row padded to the longest) would exceed
    `limit_bytes` or `limit_factor` times the non-zeros (herman N=17: 131k
    rows of up to 131k entries, 200 GB)."""
    m = len(csr_lengths)
    padded = m * int(csr_lengths.max(initial=0))
    return padded * 12 > limit_bytes or padded > limit_factor * max(
        int(csr_lengths.sum()), 1
    )


def table(rows: list[dict], cols: list[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
        return str(v)

    w = {c: max([len(c)] + [len(fmt(r.get(c, ""))) for r in rows]) for c in cols}
    lines = [
        "| " + " | ".join(c.ljust(w[c]) for c in cols) + " |",
        "|" + "|".join("-" * (w[c] + 2) for c in cols) + "|",
    ]
    for r in rows:
        lines.append(
            "| " + " | ".join(fmt(r.get(c, "")).ljust(w[c]) for c in cols) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    # python benchmarks/_gpu_common.py prebuild [--workers K] NAME...
    #     (JAXMC_BENCH_CACHE set)
    # python benchmarks/_gpu_common.py build1 NAME
    #     (one build; used by prebuild)
    if sys.argv[1] == "build1":
        build(sys.argv[2], wait=False)
    elif sys.argv[1] == "prebuild":
        args = sys.argv[2:]
        workers = 4
        if args[:1] == ["--workers"]:
            workers, args = int(args[1]), args[2:]
        prebuild(args, workers)
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
