"""Stage 4: device-side matrices built from an `ExplicitModel`; shapes
static, values dynamic.

Modules, lowest first: `stats` (padding and bytes per non-zero), `compact`
(narrow integers, `CompactVector`), `csr`, `ell` (ELL, sliced ELL), `warp`
(warp-segment sliced ELL, full/half warp, and its compact variant),
`vector` (CSR-vector, for long rows), `device_warp` (the warp-segment
layouts built on the device from device CSR arrays), `partition`
(row-partitioned matrices over several devices), `order` (state orderings:
BFS, RCM, length-sorted windows), `dia` (compact diagonals), `build` (layout kind ->
builder, and the automatic choice), `grouped` (per-state min/max over MDP
choices) and `sparse_model` (`SparseModel`, the model's matrix on the
device)."""

from .build import (
    Layout as Layout,
    build_layout as build_layout,
    choose_layout as choose_layout,
    choose_order as choose_order,
    choose_ordered_layout as choose_ordered_layout,
    device_build as device_build,
    layout_kind as layout_kind,
    make_layout as make_layout,
    ordered_csr as ordered_csr,
    padding as padding,
    row_layout_kind as row_layout_kind,
)
from .compact import CompactVector as CompactVector
from .csr import CSR as CSR
from .dia import (
    CompactDIA as CompactDIA,
    dia_order as dia_order,
    lex_order as lex_order,
    ordered_dia as ordered_dia,
)
from .ell import ELL as ELL, SLICE as SLICE, SlicedELL as SlicedELL
from .grouped import (
    GroupIndex as GroupIndex,
    group_index as group_index,
    group_reduce as group_reduce,
)
from .order import (
    Permutation as Permutation,
    bandwidth as bandwidth,
    bfs_order as bfs_order,
    rcm_order as rcm_order,
    window_order as window_order,
)
from .partition import (
    PartitionedCSR as PartitionedCSR,
    Sharded as Sharded,
    host_array as host_array,
    make_mesh as make_mesh,
    partition as partition,
)
from .sparse_model import (
    SparseModel as SparseModel,
    from_arrays as from_arrays,
    from_model as from_model,
)
from .vector import VectorCSR as VectorCSR
from .warp import (
    CompactWarpELL as CompactWarpELL,
    WarpELL as WarpELL,
)
