"""The public entry points: `load_properties`, `check`, `solve`, `sweep`,
`parametric` (loading a model is `jaxmc.model`).

This module is thin on purpose: each function hands over to one stage of the
pipeline (properties → numerics, or the differentiable path `jaxmc.diff`)
and adds no logic of its own beyond timing the build.
"""

from __future__ import annotations

import dataclasses
import os
import weakref
from collections.abc import Mapping
from typing import Any

from . import lang, semantics
from .errors import UnsupportedError
from .model import (
    ConstantsArg,
    Model,
    build as build,
    load_model as load_model,
    load_model_string as load_model_string,
)
from .options import SolveOptions
from .props.resolve import (
    parse_properties as parse_properties,
    property_to_check,
    python_hint as python_hint,
)


def load_properties(
    path: str | os.PathLike,
    model: Model,
    constants: ConstantsArg = None,
    *,
    errors: str = "raise",
) -> semantics.CheckedProperties:
    """Parse and check a property file against `model`.

    The file's undefined constants take their values from the model's
    constant setting (`jaxmc.load_model(path, constants)`), as with PRISM's
    `-const`; `constants` here adds to it or overrides it for this file.

    **Returns:** the checked properties, in file order; index them by position
    or look one up by name with `.get(name)`. Each property can also be
    passed by itself to [`jaxmc.check`][] / [`jaxmc.solve`][].
    """
    path = os.fspath(path)
    text = lang.read_source(path)
    return parse_properties(text, model, constants, file=path, errors=errors)


#: The device models of each explicit model, per (layout, precision): made
#: once (`jaxmc.numerics.DeviceModel`), reused by every check of the model.
_DEVICE_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: The keywords of the API functions that are fields of `SolveOptions`.
_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(SolveOptions))


def solve_options(options: SolveOptions | None = None, **kwargs: Any) -> SolveOptions:
    """The one `SolveOptions` of an API call: `options` with the keywords
    given (None: not given) put in; validated here, once."""
    given = {k: v for k, v in kwargs.items() if v is not None}
    return SolveOptions.of(options, **given)


def _split(kwargs: dict[str, Any]) -> tuple[SolveOptions, dict[str, Any]]:
    """`(options, the other keywords)` of an API call's `**kwargs`."""
    names = {k: kwargs.pop(k) for k in _OPTION_NAMES if k in kwargs}
    return solve_options(kwargs.pop("options", None), **names), kwargs


def _device_model(explicit, options: SolveOptions):
    from .numerics import DeviceModel

    per = _DEVICE_MODELS.setdefault(explicit, {})
    key = (options.layout, options.precision, options.devices)
    if key not in per:
        per[key] = DeviceModel.of(explicit, options)
    return per[key]


def check(
    model: Model,
    prop: Any,
    *,
    properties: semantics.CheckedProperties | None = None,
    options: SolveOptions | None = None,
    method: str | None = None,
    epsilon: float | None = None,
    relative: bool | None = None,
    max_iters: int | None = None,
    throw: bool | None = None,
    layout: str | None = None,
    precision: str | None = None,
    criterion: str | None = None,
    devices: Any = None,
    all_states: bool = False,
    scheduler: bool = False,
):
    """Check one property on `model`; returns a [`jaxmc.CheckResult`][].

    The numerical options are one [`jaxmc.SolveOptions`][] (`options=`) or
    its fields as keywords (which override `options`' fields); a keyword
    left out (None) takes `options`' value, or the default.

    **Arguments:**
    - `model`: from [`jaxmc.load_model`][] (built on first use).
    - `prop`: a property string, a checked property (from
      [`jaxmc.load_properties`][]; it carries its file's constants, formulas,
      labels and the properties it refers to), or the name/index of one in
      `properties`.
    - `properties`: the properties to look `prop` up in, by name or index.
    - `method`: `"jacobi"`, `"power"`, `"gauss_seidel"`, `"bicgstab"`,
      `"value_iteration"` (default for MDPs), `"interval_iteration"`. The
      default for DTMCs/CTMCs is Gauss-Seidel in topological order (on the
      host) where the system's graph is nearly acyclic (at most 10% of
      the unknowns in cyclic strongly connected components), else Jacobi
      (`jaxmc.numerics.methods.AUTO`); `result.method` says which ran.
    - `epsilon`, `relative`, `max_iters`: the convergence criterion, as
      PRISM's `-epsilon`, `-relative/-absolute`, `-maxiters` (defaults
      1e-6, relative, 10000).
    - `throw`: raise `ConvergenceError` when an iterative method stops before
      converging (default); with `False` the result carries the status
      (`status`, `failure`, `attempts`) instead.
    - `layout`: the device matrix every iterative solve runs its SpMV on:
      `"auto"` (CSR on a CPU; on a GPU the warp-segment layout that
      `jaxmc.layout.layout_kind` picks, run by the fused Pallas kernels, and
      steady-state systems of 50k+ states solved by GMRES on the device, on
      the compact diagonal layout where it fits), or one of `"csr"`,
      `"ell"`, `"sell"`, `"warp"`, `"warp2"`, `"compact"`, `"compact2"`
      (compact: rebuilt on the host per solve; warp where it cannot hold
      the matrix), `"vector"` (CSR-vector, for long rows), `"dia"` (compact
      diagonals: the DTMC/CTMC solves run in PRISM's lexicographic state
      order, where a box-shaped state space is a few diagonals; rebuilt
      per solve, on the GPU where there is one; compact where the matrix
      is not a few diagonals in that order, and for MDPs). The values do
      not depend on it beyond rounding. `result.layout` says which layout
      the last solve used.
    - `precision`: `"fp64"` (default) or `"fp32"`, the float type of the
      matrix values and the iterate in the iterative solves (SpMV; Jacobi,
      power, value/interval iteration; steady state, which with fp32 skips
      the fp64 direct/Krylov solves for Jacobi; BiCGStab is refused in fp32,
      where it can stop "converged" at a wrong value). fp32 is for
      speed and memory on a GPU, where the SpMV is bound by the bytes it
      reads. Its values agree with fp64 to ~1e-5 relative,
      not to PRISM's 1e-6 guarantee; an `epsilon` below 1e-6 is refused with
      fp32 (`UnsupportedError`: float32 cannot reach it), and an absolute
      criterion on large values may not converge (reported as usual). Graph
      precomputation, uniformisation, bounded steps and host solves stay
      fp64, and results are float64 either way. `result.precision` says
      which precision the last solve ran in.
    - `criterion`: `"sound"` (default): every DTMC/CTMC reachability and
      reward value is certified: it comes with bounds that contain the exact
      value, at most `epsilon` apart from it (relative or absolute;
      `result.bound`, `result.lower`/`upper`); the default method is then
      Gauss-Seidel in topological order where the graph is nearly acyclic,
      else sound value iteration (`jaxmc.numerics.sound`), and interval
      iteration for MDPs. An explicit `method` still certifies (Jacobi and
      power with a certified stopping rule, Gauss-Seidel and BiCGStab
      results certified afterwards). `"change"`: PRISM's criterion (the
      change between iterates below `epsilon`, which bounds the change,
      not the error) and PRISM's defaults (Jacobi; value iteration for
      MDPs), for PRISM's numbers; `result.bound` is None.
    - `devices`: the devices the iterative solves are split over: None
      (one device, the default), a count, a sequence of `jax.Device`s or a
      `jax.sharding.Mesh`. The states are split in BFS order into equal
      blocks, each device holding its block's matrix rows and exchanging
      only the entries its neighbours read (`docs/multi-device.md`); the
      values are those of one device with `layout="csr"`. Host solves
      (Gauss-Seidel, the topological MDP solves, small steady-state
      systems) stay on the host; the automatic choices that pick them are
      replaced by the device methods, as for an explicit layout.

    - `all_states`: compute the value in every state (`result.values`;
      PRISM's `-exportvector`); by default a property without a top-level
      filter is computed only where the initial states need it.
    - `scheduler`: also compute the optimal memoryless scheduler of an MDP
      property `Pmin/Pmax [ φ U ψ ]` (or `F`, `G`, `W`, `R`) or
      `Rmin/Rmax [ F ψ ]`, verified on the DTMC it induces
      (`result.scheduler`: `choice`, the index of each state's chosen
      choice within its row group, and `actions`, its action label; see
      `jaxmc.numerics.scheduler`); for `Pmin/Pmax [ψ]` with LTL `ψ` and
      co-safe `Rmin/Rmax [ψ]`, the optimal finite-memory scheduler
      (`jaxmc.automata.memory.MemoryScheduler`, memory = the automaton's
      state). `UnsupportedError` for other properties (step-bounded ones
      need memory). [`jaxmc.induced_model`][] makes the induced DTMC,
      [`jaxmc.export_strategy`][] writes PRISM's files.

    `result.timing` has `build`, `precompute`, `layout`, `solve` and `total`
    (seconds; see [`jaxmc.CheckResult`][]). A layout that cannot hold a
    system, and any other fallback, is in `result.attempts`.
    """
    options = solve_options(
        options, method=method, epsilon=epsilon, relative=relative,
        max_iters=max_iters, throw=throw, layout=layout, precision=precision,
        criterion=criterion, devices=devices,
    )  # fmt: skip
    return _check(model, prop, properties, options, all_states, scheduler)


def _check(
    model, prop, properties, options: SolveOptions, all_states=False, scheduler=False
):
    from .props import check_property, raise_on_failure

    checked_prop, properties = property_to_check(model, prop, properties)
    explicit = build(model)
    options = options.resolved("check")
    result = check_property(
        explicit, checked_prop, properties, options,
        _device_model(explicit, options), all_states=all_states,
        scheduler=scheduler,
    )  # fmt: skip
    if getattr(model, "build_time", None) is not None:
        result.timing.setdefault("build", model.build_time)
    if options.throw:
        raise_on_failure(result, checked_prop, properties)
    return result


def solve(
    model: Model, prop: Any, *, params: Mapping[str, Any] | None = None, **kwargs: Any
):
    """The value of `prop` at the model's single initial state, as a JAX
    scalar (a bool for properties with a threshold).

    Takes the same arguments as [`jaxmc.check`][]. Raises
    `ModelCheckingError` if the model has several initial states: use
    `check(...).at_initial`, or a `filter(...)` in the property.

    With `params={"p": 0.3, ...}` (undefined `const double`s of the model),
    the result is a differentiable function of those values: `jax.grad`,
    `jax.jvp`, `jax.jacrev` and `jax.vmap` apply, and new values reuse the
    compiled computation (see [`jaxmc.parametric`][]). The state space is
    built once, at `build_params=` if given, else at the model's `params`
    build option, else at the first concrete values; parameters may appear
    only in probabilities, rates, state reward values and CSL time bounds.
    `epsilon` (default 1e-12 on this path: `jaxmc.options.DEFAULTS`),
    `max_iters` (200,000) and `omega` set the solvers' tolerance. A solve
    that does not converge raises `ConvergenceError` (naming the method,
    iterations and residual) on concrete values; under `jax.jit`,
    `jax.grad` or `jax.vmap`, or with `throw=False`, its value is NaN, and
    `jaxmc.parametric(...).solve_report(params)` says why. With
    `rebuild=True` the model is instead rebuilt with the values as constants
    (anything goes; not differentiable).
    """
    import jax.numpy as jnp

    options, kwargs = _split(kwargs)
    if params is not None:
        from . import diff

        if kwargs.pop("rebuild", False):
            return diff.rebuild_solve(model, prop, params, options, **kwargs)
        return diff.solve_params(
            model, prop, params, _one_device(options, "solve(params=...)"), **kwargs
        )
    properties = kwargs.pop("properties", None)
    if kwargs:
        raise TypeError(f"unexpected argument `{next(iter(kwargs))}`")
    result = _check(model, prop, properties, options)
    return jnp.asarray(result.value)


def sweep(model: Model, prop: Any, params: Mapping[str, Any], **kwargs: Any):
    """`prop` at many parameter points at once (`params`: name → array, one
    common shape); one vmapped computation sharing the structure. Returns a
    numpy array of the points' shape. See `jaxmc.diff.sweep` for `chunk`,
    `progress`, `workers` (chunks solved at once on host threads; on a CPU
    by default one per core), `build_params`; the numerical options as
    [`jaxmc.parametric`][]. A point whose solve does not converge raises
    `ConvergenceError` (how many points, and the first one's method,
    iterations and residual)."""
    from . import diff

    options, kwargs = _split(kwargs)
    options = _one_device(options, "sweep")
    return diff.sweep(model, prop, params, options=options, **kwargs)


def parametric(model: Model, prop: Any, **kwargs: Any):
    """`prop` as a pure, jittable function of the parameters (a
    `jaxmc.diff.Problem`, called with a dict of values). See
    `jaxmc.diff.parametric`; the numerical options are `options=` (a
    [`jaxmc.SolveOptions`][]) or its fields `epsilon`, `max_iters`, `omega`
    as keywords (defaults 1e-12, 200,000, automatic)."""
    from . import diff

    options, kwargs = _split(kwargs)
    options = _one_device(options, "parametric")
    return diff.parametric(model, prop, options=options, **kwargs)


def _one_device(options: SolveOptions, what: str) -> SolveOptions:
    """`options`, which the differentiable path takes on one device only."""
    if options.devices is not None:
        raise UnsupportedError(
            f"`{what}` runs on one device; `devices` is for `check` and `solve`",
            hint="leave `devices` out here",
        )
    return options
