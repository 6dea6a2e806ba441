"""Stage 4: device-side matrices (CSR, ELL, sliced ELL) built from an
`ExplicitModel`; shapes static, values dynamic."""

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
    group_reduce as group_reduce,
)
