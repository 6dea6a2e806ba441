"""Stage 6: properties. Walks a checked property and calls `jaxmc.numerics`."""

from .check import check_property as check_property
from .result import CheckResult as CheckResult, raise_on_failure as raise_on_failure
from .threshold import UndecidedError as UndecidedError
