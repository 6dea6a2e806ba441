"""Stage 4: device-side matrices (CSR, ELL, sliced ELL, warp-segment sliced
ELL full/half warp, compact; CSR-vector for long rows; compact diagonals) built from an `ExplicitModel`; shapes static,
values dynamic. Also state orderings (BFS, RCM, length-sorted windows) and the automatic choice."""

from ._choose import (
    build_layout as build_layout,
    choose_layout as choose_layout,
    choose_order as choose_order,
    choose_ordered_layout as choose_ordered_layout,
    layout_kind as layout_kind,
    ordered_csr as ordered_csr,
    padding as padding,
)
from ._dia import (
    CompactDIA as CompactDIA,
    dia_order as dia_order,
    lex_order as lex_order,
    ordered_dia as ordered_dia,
)
from ._matrix import (
    CSR as CSR,
    ELL as ELL,
    SLICE as SLICE,
    Layout as Layout,
    SlicedELL as SlicedELL,
    make_layout as make_layout,
)
from ._model import (
    SparseModel as SparseModel,
    from_arrays as from_arrays,
    from_model as from_model,
    GroupIndex as GroupIndex,
    group_index as group_index,
    group_reduce as group_reduce,
)
from ._order import (
    Permutation as Permutation,
    bandwidth as bandwidth,
    bfs_order as bfs_order,
    rcm_order as rcm_order,
    window_order as window_order,
)
from ._vector import VectorCSR as VectorCSR
from ._warp import (
    CompactVector as CompactVector,
    CompactWarpELL as CompactWarpELL,
    WarpELL as WarpELL,
)
