"""PRISM's `-exportresults FILE[:shape,...]` and `-importresults FILE`.

An experiment's results are kept per property as a `Collection`, the way
PRISM's `ResultsCollection` keeps them: over the property's own constants
(every undefined constant of the model, and those of the properties file
that the property uses), in declaration order, the last varying fastest.
Constants with several values are the *ranging* ones (table columns, matrix
axes); those with one value are printed only in the `comment` shape.

Shapes (PRISM's `ResultsExporter`): a list (`plain` tab-separated, the
default, or `csv`), `matrix` (plain or with `csv`), `dataframe` (CSV, one
row per result with the property's name) and `comment` (`// RESULT (...):
value` lines, as in PRISM's test files). With several properties each
table is headed by the property (`"name": formula`) and tables are separated
by an empty line. Values are written as PRISM's `Values.valToString`
(`jaxmc.cli.javatext`).
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import JaxmcError, ModelCheckingError, UnsupportedError
from .javatext import java_text, value_text


SHAPES = ("plain", "csv", "matrix", "dataframe", "comment")
#: PRISM's names of the shapes, for the line announcing the export.
_SHAPE_NAMES = {
    ("list", False): "list (plain text)",
    ("list", True): "list (CSV)",
    ("matrix", False): "matrix (plain text)",
    ("matrix", True): "matrix (CSV)",
    ("dataframe", True): "data frame (CSV)",
    ("comment", False): "comment",
}


@dataclass
class Collection:
    """One property's results over its constants."""

    #: The property's name (None: unnamed) and PRISM's text of the property.
    name: str | None
    text: str
    #: PRISM's name of the result ("Result", "Probability", ...).
    result_name: str = "Result"
    #: (name, values) of the constants with several values, in order.
    ranging: list[tuple[str, list[Any]]] = field(default_factory=list)
    #: (name, value) of the property's constants with a single value.
    fixed: list[tuple[str, Any]] = field(default_factory=list)
    #: ranging values (a tuple in `ranging` order) → result.
    results: dict[tuple, Any] = field(default_factory=dict)

    def set(self, setting: dict[str, Any], result: Any) -> None:
        """Record `result` for the constant `setting` (names beyond this
        property's constants are ignored)."""
        self.results[tuple(setting[n] for n, _ in self.ranging)] = result

    def rows(self):
        """(ranging values, result), the last constant varying fastest."""
        for key in itertools.product(*(vals for _, vals in self.ranging)):
            yield key, self.results.get(key, _MISSING)


class _Missing:
    def __str__(self) -> str:
        return "Error: no result"


_MISSING = _Missing()


def result_text(value: Any) -> str:
    """A result as PRISM writes it in exported results."""
    if isinstance(value, JaxmcError):
        return f"Error: {value.message}"
    if isinstance(value, tuple):  # a range over several initial states
        return f"[{value_text(value[0])},{value_text(value[1])}]"
    return value_text(value)


def parse_spec(spec: str) -> tuple[str, str, bool]:
    """`FILE[:opt,...]` → (file, shape, csv) with shape one of `list`,
    `matrix`, `dataframe`, `comment`."""
    file, shape, is_csv = spec, "list", False
    m = re.fullmatch(r"(.*?):((?:[a-z]+,)*[a-z]+)", spec)
    if m and not re.fullmatch(r"[A-Za-z]", m.group(1)):  # not a drive letter
        file = m.group(1)
        for opt in m.group(2).split(","):
            if opt not in SHAPES:
                raise UnsupportedError(
                    f"-exportresults: unknown option `{opt}`",
                    hint="options are csv, matrix, dataframe, comment "
                    "(e.g. FILE:matrix,csv)",
                )
            if opt == "csv":
                is_csv = True
            elif opt != "plain":
                shape = opt
    if shape == "dataframe":
        is_csv = True
    if shape == "comment":
        is_csv = False
    return file, shape, is_csv


def shape_name(shape: str, is_csv: bool) -> str:
    return _SHAPE_NAMES[(shape, is_csv)]


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _heading(text: str, is_csv: bool) -> str:
    return _quote(text) if is_csv else text + ":"


def export_text(collections: list[Collection], shape: str, is_csv: bool) -> str:
    """The exported results, as PRISM writes them."""
    if shape == "dataframe":
        return _dataframe(collections)
    sep = "," if is_csv else "\t"
    several = len(collections) > 1
    parts = []
    for c in collections:
        out = io.StringIO()
        if several and shape != "comment":
            out.write(_heading(c.text, is_csv) + "\n")
        if shape == "list":
            names = [n for n, _ in c.ranging]
            out.write(sep.join([*names, "Result"]) + "\n")
            for key, r in c.rows():
                out.write(sep.join([*map(value_text, key), result_text(r)]) + "\n")
        elif shape == "matrix":
            out.write(_matrix(c, sep) + "\n")
        else:  # comment
            fixed = [f"{n}={value_text(v)}" for n, v in c.fixed]
            for key, r in c.rows():
                setting = fixed + [
                    f"{n}={value_text(v)}" for (n, _), v in zip(c.ranging, key)
                ]
                where = f" ({','.join(setting)})" if setting else ""
                out.write(f"// RESULT{where}: {result_text(r)}\n")
            if several:
                out.write(c.text + "\n")
        parts.append(out.getvalue())
    return "\n".join(parts)


def _matrix(c: Collection, sep: str) -> str:
    """PRISM's `ResultsCollection.toStringMatrix`: one 2D table per value
    of all constants but the last two (headed `A=0, B\\C:`), rows the
    second-last constant, columns the last; a row for one constant."""
    consts = c.ranging
    if not consts:
        return result_text(c.results.get((), _MISSING))
    csv_ = sep == ","

    def head(text: str) -> str:
        return f'"{text}"' if csv_ else text + ":"

    if len(consts) == 1:
        name, vals = consts[0]
        body = sep.join(result_text(c.results.get((v,), _MISSING)) for v in vals)
        return f"{head(name)}\n{sep.join(map(java_text, vals))}\n{body}"
    (rname, rvals), (cname, cvals) = consts[-2], consts[-1]
    tables = []
    for outer in itertools.product(*(vals for _, vals in consts[:-2])):
        prefix = ",".join(
            f"{n}={java_text(v)}" for (n, _), v in zip(consts[:-2], outer)
        )
        title = (prefix + ", " if len(consts) > 2 else "") + f"{rname}\\{cname}"
        lines = [head(title), "".join(sep + java_text(v) for v in cvals)]
        for rv in rvals:
            cells = [result_text(c.results.get((*outer, rv, cv), _MISSING))
                     for cv in cvals]  # fmt: skip
            lines.append(java_text(rv) + sep + sep.join(cells))
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def _dataframe(collections: list[Collection]) -> str:
    columns: list[str] = []
    for c in collections:
        columns += [n for n, _ in c.ranging if n not in columns]
    names = {c.result_name for c in collections}
    result = _unique(names.pop() if len(names) == 1 else "Result", columns)
    out = [",".join(["Property", *columns, result])]
    for name, c in zip(_property_names(collections), collections):
        index = {n: i for i, (n, _) in enumerate(c.ranging)}
        for key, r in c.rows():
            cells = [value_text(key[index[n]]) if n in index else "" for n in columns]
            out.append(",".join([name, *cells, result_text(r)]))
    return "\n".join(out) + "\n"


def _unique(name: str, taken: list[str]) -> str:
    unique, i = name, 1
    while unique in taken:
        unique, i = f"{name}_{i}", i + 1
    return unique


def _property_names(collections: list[Collection]) -> list[str]:
    """PRISM's data frame names: `Property_i` for the i-th (1-based) when
    unnamed, then repeated names made unique with `_1`, `_2`, ..."""
    names = [c.name or f"Property_{i}" for i, c in enumerate(collections, 1)]
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    out = []
    for n in names:
        if counts[n] > 1:
            for i in range(1, counts[n] + 1):
                if f"{n}_{i}" not in counts:
                    counts[f"{n}_{i}"] = 1
                    n = f"{n}_{i}"
                    break
        out.append(n)
    return out


# ---------------------------------------------------------------- import


def import_dataframe(path: str, text: str) -> list[Collection]:
    """The collections of a data frame CSV (PRISM's `ResultsImporter`): the
    `Property` column (else the first) names each row's property, the
    `Result` column (else the last) holds the results, the others are
    constants; a constant left empty in every row of a property is not one
    of its constants."""
    rows = list(csv.reader(io.StringIO(text.replace("\r\n", "\n"))))
    rows = [r for r in rows if r]
    if not rows:
        raise ModelCheckingError(f"{path}: empty results file")
    header = rows[0]
    prop = header.index("Property") if "Property" in header else 0
    res = header.index("Result") if "Result" in header else len(header) - 1
    if prop == res:
        raise ModelCheckingError(
            f"{path}: cannot find the property and result columns",
            hint='name them "Property" and "Result" in the header',
        )
    consts = [i for i in range(len(header)) if i not in (prop, res)]
    by_name: dict[str, list[list[str]]] = {}
    for line, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise ModelCheckingError(
                f"{path}:{line}: {len(r)} fields, the header has {len(header)}"
            )
        by_name.setdefault(r[prop], []).append(r)
    out = []
    for name, records in by_name.items():
        used = [i for i in consts if any(rec[i] for rec in records)]
        ranging = []
        for i in used:
            vals = list(dict.fromkeys(_parse_value(rec[i]) for rec in records))
            ranging.append((header[i], vals))
        c = Collection(name, f'"{name}": {name}', header[res], ranging)
        for rec in records:
            c.results[tuple(_parse_value(rec[i]) for i in used)] = _parse_value(
                rec[res]
            )
        out.append(c)
    return out


def _parse_value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    try:
        v = int(text)
        if -(2**31) <= v < 2**31:
            return v
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
