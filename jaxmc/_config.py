"""Process-wide settings, read once from the environment.

- `JAXMC_CACHE_DIR`: where [`jaxmc.enable_compilation_cache`][] keeps JAX's
  persistent compilation cache (default `~/.cache/jaxmc/jax`); set it to the
  empty string to disable the cache.

jaxmc itself never changes JAX's configuration behind a library user's back,
except `jax_enable_x64` (model checking needs float64, as PRISM uses doubles).
The command line turns the compilation cache on, so that checking a small
model a second time costs no compilation.
"""

from __future__ import annotations

import os


def default_cache_dir() -> str | None:
    value = os.environ.get("JAXMC_CACHE_DIR")
    if value is not None:
        return value or None
    return os.path.join(os.path.expanduser("~"), ".cache", "jaxmc", "jax")


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache (every jitted solver loop
    is cached, however fast it compiled). Returns the directory, or None when
    disabled by `JAXMC_CACHE_DIR=""`."""
    import jax

    path = path or default_cache_dir()
    if not path:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None  # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
