"""Entry points of the differentiable path: `parametric`, `solve_params`,
`sweep`, and `rebuild_solve` (the non-differentiable fallback)."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import semantics
from ..errors import (
    ExplorationError,
    ModelCheckingError,
    SemanticError,
    UnsupportedError,
)
from ..explore import build as _build
from ..options import SolveOptions
from ..props import check_property, raise_on_failure
from ..props.resolve import property_to_check, resolve_property
from ._params import check_values, concrete
from ._problem import Problem
from ._status import raise_on_failure as raise_on_solve_failure
from ._structure import generic_points
from ._values import VanishingAtBuildPoint


_PROBLEMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_RECHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _parameter_names(checked) -> list[str]:
    """The constants that can be parameters: the model's `double`s."""
    return [d.name for d in checked.program.constants if d.type.value == "double"]


def _derived(model, checked, build_options):
    """A `Model` for `checked`, derived from `model` (its properties and
    constant setting carried over)."""
    setting = {k: v for k, v in model.checked.constant_setting.items()
               if k not in {d.name for d in checked.program.constants}}  # fmt: skip
    if setting:
        checked = dataclasses.replace(
            checked, constant_setting={**setting, **checked.constant_setting}
        )
    # a fresh (unbuilt) model of the same class, sharing the set of
    # constants its properties declared
    return dataclasses.replace(
        model, checked=checked, build_options=build_options, _explicit=None,
        build_time=None,
    )  # fmt: skip


def with_parameters(model, names) -> Any:
    """`model` with `names` as its parameters: the model itself if they are,
    else the program re-checked with them left symbolic (cached)."""
    have = tuple(model.checked.parameters)
    decls = {d.name: d for d in model.checked.program.constants}
    if set(names) == set(have) and all(
        p in decls and decls[p].value is None for p in names
    ):
        return model
    per = _RECHECKED.setdefault(model, {})
    key = tuple(sorted(names))
    if key in per:
        return per[key]
    checked = model.checked
    decls = {d.name: d for d in checked.program.constants}
    for p in names:
        if p not in decls:
            cands = _parameter_names(checked)
            raise SemanticError(
                f"`{p}` is not a constant of the model, so it cannot be a parameter",
                hint="the model's `double` constants (possible parameters): "
                f"{', '.join(cands)}"
                if cands
                else "the model has no `double` constants",
            )
    consts = {
        k: v
        for k, v in checked.constants.items()
        if k in decls and decls[k].value is None and k not in names
    }
    for p in have:
        if p not in names:
            raise SemanticError(
                f"`params` lacks a value for parameter `{p}`",
                hint=f"the parameters are: {', '.join(have)}",
            )
    # A constant defined in the file (`const double p = 0.3;`) named in
    # `params` is made undefined, so that it stays symbolic; its defined value
    # is the default build point.
    defined = {p: checked.constants[p] for p in names if decls[p].value is not None}
    program = checked.program
    if defined:
        program = dataclasses.replace(
            program,
            constants=tuple(
                dataclasses.replace(d, value=None) if d.name in defined else d
                for d in program.constants
            ),
        )
    rechecked = semantics.check_program(
        program,
        consts,
        source=checked.source,
        file=checked.file,
        parameters=tuple(names),
    )
    opts = {k: v for k, v in model.build_options.items() if k != "params"}
    if defined or model.build_options.get("params"):
        point = {
            **{k: float(v) for k, v in defined.items()},
            **(model.build_options.get("params") or {}),
        }
        opts["params"] = {k: v for k, v in point.items() if k in names}
    out = _derived(model, rechecked, opts)
    per[key] = out
    return out


def _build_point(model, theta, build_params) -> dict:
    names = model.checked.parameters
    if build_params is not None:
        return {k: float(build_params[k]) for k in names}
    given = model.build_options.get("params") or {}
    point = {}
    for k in names:
        v = concrete(theta[k]) if k in theta else None
        if v is None and k in given:
            v = float(given[k])
        if v is None:
            raise ValueError(f"no concrete value of parameter `{k}`")
        point[k] = v
    return point


def parametric(
    model,
    prop,
    *,
    properties=None,
    params: Mapping[str, Any] | None = None,
    build_params: Mapping[str, float] | None = None,
    options: SolveOptions | None = None,
) -> Problem:
    """The property `prop` of `model` as a pure function of the parameters.

    **Arguments:**
    - `model`: a [`jaxmc.Model`][] (its undefined `const double`s named in
      `params` or `build_params` become parameters).
    - `prop`: a property string (or a checked property with `properties`).
    - `params`/`build_params`: the point at which the state space is built
      (`build_params` if given, else the model's own `params` build option,
      else the concrete values in `params`).
    - `options`: a `jaxmc.SolveOptions`; this path reads `epsilon`,
      `max_iters` (the iterative solvers' tolerance, default 1e-12,
      relative, and limit: `jaxmc.options.DEFAULTS["params"]`) and `omega`
      (over-relaxation of the Gauss-Seidel sweeps: default `None`, chosen
      automatically per solve, guarded against divergence; `1.0`: plain
      Gauss-Seidel).

    **Returns:** a `Problem`; `problem({"p": 0.3})` is a JAX scalar,
    differentiable with `jax.grad`/`jax.jvp`/`jax.jacrev` and batchable with
    `jax.vmap`; it compiles once.
    """
    check_values(params or {})
    theta = dict(params or {})
    names = tuple(build_params or theta)
    model = with_parameters(model, names)
    try:
        point = _build_point(model, theta, build_params)
    except ValueError:
        point = None  # traced values: reuse a problem built earlier, if any
    if isinstance(prop, (str, int)) and properties is not None:
        checked_prop = properties.get(prop)
        key_prop = id(checked_prop)
    elif isinstance(prop, str):
        checked_prop, properties = resolve_property(model, prop)
        key_prop = prop
    else:
        checked_prop, properties = resolve_property(model, prop)
        key_prop = id(checked_prop)
    if getattr(checked_prop, "properties", None) is not None:
        properties = checked_prop.properties
    if getattr(checked_prop, "error", None) is not None:
        raise checked_prop.error
    opts = params_options(options)
    per = _PROBLEMS.setdefault(model, {})
    any_key = (key_prop, opts.epsilon, opts.max_iters, opts.omega)
    if point is None:
        if any_key in per:
            return per[any_key]
        raise ValueError(
            "no concrete parameter values to build the state space at (called "
            "under jax.grad/jit/vmap before any concrete call)",
        ) from None
    key = (
        key_prop,
        tuple(sorted(point.items())),
        opts.epsilon,
        opts.max_iters,
        opts.omega,
    )
    if any_key in per and build_params is None and not per[any_key].fixed_regions:
        # The structure does not depend on the point: reuse the compiled
        # problem (not where nested operators' regions were decided at its
        # build point: a concrete point gets its own).
        return per[any_key]
    if key not in per:
        pinned = build_params is not None
        per[key] = _problem(model, checked_prop, properties, point, opts, pinned)
    per[any_key] = per[key]
    return per[key]


def _problem(model, prop, properties, point, opts, pinned: bool) -> Problem:
    """The problem built at `point`; where a parameter-dependent probability
    is 0 there (its transitions would be missing from the structure) and the
    point was not asked for explicitly, at a generic point instead."""
    bopts = {k: v for k, v in model.build_options.items() if k != "params"}

    def at(p):
        return Problem(
            model.checked,
            _build(model.checked, params=p, **bopts),
            prop,
            properties,
            p,
            opts,
        )

    try:
        return at(point)
    except VanishingAtBuildPoint:
        if pinned:
            raise
        first = sys.exc_info()[1]
    for p in generic_points(point):
        try:
            return at(p)
        except (VanishingAtBuildPoint, ExplorationError, SemanticError):
            continue
    raise first


def params_options(options: SolveOptions | None) -> SolveOptions:
    """`options` for this path: its defaults filled in
    (`SolveOptions.resolved("params")`); a layout or precision other than
    the defaults is refused (this path's solvers have their own layout)."""
    o = (options or SolveOptions()).resolved("params")
    for name, default in (("layout", "auto"), ("precision", "fp64")):
        if getattr(o, name) != default:
            raise UnsupportedError(
                f"`{name}` {getattr(o, name)!r} is not supported with `params`",
                hint=f"leave `{name}` out with params=, or use jaxmc.check",
            )
    return o


def solve_params(
    model,
    prop,
    params: Mapping[str, Any],
    options: SolveOptions | None = None,
    **kwargs,
):
    """`jaxmc.solve(model, prop, params=...)`: see `jaxmc.solve`. A solve
    that does not converge raises `ConvergenceError` (naming the method,
    iterations and residual) on concrete values with `options.throw`;
    otherwise (`throw` False, or traced values: under `jax.jit`, `jax.grad`,
    `jax.vmap`) it gives NaN (`jaxmc.diff._status`)."""
    options = params_options(options)
    problem = parametric(
        model,
        prop,
        params=params,
        properties=kwargs.pop("properties", None),
        build_params=kwargs.pop("build_params", None),
        options=options,
    )
    if kwargs:
        raise TypeError(f"unexpected argument `{next(iter(kwargs))}` with `params`")
    problem.ensure({k: params[k] for k in problem.names})
    point = {k: concrete(params[k]) for k in problem.names if k in params}
    if all(v is not None for v in point.values()) and len(point) == len(problem.names):
        differs = problem.structure_differs(point)
        if differs is not None:
            if not _concrete(params):
                raise _structure_error(problem, point, differs, prop)
            # the transitions that vanish here change the graph: check the
            # model built at this point (the value, not differentiable here)
            return rebuild_solve(model, prop, point)
    if options.throw and _concrete(params):
        out, report = problem.solve_report(params)
        raise_on_solve_failure(report)
    else:
        out = problem(params)
    if problem.result_type is not None and _concrete(params):
        out = out.astype(problem.result_type)
    return out


def _concrete(params) -> bool:
    return not any(
        isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(dict(params))
    )


def _structure_error(problem, point, differs, prop) -> ModelCheckingError:
    span = getattr(prop, "span", None)
    return ModelCheckingError(
        f"at {point} some probabilities/rates are 0, which changes the graph of the "
        f"model from the one built at {problem.build_params}: its precomputation "
        f"(`{differs}`) differs, so the result is not differentiable there",
        span,
        hint="differentiate at a point where every parameter-dependent probability is "
        "positive; `jaxmc.solve(..., params=...)` without jax.grad gives the value "
        "there",
    )


def rebuild_solve(
    model,
    prop,
    params: Mapping[str, Any],
    options: SolveOptions | None = None,
    **kwargs,
):
    """Rebuild the state space with `params` as plain constants and check
    (any parameter position allowed; not differentiable)."""
    check_values(params)
    checked = model.checked
    decls = {d.name: d for d in checked.program.constants}
    for k in params:
        if k not in decls:
            cands = _parameter_names(checked)
            raise SemanticError(
                f"`{k}` is not a constant of the model",
                hint=f"the model's `double` constants: {', '.join(cands)}"
                if cands
                else "the model has no `double` constants",
            )
    consts = {
        k: v
        for k, v in checked.constants.items()
        if k in decls and decls[k].value is None and k not in params
    }
    consts.update({k: float(v) for k, v in params.items()})
    # a constant the file defines, named in `params`, takes the value given
    program = dataclasses.replace(
        checked.program,
        constants=tuple(
            dataclasses.replace(d, value=None) if d.name in params else d
            for d in checked.program.constants
        ),
    )
    rechecked = semantics.check_program(
        program, consts, source=checked.source, file=checked.file
    )
    opts = {k: v for k, v in model.build_options.items() if k != "params"}
    m2 = _derived(model, rechecked, opts)
    checked_prop, properties = property_to_check(
        m2, prop, kwargs.pop("properties", None)
    )
    if kwargs:
        raise TypeError(f"unexpected argument `{next(iter(kwargs))}`")
    options = options or SolveOptions()
    result = check_property(m2.build(), checked_prop, properties, options)
    if options.throw:
        raise_on_failure(result)
    return jnp.asarray(result.value)


def _off_structure(model, prop, problem, flat, total, chunk) -> dict[int, float]:
    """The values at the points where vanishing transitions change the
    graph's precomputation: each from the model built at that point."""
    step = max(1, min(total, int(chunk or total), 1 << 12))
    out: dict[int, float] = {}
    for lo in range(0, total, step):
        th = {k: flat[k][lo : lo + step] for k in problem.names}
        for i in np.flatnonzero(problem.vanishing(th)):
            point = {k: float(flat[k][lo + i]) for k in problem.names}
            if problem.structure_differs(point) is not None:
                out[lo + int(i)] = float(rebuild_solve(model, prop, point))
    return out


def _cpu_workers() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def sweep(
    model,
    prop,
    params: Mapping[str, Any],
    *,
    chunk: int | None = None,
    progress: bool | Callable[[int, int, float], None] = False,
    build_params: Mapping[str, float] | None = None,
    options: SolveOptions | None = None,
    properties=None,
    workers: int | None = None,
) -> np.ndarray:
    """`prop` at a batch of parameter points, in one vmapped computation.

    The batch shares the structure: under `jax.vmap` the linear solves run
    as one multi-vector Gauss-Seidel iteration (iterate `[n, k]`, one gather
    pass over the shared column indices per sweep, the points' weights from
    a small table of weight classes when the model has them, a per-point
    convergence mask), not as a vmapped single-point loop.

    **Arguments:**
    - `params`: name → array; arrays of one common shape (scalars broadcast),
      e.g. from `np.meshgrid` for a 2-D sweep.
    - `chunk`: points per batch (default: all at once, up to ~2^26 / nnz
      points, which bounds the `[nnz, chunk]` arrays to ~512 MB each; on a
      GPU the power of two up to 2^28 / nnz (~2 GB each; 64 or more); on
      CPU up to 2^21 / nnz, which keeps them near cache size, and one point
      at a time, unbatched, when that is below 16). `chunk=1` solves the
      points one by one with the compiled one-point solve.
    - `progress`: `True` prints progress to stderr; a callable gets
      `(done, total, elapsed_s)`.
    - `workers`: chunks solved concurrently, each by its own host thread
      (default: the usable CPU cores on the CPU backend, 1 on an
      accelerator). Why: a solve is a loop of small XLA operations, which
      one core runs about as fast as several, so independent chunks on
      their own cores add up. The values do not depend on
      it: each chunk runs the same compiled computation.
    - the other arguments as [`jaxmc.parametric`][]; the state space is built
      at `build_params` or at the first point.

    **Returns:** a numpy array of the points' shape. A point whose solve
    does not converge raises `ConvergenceError` (with `options.throw`, the
    default; else its value is NaN).
    """
    check_values(params, batch=True)
    options = params_options(options)
    arrs = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrs.values()))
    except ValueError:
        shapes = ", ".join(f"`{k}` {a.shape}" for k, a in arrs.items())
        raise SemanticError(
            "the arrays of `params` have shapes that do not broadcast together: "
            f"{shapes}",
            hint="give every parameter an array of one common shape (scalars "
            "broadcast), e.g. from np.meshgrid for a grid",
        ) from None
    flat = {k: np.broadcast_to(a, shape).reshape(-1) for k, a in arrs.items()}
    total = int(np.prod(shape, dtype=np.int64))
    if total == 0:
        return np.zeros(shape)
    first = {k: float(v[0]) for k, v in flat.items()}
    problem = parametric(
        model,
        prop,
        params=first,
        properties=properties,
        build_params=build_params,
        options=options,
    )
    missing = [k for k in problem.names if k not in flat]
    if missing:
        raise SemanticError(
            f"`params` lacks values for parameter `{missing[0]}`",
            hint=f"the parameters are: {', '.join(problem.names)}",
        )
    problem.ensure(flat)
    rebuilt = _off_structure(model, prop, problem, flat, total, chunk)
    batched = problem.batched()
    if chunk is None:
        # The multi-vector solve holds a few `[nnz, chunk]` arrays: bound
        # them to ~512 MB each; on CPU also keep them near cache size
        # (~16 MB), which runs faster than one big batch.
        nnz = max(1, int(problem.model.num_transitions))
        chunk = (1 << 26) // nnz
        if jax.default_backend() == "gpu" and chunk >= 64:
            # a power of two, up to ~2 GB per [nnz, chunk] array: the
            # widths the fused SOR kernel takes, and batches that shrink
            # as their points converge (`solvers.sor_shrinking`)
            chunk = 1 << (((1 << 28) // nnz).bit_length() - 1)
        if jax.default_backend() == "cpu":
            # Above ~2^17 entries one point's values already fill the
            # cache: a batch costs as much per point and sweep as a single
            # solve, and runs to its slowest point, so go one point at a
            # time.
            chunk = min(chunk, (1 << 21) // nnz)
            chunk = 1 if chunk < 16 else chunk
        chunk = min(total, max(1, chunk))
    chunk = max(1, int(chunk))
    single = chunk == 1  # no vmap: the one-point compiled solve, point by point
    out = np.empty(total)
    start = time.perf_counter()
    report = progress if callable(progress) else None
    if progress is True:

        def report(done, tot, el):
            print(
                f"\rsweep: {done}/{tot} points, {el:.1f} s",
                end="" if done < tot else "\n",
                file=sys.stderr,
                flush=True,
            )

    def solve_chunk(lo):
        hi = min(total, lo + chunk)
        th = {k: flat[k][lo:hi] for k in problem.names}
        if single:
            v, rep = problem.solve_report({k: v[0] for k, v in th.items()})
            rep = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], rep)
            return lo, hi, np.asarray(v).reshape(1), rep
        if hi - lo < chunk and lo > 0:  # pad the last chunk: one compilation
            th = {
                k: np.concatenate([v, np.repeat(v[-1:], chunk - (hi - lo))])
                for k, v in th.items()
            }
        v, rep = batched(th)
        rep = jax.tree_util.tree_map(lambda a: np.asarray(a)[: hi - lo], rep)
        return lo, hi, np.asarray(v)[: hi - lo], rep

    starts = list(range(0, total, chunk))
    if workers is None:
        workers = _cpu_workers() if jax.default_backend() == "cpu" else 1
    workers = max(1, min(int(workers), len(starts)))
    done = 0

    reports = {}

    def finish(res):
        nonlocal done
        lo, hi, vals, reports[lo] = res
        out[lo:hi] = vals
        done += hi - lo
        if report is not None:
            report(done, total, time.perf_counter() - start)

    # The first chunk alone (it compiles), then the others, `workers` at a
    # time (XLA releases the GIL while it runs).
    finish(solve_chunk(starts[0]))
    if workers == 1:
        for lo in starts[1:]:
            finish(solve_chunk(lo))
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="jaxmc-sweep") as pool:
            for res in pool.map(solve_chunk, starts[1:]):
                finish(res)
    report = reports[starts[0]]
    if report.methods and options.throw:
        status = np.concatenate([reports[lo].status for lo in starts])
        for i in rebuilt:  # (solved again, on the model built there)
            status[i] = 0
        report = dataclasses.replace(
            report,
            status=status,
            iterations=np.concatenate([reports[lo].iterations for lo in starts]),
            residual=np.concatenate([reports[lo].residual for lo in starts]),
        )
        raise_on_solve_failure(report)
    for i, v in rebuilt.items():
        out[i] = v
    if options.throw and np.isnan(out).any():  # (every solve converged)
        raise ModelCheckingError(
            f"{int(np.isnan(out).sum())} of {total} points gave NaN",
            hint="check that every point gives a valid model",
        )
    if problem.result_type is not None:
        out = out.astype(problem.result_type)
    return out.reshape(shape)
