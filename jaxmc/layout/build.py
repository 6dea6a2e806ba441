"""Layouts by name (`make_layout`: kind -> builder), and the automatic
choice of layout and state order from the matrix and the device.

On a CPU the plain CSR `segment_sum` is best (no padding, and XLA:CPU has no
use for coalescing). On a GPU the warp-segment layouts coalesce the matrix
reads; the half warp halves the steps of long rows and wins when the rows are
long or irregular within segments (its padding is then smaller); the compact
variant moves 2-6 bytes per entry instead of 12 and is chosen when the values
are fixed (it cannot take new values under `jit`) and the table fits. Rows of
`VECTOR_MIN_MEAN` entries or more on average (herman N=15: 438) get the
CSR-vector layout, a warp per row: a thread per row would walk each row
alone, and few long rows make too few segments to fill the GPU. A few rows
far longer than the rest (`long_rows`) make CSR's segment sum the choice.

Each warp segment is padded to its longest row; where that padding is large
(`ORDER_MIN_PADDING`, 25%), `choose_order` returns `window_order`'s permutation
(rows sorted by length within windows of `ORDER_WINDOW` rows), which nearly
removes it (tandem c=2047: 14% -> 0.05%; cluster N=256: 43% -> 1.2%; kanban
t=5: 29% -> 1.5%). The caller then runs the solve in the permuted numbering
(`Permutation.apply` on every vector in, `undo` on the result);
`choose_ordered_layout` does both choices at once.
"""

from __future__ import annotations

import jax
import numpy as np

from .compact import narrow_int
from .csr import CSR
from .device_order import window_permuted
from .device_vector import vector_from_device
from .device_warp import compact_from_device, long_rows, warp_from_device, warp_stats
from .dia import CompactDIA
from .ell import ELL, SlicedELL
from .order import Permutation, window_order
from .vector import VectorCSR
from .warp import WARP, CompactWarpELL, WarpELL


#: Mean row length from which `layout_kind` picks the CSR-vector layout.
VECTOR_MIN_MEAN = 64


def _padded(lengths: np.ndarray, lanes: int) -> int:
    seg_rows = WARP // lanes
    n = len(lengths)
    nseg = -(-max(n, 1) // seg_rows)
    steps = np.zeros(nseg * seg_rows, dtype=np.int64)
    steps[:n] = -(-lengths // lanes)
    return int(steps.reshape(nseg, seg_rows).max(axis=1).sum() * WARP)


#: Window (rows) of the `window_order` that `choose_order` uses.
ORDER_WINDOW = 1024

#: Padding (stored entries / non-zeros - 1) of a warp layout in the given
#: order from which `choose_order` reorders. Why this high: the reordering
#: is a host pass over the matrix (about a third of the layout build), and
#: it buys only what the padding cost. At tandem c=2047's 14% the saving
#: per SpMV pays the pass back only after more SpMVs than a steady-state
#: solve there takes; at 25% and more (kanban t=5 29%, cluster N=256 43%)
#: the saving per SpMV grows with the padding removed (the windowed-order
#: benchmark in `benchmarks/` has the figures).
ORDER_MIN_PADDING = 0.25

WARP_KINDS = ("warp", "warp2", "compact", "compact2")


def padding(csr: CSR, lanes: int = 1) -> float:
    """Padding of the warp-segment layouts with `lanes` lanes per row:
    stored entries per non-zero, less 1."""
    lengths = np.diff(np.asarray(csr.indptr, dtype=np.int64))
    return _padded(lengths, lanes) / max(int(lengths.sum()), 1) - 1.0


def _offset_type(csr: CSR):
    rows = np.asarray(csr.row_ids, np.int64)
    off = np.asarray(csr.indices, np.int64) - rows
    return np.dtype(narrow_int(int(off.min(initial=0)), int(off.max(initial=0))))


def _ordered(csr: CSR, kind: str, window: int | None, min_padding: float | None):
    """`(Permutation, permuted CSR)` if reordering pays for `kind`, else
    None (see `choose_order`); on the device where `device_build()` says so
    (the same decision and matrix; the permuted CSR then a device one)."""
    window = ORDER_WINDOW if window is None else window
    min_padding = ORDER_MIN_PADDING if min_padding is None else min_padding
    if kind not in WARP_KINDS or csr.shape[0] != csr.shape[1] or csr.nnz == 0:
        return None
    lanes = 2 if kind.endswith("2") else 1
    on_device = device_build(csr.nnz)
    pad = _device_padding if on_device else padding
    before = pad(csr, lanes)
    if before < min_padding:
        return None
    if on_device:
        perm, B = window_permuted(csr, window)
    else:
        perm = window_order(csr, window)
        B = perm.csr(csr, host=True)
    if pad(B, lanes) > 0.5 * before:
        return None
    # The compact layout stores columns as offsets from the row; a move of
    # up to `window` places must not widen them (int16 -> int32 would cost
    # more bytes than the padding saved).
    otype = _device_offset_type if on_device else _offset_type
    if kind.startswith("compact") and otype(B).itemsize > otype(csr).itemsize:
        return None
    return perm, B


def _device_padding(csr: CSR, lanes: int = 1) -> float:
    """`padding`, from device statistics."""
    total = warp_stats(csr.indptr, csr.indices, csr.data, lanes)[0]
    return (total - WARP) / max(csr.nnz, 1) - 1.0


def _device_offset_type(csr: CSR):
    _, _, lo, hi = warp_stats(csr.indptr, csr.indices, csr.data, 1, compact=True)
    return np.dtype(narrow_int(lo, hi))


def choose_order(
    csr: CSR,
    kind: str,
    *,
    window: int | None = None,
    min_padding: float | None = None,
) -> Permutation | None:
    """The state order for layout `kind` of the square matrix `csr`:
    `window_order(csr, window)` when `kind` is a warp-segment layout, its
    padding in the given order is at least `min_padding`, the reordering at
    least halves it and (compact layouts) the column offsets still fit the
    same integer type; else None (keep the order). `window` and
    `min_padding` default to `ORDER_WINDOW` and `ORDER_MIN_PADDING`, read at
    call time (`ORDER_MIN_PADDING = inf` switches the order off).

    Pass the matrix that is multiplied (for Jacobi, the off-diagonal part of
    the system): its row lengths set the padding."""
    got = _ordered(csr, kind, window, min_padding)
    return None if got is None else got[0]


def ordered_csr(
    csr: CSR,
    kind: str,
    *,
    window: int | None = None,
    min_padding: float | None = None,
) -> tuple[CSR, Permutation | None]:
    """`(P A P^T, P)` with `P = choose_order(csr, kind)`, or `(csr, None)`
    where reordering does not pay (one host reordering for both)."""
    got = _ordered(csr, kind, window, min_padding)
    return (csr, None) if got is None else (got[1], got[0])


def row_layout_kind(indptr, device_kind: str | None = None) -> str:
    """`layout_kind` of a matrix whose values may change, from its row
    pointers alone: "csr" (not a GPU, or a row far longer than the rest),
    "vector", "warp" or "warp2"."""
    device_kind = device_kind or jax.default_backend()
    if device_kind != "gpu":
        return "csr"
    lengths = np.diff(np.asarray(indptr, dtype=np.int64))
    if len(lengths) and long_rows(int(lengths.max()), float(lengths.mean())):
        return "csr"
    if len(lengths) and lengths.mean() >= VECTOR_MIN_MEAN:
        return "vector"
    nnz = max(int(lengths.sum()), 1)
    full = _padded(lengths, 1) / nnz
    half = _padded(lengths, 2) / nnz
    # Half warp: fewer padded bytes, or long rows (half the loop trips).
    mean = lengths.mean() if len(lengths) else 0
    return "warp2" if (half < 0.9 * full or mean >= 24) else "warp"


def layout_kind(
    csr: CSR, device_kind: str | None = None, *, fixed_values: bool = False
) -> str:
    """The layout name `choose_layout` picks (see the module docstring).

    **Arguments:**
    - `csr`: the matrix.
    - `device_kind`: `"cpu"` or `"gpu"` (default: JAX's default backend).
    - `fixed_values`: whether the values stay as they are (allows `compact`).
    """
    kind = row_layout_kind(csr.indptr, device_kind)
    if kind not in ("warp", "warp2"):
        return kind
    suffix = kind[4:]
    if fixed_values and csr.shape[0] == csr.shape[1] and csr.nnz:
        distinct = len(np.unique(np.asarray(csr.data)))
        rows = np.asarray(csr.row_ids, np.int64)
        off = np.asarray(csr.indices, np.int64) - rows
        otype = narrow_int(int(off.min()), int(off.max()))
        if distinct < 65536 and np.dtype(otype).itemsize <= 2:
            return "compact" + suffix
    return "warp" + suffix


#: Where the warp-segment and CSR-vector layouts are built: "auto" (on the
#: device on a GPU for matrices of `DEVICE_MIN_NNZ` entries or more,
#: `jaxmc.layout.device_warp`, `device_vector`; with numpy on the host
#: elsewhere), "on" (the device) or "off" (the host). Both give the same
#: arrays. Read at each build.
DEVICE_BUILD = "auto"

#: Smallest matrix (entries) that "auto" builds on the device: below it the
#: numpy build takes milliseconds and a first device build's compilation
#: would dominate.
DEVICE_MIN_NNZ = 1_000_000


def device_build(nnz: int | None = None) -> bool:
    """Whether `build_layout` builds the warp-segment and CSR-vector layouts
    of a matrix of `nnz` entries (None: any size) on the device
    (`DEVICE_BUILD`)."""
    if DEVICE_BUILD == "auto":
        big = nnz is None or nnz >= DEVICE_MIN_NNZ
        return big and jax.default_backend() == "gpu"
    return DEVICE_BUILD == "on"


def build_layout(csr: CSR, kind: str, device_kind: str | None = None):
    """Build named layout `kind` (`"auto"` asks `layout_kind`); the
    warp-segment and CSR-vector layouts on the device where `device_build()`
    says so, from the CSR's arrays as they are (device arrays stay there)."""
    if kind == "auto":
        kind = layout_kind(csr, device_kind)
    if kind in WARP_KINDS:
        lanes = 2 if kind.endswith("2") else 1
        compact = kind.startswith("compact")
        if device_build(csr.nnz):
            build = compact_from_device if compact else warp_from_device
            return build(csr.indptr, csr.indices, csr.data, csr.shape, lanes=lanes)
        return (CompactWarpELL if compact else WarpELL).from_csr(csr, lanes=lanes)
    if kind == "vector":
        if device_build(csr.nnz):
            return vector_from_device(csr.indptr, csr.indices, csr.data, csr.shape)
        return VectorCSR.from_csr(csr)
    return make_layout(csr, kind)


def choose_layout(
    csr: CSR,
    device_kind: str | None = None,
    *,
    kind: str | None = None,
    fixed_values: bool = False,
):
    """The layout for `csr` on `device_kind`: `kind` if given (any name of
    `jaxmc.layout.make_layout`), else the automatic choice."""
    if kind is None or kind == "auto":
        kind = layout_kind(csr, device_kind, fixed_values=fixed_values)
    return build_layout(csr, kind, device_kind)


def choose_ordered_layout(
    csr: CSR,
    device_kind: str | None = None,
    *,
    kind: str | None = None,
    fixed_values: bool = False,
    window: int | None = None,
) -> tuple:
    """`(layout, order)`: `choose_layout` on `csr` reordered by
    `choose_order` where that pays (`order` a `Permutation`, else None).
    The layout holds `P A P^T`: apply `order` to every vector that meets it
    and undo it on every result. With `kind` None or "auto", the kind is
    chosen again on the reordered matrix (less padding can turn a half-warp
    choice into a full-warp one)."""
    auto = kind is None or kind == "auto"
    first = layout_kind(csr, device_kind, fixed_values=fixed_values) if auto else kind
    # auto: judge the order by the full warp (the lanes are chosen again).
    got = _ordered(csr, first.removesuffix("2") if auto else first, window, None)
    if got is None:
        return build_layout(csr, first, device_kind), None
    perm, B = got
    kind = layout_kind(B, device_kind, fixed_values=fixed_values) if auto else first
    return build_layout(B, kind, device_kind), perm


Layout = CSR | ELL | SlicedELL


def make_layout(csr: CSR, kind: str = "csr") -> Layout:
    """Build layout `kind` from a CSR matrix: `"csr"`, `"ell"`, `"sell"`,
    the warp-segment layouts `"warp"` (full warp), `"warp2"` (half warp),
    `"compact"`/`"compact2"` (their compact variants, fixed values only),
    `"vector"` (CSR-vector, a warp per row, for long rows), `"dia"` (the
    compact diagonal layout, `CompactDIA`: few diagonals only), or `"auto"`
    (`jaxmc.layout.choose_layout` for the default device)."""
    if kind in ("auto", "warp", "warp2", "compact", "compact2", "vector"):
        return build_layout(csr, kind)
    if kind == "csr":
        return csr
    if kind == "ell":
        return ELL.from_csr(csr)
    if kind == "sell":
        return SlicedELL.from_csr(csr)
    if kind == "dia":
        return CompactDIA.from_csr(csr)
    raise ValueError(
        f"unknown layout `{kind}`; expected 'csr', 'ell', 'sell', 'warp', "
        "'warp2', 'compact', 'compact2', 'vector', 'dia' or 'auto'"
    )
