"""What checking a property returns: `CheckResult`, and the options it takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelCheckingError


@dataclass(frozen=True)
class CheckOptions:
    """Numerical options, as PRISM's switches (`-epsilon`, `-relative` /
    `-absolute`, `-maxiters`, `-jacobi`, `-power`, `-bicgstab`, `-valiter`,
    `-ii`), `layout`, the device matrix of the iterative solves
    (`jaxmc.numerics.LAYOUTS`: "auto" is CSR on a CPU, a warp-segment layout
    run by the Pallas kernels on a GPU), and `precision`, their float type
    ("fp64" or "fp32"; fp32 refuses an `epsilon` below
    `jaxmc.numerics.precision.FP32_MIN_EPSILON`, 1e-6, which it cannot reach),
    and `criterion`: "sound" (every value within a certified bound of
    `epsilon`) or "change" (PRISM's criterion and default methods exactly;
    `jaxmc.numerics.methods.CRITERIA`)."""

    method: str | None = None
    epsilon: float = 1e-6
    relative: bool = True
    max_iters: int = 10000
    throw: bool = True
    layout: str = "auto"
    precision: str = "fp64"
    criterion: str = "sound"

    def __post_init__(self):
        from ..numerics.matrices import check_layout
        from ..numerics.methods import check_criterion
        from ..numerics.precision import check_precision

        check_criterion(self.criterion)
        check_layout(self.layout)
        check_precision(self.precision, self.epsilon)


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
      (`"converged"`, `"max_iters"`, ...), where there was one.
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
    scheduler: np.ndarray | None = None
    #: Certified lower/upper bounds per state from interval iteration (when
    #: the top-level operator was solved with it), else None.
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    method: str | None = None
    layout: str | None = None
    precision: str | None = None

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
