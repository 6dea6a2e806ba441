"""`SolveOptions`: the numerical options of every check and solve, one value
validated once (when it is made) and passed down the pipeline.

The public API (`jaxmc.check`, `solve`, `sweep`, `parametric`, the command
line) takes `options=SolveOptions(...)` or the same names as keywords
(`method=`, `epsilon=`, ...), from which it makes one `SolveOptions`
(`SolveOptions.of`); the stages below it take the object.

Two paths read it, with different defaults for the fields left `None`
(`DEFAULTS`, resolved in one place: `SolveOptions.resolved`):

- `"check"` (`jaxmc.check`, `jaxmc.solve` without `params`): PRISM's
  `-epsilon 1e-6` (relative) and `-maxiters 10000`;
- `"params"` (`jaxmc.solve(params=...)`, `sweep`, `parametric`, the
  differentiable path): epsilon 1e-12 and 200,000 iterations, because
  derivatives inherit the solver's error and finite-difference checks need
  ~1e-10.

This module sits beside `jaxmc.errors` and `jaxmc._config`: every stage may
import it, and it imports no stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .errors import JaxmcError, UnsupportedError


#: `method=`: the solution methods. Linear-equation methods (DTMCs, CTMCs;
#: on an MDP PRISM's switches select value iteration) and min/max methods.
LINEAR_METHODS = ("jacobi", "gauss_seidel", "power", "bicgstab")
MINMAX_METHODS = ("value_iteration", "interval_iteration")
METHODS = LINEAR_METHODS + MINMAX_METHODS

#: `layout=`: the device matrix of the iterative solves ("auto": chosen per
#: model when its device model is built, see `jaxmc.numerics.device`).
LAYOUTS = (
    "auto", "csr", "ell", "sell", "warp", "warp2", "compact", "compact2", "vector",
    "dia",
)  # fmt: skip

#: `criterion=`: the stopping criteria of the iterative solves: "sound" (the
#: default: every value within a certified bound of `epsilon`, absolute or
#: relative) and "change" (PRISM's: the change between successive iterates
#: below `epsilon`, which bounds the change, not the error, with PRISM's
#: default methods).
CRITERIA = ("sound", "change")

#: `precision=`: the float type of the iterative solves.
PRECISIONS = ("fp64", "fp32")

#: The smallest `epsilon` accepted with "fp32": about 8 float32 ulps (2^-23
#: = 1.2e-7 relative), so that PRISM's criterion `sup_norm < epsilon` can hold
#: above the rounding noise of an fp32 step instead of iterating to
#: `max_iters`.
FP32_MIN_EPSILON = 1e-6

#: The defaults of the fields left `None`, per path (module docstring).
DEFAULTS: dict[str, dict[str, Any]] = {
    "check": {"epsilon": 1e-6, "max_iters": 10_000},
    "params": {"epsilon": 1e-12, "max_iters": 200_000},
}


class OptionsError(JaxmcError, ValueError):
    """An option with a value jaxmc does not take (also a `ValueError`)."""


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise OptionsError(
            f"unknown `{name}` {value!r}",
            hint=f"`{name}` is one of {', '.join(repr(a) for a in allowed)}",
        )


@dataclass(frozen=True)
class SolveOptions:
    """The numerical options, as PRISM's switches.

    - `method`: one of `METHODS`, or None for the model type's default
      under `criterion` (`jaxmc.numerics.methods.default_method`).
    - `epsilon`, `relative`, `max_iters`: the convergence criterion
      (`-epsilon`, `-relative`/`-absolute`, `-maxiters`); `None` is the
      path's default (`DEFAULTS`).
    - `layout`: the device matrix of the iterative solves (`LAYOUTS`).
    - `precision`: "fp64" or "fp32", the float type of the iterative solves
      (fp32 refuses an `epsilon` below `FP32_MIN_EPSILON`).
    - `throw`: a solve that stops before converging raises
      `ConvergenceError` at the API (one error, located at the property);
      with False the result carries the status and the attempts instead.
    - `criterion`: "sound" (every DTMC/CTMC/MDP reachability and reward
      value certified within `epsilon`: the result's `bound`, `lower`,
      `upper`) or "change" (PRISM's criterion and default methods exactly);
      `CRITERIA`.
    - `omega`: the differentiable path's over-relaxation of its
      Gauss-Seidel sweeps (None: chosen per solve; 1.0: plain Gauss-Seidel;
      else a starting value in (0, 2)).
    - `devices`: the devices the checking path's iterative solves are
      split over (`jaxmc.layout.partition`, `docs/multi-device.md`): None
      or 1 (one device, the default), a count (the first of
      `jax.devices()`), a sequence of `jax.Device`s (kept as a tuple) or a
      `jax.sharding.Mesh`.
    """

    method: str | None = None
    epsilon: float | None = None
    relative: bool = True
    max_iters: int | None = None
    layout: str = "auto"
    precision: str = "fp64"
    throw: bool = True
    omega: float | None = None
    criterion: str = "sound"
    devices: Any = None
    #: The fields `resolved` filled in from the path's defaults (not given
    #: by the caller; not part of equality): a solve may treat a default
    #: `max_iters` as a budget that a steadily converging method may
    #: exceed (`max_iters_given`), where a given one is a hard cap.
    defaulted: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        if self.method is not None:
            _choice("method", self.method, METHODS)
        _choice("layout", self.layout, LAYOUTS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("criterion", self.criterion, CRITERIA)
        if self.epsilon is not None:
            eps = self.epsilon
            if isinstance(eps, bool) or not isinstance(eps, (int, float)):
                raise OptionsError(
                    f"`epsilon` should be a number, not {eps!r}", hint="e.g. 1e-6"
                )
            if not eps > 0 or eps != eps or eps == float("inf"):
                raise OptionsError(
                    f"`epsilon` must be positive and finite, not {eps!r}",
                    hint="e.g. epsilon=1e-6 (PRISM's default)",
                )
            object.__setattr__(self, "epsilon", float(eps))
        if self.max_iters is not None:
            k = self.max_iters
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise OptionsError(
                    f"`max_iters` must be a positive integer, not {k!r}",
                    hint="e.g. max_iters=10000 (PRISM's default)",
                )
        if self.omega is not None and not 0.0 < float(self.omega) < 2.0:
            raise OptionsError(
                f"`omega` must be in (0, 2) or None (automatic), not {self.omega!r}",
                hint="omega=1.0 is plain Gauss-Seidel",
            )
        if self.precision == "fp32" and self.epsilon is not None:
            check_fp32_epsilon(self.epsilon)
        object.__setattr__(self, "devices", _devices(self.devices))

    @classmethod
    def of(cls, options: SolveOptions | None = None, **kwargs) -> SolveOptions:
        """`options` (or the defaults) with the keywords given: the one
        place the API turns `method=`, `epsilon=`, ... into an object.
        An unknown keyword is a `TypeError`."""
        base = cls() if options is None else options
        if not isinstance(base, SolveOptions):
            raise OptionsError(
                f"`options` should be a SolveOptions, not {type(base).__name__}",
                hint="jaxmc.SolveOptions(epsilon=1e-8, ...)",
            )
        names = {f.name for f in dataclasses.fields(cls)} - {"defaulted"}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"unexpected argument `{unknown[0]}`")
        return dataclasses.replace(base, **kwargs) if kwargs else base

    def resolved(self, path: str = "check") -> SolveOptions:
        """These options with `epsilon` and `max_iters` filled in from
        `path`'s defaults (`DEFAULTS`: "check" or "params"), checked again
        (fp32 against the default epsilon)."""
        fill = {k: v for k, v in DEFAULTS[path].items() if getattr(self, k) is None}
        if not fill:
            return self
        return dataclasses.replace(
            self, **fill, defaulted=tuple(sorted({*self.defaulted, *fill}))
        )

    @property
    def max_iters_given(self) -> bool:
        """Whether the caller set `max_iters` (else it is the path's
        default, filled in by `resolved`)."""
        return "max_iters" not in self.defaulted


def _devices(devices):
    """`devices` checked for its type (the devices themselves are looked up
    when the mesh is made, `jaxmc.layout.make_mesh`); 1 is None."""
    hint = "devices=4, devices=jax.devices()[:2] or a 1-D jax.sharding.Mesh"
    if devices is None or hasattr(devices, "axis_names"):  # (a Mesh)
        return devices
    if isinstance(devices, bool):
        raise OptionsError(f"`devices` should be a count, not {devices!r}", hint=hint)
    if isinstance(devices, int):
        if devices < 1:
            raise OptionsError(
                f"`devices` must be at least 1, not {devices}", hint=hint
            )
        return None if devices == 1 else devices
    if isinstance(devices, (list, tuple)) and devices:
        return tuple(devices)
    raise OptionsError(f"unknown `devices` {devices!r}", hint=hint)


def check_fp32_epsilon(epsilon: float) -> None:
    """float32 cannot reach an `epsilon` below `FP32_MIN_EPSILON`."""
    if epsilon < FP32_MIN_EPSILON:
        raise UnsupportedError(
            f"epsilon {epsilon:g} is below what fp32 can reach (float32 rounds at "
            f"~6e-8 relative; the smallest epsilon with fp32 is {FP32_MIN_EPSILON:g})",
            hint=f"use epsilon >= {FP32_MIN_EPSILON:g} with fp32, or precision fp64",
        )


def check_options(options: SolveOptions | None) -> SolveOptions:
    """The options of a checking-path function (below the API): `options`
    resolved with the "check" defaults, or the defaults when None."""
    return (SolveOptions() if options is None else options).resolved("check")
