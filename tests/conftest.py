"""Test-wide settings: fp64 like PRISM, and the shared conformance data."""

import os

import jax


# The CLI turns on JAX's persistent compilation cache (`JAXMC_CACHE_DIR`);
# in-process CLI tests would turn it on for the whole session, in HOME.
os.environ.setdefault("JAXMC_CACHE_DIR", "")


# Model checking is done in double precision by default, as in PRISM and Storm.
jax.config.update("jax_enable_x64", True)
