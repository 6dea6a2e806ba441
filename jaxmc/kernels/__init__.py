"""The hot path, isolated: sparse matrix-vector products and fused solver
steps (plain JAX reference, Pallas/Triton kernels on the GPU).

Modules: `spmv` (the one entry point), `multi` (`[n, k]` right-hand
sides), `fused` (a solver step and its convergence measure in one pass),
`impl` (reference or Pallas, per layout), `norms` (PRISM's convergence
measure), and the Pallas kernels `spmv_pallas`, `spmv_multi_pallas`,
`dia_pallas`, `sor_multi_pallas` with their shared pieces in `pallas_ops`
(loaded on first use, not with `jaxmc`)."""

from .fused import (
    bellman_step as bellman_step,
    jacobi_step as jacobi_step,
    power_step as power_step,
)
from .multi import (
    jacobi_step_multi as jacobi_step_multi,
    power_step_multi as power_step_multi,
    spmv_multi as spmv_multi,
)
from .norms import sup_norm as sup_norm, sup_norm_columns as sup_norm_columns
from .spmv import spmv as spmv
