"""Stage 5: iterative solvers (jitted `lax.while_loop`s returning a `Status`).

The solvers live in private modules and are re-exported here; `progress`
(how long solves report their progress to the front end), `sor` (the
multi-right-hand-side fixed-point and SOR loops) and `adjoint` (the
implicitly differentiated solves built on them) are public.

Model checking needs float64 by default, as PRISM uses doubles: with float32 a
relative criterion of 1e-6 is at the rounding level and iterations stall. So
importing this package turns on `jax_enable_x64`.
"""

from .._config import enable_x64


enable_x64()

from ._gauss_seidel import (  # noqa: E402
    gauss_seidel as gauss_seidel,
    scc_labels as scc_labels,
    topological_order as topological_order,
)
from ._linear import (  # noqa: E402
    bicgstab as bicgstab,
    bicgstab_l_loop as bicgstab_l_loop,
    bicgstab_l_start as bicgstab_l_start,
    bicgstab_loop as bicgstab_loop,
    jacobi as jacobi,
    power as power,
)
from ._lra import (  # noqa: E402
    gain_tolerance_met as gain_tolerance_met,
    lra_value_iteration as lra_value_iteration,
)
from ._minmax import (  # noqa: E402
    interval_iteration as interval_iteration,
    value_iteration as value_iteration,
)
from ._results import (  # noqa: E402
    RUNNING as RUNNING,
    Solution as Solution,
    Status as Status,
    check_solution as check_solution,
    convergence_error as convergence_error,
    sup_norm as sup_norm,
)
from ._scc_levels import LevelPlan as LevelPlan, plan_levels as plan_levels  # noqa: E402
from ._sound import (  # noqa: E402
    sound_value_iteration as sound_value_iteration,
)
from ._topological import (  # noqa: E402
    gaps as gaps,
    topological_iteration as topological_iteration,
)
from .adjoint import (  # noqa: E402
    implicit_gmres as implicit_gmres,
    jacobi_solver as jacobi_solver,
    linear_solve as linear_solve,
)
from .sor import (  # noqa: E402
    Relevance as Relevance,
    fixed_point_columns as fixed_point_columns,
    fixed_point_loop as fixed_point_loop,
    flag as flag,
    iterate as iterate,
    method_name as method_name,
    sor as sor,
    sor_shrinking as sor_shrinking,
)
