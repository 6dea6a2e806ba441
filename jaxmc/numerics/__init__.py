"""Stages 4-5 numerics: the model-checking helpers (Storm's
`SparseDtmcPrctlHelper` style). They take an `ExplicitModel` and boolean
state masks, know nothing of formulas, and return per-state values.

Model checking needs float64 by default, as PRISM uses doubles (with float32 a
relative criterion of 1e-6 is at the rounding level); importing this package
turns on `jax_enable_x64`.
"""

from .._config import enable_x64


enable_x64()

from .bounded import (  # noqa: E402
    bounded_until as bounded_until,
    next_probabilities as next_probabilities,
)
from .ctl import (  # noqa: E402
    exists_globally as exists_globally,
    exists_next as exists_next,
    exists_until as exists_until,
    forall_globally as forall_globally,
    forall_next as forall_next,
    forall_until as forall_until,
)
from .ctmc import (  # noqa: E402
    ctmc_bounded_until as ctmc_bounded_until,
    ctmc_cumulative_rewards as ctmc_cumulative_rewards,
    ctmc_instantaneous_rewards as ctmc_instantaneous_rewards,
    ctmc_reachability_rewards as ctmc_reachability_rewards,
    embedded_dtmc as embedded_dtmc,
    exit_rates as exit_rates,
    transient_probabilities as transient_probabilities,
    uniformise as uniformise,
)
from .device import DeviceModel as DeviceModel  # noqa: E402
from .foxglynn import fox_glynn as fox_glynn  # noqa: E402
from .graph import (  # noqa: E402
    bsccs as bsccs,
    mecs as mecs,
    prob0 as prob0,
    prob0A as prob0A,
    prob0E as prob0E,
    prob01 as prob01,
    prob1 as prob1,
    prob1A as prob1A,
    prob1E as prob1E,
)
from .matrices import LAYOUTS as LAYOUTS  # noqa: E402
from .reach import until_probabilities as until_probabilities  # noqa: E402
from .result import Attempt as Attempt, NumericResult as NumericResult  # noqa: E402
from .reward_bounded import reward_bounded_until as reward_bounded_until  # noqa: E402
from .rewards import (  # noqa: E402
    cumulative_rewards as cumulative_rewards,
    instantaneous_rewards as instantaneous_rewards,
    reachability_rewards as reachability_rewards,
    total_rewards as total_rewards,
)
from .steady import (  # noqa: E402
    stationary_distributions as stationary_distributions,
    steady_state as steady_state,
)
from .steady_values import (  # noqa: E402
    long_run_rewards as long_run_rewards,
    steady_state_values as steady_state_values,
)
