"""Stage 5: iterative solvers (jitted `lax.while_loop`s returning a `Status`).

Model checking needs float64 by default, as PRISM uses doubles: with float32 a
relative criterion of 1e-6 is at the rounding level and iterations stall. So
importing this package turns on `jax_enable_x64`.
"""

import jax


jax.config.update("jax_enable_x64", True)

from ._gauss_seidel import gauss_seidel as gauss_seidel  # noqa: E402
from ._linear import bicgstab as bicgstab, jacobi as jacobi, power as power  # noqa: E402
from ._minmax import (  # noqa: E402
    interval_iteration as interval_iteration,
    value_iteration as value_iteration,
)
from ._results import (  # noqa: E402
    Solution as Solution,
    Status as Status,
    check_solution as check_solution,
    sup_norm as sup_norm,
)
