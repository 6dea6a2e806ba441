"""The differentiable path: model-checking results as pure JAX functions of a
model's parameters (`jax.grad`, `jax.jvp`, `jax.jacrev`, `jax.vmap`).

- `parametric(model, prop, params=...)` → a `Problem`, callable on a dict of
  parameter values; compiled once, never retraced for new values.
- `sweep(model, prop, params={"p": array})` → the values at many points, in
  one vmapped computation.

`jaxmc.solve(model, prop, params=...)` and `jaxmc.sweep` are the public
spellings. See `jaxmc.diff._values` for the semantics of parameters (the
structure is fixed, as in Storm's parametric models) and
`jaxmc.diff._problem` for how each property is differentiated, and
`jaxmc.diff._status` for what happens when a solve fails. The solvers
are `jaxmc.solvers` (`sor`, `adjoint`), on the layouts of
`jaxmc.layout.sweep`.
"""

from .._config import enable_x64


enable_x64()

from ._api import (  # noqa: E402
    parametric as parametric,
    rebuild_solve as rebuild_solve,
    solve_params as solve_params,
    sweep as sweep,
    with_parameters as with_parameters,
)
from ._problem import Problem as Problem  # noqa: E402
from ._status import SolveReport as SolveReport  # noqa: E402
from ._values import (  # noqa: E402
    StateRewards as StateRewards,
    TransitionValues as TransitionValues,
    check_structure as check_structure,
)
