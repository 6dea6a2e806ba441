"""Parsing PRISM's `-const` switch, and expanding ranged constants.

PRISM's `-const` takes a comma-separated list `N=3,p=0.2,b=true`, where an
integer or double constant may also be given a range for an experiment:
`N=1:9` (step 1) or `N=1:2:9` (low:step:high). The values are parsed without
knowing the constants' declared types (the model may not have been read yet),
so a value keeps its spelling until `coerce_value` / `expand_constants` gives
it a type. This follows `prism.UndefinedConstants` / `prism.DefinedConstant`:

- a double range iterates `low + i*step` while it is `<= high + 0.001*step`
  (PRISM's tolerance for rounding), so `0:0.1:1` has 11 values;
- an int range iterates `low, low+step, ...` up to `high` (the last value may
  be below `high` when the step does not divide the width);
- step must be positive and no larger than `high - low`; `high < low` is an
  error; booleans cannot be ranges;
- doubles accept PRISM's fraction syntax `1/3`;
- when several constants are ranged, the *last* one varies fastest (PRISM
  iterates in declaration order with the last constant as the innermost loop).
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import SemanticError
from ..lang import ast
from .program import CheckedProgram
from .types import suggest


Value = int | float | bool

#: PRISM's tolerance when iterating a double range (`DOUBLE_PRECISION_CORRECTION`).
DOUBLE_PRECISION_CORRECTION = 0.001


@dataclass(frozen=True)
class ConstValue:
    """A single value `N=3`, kept as text until its type is known."""

    text: str

    def default(self) -> Value:
        """The value with the type its spelling suggests (int, double, bool)."""
        return _guess(self.text)


@dataclass(frozen=True)
class ConstRange:
    """A range `low:high` or `low:step:high` (texts; `step` None means 1)."""

    low: str
    high: str
    step: str | None = None


ConstSpec = ConstValue | ConstRange

_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*$")
_INT = re.compile(r"[+-]?\d+$")

#: How a constant setting is written (the hint of every syntax error).
SYNTAX_HINT = (
    "write constants as `N=3,p=0.5,b=true` (names of undefined constants, "
    "one `=` each, values separated by commas; a range: `N=1:10` or `N=1:2:10`)"
)


class MissingConstantsError(SemanticError):
    """Undefined constants that were given no value.

    The error carries the constants as data (`names`, and their declared
    `types`; `in_properties` says whether they belong to a properties file),
    so that each front end can say how to give them values: the default hint
    is the command line's (`--const N=...`, PRISM's `-const`), and
    `jaxmc.api` replaces it with the Python form (`constants={"N": ...}`)
    through `rehint`.
    """

    def __init__(
        self,
        names: Sequence[str],
        span: ast.Span | None = None,
        *,
        types: Mapping[str, object] | None = None,
        in_properties: bool = False,
        source: str | None = None,
    ):
        self.names = tuple(names)
        self.types = dict(types or {})
        self.in_properties = in_properties
        shown = ", ".join(f"`{n}`" for n in self.names)
        plural = "s" if len(self.names) > 1 else ""
        super().__init__(
            f"undefined constant{plural} {shown} must be given a value",
            span,
            source=source,
            hint=command_line_hint(self.names),
        )

    def rehint(self, hint: str) -> MissingConstantsError:
        """Replace the hint (e.g. by the one of another front end)."""
        self.hint = hint
        self.args = (self._render(),)
        return self


def command_line_hint(names: Sequence[str]) -> str:
    """How to give `names` values on jaxmc's command line (PRISM's `-const`)."""
    return "use --const " + ",".join(f"{n}=..." for n in names)


def parse_constants(text: str | Iterable[str] | None) -> dict[str, ConstSpec]:
    """Parse a `-const` argument such as `"N=3,p=0.2,K=1:2:9,b=true"`.

    Several strings (e.g. repeated `--const` options) may be given as an
    iterable; they are concatenated. Blank parts are ignored (as in PRISM).

    **Returns:** name → `ConstValue` or `ConstRange`, in the order given.

    **Raises:** `SemanticError` on a malformed part or a name given twice.
    """
    if text is None:
        return {}
    if not isinstance(text, str):
        text = ",".join(t for t in text if t)
    out: dict[str, ConstSpec] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, rhs = part.partition("=")
        name, rhs = name.strip(), rhs.strip()
        if not eq or not name or not rhs:
            what = "a name" if not name else "a value" if eq else "`=`"
            raise SemanticError(
                f"invalid constant definition `{part}`: {what} is missing",
                hint=SYNTAX_HINT,
            )
        if not _NAME.match(name):
            raise SemanticError(
                f"invalid constant name `{name}` in `{part}`", hint=SYNTAX_HINT
            )
        if "=" in rhs:
            raise SemanticError(
                f"invalid constant definition `{part}`: more than one `=`",
                hint=SYNTAX_HINT,
            )
        if rhs.endswith(":"):
            raise SemanticError(
                f"invalid range `{rhs}` for constant `{name}`",
                hint="a range is `low:high` or `low:step:high`",
            )
        args = [a.strip() for a in rhs.split(":")]
        if any(not a for a in args) or len(args) > 3:
            raise SemanticError(
                f"invalid range `{rhs}` for constant `{name}`",
                hint="a range is `low:high` or `low:step:high`",
            )
        if name in out:
            raise SemanticError(f"duplicate definitions for constant `{name}`")
        if len(args) == 1:
            out[name] = ConstValue(args[0])
        elif len(args) == 2:
            out[name] = ConstRange(args[0], args[1])
        else:
            out[name] = ConstRange(args[0], args[2], args[1])
    return out


def _guess(text: str) -> Value:
    if text == "true":
        return True
    if text == "false":
        return False
    if _INT.match(text):
        return int(text)
    try:
        return parse_double(text)
    except ValueError:
        raise SemanticError(f"`{text}` is not a number or boolean") from None


def parse_double(text: str) -> float:
    """Java's `Double.parseDouble`, plus PRISM's fraction syntax `a/b` (left
    associative, as `DefinedConstant.parseDouble`)."""
    i = text.rfind("/")
    if i < 0:
        t = text.strip()
        if t.lower().rstrip("df") in ("nan", "infinity", "+infinity", "-infinity"):
            return float(t.lower().rstrip("df").replace("infinity", "inf"))
        return float(t.rstrip("dDfF") if re.match(r".*\d[dDfF]$", t) else t)
    if i == 0 or i == len(text) - 1:
        raise ValueError("illegal fraction syntax")
    num, den = parse_double(text[:i]), parse_double(text[i + 1 :])
    if den == 0:
        return math.copysign(math.inf, num) if num != 0 else math.nan
    return num / den


def coerce_value(name: str, value: object, type_: ast.ValueType) -> Value:
    """Convert an override value (text, `ConstValue` or Python value) to the
    declared type of constant `name`, as PRISM does for `-const`: an int
    constant needs an integer spelling (`3`, not `3.0`), a double accepts
    ints, a boolean needs `true`/`false`."""
    if isinstance(value, ConstRange):
        raise SemanticError(
            f"constant `{name}` is given a range; expand ranges with "
            "`expand_constants` first"
        )
    if isinstance(value, ConstValue):
        value = value.text
    if type_ == ast.ValueType.BOOL:
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise SemanticError(
            f"value `{value}` for constant `{name}` is not a valid Boolean",
            hint=f"`{name}` is declared `bool`: write `{name}=true` or `{name}=false`",
        )
    if type_ == ast.ValueType.INT:
        if isinstance(value, bool):
            raise SemanticError(
                f"value `{value}` for constant `{name}` is not a valid integer"
            )
        if isinstance(value, int):
            v = value
        elif isinstance(value, str) and _INT.match(value.strip()):
            v = int(value.strip())
        else:
            raise SemanticError(
                f"value `{value}` for constant `{name}` is not a valid integer",
                hint=f"`{name}` is declared `int`: write e.g. `{name}=3`",
            )
        if not -(2**31) <= v < 2**31:
            raise SemanticError(
                f"value `{value}` for constant `{name}` is out of the 32-bit int range"
            )
        return v
    # double
    if isinstance(value, bool):
        raise SemanticError(
            f"value `{value}` for constant `{name}` is not a valid double"
        )
    if isinstance(value, (int, float)):
        return float(value)
    try:
        d = parse_double(str(value))
    except ValueError:
        raise SemanticError(
            f"value `{value}` for constant `{name}` is not a valid double",
            hint=f"`{name}` is declared `double`: write e.g. `{name}=0.5` or "
            f"`{name}=1/3`",
        ) from None
    if not math.isfinite(d):
        raise SemanticError(
            f"value `{value}` for constant `{name}` is not a valid double"
        )
    return d


def range_values(
    name: str, spec: ConstSpec, type_: ast.ValueType | None = None
) -> list[Value]:
    """The values of one `-const` entry, in PRISM's order. `type_` None means
    "guess from the spelling" (int if all parts are integers, else double)."""
    if isinstance(spec, ConstValue):
        if type_ is None:
            return [spec.default()]
        return [coerce_value(name, spec, type_)]
    if type_ is None:
        parts = [spec.low, spec.high] + ([spec.step] if spec.step else [])
        type_ = (
            ast.ValueType.INT
            if all(_INT.match(p) for p in parts)
            else ast.ValueType.DOUBLE
        )
    if type_ == ast.ValueType.BOOL:
        raise SemanticError(f"cannot define ranges for Boolean constant `{name}`")
    lo = coerce_value(name, spec.low, type_)
    hi = coerce_value(name, spec.high, type_)
    step = (
        coerce_value(name, spec.step, type_)
        if spec.step is not None
        else type_cast(1, type_)
    )
    if hi < lo:
        raise SemanticError(
            f"low value {lo} for constant `{name}` is higher than the high value {hi}"
        )
    if spec.step is not None:
        if step == 0:
            raise SemanticError(f"step value for constant `{name}` cannot be zero")
        if step < 0:
            raise SemanticError(f"step value for constant `{name}` must be positive")
        if step > hi - lo:
            raise SemanticError(
                f"step value {step} for constant `{name}` is bigger than the "
                f"difference between {lo} and {hi}"
            )
    out: list[Value] = []
    if type_ == ast.ValueType.INT:
        v = lo
        while v <= hi:
            out.append(v)
            v = lo + len(out) * step
    else:
        v = float(lo)
        while v <= hi + DOUBLE_PRECISION_CORRECTION * step:
            out.append(v)
            v = lo + len(out) * step
    return out


def type_cast(v: Value, type_: ast.ValueType) -> Value:
    return float(v) if type_ == ast.ValueType.DOUBLE else v


def expand_constants(
    specs: Mapping[str, ConstSpec] | str | None,
    types: Mapping[str, ast.ValueType] | None = None,
    order: Sequence[str] | None = None,
) -> list[dict[str, Value]]:
    """Expand ranged constants into the list of concrete settings.

    **Arguments:**
    - `specs`: the output of `parse_constants` (or the `-const` text itself).
    - `types`: declared types of the constants, when known; names missing
      from it are typed from their spelling.
    - `order`: the order in which PRISM iterates (declaration order: model
      constants, then property constants); names not in it come after, in the
      order given. The last constant varies fastest.

    **Returns:** one dict name → value per setting (a single `{}` when there
    are no constants).
    """
    if isinstance(specs, str) or specs is None:
        specs = parse_constants(specs)
    types = types or {}
    names = [n for n in (order or ()) if n in specs]
    names += [n for n in specs if n not in names]
    axes = [range_values(n, specs[n], types.get(n)) for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*axes)]


def constant_setting(constants: Mapping[str, object] | str | None) -> dict[str, object]:
    """A constant setting (a `-const` string `"N=3,p=0.2"` or a mapping name →
    value) as name → value, checked: names are identifiers, values are
    numbers, Booleans or their spellings (`ConstValue`), and no constant is
    given a range (expand ranges into settings with `expand_constants`).

    **Raises:** `SemanticError` with a hint showing the syntax.
    """
    if constants is None:
        return {}
    if isinstance(constants, str):
        specs: Mapping[str, object] = parse_constants(constants)
    elif isinstance(constants, Mapping):
        specs = constants
    else:
        raise SemanticError(
            f'constants should be a string like "N=3,p=0.5" or a mapping, not '
            f"{type(constants).__name__}",
            hint=SYNTAX_HINT,
        )
    out: dict[str, object] = {}
    for name, v in specs.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise SemanticError(f"invalid constant name {name!r}", hint=SYNTAX_HINT)
        if isinstance(v, ConstRange):
            step = f"{v.step}:" if v.step is not None else ""
            raise SemanticError(
                f"constant `{name}` is given a range `{v.low}:{step}{v.high}`, but "
                "here each constant takes one value",
                hint="load once per value (`jaxmc.semantics.expand_constants` lists "
                "the settings of a range); the command line runs ranges as experiments",
            )
        if isinstance(v, str):
            if "=" in v or "," in v or not v.strip():
                raise SemanticError(
                    f"invalid value {v!r} for constant `{name}`", hint=SYNTAX_HINT
                )
            v = ConstValue(v.strip())
        elif isinstance(v, bool) or isinstance(v, ConstValue):
            pass
        elif isinstance(v, numbers.Integral):
            v = int(v)
        elif isinstance(v, numbers.Real):
            v = float(v)
        else:
            raise SemanticError(
                f"invalid value {v!r} for constant `{name}`: expected a number or a "
                "Boolean",
                hint=SYNTAX_HINT,
            )
        out[name] = v
    return out


def _settable(checked: CheckedProgram, pf: ast.PropertiesFile) -> str:
    names = [c.name for c in checked.program.constants if c.value is None]
    names += [c.name for c in pf.constants if c.value is None]
    if not names:
        return "neither the model nor the properties have undefined constants"
    return "the undefined constants are: " + ", ".join(f"`{n}`" for n in names)


def check_setting(
    pf: ast.PropertiesFile,
    checked: CheckedProgram,
    explicit: Mapping[str, object],
    merged: Mapping[str, object],
    known: Iterable[str],
) -> None:
    """PRISM's `-const` rules across a model and a properties file `pf`:
    a name of `explicit` (the setting given with the properties) that the
    model declares must be one of its undefined constants, with the value the
    model was checked with; every name of `merged` (the model's setting and
    `explicit`) must be declared by the model, by `pf` or be in `known`
    (declared by other properties files of the model). Values for constants
    `pf` defines are refused when its constants are resolved.

    **Raises:** `SemanticError` naming the constants that can be set."""
    model = {c.name: c for c in checked.program.constants}
    for name, v in explicit.items():
        d = model.get(name)
        if d is None:
            continue
        if d.value is not None:
            raise SemanticError(
                f"constant `{name}` is defined in the model, so it cannot be given a "
                "value",
                hint=_settable(checked, pf),
            )
        if name in checked.parameters:
            raise SemanticError(
                f"constant `{name}` is a parameter of the model (symbolic): its values "
                "go in `params=`, not in the constants",
            )
        if coerce_value(name, v, d.type) != checked.constants.get(name):
            shown = v.text if isinstance(v, ConstValue) else v
            raise SemanticError(
                f"constant `{name}` of the model was set to "
                f"{checked.constants.get(name)} "
                f"when the model was loaded; it cannot be changed to {shown} for the "
                "properties",
                hint="load the model again with the new value",
            )
    declared = {c.name for c in pf.constants} | set(model) | set(known)
    unknown = [n for n in merged if n not in declared]
    if unknown:
        shown = ", ".join(f"`{n}`" for n in unknown)
        raise SemanticError(
            f"unknown constant{'s' if len(unknown) > 1 else ''} {shown}: neither the "
            "model nor the properties declare "
            + ("them" if len(unknown) > 1 else "it"),
            hint=" ".join(
                h
                for h in (
                    suggest(unknown[0], declared - set(known)),
                    _settable(checked, pf),
                )
                if h
            ),
        )
