"""Test-wide settings: fp64 like PRISM, and the shared conformance data."""

import os
import sys
from pathlib import Path

import jax


# Tests live in one folder per stage (tests/lang, tests/explore, ...); the
# shared helpers (corpus, storm_oracle, structure, conformance) sit here.
# A few tests share helpers across stages (`test_numerics_helpers`'s random
# models, `test_diff_sor`'s walk): the stage folders are importable too, so
# that any subset of the suite collects.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
for _stage in sorted(_HERE.iterdir()):
    if _stage.is_dir() and not (_stage / "__init__.py").exists():
        if _stage.name != "__pycache__":
            sys.path.append(str(_stage))


# The CLI turns on JAX's persistent compilation cache (`JAXMC_CACHE_DIR`);
# in-process CLI tests would turn it on for the whole session, in HOME.
os.environ.setdefault("JAXMC_CACHE_DIR", "")


# Model checking is done in double precision by default, as in PRISM and Storm.
jax.config.update("jax_enable_x64", True)
