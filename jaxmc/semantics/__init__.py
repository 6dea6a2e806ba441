"""Stage 2: semantic analysis, from the AST to a `CheckedProgram`.

Scoping, typing, constant evaluation (with `-const` overrides), formula
expansion, module renaming and the system clause; properties files are
checked against a checked model.
"""

from .check import check_program as check_program
from .constants import (
    ConstRange as ConstRange,
    ConstValue as ConstValue,
    coerce_value as coerce_value,
    expand_constants as expand_constants,
    parse_constants as parse_constants,
    range_values as range_values,
)
from .evaluate import evaluate as evaluate, literal as literal
from .fold import fold as fold
from .program import (
    CheckedCommand as CheckedCommand,
    CheckedModule as CheckedModule,
    CheckedProgram as CheckedProgram,
    CheckedRewardItem as CheckedRewardItem,
    CheckedRewardStruct as CheckedRewardStruct,
    CheckedUpdate as CheckedUpdate,
    CheckedVar as CheckedVar,
)
from .properties import (
    CheckedProperties as CheckedProperties,
    CheckedProperty as CheckedProperty,
    check_properties as check_properties,
)
from .types import can_assign as can_assign, type_of as type_of
