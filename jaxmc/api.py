"""The public entry points: `load_model`, `build`, `load_properties`, `check`,
`solve`.

This module is thin on purpose: each function hands over to one stage of the
pipeline (parse → check → explore → numerics) and adds no logic of its own
beyond caching the built model and timing the stages.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import lang, semantics
from .errors import JaxmcError, ModelCheckingError
from .explore import ExplicitModel, build as _build
from .lang import ast
from .semantics.constants import MissingConstantsError, constant_setting
from .semantics.properties import CheckedProperty


ConstantsArg = str | Mapping[str, Any] | None


@dataclass(eq=False)
class Model:
    """A PRISM model parsed and checked, with its constants fixed; built into
    an `ExplicitModel` on first use (then cached).

    Create it with [`jaxmc.load_model`][].
    """

    checked: semantics.CheckedProgram
    path: str | None = None
    build_options: dict[str, Any] = field(default_factory=dict)
    _explicit: ExplicitModel | None = field(default=None, repr=False)
    build_time: float | None = None
    #: Constants declared by the properties loaded for this model so far
    #: (the names of its constant setting that are not the model's may
    #: belong to any of them).
    _declared_by_properties: set[str] = field(default_factory=set, repr=False)

    @property
    def model_type(self) -> ast.ModelType:
        return self.checked.model_type

    @property
    def constants(self) -> Mapping[str, Any]:
        return self.checked.constants

    @property
    def constant_setting(self) -> Mapping[str, Any]:
        """The constants given to [`jaxmc.load_model`][], names for the
        properties included (they serve the properties files loaded for
        this model)."""
        return self.checked.constant_setting

    def build(self, **options: Any) -> ExplicitModel:
        """Explore the state space (once; later calls return the cached model
        unless different options are given)."""
        if self._explicit is None or (options and options != self.build_options):
            if options:
                self.build_options = dict(options)
            start = time.perf_counter()
            self._explicit = _build(self.checked, **self.build_options)
            self.build_time = time.perf_counter() - start
        return self._explicit


def load_model(
    path: str | os.PathLike,
    constants: ConstantsArg = None,
    *,
    parameters: tuple[str, ...] = (),
    **build_options: Any,
) -> Model:
    """Parse and check a PRISM model file.

    **Arguments:**
    - `path`: a `.pm` (DTMC), `.sm` (CTMC), `.nm` (MDP) or `.prism` file.
    - `constants`: values for undefined constants, either as PRISM's
      `-const` string `"N=3,p=0.2"` or as a mapping. As with PRISM's
      `-const`, one setting serves the model and its properties: names the
      model does not declare are kept for the properties files loaded with
      [`jaxmc.load_properties`][] (and property strings given to
      [`jaxmc.check`][]), which report a name that none of them declares. A
      value for a constant the file defines is an error (as in PRISM).
    - `parameters`: constants to keep symbolic (for gradients).
    - `build_options`: passed to the builder when the model is built
      (`max_states`, `deadlocks="fix"|"error"`, `progress`).

    **Returns:** a [`jaxmc.Model`][]; the state space is built lazily.
    """
    path = os.fspath(path)
    text = lang.read_source(path)
    return load_model_string(
        text, constants, file=path, parameters=parameters, **build_options
    )


def load_model_string(
    text: str,
    constants: ConstantsArg = None,
    *,
    file: str | None = None,
    parameters: tuple[str, ...] = (),
    **build_options: Any,
) -> Model:
    """Like [`jaxmc.load_model`][] but from the model's text."""
    with _api_hints():
        setting = constant_setting(constants)
        program = lang.parse_model(text, file=file)
        checked = semantics.check_program(
            program,
            setting,
            source=text,
            file=file,
            parameters=parameters,
        )
    return Model(checked=checked, path=file, build_options=dict(build_options))


def python_hint(err: MissingConstantsError) -> str:
    """How to give the constants of `err` values from Python."""
    values = ", ".join(f'"{n}": ...' for n in err.names)
    if err.in_properties:
        return f"pass constants={{{values}}} to jaxmc.load_properties (or to jaxmc.load_model)"
    hint = f"pass constants={{{values}}} to jaxmc.load_model"
    doubles = [n for n in err.names if str(getattr(err.types.get(n), "value", "")) == "double"]
    if doubles:
        names = ", ".join(f'"{n}"' for n in doubles)
        hint += f" (or parameters=({names},) to keep {'them' if len(doubles) > 1 else 'it'} symbolic, for gradients)"
    return hint


@contextlib.contextmanager
def _api_hints() -> Iterator[None]:
    """Errors about undefined constants say how to give them values in Python."""
    try:
        yield
    except MissingConstantsError as err:
        raise err.rehint(python_hint(err)) from None


def build(model: Model | ExplicitModel, **options: Any) -> ExplicitModel:
    """The explicit state space of `model` (built on first use, then cached)."""
    if isinstance(model, ExplicitModel):
        return model
    return model.build(**options)


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


def parse_properties(
    text: str,
    model: Model,
    constants: ConstantsArg = None,
    *,
    file: str | None = None,
    errors: str = "raise",
) -> semantics.CheckedProperties:
    """Parse and check properties given as text (one or more, `;`-separated).

    With `errors="keep"`, a property that fails its checks is kept with its
    error, which is raised when that property is checked (so one bad property
    does not hide the others of a file)."""
    with _api_hints():
        pf = lang.parse_properties(text, file=file)
        props = semantics.check_properties(
            pf, model.checked, constants, source=text, file=file, errors=errors,
            known=sorted(model._declared_by_properties),
        )  # fmt: skip
    for p in props:
        if isinstance(p.error, MissingConstantsError):
            p.error.rehint(python_hint(p.error))
    model._declared_by_properties.update(c.name for c in pf.constants)
    return props


def _resolve_property(model: Model, prop: Any) -> tuple[Any, semantics.CheckedProperties]:
    """`prop` as (one checked property, the collection it belongs to)."""
    if isinstance(prop, str):
        props = parse_properties(prop, model)
        if len(props) != 1:
            raise ModelCheckingError(
                f"expected exactly one property, got {len(props)}",
                hint="pass one property at a time, or use load_properties",
            )
        return props[0], props
    if isinstance(prop, CheckedProperty):
        return prop, prop.properties
    if isinstance(prop, tuple) and len(prop) == 2:
        props, key = prop
        return props.get(key), props
    raise TypeError(
        "`prop` should be a property string like 'P=? [ F \"goal\" ]', a property "
        "from `jaxmc.load_properties`, or a (properties, name_or_index) pair."
    )


def check(
    model: Model,
    prop: Any,
    *,
    properties: semantics.CheckedProperties | None = None,
    method: str | None = None,
    epsilon: float = 1e-6,
    relative: bool = True,
    max_iters: int = 10000,
    throw: bool = True,
    layout: str = "auto",
    precision: str = "fp64",
):
    """Check one property on `model`; returns a [`jaxmc.CheckResult`][].

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
      (`jaxmc.numerics._common.AUTO`); `result.method` says which ran.
    - `epsilon`, `relative`, `max_iters`: the convergence criterion, as
      PRISM's `-epsilon`, `-relative/-absolute`, `-maxiters`.
    - `throw`: raise `ConvergenceError` when an iterative method stops before
      converging; with `False` the result carries the status instead.
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
      per solve, on the GPU where there is one; compact where the matrix is not a few diagonals
      in that order, and for MDPs). The values do not depend on it beyond
      rounding. `result.layout` says which layout the last solve used.
    - `precision`: `"fp64"` (default) or `"fp32"`, the float type of the
      matrix values and the iterate in the iterative solves (SpMV; Jacobi,
      power, value/interval iteration; steady state, which with fp32 skips
      the fp64 direct/Krylov solves for Jacobi; BiCGStab is refused in fp32,
      where it can stop "converged" at a wrong value). fp32 is for
      speed and memory on a GPU, where the SpMV is bound by the bytes it
      reads (an H200 warp-layout SpMV of tandem c=2047: 108 µs in f32
      against 144 µs in f64). Its values agree with fp64 to ~1e-5 relative,
      not to PRISM's 1e-6 guarantee; an `epsilon` below 1e-6 is refused with
      fp32 (`UnsupportedError`: float32 cannot reach it), and an absolute
      criterion on large values may not converge (reported as usual). Graph
      precomputation, uniformisation, bounded steps and host solves stay
      fp64, and results are float64 either way. `result.precision` says
      which precision the last solve ran in.

    `result.timing` has `build`, `precompute`, `layout`, `solve` and `total`
    (seconds; see [`jaxmc.CheckResult`][]).
    """
    from .props import CheckOptions, check_property

    if properties is not None and isinstance(prop, (str, int)):
        try:
            checked_prop = properties.get(prop)
        except (KeyError, IndexError, JaxmcError):
            if isinstance(prop, int):
                raise
            checked_prop, properties = _resolve_property(model, prop)
    else:
        checked_prop, properties = _resolve_property(model, prop)
    if checked_prop.properties is not None:
        properties = checked_prop.properties
    if checked_prop.error is not None:
        raise checked_prop.error
    explicit = build(model)
    options = CheckOptions(
        method=method,
        epsilon=epsilon,
        relative=relative,
        max_iters=max_iters,
        throw=throw,
        layout=layout,
        precision=precision,
    )
    result = check_property(explicit, checked_prop, properties, options)
    if model.build_time is not None:
        result.timing.setdefault("build", model.build_time)
    return result


def solve(model: Model, prop: Any, *, params: Mapping[str, Any] | None = None, **kwargs: Any):
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
    `epsilon` (default 1e-12 on this path) and `max_iters` set the solvers'
    tolerance. With `rebuild=True` the model is instead rebuilt with the
    values as constants (anything goes; not differentiable).
    """
    import jax.numpy as jnp

    if params is not None:
        from . import diff

        if kwargs.pop("rebuild", False):
            return diff.rebuild_solve(model, prop, params, **kwargs)
        return diff.solve_params(model, prop, params, **kwargs)
    result = check(model, prop, **kwargs)
    return jnp.asarray(result.value)


def sweep(model: Model, prop: Any, params: Mapping[str, Any], **kwargs: Any):
    """`prop` at many parameter points at once (`params`: name → array, one
    common shape); one vmapped computation sharing the structure. Returns a
    numpy array of the points' shape. See `jaxmc.diff.sweep` for `chunk`,
    `progress`, `workers` (chunks solved at once on host threads; on a CPU
    by default one per core), `build_params`."""
    from . import diff

    return diff.sweep(model, prop, params, **kwargs)


def parametric(model: Model, prop: Any, **kwargs: Any):
    """`prop` as a pure, jittable function of the parameters (a
    `jaxmc.diff.Problem`, called with a dict of values). See
    `jaxmc.diff.parametric`."""
    from . import diff

    return diff.parametric(model, prop, **kwargs)
