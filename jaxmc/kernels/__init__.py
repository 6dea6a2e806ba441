"""The hot path, isolated: sparse matrix-vector products and fused solver
steps (plain JAX reference, Pallas/Triton kernels on the GPU)."""

from .fused import (
    bellman_step as bellman_step,
    jacobi_step as jacobi_step,
    power_step as power_step,
)
from .spmv import spmv as spmv
