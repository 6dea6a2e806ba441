"""Multi-vector SpMV and implicitly differentiated linear solves.

Everything here works on one right-hand side (`x` of shape `[n]`) or on
many at once (`[n, k]`, with values `[nnz]` shared or `[nnz, k]` per
column): a batch of parameter points goes through the *same* gathers, one pass over
the matrix's indices for all columns.
The loops never scatter: every sweep, forward or transposed, one vector or
many, is a sequence of row gathers in a hybrid ELL layout
(`hybrid_ell`: slot-major ELL plus a few scatter-added overflow entries for
very long rows), because a scatter-add (`segment_sum`) is ~13x slower than a
gather on a GPU. Under `jax.vmap` the Jacobi loop is not vmapped as is (that
runs a batched scatter per step): `_jacobi_solver` is a `custom_vmap` whose
rule runs the explicit multi-vector iteration, batch axis last, with a
per-column convergence mask. Gradients are unaffected:
`custom_linear_solve` never differentiates its solver.

`solve(system, b)` solves `(I - A) x = b` by multicolour Gauss-Seidel
(Jacobi's parallelism, at most Jacobi's iterations), over-relaxed with a
guarded automatic `w` (`_sor`; 2-4x fewer sweeps on slowly mixing chains),
and is wrapped in
`lax.custom_linear_solve`, so its derivative is the implicit-function
theorem's: a tangent costs one more solve with the same matrix, a cotangent
one solve with `(I - A)^T` (the transposed structure is precomputed on the
host, the values are gathered). The forward `lax.while_loop` is never
differentiated. Given `relevance`, that cotangent solve stops when the
*gradient* has converged (`Relevance`: adjoint entries weighted by the
values their row's derivative multiplies) rather than when every adjoint
entry has, down to 1e-200 far from the initial state: on the walk of
`benchmarks/grad.py` 1.15x the forward's sweeps instead of ~1.5x.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ConvergenceError
from ..kernels import sor_multi_pallas as _sor_kernel


class Pattern:
    """The sparsity of a square matrix on the host: entry `e` is at
    `(rows[e], cols[e])`, rows sorted. Precomputes the transpose permutation,
    a colouring of the states (`coloring`) and, for both orientations, the
    gather layout of the Gauss-Seidel sweeps (`sweep_layout`).
    """

    def __init__(self, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int],
                 lex: np.ndarray | None = None):
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        self.shape = (int(shape[0]), int(shape[1]))
        n = self.shape[0]
        perm = np.lexsort((rows, cols))
        color = coloring(rows, cols, n)
        order = np.argsort(color, kind="stable")
        #: Static: rows `[bounds[c], bounds[c+1])` of the colour-sorted order
        #: are colour `c`.
        self.bounds = tuple(int(v) for v in np.searchsorted(color[order], np.arange(color.max(initial=-1) + 2)))
        self.arrays = {
            "rows": rows.astype(np.int32),
            "cols": cols.astype(np.int32),
            "perm": perm.astype(np.int32),
            "t_rows": cols[perm].astype(np.int32),
            "t_cols": rows[perm].astype(np.int32),
            "order": order.astype(np.int32),
            "lay": sweep_layout(rows, cols, order, self.bounds),
            "t_lay": sweep_layout(cols[perm], rows[perm], order, self.bounds),
        }
        # each row's diagonal entry (nnz: none), in both orientations: the
        # solves then gather the diagonal instead of scatter-adding it (a
        # scatter over `[nnz, k]` values in batched solves)
        on = np.flatnonzero(rows == cols)
        if np.unique(rows[on]).size == on.size:
            diag = np.full(n, rows.size, np.int64)
            diag[rows[on]] = on
            inv = np.append(np.empty_like(perm), rows.size)  # (nnz stays nnz)
            inv[perm] = np.arange(perm.size)
            t_diag = inv[diag]
            self.arrays["diag"] = diag.astype(np.int32)
            self.arrays["t_diag"] = t_diag.astype(np.int32)
        #: Static: the diagonal sweep layout's offsets `(forward,
        #: transposed)`, or None where it does not apply (`dia_layout`).
        self.dia = None
        if lex is not None and DIA != "off":
            fwd = dia_layout(rows, cols, n, lex, color)
            t = fwd and dia_layout(cols[perm], rows[perm], n, lex, color, order=fwd[1]["order"])
            if t is not None:
                self.dia = (fwd[0], t[0])
                self.arrays["dia"] = {"fwd": fwd[1], "t": t[1]}


def coloring(rows: np.ndarray, cols: np.ndarray, n: int, max_colors: int = 32) -> np.ndarray:
    """A colouring of the states for Gauss-Seidel sweeps: no off-diagonal
    entry joins two states of one colour (in either direction), except in
    a last colour of leftovers (updated Jacobi-style among themselves).

    Bipartite graphs (grids, random walks, birth-death chains) get 2 colours
    from the parity of a BFS depth; others a Jones-Plassmann greedy colouring
    (random priorities, vectorised). Why: a multicolour Gauss-Seidel sweep is
    as parallel as a Jacobi step (one gather pass per colour) and, for the
    M-matrices `I - A` solved here, converges at least as fast (Stein-
    Rosenberg); on a bipartite graph its rate is the square of Jacobi's, i.e.
    half the iterations."""
    if n == 0:
        return np.zeros(0, np.int64)
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    off = rows != cols
    u = np.concatenate([rows[off], cols[off]])
    v = np.concatenate([cols[off], rows[off]])
    if u.size == 0:
        return np.zeros(n, np.int64)
    G = sp.csr_matrix((np.ones(u.size, np.int8), (u, v)), shape=(n, n))
    G.sum_duplicates()
    # 2 colours: BFS depth parity from one root per component (a virtual
    # super-root n joined to each component's first state).
    _, labels = csgraph.connected_components(G, directed=False)
    roots = np.unique(labels, return_index=True)[1]
    H = sp.csr_matrix(
        (np.ones(u.size + roots.size, np.int8),
         (np.concatenate([u, np.full(roots.size, n)]), np.concatenate([v, roots]))),
        shape=(n + 1, n + 1),
    )
    _, pred = csgraph.breadth_first_order(H, n, directed=False, return_predecessors=True)
    anc = np.where(pred >= 0, pred, np.arange(n + 1))
    depth = (pred >= 0).astype(np.int64)
    while True:  # pointer jumping: depth to the super-root
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        depth = depth + np.where(anc != nxt, depth[anc], 0)
        anc = nxt
    parity = depth[:n] % 2
    if np.all(parity[u] != parity[v]):
        return parity
    # Jones-Plassmann: a state whose priority beats all its uncoloured
    # neighbours' takes the smallest colour none of its neighbours has.
    ind, ptr = G.indices, G.indptr
    deg = np.diff(ptr)
    starts = np.minimum(ptr[:-1], max(ind.size - 1, 0))
    w = np.random.default_rng(0).permutation(n)
    color = np.full(n, -1, np.int64)
    for _ in range(10 * max_colors):
        todo = color < 0
        if not todo.any():
            break
        nb = np.where(todo[ind], w[ind], -1)
        best = np.where(deg > 0, np.maximum.reduceat(nb, starts), -1)
        pick = todo & (w > best)
        bits = np.where(color[ind] >= 0, np.left_shift(np.uint64(1), np.maximum(color[ind], 0).astype(np.uint64)), np.uint64(0))
        used = np.where(deg > 0, np.bitwise_or.reduceat(bits, starts), np.uint64(0))[pick]
        low = ~used & (used + np.uint64(1))
        c = np.round(np.log2(low.astype(np.float64))).astype(np.int64)
        color[np.flatnonzero(pick)] = np.where(c < max_colors, c, max_colors)
    color[color < 0] = max_colors
    # renumber the colours in use 0..C-1
    return np.unique(color, return_inverse=True)[1].astype(np.int64)


def sweep_layout(rows: np.ndarray, cols: np.ndarray, order: np.ndarray, bounds) -> dict:
    """Per colour block `c` (states `order[bounds[c]:bounds[c+1]]`), the
    hybrid ELL layout (`hybrid_ell`) of its rows, with columns renumbered to
    positions in `order`: `pcols` `[nnz]`, `ell` a tuple of `[w_c, n_c]`
    entry indices, `ovf` a tuple of overflow entry indices and `ovf_rows`
    their rows within the block."""
    n = order.size
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    prow = pos[rows] if rows.size else rows
    by_row = np.lexsort((np.arange(rows.size), prow))  # entries by permuted row
    ells, ovfs, ovf_rows = [], [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        a, b = np.searchsorted(prow[by_row], [lo, hi])
        ent = by_row[a:b]
        ell, ovf = hybrid_ell(prow[ent] - lo, hi - lo)
        ells.append(np.where(ell < ent.size, ent[np.minimum(ell, max(ent.size - 1, 0))], rows.size).astype(np.int32))
        ovfs.append(ent[ovf].astype(np.int32))
        ovf_rows.append((prow[ent[ovf]] - lo).astype(np.int32))
    return {
        "pcols": pos[cols].astype(np.int32) if cols.size else cols.astype(np.int32),
        "ell": tuple(ells),
        "ovf": tuple(ovfs),
        "ovf_rows": tuple(ovf_rows),
    }


#: The diagonal layout of the sweeps (`dia_layout`): at most this many
#: diagonals, holding all but at most `DIA_MAX_REMAINDER` of the
#: off-diagonal entries, padded to at most `DIA_MAX_FILL` times them, and at
#: most `DIA_MAX_COLORS` colours (a pass over the whole vector each). `DIA`:
#: where the sweeps use it: `"auto"` (the CPU backend), `"on"`, `"off"`.
DIA_MAX_DIAGS = 16
DIA_MAX_REMAINDER = 0.02
DIA_MAX_FILL = 3.0
DIA_MAX_COLORS = 3
DIA = "auto"


def dia_active() -> bool:
    """Whether solves use the diagonal layout where their `Pattern` has one
    (`DIA`). Why only the CPU by default: there XLA runs each gather as its
    own pass (a gathered slot is written and read back), and contiguous
    slices fuse; the GPU's sweeps are tuned on the gather layout and its
    fused kernel (also where it is asked for: `sor_multi_pallas.mode()`)."""
    if DIA == "auto" and _sor_kernel.mode() in ("on", "interpret"):
        return False  # the fused kernel was asked for: it reads the gather layout
    return DIA == "on" or (DIA == "auto" and jax.default_backend() == "cpu")


def dia_layout(rows: np.ndarray, cols: np.ndarray, n: int, lex: np.ndarray, color: np.ndarray,
               order: np.ndarray | None = None):
    """The diagonal ("DIA") layout of the matrix in the states'
    lexicographic order, for sweeps without gathers, or None where it does
    not fit (the `DIA_*` limits).

    Why: a PRISM model's states are tuples of bounded variables, and most
    updates move one variable by a constant (`x'=x+1`). In the
    lexicographic order of the states (`lex`: PRISM's own order), such an
    update is a constant index offset wherever the reachable states form a
    box, so the matrix is a few diagonals: entry `(i, i + o)`. A sweep then
    reads `x` through contiguous shifted slices, which XLA fuses into one
    pass, instead of one gather per ELL slot, each a pass of its own on a
    CPU. The colours become masks: each colour's pass computes every row
    and keeps its own rows' values. (Colour blocks of diagonals, which
    skip the other colours' rows, were slower: XLA copies every slice that
    reads the buffer a block is written into, or, reading a concatenation
    of the blocks, compiles the slices to per-element selects.)

    The iterate order is `lex` restricted to the states with entries, then
    the others (`order`: given for the transposed layout, which shares it).
    Returns `(offsets, arrays)`: `offsets` the static tuple of diagonals;
    `arrays` `{"order", "mask"` `[C, n]` bool, `"idx"` `[D, n]` (the entry
    on diagonal `d` of row `i` of the iterate, or `nnz`), and the
    remainder, entries on no chosen diagonal (or a repeated `(row, col)`),
    scatter-added: `"r_ent", "r_rows", "r_cols"}`. Diagonal entries are
    left out (the solves divide by them)."""
    nnz = rows.size
    ncol = int(color.max(initial=-1)) + 1
    if nnz == 0 or n == 0 or ncol > DIA_MAX_COLORS:
        return None
    if order is None:
        active = np.zeros(n, bool)
        active[rows] = True
        active[cols] = True
        lex = np.asarray(lex, np.int64)
        order = np.concatenate([lex[active[lex]], lex[~active[lex]]])
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    pr, pc = pos[rows], pos[cols]
    ent = np.flatnonzero(pr != pc)
    if ent.size == 0:
        return None
    u, inv, cnt = np.unique(pc[ent] - pr[ent], return_inverse=True, return_counts=True)
    by = np.argsort(-cnt, kind="stable")
    need = ent.size - int(np.floor(DIA_MAX_REMAINDER * ent.size))
    D = int(np.searchsorted(np.cumsum(cnt[by]), need)) + 1
    rows_used = int(np.count_nonzero(np.bincount(pr[ent], minlength=n)))
    if D > DIA_MAX_DIAGS or D * rows_used > DIA_MAX_FILL * ent.size:
        return None
    chosen = np.sort(u[by[:D]])
    d_of = np.full(u.size, -1, np.int64)
    d_of[np.searchsorted(u, chosen)] = np.arange(D)
    d = d_of[inv.reshape(-1)]
    on = np.flatnonzero(d >= 0)
    _, first = np.unique(d[on] * n + pr[ent[on]], return_index=True)
    keep = on[first]  # (a repeated (row, col) goes to the remainder)
    idx = np.full((D, n), nnz, np.int64)
    idx[d[keep], pr[ent[keep]]] = ent[keep]
    rest = ent[np.setdiff1d(np.arange(ent.size), keep)]
    mask = color[order][None, :] == np.arange(ncol)[:, None]
    return tuple(int(o) for o in chosen), {
        "order": order.astype(np.int32),
        "mask": mask,
        "idx": idx.astype(np.int32),
        "r_ent": rest.astype(np.int32),
        "r_rows": pr[rest].astype(np.int32),
        "r_cols": pc[rest].astype(np.int32),
    }


#: Relative cost of one scatter-added entry against one gathered ELL slot
#: when choosing the ELL width (a scatter-add is ~13x slower than a gather on
#: a GPU, ~2-4x on CPU).
SCATTER_COST = 4


def hybrid_ell(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The hybrid ELL + COO layout ("HYB") of sorted `rows`.

    Returns `(ell, ovf)`: `ell` `[w, n]` holds, slot-major (column-major ELL:
    slot `j` of every row is contiguous, so that step `j` is one coalesced
    gather), the entry indices of the first `w` entries of each row, padded
    with `nnz` (a zero entry appended by the user); `ovf` `[m]` the entries
    beyond slot `w` (in row order), which are scatter-added. `w` is the
    longest row (no scatter at all) unless that pads the matrix more than
    4x; then `w` minimises `w n + SCATTER_COST m` (a few very long rows).

    Why: `segment_sum` is a scatter-add, ~13x slower than a gather on a GPU
    and slower on CPU too for `[nnz, k]` values (many right-hand sides)."""
    nnz = rows.size
    if nnz == 0 or n == 0:
        return np.zeros((0, n), np.int32), np.zeros(0, np.int32)
    counts = np.bincount(rows, minlength=n)
    w = int(counts.max())
    if w * n > 4 * (nnz + n):  # padding > 4x: move the long rows' tails out
        srt = np.sort(counts)
        cand = np.unique(np.concatenate([[0], srt]))
        # overflow(w) = sum over rows of max(count - w, 0)
        idx = np.searchsorted(srt, cand, side="right")
        tail = np.concatenate([np.cumsum(srt[::-1])[::-1], [0]])
        over = tail[idx] - cand * (n - idx)
        w = int(cand[np.argmin(cand * n + SCATTER_COST * over)])
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(nnz) - start[rows]
    inside = slot < w
    ell = np.full((w, n), nnz, np.int64)
    ell[slot[inside], rows[inside]] = np.flatnonzero(inside)
    return ell.astype(np.int32), np.flatnonzero(~inside).astype(np.int32)


def _bcast(data, g):
    return data if data.ndim == g.ndim else data.reshape(data.shape + (1,) * (g.ndim - 1))


def spmv(data, rows, cols, n_rows: int, x):
    """`y = A x` for `A` given by entries `data` at `(rows, cols)`; `x` is
    `[n]` or `[n, k]` and `data` `[nnz]` or `[nnz, k]`. A scatter-add: used
    once per call (residuals, the JVP's `A' x`), never inside a loop."""
    g = x[cols]
    return jax.ops.segment_sum(
        _bcast(data, g) * g, rows, num_segments=n_rows, indices_are_sorted=True
    )


def spmv_t(data, pat: dict, n_cols: int, x):
    """`y = A^T x` through the precomputed transpose (sorted segments)."""
    return spmv(data[pat["perm"]], pat["t_rows"], pat["t_cols"], n_cols, x)


def gs_sweep(off, dg, rhs, lay: dict, order, bounds, n: int, classes=None, rhs_rows=None):
    """`(sweep, to_perm, from_perm)`: one multicolour Gauss-Seidel sweep of
    `x = (rhs + off x) / dg` on the colour-sorted iterate, colour by colour
    (each block's new values use the other blocks' latest ones), in the
    layout of `sweep_layout`. `sweep(x, omega)` over-relaxes each block's
    update, `x_c <- (1 - omega) x_c + omega GS_c(x)` (SOR; `omega` a scalar
    or `[k]`, one per column; `None` is plain Gauss-Seidel);
    `sweep(x, omega, check=(rel, eps, m))` returns `(x', ok)`, `ok` (per
    column) whether every entry passes the stop rule `rel.converged(|x' -
    x|, x', eps, m)` and is finite (the kernel computes it in the same
    pass). `off` is `[nnz]` or `[nnz, k]`, `dg` and `rhs` `[n]` or `[n, k]`
    (`k` columns at once: one pass over the shared indices). Values are divided by the diagonal and laid out once, here;
    each block's update is `w_c` row gathers `x[cols_j]` times values (no
    scatter, except a few overflow entries of very long rows) written back
    as one contiguous slice.

    With `classes` (`{"cls": [nnz], "table": [C, k]}`: entry `e`'s weight
    `off[e] / dg[row e]` is `table[cls[e]]`), the weights are gathered from
    the small table inside each sweep instead of being stored `[w, n, k]`:
    a batched sweep then reads the shared indices, the iterate and the table
    only, not `nnz x k` values (it is memory-bound).

    On a GPU (`sor_multi_pallas.active(k)`), an `[n, k]` sweep runs the
    fused Pallas kernel instead, one call per colour block (the gathers,
    weights, blend and write-back in one pass; XLA's fusions make ~4
    passes over the iterate per sweep, the kernel ~2), with the same reads
    in the same order, so the same values; single vectors and other
    backends take the XLA path. `rhs_rows` (optional, int `[m]`): the only
    rows where `rhs` can be non-zero (e.g. the states next to a
    reachability's target); the kernel then reads those rows of the
    right-hand side only (the XLA path ignores it)."""
    multi = rhs.ndim > 1
    pos = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))

    def to_perm(v):
        return v[order]

    def from_perm(v):
        return v[pos]

    dgp = to_perm(dg if dg.ndim == rhs.ndim else dg[:, None])
    rp = to_perm(rhs) / dgp
    pad = jnp.zeros((1,) + off.shape[1:], off.dtype)
    offp = jnp.concatenate([off, pad])
    pcols = jnp.concatenate([lay["pcols"], jnp.zeros((1,), jnp.int32)])
    if classes is not None:
        table = jnp.concatenate([classes["table"], jnp.zeros((1,) + classes["table"].shape[1:])])
        clsp = jnp.concatenate([classes["cls"], jnp.full((1,), classes["table"].shape[0], jnp.int32)])
    kmode = _sor_kernel.active(rp.shape[1]) if multi and rp.ndim == 2 else None
    krp, krows = rp, None
    if kmode is not None and rhs_rows is not None:
        ppos = pos[rhs_rows]  # their positions in the iterate's order
        krp = rp[ppos]
        krows = jnp.full((n,), -1, jnp.int32).at[ppos].set(jnp.arange(ppos.shape[0], dtype=jnp.int32))
    blocks, kblocks = [], []
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        ell, ovf, orow = lay["ell"][c], lay["ovf"][c], lay["ovf_rows"][c]
        d = dgp[lo:hi]
        if classes is not None:
            vals, ov = clsp[ell], table[clsp[ovf]]  # class ids; weights
        else:
            vals = offp[ell]  # [w, n_c] or [w, n_c, k]
            if multi and vals.ndim == 2:
                vals = vals[..., None]
            vals = vals / d
            ov = offp[ovf]
            if multi and ov.ndim == 1:
                ov = ov[:, None]
            ov = ov / d[orow]
        blocks.append((lo, hi, vals, pcols[ell], ov, pcols[ovf], orow))
        if kmode is not None:  # the kernel's columns (-1: padding, not gathered) and weights
            if classes is not None:
                kw = {"cls": vals, "table": table}
            else:
                kw = {"vals": vals[..., 0] if vals.ndim == 3 and vals.shape[2] == 1 else vals}
            kcols = jnp.where(ell < lay["pcols"].shape[0], pcols[ell], -1)
            kblocks.append((lo, hi, kcols, kw, (ov, pcols[ovf], orow) if ovf.shape[0] else None))
    if kmode is not None:  # shapes the kernel takes (else the XLA path)
        k = rp.shape[1]
        for lo, hi, kcols, kw, _ in kblocks:
            v = kw["vals"] if "vals" in kw else kw["table"]
            dense = "vals" in kw and v.ndim == 3
            ok = v.shape[-1] == k if dense else v.ndim == 2 and ("vals" in kw or v.shape[1] == k)
            if not ok or not _sor_kernel.fits(n, k, kcols.shape[0], hi - lo, dense):
                kmode = None

    def weight(vals, j):
        return vals[j] if classes is None else table[vals[j]]

    def sweep(x, omega=None, check=None):
        if kmode is not None and x.shape == rp.shape and x.dtype == rp.dtype:
            kcheck = None
            if check is not None:
                rel, eps, m = check
                if rel.w is None:
                    kcheck = (eps, None, None)
                else:
                    kcheck = (eps, rel.nw, rel.measure(x) if m is None else m)
            return _sor_kernel.sweep(x, krp, kblocks, omega, check=kcheck, rp_rows=krows,
                                     interpret=kmode == "interpret")
        y = _xla_sweep(x, omega)
        if check is None:
            return y
        rel, eps, m = check
        ok = rel.converged(jnp.abs(y - x), y, eps, m, finite=True)
        return y, ok

    def _xla_sweep(x, omega):
        for lo, hi, vals, ecols, ov, ocols, orow in blocks:
            w = vals.shape[0]
            acc = rp[lo:hi]
            if w <= 32:
                for j in range(w):
                    acc = acc + x[ecols[j]] * weight(vals, j)
            else:
                acc = lax.fori_loop(0, w, lambda j, a: a + x[ecols[j]] * weight(vals, j), acc)
            if ocols.shape[0]:
                acc = acc + jax.ops.segment_sum(
                    ov * x[ocols], orow, num_segments=hi - lo, indices_are_sorted=True
                )
            if omega is not None:  # SOR: (1 - w) x + w GS(x); exactly GS(x) at w = 1
                acc = (1.0 - omega) * x[lo:hi] + omega * acc
            x = acc if (lo, hi) == (0, n) else lax.dynamic_update_slice_in_dim(x, acc, lo, 0)
        return x

    return sweep, to_perm, from_perm


def dia_sweep(off, dg, rhs, lay: dict, order, offsets: tuple, n: int, classes=None):
    """`gs_sweep` on the diagonal layout (`dia_layout`): the same multicolour
    sweep of `x = (rhs + off x) / dg`, colour by colour, and the same
    contract (`sweep(x, omega, check=None)`, `to_perm`, `from_perm`), with
    the iterate in the layout's order. Each colour is one pass: `rhs +
    sum_d w_d * x[i + o_d]` for every row `i` from shifted slices of the
    zero-padded iterate, plus the scatter-added remainder, kept where the
    row has the colour (`mask`). The weights (`off / dg`, or the points'
    `classes` table) are laid out once, here. Sums run in diagonal order, so
    values agree with `gs_sweep`'s to rounding."""
    pos = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))

    def to_perm(v):
        return v[order]

    def from_perm(v):
        return v[pos]

    multi = rhs.ndim > 1
    dgp = to_perm(dg if dg.ndim == rhs.ndim else dg[:, None])
    rp = to_perm(rhs) / dgp
    idx, r_ent, r_rows, r_cols = lay["idx"], lay["r_ent"], lay["r_rows"], lay["r_cols"]
    if classes is not None:  # weights per class and point: `[C, k]`
        table = jnp.concatenate([classes["table"], jnp.zeros((1,) + classes["table"].shape[1:])])
        clsp = jnp.concatenate([classes["cls"], jnp.full((1,), classes["table"].shape[0], jnp.int32)])
        vals, rv = table[clsp[idx]], table[clsp[r_ent]]
    else:
        offp = jnp.concatenate([off, jnp.zeros((1,) + off.shape[1:], off.dtype)])
        vals, rv = offp[idx], offp[r_ent]  # [D, n(, k)], [m(, k)]
        if multi and vals.ndim == 2:
            vals, rv = vals[..., None], rv[:, None]
        vals, rv = vals / dgp, rv / dgp[r_rows]
    pad = max(abs(o) for o in offsets)
    masks = lay["mask"]
    widths = tuple((0, 0) for _ in range(rp.ndim - 1))

    def _pass(x, c, omega):
        xp = jnp.pad(x, ((pad, pad),) + widths)
        acc = rp
        for j, o in enumerate(offsets):
            acc = acc + lax.slice_in_dim(xp, pad + o, pad + o + n) * vals[j]
        if r_ent.shape[0]:
            acc = acc + jax.ops.segment_sum(rv * x[r_cols], r_rows, num_segments=n)
        if omega is not None:
            acc = (1.0 - omega) * x + omega * acc
        return jnp.where(masks[c] if not multi else masks[c][:, None], acc, x)

    def sweep(x, omega=None, check=None):
        y = x
        for c in range(masks.shape[0]):
            y = _pass(y, c, omega)
        if check is None:
            return y
        rel, eps, m = check
        ok = rel.converged(jnp.abs(y - x), y, eps, m, finite=True)
        return y, ok

    return sweep, to_perm, from_perm


def make_sweep(off, dg, rhs, lay: dict, order, bounds, n: int, classes=None, rhs_rows=None, dia=None):
    """`dia_sweep` where `dia` (the layout's static offsets) is given and
    `lay`/`order` are that layout's, else `gs_sweep`."""
    if dia is not None:
        return dia_sweep(off, dg, rhs, lay, order, dia, n, classes)
    return gs_sweep(off, dg, rhs, lay, order, bounds, n, classes, rhs_rows)


def _col_max(v):
    a = jnp.abs(v)
    return jnp.max(a, axis=0) if a.ndim else a


class Relevance:
    """The per-entry floor of the relative stop rule, `|x_new - x_old| <=
    eps * max(|x|, floor)`. Without weights (`w` None) the floor is 1e-300:
    every entry converges relative to itself (PRISM's rule).

    With weights `w` (`[n]`, or `[n, k]` per column; `w_s` bounds how much a
    unit of `x_s` can contribute to the quantity the solve is for), entries
    whose contribution `|x_s| w_s` is below `M / n`, `M` the largest
    contribution (per column, `measure`), are held to an absolute rule,
    `eps M / (n w_s)`, instead: together they cannot move the result by
    more than `eps M`, so the result keeps the relative accuracy `eps` while
    the loop no longer waits for entries that cannot matter to it. Entries
    with `w_s = 0` never hold it up. Used by the adjoint solve of a gradient
    (`linear_solve`), whose entries span hundreds of orders of magnitude (1
    at the initial state, 1e-200 far from it) while the gradient only weighs
    those near the paths that carry the probability."""

    def __init__(self, w=None):
        self.w = w
        if w is not None:
            self.nw = w.shape[0] * w

    def _b(self, v, x):
        return v if v.ndim == x.ndim else v[:, None]

    def measure(self, x):
        """`M`: the largest contribution `|x_s| w_s` (per column)."""
        if self.w is None:
            return jnp.zeros(x.shape[1:], x.dtype)
        return jnp.max(jnp.abs(x) * self._b(self.w, x), axis=0)

    def converged(self, d, x, eps, m=None, finite=False):
        """Per column: does every entry pass `d <= eps * max(|x|, floor)`
        (and, with `finite`, is every entry of `x` finite: one reduction
        for both)? (Weighted, as `d n w <= eps max(|x| n w, M)`: no
        division, and entries with `w = 0` pass.)"""
        if self.w is None:
            ok = d <= eps * jnp.maximum(jnp.abs(x), 1e-300)
        else:
            m = self.measure(x) if m is None else m
            nw = self._b(self.nw, x)
            ok = d * nw <= eps * jnp.maximum(jnp.abs(x) * nw, jnp.maximum(m, 1e-300))
        if finite:
            ok = ok & jnp.isfinite(x)
        return jnp.all(ok, axis=0)

    def floor(self, x, m=None):
        """The floor for iterate `x`, given `M` (measured on `x` if None;
        an earlier, smaller `M` gives a lower floor: a stricter rule)."""
        if self.w is None:
            return 1e-300
        m = self.measure(x) if m is None else m
        nw = self._b(self.nw, x)
        return jnp.maximum(jnp.where(nw > 0, m / jnp.where(nw > 0, nw, 1.0), jnp.inf), 1e-300)


def _jacobi(step, x0, eps, max_iters, rel=None):
    """Iterate `x <- step(x)` until every entry changes by at most `eps`
    relative to itself (PRISM's relative criterion, so that small values,
    such as a tiny probability at the initial state, are accurate too;
    entries below 1e-300 count as converged; `rel`: a `Relevance` floor),
    or `max_iters`. Returns `(x, iterations, converged)`."""
    rel = rel or Relevance()

    def cond(c):
        _, it, done = c
        return (~done) & (it < max_iters)

    def body(c):
        x, it, _ = c
        x1 = step(x)
        x2 = step(x1)
        d = jnp.abs(x2 - x1)
        ok = rel.converged(d, x2, eps, finite=True)
        return x2, it + 2, ok

    x, it, ok = lax.while_loop(cond, body, (x0, jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    return x, it, ok


def _jacobi_columns(step, x0, eps, max_iters, rel=None):
    """`_jacobi` for `x0` of shape `[n, k]`: each column has its own
    convergence flag and stops changing once converged (so it ends exactly
    where a single-vector `_jacobi` would); the loop runs until every column
    has converged or `max_iters`. Returns `x` with non-converged columns NaN.
    """
    rel = rel or Relevance()

    def cond(c):
        _, it, done = c
        return (~jnp.all(done)) & (it < max_iters)

    def body(c):
        x, it, done = c
        x1 = step(x)
        x2 = step(x1)
        d = jnp.abs(x2 - x1)
        ok = rel.converged(d, x2, eps, finite=True)
        return jnp.where(done, x, x2), it + 2, done | ok

    done0 = jnp.zeros(x0.shape[1:], bool)
    x, _, done = lax.while_loop(cond, body, (x0, jnp.zeros((), jnp.int32), done0))
    return jnp.where(done, x, jnp.nan)


#: Automatic over-relaxation (`_sor`): sweeps per measuring/judging window,
#: sweeps of plain Gauss-Seidel before `omega` is chosen, and the largest
#: `omega` tried.
SOR_WINDOW = 16
SOR_WARMUP = 32
SOR_MAX_OMEGA = 1.9


def _window_stats(p, q):
    """The combiner of `_sor`'s window statistics: max, max, max, sum, sum,
    sum (any non-finite)."""
    return (jnp.maximum(p[0], q[0]), jnp.maximum(p[1], q[1]), jnp.maximum(p[2], q[2]),
            p[3] + q[3], p[4] + q[4], p[5] + q[5])


def young_omega(rho):
    """Young's optimal over-relaxation `2 / (1 + sqrt(1 - rho))` for a
    Gauss-Seidel contraction rate `rho` per sweep (exact for consistently
    ordered matrices with real Jacobi eigenvalues, e.g. red-black orderings
    of symmetrizable chains)."""
    return 2.0 / (1.0 + jnp.sqrt(jnp.maximum(1.0 - rho, 0.0)))


def _sor(sweep, x0, eps, max_iters, omega=None, rel=None, state=None, min_active=0,
         keep_state=False):
    """Iterate `x <- sweep(x, w)` (multicolour SOR) until every entry changes
    by at most `eps` relative to itself (`_jacobi`'s criterion, unchanged),
    or `max_iters` sweeps. `x0` is `[n]` or `[n, k]`; every column has its
    own relaxation `w`, state and convergence flag, and stops changing once
    converged (so a column ends where a one-vector solve would). Returns
    `(x, sweeps, done, w)`, `done` and the final `w` per column.

    Why: the chains solved here mix slowly (rates ~0.95-0.99 per sweep), so
    Gauss-Seidel needs ~10^3 sweeps per point; over-relaxation needs 2-4x
    fewer (measured on the walk of `benchmarks/sweep.py`, RESULTS.md). The best `w` is
    not known in advance and too large a `w` fails in two ways on these
    nonsymmetric (strongly non-normal) chains: the iterate grows by many
    orders of magnitude before it would converge, or the absolute error
    converges but tiny entries (1e-20 and below) stall under the relative
    criterion. Hence, with `omega=None`:

    1. plain Gauss-Seidel for `SOR_WARMUP` sweeps; the contraction rate
       `rho` of the largest absolute change over the last window of
       `SOR_WINDOW` sweeps gives `w = young_omega(rho)` (the early `rho`
       underestimates the asymptotic one, so this `w` is below Young's);
    2. at every later window end the column must show progress: the largest
       absolute change halved, or the largest relative change at a new low,
       or fewer zero entries (a front still spreading), or fewer entries
       failing the stop rule (a front of relative accuracy still spreading:
       tiny entries converge long after the absolute change has reached
       rounding level); and its absolute change must not have doubled
       (unless at rounding level). If not, `w <- 1 + (w - 1)/2`
       and the iterate goes back to the snapshot taken at the last good
       window end (any start converges for a convergent `w`; the snapshot
       saves the sweeps a blow-up would cost). Below `w = 1.02` it is plain
       Gauss-Seidel for good.

    A fixed `omega` skips step 1 and keeps the guard; `omega=1.0` is plain
    Gauss-Seidel (`_jacobi`). Non-convergence still shows as `done = False`
    (callers NaN those columns). `rel`: the stop rule's `Relevance` floor
    (also used by the guard's counts), its `M` measured at window ends.

    `min_active` > 0: stop as soon as at most that many columns are still
    running. `keep_state`: also return the whole loop state (a fifth
    element), which `state` resumes (`x0` is then ignored;
    `_sor_shrinking`)."""
    rel = rel or Relevance()
    L = SOR_WINDOW
    auto = omega is None
    cshape = x0.shape[1:]
    f64 = x0.dtype

    def full(v, dt=f64):
        return jnp.full(cshape, v, dt)

    w0 = full(1.0 if auto else float(omega))
    phase0 = full(0 if auto else 1, jnp.int32)  # 0 measure, 1 SOR (guarded), 2 plain GS

    def window(s, d, done):
        """At a window end: choose `w` (phase 0) or judge it (phase 1), from
        the last step's change `d`."""
        x2, snap, w, phase, a_ref, r_min, z_ref, u_ref, it = s
        scale = jnp.maximum(jnp.abs(x2), rel.floor(x2))
        # one variadic reduction (one pass; six separate ones cost ~2 ms per
        # window at 10^5 states on a CPU core)
        a, r, top, z, u, nonfinite = lax.reduce(
            (d, d / scale, jnp.abs(x2), (x2 == 0).astype(jnp.int32),
             (d > eps * scale).astype(jnp.int32), (~jnp.isfinite(x2)).astype(jnp.int32)),
            (jnp.asarray(-jnp.inf, d.dtype), jnp.asarray(-jnp.inf, d.dtype),
             jnp.asarray(-jnp.inf, d.dtype), jnp.int32(0), jnp.int32(0), jnp.int32(0)),
            _window_stats, (0,),
        )
        finite = nonfinite == 0
        at = ~done
        first = a_ref < 0  # no reference since the last change of w
        # 1. choose w from the Gauss-Seidel rate
        rate = (a / jnp.where(first, 1.0, a_ref)) ** (1.0 / L)
        tiny = a <= 1e-13 * top  # at rounding level
        est = at & ~first & (phase == 0) & (it >= SOR_WARMUP) & finite
        pick = est & (rate < 1) & ~tiny
        w_est = jnp.clip(young_omega(rate), 1.0, SOR_MAX_OMEGA)
        # 2. guard
        progress = (a < 0.5 * a_ref) | (r < r_min) | (z < z_ref) | (u < u_ref)
        grew = (a > 2.0 * a_ref) & ~tiny
        bad = at & ~first & (phase == 1) & (grew | ~progress | ~finite)
        w_back = 1.0 + 0.5 * (w - 1.0)
        w_back = jnp.where(w_back < 1.02, 1.0, w_back)
        w_new = jnp.where(pick, w_est, jnp.where(bad, w_back, w))
        phase = jnp.where(pick, 1, jnp.where((est & tiny) | (bad & (w_new == 1.0)), 2, phase))
        changed = pick | bad
        x_new = jnp.where(bad, snap, x2)
        snap = jnp.where(at & ~bad, x2, snap)
        a_ref = jnp.where(at, jnp.where(changed, -1.0, a), a_ref)
        r_min = jnp.where(at, jnp.where(changed, jnp.inf, jnp.minimum(r_min, r)), r_min)
        z_ref = jnp.where(at, z, z_ref)
        u_ref = jnp.where(at, u, u_ref)
        return x_new, snap, w_new, phase, a_ref, r_min, z_ref, u_ref, rel.measure(x_new)

    def step_cond(c):
        _, _, it, done, _, i = c
        return (i < L // 2) & ~jnp.all(done) & (it < max_iters)

    def step(c, m):
        """Two sweeps and the convergence check (with the floor of the
        window's `M`), which the second sweep computes as it writes (one
        fused pass on a GPU: `gs_sweep`). Converged columns stop changing:
        they sweep with `w = 0`, which leaves them exactly as they are (so
        a column ends where a one-vector solve would, and no select pass
        over the iterate is needed). The first sweep's result is carried
        out for the window's bookkeeping."""
        x, _, it, done, w, i = c
        we = jnp.where(done, 0.0, w)  # (one vector: the loop stops instead)
        x1 = sweep(x, we)
        x2, ok = sweep(x1, we, check=(rel, eps, m))
        return x2, x1, it + 2, done | ok, w, i + 1

    def cond(c):
        go = (~jnp.all(c[3])) & (c[2] < max_iters)
        if min_active:
            go = go & (jnp.sum(~c[3], dtype=jnp.int32) > min_active)
        return go

    def body(c):
        # Windows of SOR_WINDOW sweeps: an inner loop of sweeps, then the
        # bookkeeping once (not masks on every iteration, nor a `cond` per
        # iteration, which costs a host round trip per step on a GPU).
        x, snap, it, done, w, phase, a_ref, r_min, z_ref, u_ref, m = c
        x, x1, it, done, w, _ = lax.while_loop(
            step_cond, lambda c: step(c, m), (x, x, it, done, w, jnp.zeros((), jnp.int32))
        )
        x, snap, w, phase, a_ref, r_min, z_ref, u_ref, m = window(
            (x, snap, w, phase, a_ref, r_min, z_ref, u_ref, it), jnp.abs(x - x1), done
        )
        return x, snap, it, done, w, phase, a_ref, r_min, z_ref, u_ref, m

    init = state if state is not None else (
        x0, x0, jnp.zeros((), jnp.int32), full(False, bool), w0, phase0,
        full(-1.0), full(jnp.inf), full(0, jnp.int32), full(0, jnp.int32), rel.measure(x0),
    )
    out = lax.while_loop(cond, body, init)
    if keep_state:
        return out[0], out[2], out[3], out[4], out
    return out[0], out[2], out[3], out[4]


#: `_sor_shrinking`: the narrowest batch it shrinks to, and when batched
#: solves shrink: `"auto"` where the fused SOR kernel runs (a GPU: there a
#: sweep's time is proportional to the batch's width; on a CPU the extra
#: compiled loops cost more than they save on the small batches it runs),
#: `"on"`, `"off"`.
SHRINK_MIN = 64
SHRINK = "auto"


def _shrinks(k: int, omega) -> bool:
    if SHRINK == "off" or k // 2 < SHRINK_MIN or (omega is not None and float(omega) == 1.0):
        return False
    return SHRINK == "on" or _sor_kernel.active(k) is not None


def _sor_shrinking(build, x0, eps, max_iters, omega=None, weights=None, min_width=None):
    """`_sor` of an `[n, k]` batch whose width halves whenever at most half
    of its columns still run: the running columns move to a batch of half
    the width (a new `sweep` from `build(columns)`, `columns` the original
    indices, or None for all), the finished ones leave with their values.
    Returns `(x, done)` in the original column order.

    Why: a batch runs to its slowest column (in `benchmarks/sweep.py`'s
    grid the points need 334 sweeps at the median and up to 584), and a
    sweep's cost is proportional to the batch's width, so a batch of fixed
    width costs `k * max(sweeps)`; shrinking costs about `k * median +
    k/2 * (p75 - median) + ...`. Every column still takes exactly the
    sweeps, `w`s and values it would take in the full batch (a column's
    update never reads another column). `weights`: the `Relevance`
    weights, `[n]` or `[n, k]`."""
    n, k = x0.shape
    lo = SHRINK_MIN if min_width is None else min_width
    if k // 2 < lo:
        x, _, done, _ = _sor(build(None), x0, eps, max_iters, omega, Relevance(weights))
        return x, done
    cols = jnp.arange(k, dtype=jnp.int32)
    x_out = jnp.zeros_like(x0)
    done_out = jnp.zeros((k,), bool)
    state, width = None, k
    while True:  # static: one compiled loop per width
        full = state is None or weights is None or weights.ndim == 1
        rel = Relevance(weights if full else weights[:, cols])
        half = width // 2
        if half < lo:  # the last width runs to the end
            x, _, done, _ = _sor(build(cols), x0, eps, max_iters, omega, rel, state)
            break
        x, _, done, _, state = _sor(build(None if state is None else cols), x0, eps, max_iters, omega,
                                    rel, state, min_active=half, keep_state=True)
        # running columns first (at most `half` of them: or the loop hit
        # `max_iters`, and the others stay not done), then the finished
        keep = jnp.argsort(done, stable=True)
        gone = keep[half:]
        x_out = x_out.at[:, cols[gone]].set(x[:, gone])
        done_out = done_out.at[cols[gone]].set(done[gone])
        keep = keep[:half]
        state = tuple(v if v.ndim == 0 else v[..., keep] for v in state)
        cols, width = cols[keep], half
    x_out = x_out.at[:, cols].set(x)
    done_out = done_out.at[cols].set(done)
    return x_out, done_out


def _iterate(sweep, x0, eps, max_iters, omega, weights=None):
    """`_sor` (`omega` None: automatic, or a fixed guarded `w`), or plain
    Gauss-Seidel (`_jacobi`/`_jacobi_columns`, unchanged) when `omega == 1`;
    `weights` (in the iterate's order) give the stop rule's
    `Relevance` floor. Returns `x` with non-converged columns NaN."""
    rel = Relevance(weights)
    if omega is not None and float(omega) == 1.0:
        if x0.ndim > 1:
            return _jacobi_columns(sweep, x0, eps, max_iters, rel)
        x, _, ok = _jacobi(sweep, x0, eps, max_iters, rel)
        return _flag(x, ok)
    x, _, done, _ = _sor(sweep, x0, eps, max_iters, omega, rel)
    return _flag(x, done)


def _jacobi_solver(n: int, eps, max_iters: int, bounds, omega=None, dia=None):
    """`jac(off, dg, rhs, order, lay, rows, classes, weights, rhs_rows) -> x` with
    `x = (rhs + off x) / dg` by multicolour Gauss-Seidel (`gs_sweep`; plain
    Jacobi when there is one colour), stopped by `_jacobi`'s criterion
    (`weights`, optional: its `Relevance` floor); NaN if not converged.
    `rhs_rows` (optional): the rows where `rhs` can be non-zero (`gs_sweep`).
    Under `jax.vmap` it runs the explicit multi-vector iteration instead of
    vmapping the loop: the iterate is `[n, k]` with the batch axis last, the
    values `[nnz, k]` (or shared `[nnz]`), one gather over the shared column
    indices per slot and sweep, and a per-column convergence mask; where
    the SOR kernel runs, a batch halves its width as its columns converge
    (`_sor_shrinking`). `dia` (static offsets): `lay` and `order` are the
    diagonal layout's (`dia_sweep`)."""

    @jax.custom_batching.custom_vmap
    def jac(off, dg, rhs, order, lay, rows, classes, weights, rhs_rows=None):
        sweep, to_p, from_p = make_sweep(off, dg, rhs, lay, order, bounds, n, dia=dia)
        wp = None if weights is None else to_p(weights)
        return from_p(_iterate(sweep, jnp.zeros_like(rhs), eps, max_iters, omega, wp))

    @jac.def_vmap
    def _rule(k, in_batched, off, dg, rhs, order, lay, rows, classes, weights, rhs_rows=None):
        b_off, b_dg, b_rhs = in_batched[:3]
        if any(jax.tree_util.tree_leaves(in_batched[3:7] + in_batched[8:])):  # a batched structure
            axes = tuple(jax.tree_util.tree_map(lambda b: 0 if b else None, b) for b in in_batched)
            return jax.vmap(jac.fun, in_axes=axes)(
                off, dg, rhs, order, lay, rows, classes, weights, rhs_rows), True
        off = off.T if b_off else off  # [nnz, k] or [nnz]
        dg = dg.T if b_dg else dg  # [n, k] or [n]
        rhs = rhs.T if b_rhs else jnp.broadcast_to(rhs[:, None], (rhs.shape[0], k))
        if weights is not None and in_batched[7]:
            weights = weights.T  # [n, k]

        def run(cl):
            sweep, to_p, from_p = make_sweep(off, dg, rhs, lay, order, bounds, n, cl, rhs_rows, dia)
            wp = None if weights is None else to_p(weights)
            if dia is not None or not _shrinks(k, omega):
                return from_p(_iterate(sweep, jnp.zeros_like(rhs), eps, max_iters, omega, wp)).T

            def build(c):  # the sweep of columns `c` (None: all)
                if c is None:
                    return sweep

                def sub(a):
                    return a[:, c] if a.ndim == 2 else a

                cc = None if cl is None else {"cls": cl["cls"], "table": cl["table"][:, c]}
                return gs_sweep(sub(off), sub(dg), rhs[:, c], lay, order, bounds, n, cc, rhs_rows)[0]

            x, done = _sor_shrinking(build, jnp.zeros_like(rhs), eps, max_iters, omega, wp)
            return from_p(_flag(x, done)).T

        if not classes or not b_off:
            return run(None), True
        # Per-point weights in classes: gather a [C, k] table per sweep
        # instead of [nnz, k] values, if the classes hold at these points
        # (checked exactly; else the plain path).
        d = dg if dg.ndim == 2 else dg[:, None]
        s = off / d[rows]
        table = s[classes["rep"]]
        ok = jnp.all(s == table[classes["cls"]])
        x = lax.cond(ok, lambda: run({"cls": classes["cls"], "table": table}), lambda: run(None))
        return x, True

    return jac


class Options:
    """Tolerance, iteration limit and over-relaxation of the differentiable
    path. The default tolerance is much tighter than PRISM's 1e-6:
    derivatives inherit the solver's error, and finite-difference checks
    need ~1e-10. `omega`: `None` chooses the over-relaxation of the
    Gauss-Seidel sweeps automatically, per solve and per column (`_sor`);
    `1.0` forces plain Gauss-Seidel; another value is a fixed starting `w`
    in (0, 2), still guarded against divergence."""

    def __init__(self, epsilon: float = 1e-12, max_iters: int = 200_000, omega: float | None = None):
        self.epsilon = float(epsilon)
        self.max_iters = int(max_iters)
        if omega is not None and not 0.0 < float(omega) < 2.0:
            raise ValueError(f"`omega` must be in (0, 2) or None (automatic), not {omega!r}")
        self.omega = None if omega is None else float(omega)


def linear_solve(data, pat: Pattern, arrays: dict, b, opts: Options, classes=None, relevance=None,
                 rhs_rows=None):
    """`x` with `x = A x + b`, i.e. `(I - A) x = b`, for `A` = `data` on
    `pat` (spectral radius < 1: the caller restricts `A` to the transient
    "maybe" states). Differentiable in `data` and `b` by the implicit function
    theorem. `arrays` are `pat.arrays` on the device; `classes` (optional,
    `{"cls": [nnz], "rep": [C]}`) guesses which entries have equal Jacobi
    weights `A[e] / (1 - A_ii)` at every parameter point (used, after an
    exact check, by batched forward solves).

    `relevance` (optional, `{"b_scale": [n], "offset": [n]}`) lets the
    adjoint solve of a gradient stop when the *gradient* has converged
    rather than every entry of the adjoint: a cotangent `g` of `x` reaches
    the parameters as `lam^T (dA x + db)` with `lam = (I - A)^-T g`, and
    row `s` of `dA x + db` is bounded by the values it multiplies, `w_s =
    max(b_scale_s, max_{c in row s} |offset_c + x_c|)` (times the
    parameters' relative sensitivities). So `w` weighs the adjoint's stop
    rule (`Relevance`): entries far from where the probability flows
    (adjoint entries of 1e-200, say) no longer hold up the loop. Without
    it (or for tangents: `jax.jvp`) every entry converges relative to
    itself. `offset`: what `x` is a correction to (e.g. the value-iteration
    result), so that `offset + x` are the values; `b_scale`: a bound on
    `|db_s|`'s scale (the values `b_s` is made of).

    `rhs_rows` (optional, int `[m]`, with `relevance`): the rows where `b`
    can be non-zero; batched forward solves on a GPU then read only those
    rows of it per sweep (`gs_sweep`). Tangent and adjoint solves, whose
    right-hand sides are dense, ignore it."""
    n = pat.shape[0]
    eps = jnp.asarray(opts.epsilon, jnp.float64)
    mi = opts.max_iters
    omega = getattr(opts, "omega", None)
    dia = pat.dia if pat.dia is not None and "dia" in arrays and dia_active() else None
    jacs = {
        False: _jacobi_solver(n, opts.epsilon, mi, pat.bounds, omega, dia and dia[0]),
        True: _jacobi_solver(n, opts.epsilon, mi, pat.bounds, omega, dia and dia[1]),
    }
    # Everything the solves read is passed explicitly (`st`), never closed
    # over: the custom JVP below must not capture traced arrays.
    st = {"arrays": arrays, "classes": classes or {}}

    def _solver(st, dat, r, c, transposed, rhs, cl, weights=None, rhs_rows=None, diag=None):
        d = jax.lax.stop_gradient(dat)
        if diag is not None:  # (the same values as the scatter-add: one term per row)
            dg = 1.0 - jnp.concatenate([d, jnp.zeros((1,) + d.shape[1:], d.dtype)])[diag]
        else:
            dg = 1.0 - jax.ops.segment_sum(
                jnp.where(_bcast(r == c, d), d, 0.0), r, num_segments=n
            )
        off = jnp.where(_bcast(r == c, d), 0.0, d)
        a = st["arrays"]
        if dia is not None:
            lay = a["dia"]["t" if transposed else "fwd"]
            order, offsets = lay["order"], dia[int(transposed)]
        else:
            lay, order, offsets = a["t_lay" if transposed else "lay"], a["order"], None
        if d.ndim > 1 or rhs.ndim > 1:  # explicit multi-vector call
            rhs = jnp.broadcast_to(rhs, dg.shape) if rhs.ndim < dg.ndim else rhs
            sweep, to_p, from_p = make_sweep(off, dg, rhs, lay, order, pat.bounds, n, dia=offsets)
            wp = None if weights is None else to_p(weights)  # [n] or [n, k]
            return from_p(_iterate(sweep, jnp.zeros_like(rhs), eps, mi, omega, wp))
        return jacs[transposed](off, dg, rhs, order, lay, r, cl, weights, rhs_rows)

    def pieces(st, dat, weights, rhs_rows=None):
        """`(matvec, solve, transpose_solve)` of `custom_linear_solve` for
        the values `dat`; `weights` weigh the transposed solve's stop rule;
        `rhs_rows` (the primal solve only) the rows where `solve`'s
        right-hand side can be non-zero."""
        a = st["arrays"]
        rows, cols = a["rows"], a["cols"]

        def matvec(x):
            return x - spmv(dat, rows, cols, n, x)

        def solve(_, rhs):
            return _solver(st, dat, rows, cols, False, rhs, st["classes"], None, rhs_rows, a.get("diag"))

        def transpose_solve(_, rhs):
            return _solver(st, dat[a["perm"]], a["t_rows"], a["t_cols"], True, rhs, {}, weights,
                           None, a.get("t_diag"))

        return matvec, solve, transpose_solve

    if relevance is None:
        matvec, solve, transpose_solve = pieces(st, data, None)
        return lax.custom_linear_solve(matvec, b, solve, transpose_solve)

    # The adjoint's weights depend on the solution, so the derivative is
    # written out: a custom JVP whose tangent solve, transposed by
    # `jax.grad`, is the weighted adjoint solve. The primal solve is the
    # one above.
    @jax.custom_jvp
    def solve_x(dat, rhs, rel, st):
        return pieces(st, dat, None, st.get("rhs_rows"))[1](None, rhs)

    @solve_x.defjvp
    def solve_x_jvp(primals, tangents):
        dat, rhs, rel, st = primals
        d_dat, d_rhs = tangents[:2]
        x = solve_x(dat, rhs, rel, st)
        rows, cols = st["arrays"]["rows"], st["arrays"]["cols"]
        full = jnp.abs(rel["offset"] + x)
        w = jnp.maximum(rel["b_scale"], jax.ops.segment_max(
            full[cols], rows, num_segments=n, indices_are_sorted=True))
        matvec, solve, transpose_solve = pieces(st, dat, w)
        t = d_rhs + spmv(d_dat, rows, cols, n, x)
        return x, lax.custom_linear_solve(matvec, t, solve, transpose_solve)

    rel = jax.tree_util.tree_map(lax.stop_gradient, {
        "b_scale": jnp.asarray(relevance["b_scale"], jnp.float64),
        "offset": jnp.asarray(relevance.get("offset", 0.0), jnp.float64) + jnp.zeros(n),
    })
    if rhs_rows is not None:
        st = dict(st, rhs_rows=rhs_rows)
    return solve_x(data, b, rel, st)


def _flag(x, ok):
    """NaN out a solution that did not converge (the caller raises
    `ConvergenceError` on NaN results outside of tracing)."""
    return jnp.where(ok, x, jnp.nan)


def raise_if_nan(value, what: str = "the solver") -> None:
    """Host check after a concrete call."""
    try:
        v = np.asarray(value)
    except Exception:  # a tracer: nothing to check
        return
    if np.any(np.isnan(v)):
        raise ConvergenceError(
            f"{what} did not converge (or produced NaN)",
            hint="raise `max_iters`, loosen `epsilon`, or check that the parameter "
            "point gives a valid model",
        )
