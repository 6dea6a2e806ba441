"""Test-wide settings: fp64 like PRISM, and the shared conformance data."""

import os
import sys
from pathlib import Path

import jax


# Tests live in one folder per stage (tests/lang, tests/explore, ...); the
# shared helpers (corpus, storm_oracle, structure, conformance) sit here.
# Two stages share helpers with others (`tests/numerics/test_numerics_helpers`'s
# random models in tests/solvers, `tests/diff/test_diff_sor`'s walk in
# tests/kernels): their folders are importable, so that any subset collects.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path += [str(_HERE / "numerics"), str(_HERE / "diff")]


# The CLI turns on JAX's persistent compilation cache (`JAXMC_CACHE_DIR`);
# in-process CLI tests would turn it on for the whole session, in HOME.
os.environ.setdefault("JAXMC_CACHE_DIR", "")


# Model checking is done in double precision by default, as in PRISM and Storm.
jax.config.update("jax_enable_x64", True)
