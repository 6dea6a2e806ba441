"""Stage 6: properties. Plans a checked property (`plan`) and executes the plan
eagerly on `jaxmc.numerics` (`check`)."""

from . import plan as plan
from .check import check_property as check_property, state_formulas as state_formulas
from .result import CheckResult as CheckResult, raise_on_failure as raise_on_failure
from .threshold import UndecidedError as UndecidedError
