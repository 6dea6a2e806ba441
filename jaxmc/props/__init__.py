"""Stage 6: properties. Walks a checked property and calls `jaxmc.numerics`."""

from .check import check_property as check_property
from .result import CheckOptions as CheckOptions, CheckResult as CheckResult
from .threshold import UndecidedError as UndecidedError
