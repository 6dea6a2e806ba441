"""Test-wide settings: fp64 like PRISM, and the shared conformance data."""

import os
import sys
from pathlib import Path

import jax


# Tests live in one folder per stage (tests/lang, tests/explore, ...); the
# shared helpers (corpus, storm_oracle, structure, conformance) sit here.
sys.path.insert(0, str(Path(__file__).resolve().parent))


# The CLI turns on JAX's persistent compilation cache (`JAXMC_CACHE_DIR`);
# in-process CLI tests would turn it on for the whole session, in HOME.
os.environ.setdefault("JAXMC_CACHE_DIR", "")


# Model checking is done in double precision by default, as in PRISM and Storm.
jax.config.update("jax_enable_x64", True)
