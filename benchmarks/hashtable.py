"""Find-or-put throughput of the explorer's visited-state tables
(`jaxmc.explore.device.table`): the Pallas kernel against the sorted
(portable) reference and the XLA-rounds hash table, on batches shaped like
a BFS level.

A case is `n` successor keys (`--width` uint32 words) of which a fraction
`dup` are duplicates: the level's distinct keys number `n * (1 - dup)`,
half of them already in the table (states of earlier levels) and half new;
the batch draws every distinct key once and fills the rest with repeats,
shuffled. Each implementation runs the same batch on the same pre-filled
table (the call copies the table: it is not donated), after one untimed
call that compiles; the ids of every implementation are checked against
the sorted reference's.

    python benchmarks/hashtable.py                       # 1e6, 1e7, 1e8
    python benchmarks/hashtable.py --sizes 1e6 --dups 0.5 0.9 --impls pallas sorted

Prints one row per case: keys/s (inserts and look-ups), the new keys found,
and whether the ids equal the reference's.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxmc.explore.device import table as T  # noqa: E402


def make_case(n: int, dup: float, width: int, seed: int = 0):
    """(old keys, batch keys): distinct random keys, bit 31 of word 0 clear."""
    rng = np.random.default_rng(seed)
    distinct = max(2, int(n * (1 - dup)))
    pool = rng.integers(0, 2**32, size=(distinct, width), dtype=np.uint64)
    pool = pool.astype(np.uint32)
    pool[:, 0] &= np.uint32(0x7FFFFFFF)
    pool = np.unique(pool, axis=0)
    rng.shuffle(pool)
    old = pool[: pool.shape[0] // 2]
    idx = np.concatenate(
        [np.arange(pool.shape[0]), rng.integers(0, pool.shape[0], n - pool.shape[0])]
    )
    rng.shuffle(idx)
    return old, pool[idx]


def _fop(impl: str):
    return jax.jit(
        functools.partial(T.find_or_put, impl="auto" if impl == "sorted" else impl)
    )


def prefill(impl: str, old: np.ndarray, capacity: int, width: int):
    table = T.create(capacity, width, impl)
    chunk = 1 << 22
    fop = _fop(impl)
    for i in range(0, old.shape[0], chunk):
        part = jnp.asarray(old[i : i + chunk])
        table, _, _ = fop(table, part, jnp.ones(part.shape[0], bool))
    jax.block_until_ready(table)
    return table


def bench(impl, old, batch, width, reps):
    capacity = old.shape[0] + batch.shape[0]
    table = prefill(impl, old, capacity, width)
    keys = jnp.asarray(batch)
    valid = jnp.ones(batch.shape[0], bool)
    fop = _fop(impl)
    t0 = time.perf_counter()
    out = jax.block_until_ready(fop(table, keys, valid))
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fop(table, keys, valid))
        times.append(time.perf_counter() - t0)
    new_table, ids, is_new = out
    return {
        "s": statistics.median(times),
        "first_s": compile_s,
        "ids": np.asarray(ids),
        "new": int(np.asarray(is_new).sum()),
        "overflow": bool(new_table.overflow),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7, 1e8])
    ap.add_argument("--dups", nargs="+", type=float, default=[0.5, 0.75, 0.9])
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--impls", nargs="+", default=["pallas", "rounds", "sorted"])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    dev = jax.devices()[0]
    print(
        f"# device: {dev.device_kind} ({jax.default_backend()}), jax {jax.__version__}"
    )
    print(f"# width {args.width} words; {time.strftime('%Y-%m-%d %H:%M')}")
    hdr = f"{'keys':>11} {'dup':>5} {'impl':>7} {'ms':>10} {'Mkeys/s':>9} "
    print(hdr + f"{'first s':>8} {'new':>10} ids")
    # The sorted implementation is the reference: it runs first.
    impls = sorted(args.impls, key=lambda i: i != "sorted")
    for n in map(int, args.sizes):
        for dup in args.dups:
            old, batch = make_case(n, dup, args.width)
            ref = None
            for impl in impls:
                try:
                    r = bench(impl, old, batch, args.width, args.reps)
                except Exception as e:  # report and go on (e.g. out of memory)
                    msg = str(e).splitlines()[0][:100]
                    print(
                        f"{n:>11} {dup:>5} {impl:>7} failed: {type(e).__name__}: {msg}"
                    )
                    continue
                if ref is None:
                    ref = r["ids"]
                same = "ref" if ref is r["ids"] else str(np.array_equal(ref, r["ids"]))
                print(
                    f"{n:>11} {dup:>5} {impl:>7} {r['s'] * 1e3:>10.2f} "
                    f"{n / r['s'] / 1e6:>9.1f} {r['first_s']:>8.2f} {r['new']:>10} "
                    f"{same}{' OVERFLOW' if r['overflow'] else ''}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
