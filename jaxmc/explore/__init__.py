"""Stage 3: state-space construction (`CheckedProgram` → `ExplicitModel`),
expression lowering, and PRISM's explicit model files."""

from .builder import build as build
from .explicit_import import import_explicit as import_explicit
from .formats import (
    export_explicit as export_explicit,
    format_lab as format_lab,
    format_srew as format_srew,
    format_sta as format_sta,
    format_tra as format_tra,
    format_trew as format_trew,
)
from .growth import BuildProgress as BuildProgress
from .lower import (
    Lowered as Lowered,
    Parametric as Parametric,
    lower as lower,
    lower_parametric as lower_parametric,
)
from .model import (
    ExplicitModel as ExplicitModel,
    RewardStructure as RewardStructure,
    StateVar as StateVar,
)
from .provenance import Provenance as Provenance
