"""What checking a property returns: `CheckResult`; and `raise_on_failure`,
the one place a failed solve becomes an error (`ConvergenceError`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import JaxmcError, ModelCheckingError
from ..numerics.result import Attempt
from ..solvers import Status, convergence_error


@dataclass
class CheckResult:
    """The outcome of checking one property.

    - `values`: the property's value in every state (numpy; bool, int or
      float), or None when the top level is a filter (a single value).
    - `initial_states`: indices of the model's initial states.
    - `at_initial`: `values` at the initial states.
    - `value`: the result PRISM reports: the filter's value; else the value in
      the single initial state; for several initial states, `forall` for
      boolean properties and an error for numerical ones (PRISM reports the
      range, which is in `range`).
    - `status`, `iterations`, `residual`: from the last iterative solve
      (`"converged"`, `"max_iters"`, ...), where there was one; `status` is
      that of the first solve that failed, if one did (then `failure`
      describes it).
    - `attempts`: what the last solve tried before the method and layout
      that produced its values (fallbacks: a layout that could not hold the
      system, a method handed over to another), oldest first, as
      `jaxmc.numerics.Attempt`s; empty when the first try succeeded.
    - `bound`: a certified bound on the absolute error of `value` (and of
      every value at the initial states), or None where none is certified
      (criterion "change", or a value combined from several operators).
    - `lower`, `upper`, `bound_gap`: the certified bounds on every state's
      value of the last solve (interval or sound value iteration, certified
      direct solves) and their largest gap.
    - `method`, `layout`: the numerical method and the device layout of the
      last solve (`"host"` for solves on the host: LU, scipy's GMRES,
      Gauss-Seidel), where there was one.
    - `precision`: the float type that solve ran in (`"fp64"` or `"fp32"`;
      host solves, uniformisation and bounded steps are always `"fp64"`).
    - `printed`: for a top-level `filter(print|printall|argmin|argmax,
      ...)`, the states and values PRISM prints (`props.filters.FilterOutput`),
      else None.
    - `timing`: seconds per stage: `build` (the state space), `precompute`
      (graph algorithms: prob0/prob1, BSCCs, end components, bounds),
      `layout` (device matrices), `solve` (numerical solves, waited for),
      `total` (the whole check, all of these but `build`).
    """

    property_text: str
    values: np.ndarray | None
    initial_states: np.ndarray
    filter_value: Any = None
    is_filter: bool = False
    status: str | None = None
    iterations: int | None = None
    residual: float | None = None
    bound_gap: float | None = None
    bound: float | None = None
    timing: dict[str, float] = field(default_factory=dict)
    #: The optimal scheduler of the top-level operator, when asked for
    #: (`jaxmc.check(..., scheduler=True)`): a memoryless
    #: `jaxmc.numerics.scheduler.Scheduler` (`choice`, `actions`, ...), or
    #: for LTL a finite-memory `jaxmc.automata.memory.MemoryScheduler`.
    scheduler: Any = None
    #: Certified lower/upper bounds per state from interval iteration (when
    #: the top-level operator was solved with it), else None.
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    method: str | None = None
    layout: str | None = None
    precision: str | None = None
    attempts: tuple[Attempt, ...] = ()
    #: The first solve that did not converge (None if all did).
    failure: Attempt | None = field(default=None, repr=False)
    #: What a top-level print/printall/argmin/argmax filter shows.
    printed: Any = field(default=None, repr=False)

    @property
    def at_initial(self) -> np.ndarray:
        if self.values is None:
            return np.full(len(self.initial_states), self.filter_value)
        return self.values[self.initial_states]

    @property
    def range(self) -> tuple[Any, Any]:
        vals = self.at_initial
        return (vals.min(), vals.max())

    @property
    def value(self) -> Any:
        if self.is_filter:
            return self.filter_value
        vals = self.at_initial
        if len(vals) == 1:
            return vals[0].item()
        if vals.dtype == bool:
            return bool(vals.all())
        lo, hi = self.range
        if lo == hi:
            return lo.item()
        raise ModelCheckingError(
            f"the model has {len(vals)} initial states, with values in [{lo}, {hi}]",
            hint="use `CheckResult.at_initial` or `.range`, or a filter such as "
            'filter(max, P=? [ ... ], "init")',
        )


def raise_on_failure(
    result: CheckResult, prop: Any = None, properties: Any = None
) -> CheckResult:
    """`result`, or the `ConvergenceError` of its first failed solve,
    located at `prop` (of `properties`): the API's one throw
    (`SolveOptions.throw`); the solves below it report their status as
    data."""
    f = result.failure
    if f is not None and f.status not in (Status.CONVERGED, Status.REFUSED):
        e = convergence_error(f.method, f.status, f.iterations, f.residual)
        tried = [a.describe() for a in result.attempts
                 if a.status not in (Status.CONVERGED, Status.REFUSED)]  # fmt: skip
        if tried:  # a fallback chain, exhausted: every method it tried
            e.message = f"every method failed: {'; '.join(tried)}; then {e.message}"
            e.args = (e._render(),)
        raise located(e, prop, properties)
    return result


def located(e: JaxmcError, prop: Any, properties: Any) -> JaxmcError:
    """`e` located at the property being checked, if it has no place of its
    own (a numerical failure, a limit reached): the user sees which property
    of which file it came from."""
    span = getattr(prop, "span", None)
    if e.span is None and span is not None:
        e.span = span
        source = getattr(properties, "source", None)
        if source is not None:
            return e.with_source(source, getattr(properties, "file", None))
        e.args = (e._render(),)
    return e
