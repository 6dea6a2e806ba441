"""The hot path, isolated: sparse matrix-vector products."""

from .spmv import spmv as spmv
