"""Process-wide settings, read once from the environment.

- `JAXMC_CACHE_DIR`: where [`jaxmc.enable_compilation_cache`][] keeps JAX's
  persistent compilation cache (default `~/.cache/jaxmc/jax`); set it to the
  empty string to disable the cache.
- `JAXMC_SOR_KERNEL`: `SOR_KERNEL`, when batched Gauss-Seidel sweeps run the
  fused Pallas SOR kernel.
- `JAXMC_DIFF_DIA`, `JAXMC_DIFF_SHRINK` (`auto`, `on` or `off`, default
  `auto`): `SETTINGS.diff_dia` and `SETTINGS.diff_shrink`, the layouts of
  the differentiable path's solves (see `Settings`). Tests change them with
  `override(...)`.

jaxmc itself never changes JAX's configuration behind a library user's back,
except `jax_enable_x64` (model checking needs float64, as PRISM uses doubles).
The command line turns the compilation cache on, so that checking a small
model a second time costs no compilation. Compiler options are set per
jitted function (`cpu_solver_options`), never through `XLA_FLAGS`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Iterator


_SWITCH = ("auto", "on", "off")


def _switch(name: str) -> str:
    """The value of the environment variable `name`: one of `_SWITCH`."""
    value = os.environ.get(name, "auto").strip().lower() or "auto"
    if value not in _SWITCH:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(_SWITCH)}")
    return value


@dataclasses.dataclass
class Settings:
    """Switches of the differentiable path (`jaxmc.diff`), each `"auto"`,
    `"on"` or `"off"`; read where a solve is set up, so a change applies to
    solves built after it.

    - `diff_dia`: whether the Gauss-Seidel sweeps use the diagonal layout
      where a matrix has one (`jaxmc.layout.sweep_dia`); `"auto"`: on the CPU
      backend, unless the fused SOR kernel was asked for.
    - `diff_shrink`: whether batched solves shrink their batch as its
      columns converge; `"auto"`: where the fused SOR kernel runs (a GPU).
    """

    diff_dia: str = "auto"
    diff_shrink: str = "auto"

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if getattr(self, f.name) not in _SWITCH:
                raise ValueError(
                    f"`{f.name}` must be one of {', '.join(_SWITCH)}, "
                    f"not {getattr(self, f.name)!r}"
                )


#: The process's settings, read once from the environment at import.
SETTINGS = Settings(
    diff_dia=_switch("JAXMC_DIFF_DIA"), diff_shrink=_switch("JAXMC_DIFF_SHRINK")
)


@contextlib.contextmanager
def override(**changes: str) -> Iterator[Settings]:
    """Change `SETTINGS` inside a `with` block (validated), then restore."""
    old = dataclasses.replace(SETTINGS)
    new = dataclasses.replace(SETTINGS, **changes)
    for f in dataclasses.fields(Settings):
        setattr(SETTINGS, f.name, getattr(new, f.name))
    try:
        yield SETTINGS
    finally:
        for f in dataclasses.fields(Settings):
            setattr(SETTINGS, f.name, getattr(old, f.name))


def enable_x64() -> None:
    """Turn on `jax_enable_x64`: model checking needs float64, as PRISM uses
    doubles (with float32 a relative criterion of 1e-6 is at the rounding
    level and iterations stall). The packages that compute call it when
    imported; it is the one JAX setting jaxmc changes by itself."""
    import jax

    jax.config.update("jax_enable_x64", True)


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


#: XLA options for the differentiable solves (`jaxmc.diff`) on the CPU
#: backend: XLA CPU's older fusion emitters. Why: a solve is thousands of
#: small passes; with the newer emitters one solve ran slower on one core,
#: and two at once in one process (`jaxmc.sweep`'s `workers`) slowed each
#: other, although two processes did not: they contend inside XLA's runtime
#: (its intra-op thread pool runs the kernels; what differs was not
#: established: the optimised HLO is the same). Figures in
#: benchmarks/RESULTS.md. `jaxmc.check`'s solvers keep the defaults (mixed
#: there: some models slower).
CPU_SOLVER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def _accepted(items: tuple) -> bool:
    """Whether this jaxlib's CPU compiler takes these options (a name that
    a later XLA drops must cost speed, never an error)."""
    import jax
    import jax.numpy as jnp

    try:
        cpu = jax.devices("cpu")[0]
        f = jax.jit(lambda x: x + 1, compiler_options=dict(items))
        jax.block_until_ready(f(jax.device_put(jnp.zeros(2), cpu)))
        return True
    except Exception:  # noqa: BLE001 - an unknown option: run with the defaults
        return False


def cpu_solver_options() -> dict | None:
    """`compiler_options` for `jax.jit` of a solve on JAX's default backend:
    `CPU_SOLVER_OPTIONS` on the CPU (where this jaxlib accepts them), else
    None (other backends keep their defaults)."""
    import jax

    if jax.default_backend() != "cpu" or not CPU_SOLVER_OPTIONS:
        return None
    items = tuple(sorted(CPU_SOLVER_OPTIONS.items()))
    return dict(items) if _accepted(items) else None


#: When batched multicolour Gauss-Seidel sweeps (`jaxmc.diff`) run the fused
#: Pallas SOR kernel (`jaxmc.kernels.sor_multi_pallas`): `"auto"` (on a GPU
#: backend, for wide batches), `"on"` (native, any backend), `"off"`, or
#: `"interpret"` (Pallas' interpret mode: CPU tests). From `JAXMC_SOR_KERNEL`;
#: read at trace time, so set it before the first call of a jitted function.
SOR_KERNEL_MODES = ("auto", "on", "off", "interpret")
SOR_KERNEL = os.environ.get("JAXMC_SOR_KERNEL", "auto")
if SOR_KERNEL not in SOR_KERNEL_MODES:
    raise ValueError(
        f"JAXMC_SOR_KERNEL must be one of {SOR_KERNEL_MODES}, not {SOR_KERNEL!r}"
    )
