"""`jaxmc plot-matrix`: draw a model's transition matrix in PRISM's state
order and in jaxmc's, with the padding a sliced-ELL layout would store."""

from __future__ import annotations

import argparse
import os
import sys


def run(args: argparse.Namespace) -> int:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "error: jaxmc plot-matrix needs matplotlib\n"
            "hint: pip install 'jaxmc[plot]'  (or: pip install matplotlib)",
            file=sys.stderr,
        )
        return 1
    import numpy as np

    import jaxmc
    from jaxmc.layout import CSR, SLICE, SlicedELL

    model = jaxmc.load_model(args.model, ",".join(args.const) or None)
    explicit = jaxmc.build(model)
    n = explicit.num_states
    # State-to-state pattern (an MDP's choices merged per state).
    rows = explicit.state_of_choice()[explicit.row_of_entry()]
    cols = np.asarray(explicit.col)
    # PRISM numbers states in lexicographic order of the variable valuations
    # (first variable most significant).
    states = np.asarray(explicit.states)
    lex = np.lexsort(states.T[::-1]) if states.shape[1] else np.arange(n)
    rank = np.empty(n, dtype=np.int64)
    rank[lex] = np.arange(n)

    def padding(r, c):
        order = np.lexsort((c, r))
        r, c = r[order], c[order]
        keep = np.ones(len(r), dtype=bool)
        keep[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
        r, c = r[keep], c[keep]
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(ptr, r + 1, 1)
        ptr = np.cumsum(ptr)
        csr = CSR.from_arrays(ptr, c, np.ones(len(c)), (n, n))
        sell = SlicedELL.from_csr(csr)
        stored = sum(int(np.prod(s.shape)) for s in sell.slot)
        return r, c, stored - len(c)

    fig, axes = plt.subplots(1, 2, figsize=(12, 6))
    panels = (
        ("PRISM order (lexicographic)", rank[rows], rank[cols]),
        ("jaxmc order (BFS)", rows, cols),
    )
    msize = max(0.05, min(4.0, 300.0 / max(n, 1)))
    for ax, (title, r, c) in zip(axes, panels):
        r, c, pad = padding(r, c)
        nnz = len(c)
        if n > 2000:
            ax.plot(c, r, ",", color="black")
        else:
            ax.scatter(c, r, s=msize, c="black", marker="s", linewidths=0)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_title(
            f"{title}\nsliced ELL ({SLICE}-row slices): {nnz:,} non-zeros, "
            f"{pad:,} padding ({pad / max(nnz, 1):.0%})",
            fontsize=9,
        )
        ax.set_xlabel("column (successor)")
        ax.set_ylabel("row (state)")
    name = os.path.basename(args.model)
    fig.suptitle(f"{name}: {n:,} states, {explicit.num_transitions:,} transitions")
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)
    print(f"Wrote {args.output}")
    return 0
