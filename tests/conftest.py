"""Test-wide settings: fp64 like PRISM, and the shared conformance data."""

import jax


# Model checking is done in double precision by default, as in PRISM and Storm.
jax.config.update("jax_enable_x64", True)
