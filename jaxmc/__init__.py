"""jaxmc: probabilistic model checking of PRISM models, array-first on JAX.

The pipeline, one sub-package per stage: `lang` (parse) → `semantics`
(check) → `explore` (build the state space) → `layout`/`kernels` (device
matrices) → `solvers`/`numerics` (iterations) → `props` (properties).
"""

import importlib.metadata

from . import errors as errors, explore as explore, lang as lang, semantics as semantics
from ._config import enable_compilation_cache as enable_compilation_cache
from .api import (
    check as check,
    load_properties as load_properties,
    parametric as parametric,
    parse_properties as parse_properties,
    solve as solve,
    sweep as sweep,
)
from .errors import (
    ConvergenceError as ConvergenceError,
    ExplorationError as ExplorationError,
    JaxmcError as JaxmcError,
    ModelCheckingError as ModelCheckingError,
    PrismSyntaxError as PrismSyntaxError,
    SemanticError as SemanticError,
    UnsupportedError as UnsupportedError,
)
from .explore import ExplicitModel as ExplicitModel
from .model import (
    Model as Model,
    build as build,
    export_drn as export_drn,
    export_model as export_model,
    import_model as import_model,
    load_drn as load_drn,
    load_model as load_model,
    load_model_string as load_model_string,
)
from .options import SolveOptions as SolveOptions
from .props import CheckResult as CheckResult
from .strategy import (
    export_strategy as export_strategy,
    format_strategy as format_strategy,
    induced_model as induced_model,
)


try:
    __version__ = importlib.metadata.version("jaxmc")
except importlib.metadata.PackageNotFoundError:  # run from a source tree
    __version__ = "0+unknown"
