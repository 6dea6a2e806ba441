"""Numbers as PRISM's Java code writes them, for files that must match
PRISM's byte for byte.

- `java_double`: Java's `Double.toString` (`1.0`, `0.125`, `1.0E-7`,
  `Infinity`): what PRISM writes for a double in vectors (`-exportvector`)
  and filter printouts.
- `format_g12`: PRISM's `PrismUtils.formatDouble(12, d)`, Java's `%.12g`
  without trailing zeros (`1`, `0.78125`, `1e-05`): what `Values.valToString`
  writes for doubles in exported results (`-exportresults`).
- `value_text`: `Values.valToString` of any result or constant value
  (booleans `true`/`false`, integers in decimal, doubles by `format_g12`).

Java takes the digits of a double from its shortest decimal representation
(the digits of Python's `repr`) and rounds those half up for `%g`.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any


def _special(v: float) -> str | None:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return None


def java_double(v: float) -> str:
    """Java's `Double.toString(v)`."""
    v = float(v)
    special = _special(v)
    if special is not None:
        return special
    if v == 0.0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    sign, digits, exp = Decimal(repr(v)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exp  # the decimal point after this many digits
    minus = "-" if sign else ""
    if 1e-3 <= abs(v) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{text}"
        whole = text[:point].ljust(point, "0")
        frac = text[point:] or "0"
        return f"{minus}{whole}.{frac}"
    return f"{minus}{text[0]}.{text[1:] or '0'}E{point - 1}"


_TRAILING = re.compile(r"\.0+(e|$)")
_TRAILING2 = re.compile(r"(\.[0-9]*?)0+(e|$)")


def format_g12(v: float, precision: int = 12) -> str:
    """PRISM's `formatDouble(precision, v)`: Java's `%.{precision}g`, then
    trailing zeros (and a bare point) removed."""
    v = float(v)
    special = _special(v)
    if special is not None:
        return special
    if v == 0.0:
        text = "0." + "0" * (precision - 1)
        text = ("-" if math.copysign(1.0, v) < 0 else "") + text
    else:
        d = Decimal(repr(v))
        exp10 = d.adjusted()
        q = d.quantize(Decimal(1).scaleb(exp10 - precision + 1), ROUND_HALF_UP)
        if q.adjusted() != exp10:  # rounded up to the next power of ten
            exp10 = q.adjusted()
            q = q.quantize(Decimal(1).scaleb(exp10 - precision + 1), ROUND_HALF_UP)
        if Decimal("1e-4") <= abs(q) < Decimal(10) ** precision:
            text = format(q, "f")
        else:
            mant = q.scaleb(-exp10)
            text = f"{format(mant, 'f')}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    text = _TRAILING.sub(r"\1", text, count=1)
    return _TRAILING2.sub(r"\1\2", text, count=1)


def value_text(v: Any) -> str:
    """PRISM's `Values.valToString(v)`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if hasattr(v, "item"):  # numpy scalars
        return value_text(v.item())
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_g12(v)
    return str(v)


def java_text(v: Any) -> str:
    """Java's `String.valueOf(v)` for a PRISM value (`Double.toString` for
    doubles)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if hasattr(v, "item"):
        return java_text(v.item())
    if isinstance(v, float):
        return java_double(v)
    return str(v)
