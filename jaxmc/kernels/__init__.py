"""The hot path, isolated: sparse matrix-vector products and fused solver
steps (plain JAX reference, Pallas/Triton kernels on the GPU)."""

from .fused import (
    bellman_step as bellman_step,
    jacobi_step as jacobi_step,
    power_step as power_step,
)
from .multi import (
    jacobi_step_multi as jacobi_step_multi,
    power_step_multi as power_step_multi,
    spmv_multi as spmv_multi,
    sup_norm_columns as sup_norm_columns,
)
from .spmv import spmv as spmv
