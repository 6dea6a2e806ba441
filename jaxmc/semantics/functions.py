"""PRISM's operators and functions, defined once, on an array namespace `xp`
(numpy or jax.numpy) so that every evaluator shares them: the scalar
evaluation of constants (`jaxmc.semantics.evaluate`), the builder's
vectorised evaluation (`jaxmc.explore.lower`, numpy) and the parametric path
(`jaxmc.explore.lower.lower_parametric`, jax.numpy, traced).

The semantics are those of PRISM's floating-point evaluation
(`parser.ast.ExpressionBinaryOp/ExpressionFunc.evaluate`):

- `+ - *` and unary `-` of ints are ints; a result outside the 32-bit range is
  an error (`Math.addExact` & co.): `int_out_of_range` says where;
- `/` is always IEEE double division (`x/0` is `±Infinity` or `NaN`);
- `pow(a, b)` of ints is `Math.pow` on the doubles, then an exact conversion
  to int: a negative exponent or a result outside the 32-bit range is an
  error (`ipow`). With a double operand it is `Math.pow` (`fpow`: C's `pow`
  but for a NaN exponent and `(±1)^±Infinity`, which are NaN);
- `mod(i, j)` is the non-negative remainder (`rem < 0 ? rem + j : rem`); a
  divisor `j <= 0` is an error (`imod`);
- `floor`, `ceil`, `round` give ints (`round(x) = floor(x + 0.5)`); a
  non-finite argument or a result outside the 32-bit range is an error;
- `log(x, b) = ln(x) / ln(b)`, never an error;
- `min`/`max` of doubles fold left as `(d < acc) ? d : acc` (`fmin`, `fmax`):
  a NaN never replaces the running value, a NaN first argument stays;
- `=` on doubles is `Double.equals` (`deq`): NaN equals NaN, `0.0` differs
  from `-0.0`.

Functions that can fail come with a `*_bad` twin giving the mask of failing
entries; the value function returns a harmless value (0) there, so that the
vectorised callers can compute on a whole batch and raise only where the
value is needed (PRISM's lazy `| & => ? :`).
"""

from __future__ import annotations


INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


def int_out_of_range(x):
    """Where an int result lies outside PRISM's 32-bit `int`."""
    return (x < INT_MIN) | (x > INT_MAX)


def _f64(xp, x):
    return xp.asarray(x, dtype=xp.float64)


def _ipow_double(xp, a, b):
    # PRISM: `Math.pow` on the doubles, then an exact conversion to int
    return xp.power(_f64(xp, a), _f64(xp, b))


def ipow_bad(xp, a, b):
    """Where int `pow(a, b)` fails: negative exponent, result beyond 32 bits."""
    res = _ipow_double(xp, a, b)
    return (xp.asarray(b) < 0) | _int_bad(xp, res)


def ipow(xp, a, b):
    """Int `pow(a, b)` (0 where `ipow_bad`)."""
    res = _ipow_double(xp, a, b)
    bad = (xp.asarray(b) < 0) | _int_bad(xp, res)
    return xp.where(bad, 0.0, res).astype(xp.int64)


def imod_bad(xp, a, b):
    """Where `mod(a, b)` fails: a non-positive divisor."""
    return xp.asarray(b) <= 0


def imod(xp, a, b):
    """`mod(a, b)`, non-negative for a positive divisor (0 where `imod_bad`)."""
    a = xp.asarray(a, dtype=xp.int64)
    b = xp.asarray(b, dtype=xp.int64)
    return xp.mod(a, xp.where(b <= 0, 1, b))


def _int_bad(xp, x):
    return ~((x >= INT_MIN) & (x <= INT_MAX))  # NaN compares false


def _to_int(xp, x):
    return xp.where(_int_bad(xp, x), 0.0, x).astype(xp.int64)


def _floor(xp, x):
    return xp.floor(_f64(xp, x))


def _ceil(xp, x):
    return xp.ceil(_f64(xp, x))


def _round(xp, x):
    return xp.floor(_f64(xp, x) + 0.5)


#: `name -> the double before the conversion to int` of floor, ceil, round.
ROUNDING = {"floor": _floor, "ceil": _ceil, "round": _round}


def rounding(xp, func: str, x):
    """`floor(x)`, `ceil(x)` or `round(x)` as an int (0 where it fails)."""
    return _to_int(xp, ROUNDING[func](xp, x))


def rounding_bad(xp, func: str, x):
    """Where `floor`/`ceil`/`round` fails: NaN, infinite, beyond 32 bits."""
    return _int_bad(xp, ROUNDING[func](xp, x))


def fdiv(xp, a, b):
    """`a / b`: IEEE double division."""
    return xp.true_divide(_f64(xp, a), _f64(xp, b))


def fpow(xp, a, b):
    """`pow(a, b)` with a double operand: Java's `Math.pow`, which is C's
    `pow` except that a NaN exponent, and `(±1)^±Infinity`, give NaN."""
    a, b = _f64(xp, a), _f64(xp, b)
    nan = xp.isnan(b) | ((xp.abs(a) == 1.0) & xp.isinf(b))
    return xp.where(nan, xp.nan, xp.power(a, b))


def flog(xp, x, b):
    """`log(x, b) = ln(x) / ln(b)`."""
    return xp.log(_f64(xp, x)) / xp.log(_f64(xp, b))


def fmin(xp, acc, d):
    """One step of PRISM's double `min`: `(d < acc) ? d : acc`."""
    acc, d = _f64(xp, acc), _f64(xp, d)
    return xp.where(d < acc, d, acc)


def fmax(xp, acc, d):
    """One step of PRISM's double `max`: `(d > acc) ? d : acc`."""
    acc, d = _f64(xp, acc), _f64(xp, d)
    return xp.where(d > acc, d, acc)


def deq(xp, a, b):
    """`=` on doubles: Java's `Double.equals` (NaN = NaN, 0.0 ≠ -0.0)."""
    a, b = _f64(xp, a), _f64(xp, b)
    same = (a == b) & (xp.signbit(a) == xp.signbit(b))
    return same | (xp.isnan(a) & xp.isnan(b))


def dne(xp, a, b):
    """`!=` on doubles: not `Double.equals`."""
    return ~deq(xp, a, b)
