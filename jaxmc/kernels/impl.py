"""Which implementation runs a product: `impl` is `"reference"` (plain
JAX, every layout), `"pallas"` (the Triton kernels, for the layouts that
have one) or `"auto"` (Pallas on a GPU where a kernel exists, plain JAX
elsewhere). The choice is made at trace time, from the layout's type."""

from __future__ import annotations

import jax

from ..layout.dia import CompactDIA
from ..layout.vector import VectorCSR
from ..layout.warp import CompactWarpELL, WarpELL


IMPLS = ("auto", "reference", "pallas")


def check_impl(impl):
    if impl not in IMPLS:
        raise ValueError(f"`impl` must be one of {IMPLS}, not {impl!r}")


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def use_pallas(matrix, impl: str) -> bool:
    """Whether `impl` means the Pallas kernel for `matrix`."""
    check_impl(impl)
    if not isinstance(matrix, (WarpELL, CompactWarpELL, VectorCSR, CompactDIA)):
        if impl == "pallas":
            raise TypeError(
                f"no Pallas kernel for {type(matrix).__name__}; use a warp-segment "
                "layout (`make_layout(csr, 'warp')`), the CSR-vector layout "
                "(`make_layout(csr, 'vector')`), the diagonal layout "
                "(`make_layout(csr, 'dia')`) or impl='reference'"
            )
        return False
    return impl == "pallas" or (impl == "auto" and on_gpu())


def multi_supported(matrix) -> bool:
    """Whether the multi-vector Pallas kernel handles `matrix`: full-warp
    segment layouts in stored row order."""
    return (
        isinstance(matrix, (WarpELL, CompactWarpELL))
        and matrix.lanes == 1
        and matrix.lane_info is None
    )


def use_pallas_multi(matrix, impl: str) -> bool:
    """Whether `impl` means the multi-vector Pallas kernel for `matrix`."""
    check_impl(impl)
    if impl == "pallas" and not multi_supported(matrix):
        lanes = f" with lanes={matrix.lanes}" if hasattr(matrix, "lanes") else ""
        raise TypeError(
            f"no multi-vector Pallas kernel for {type(matrix).__name__}{lanes}; "
            "use a full-warp layout (`make_layout(csr, 'warp')` or 'compact', "
            "without sort_rows) or impl='reference'"
        )
    return multi_supported(matrix) and (
        impl == "pallas" or (impl == "auto" and on_gpu())
    )
