"""PRISM's regression suite (`../shared/models/prism-tests`) as test cases.

Each property in a `.props` file is preceded by `// RESULT: value` comments
(optionally per constant setting: `// RESULT (N=2): 0.5`); `.args` files give
one configuration per line (`-const N=2 -epsilon 1e-8 ...`). This module finds
the in-scope tests and turns each (model, properties file, configuration,
property) into a `Case` with its expected value.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import corpus


SHARED = corpus.SHARED_MODELS
SUITE = corpus.TESTS
#: In scope (see ../shared/README.md).
IN_SCOPE_DIRS = corpus.TEST_DIRS
MODEL_SUFFIXES = corpus.MODEL_SUFFIXES
model_type_keyword = corpus.model_type_keyword

# Switches that change nothing for us (engines, output, precomputation).
_IGNORED = {
    "-ex", "-explicit", "-mtbdd", "-sparse", "-hybrid", "-m", "-s", "-h",
    "-nopre", "-fixdl", "-topological", "-hybrid-explicit", "-hybrid-const",
    "-m-ex", "-gs-explicit", "-cuddepsilon", "-transientmethod", "-exportresults",
    "-exportmodel", "-exportlabels", "-exportvector", "-exportstrat",
    "-exporttarget", "-exportproplabels", "-convprog",
    "-nossdetect", "-nofair", "-pathviaautomata",
}  # fmt: skip
_TAKES_VALUE = {
    "-cuddepsilon", "-transientmethod", "-exportresults", "-exportmodel",
    "-exportlabels", "-exportvector", "-exportstrat", "-exporttarget",
    "-exportproplabels", "-gridresolution", "-paretoepsilon", "-ptamethod",
    "-importresults",
}  # fmt: skip
_METHODS = {
    "-jacobi": "jacobi", "-power": "power", "-gs": "gauss_seidel",
    "-gaussseidel": "gauss_seidel", "-bgs": "gauss_seidel", "-pgs": "gauss_seidel",
    "-valiter": "value_iteration", "-ii": "interval_iteration",
    "-politer": "value_iteration", "-modpoliter": "value_iteration",
    "-lp": "value_iteration",
}  # fmt: skip
# Switches that put a configuration out of scope, with the reason.
_OUT_OF_SCOPE = {
    "-exact": "exact (rational) arithmetic engine",
    "--exact": "exact (rational) arithmetic engine",
    "-param": "parametric model checking (rational functions)",
    "-sim": "statistical model checking (simulation)",
    "-ptamethod": "probabilistic timed automata",
    "-importresults": "imported results",
    "-fair": "fairness constraints",
    "-mdp": "model type conversion (-mdp)",
    "-dtmc": "model type conversion (-dtmc)",
    "-ctmc": "model type conversion (-ctmc)",
}  # fmt: skip


@dataclass(frozen=True)
class Config:
    """One line of an `.args` file, as options for jaxmc."""

    consts: str = ""
    method: str | None = None
    epsilon: float | None = None
    relative: bool = True
    max_iters: int | None = None
    only_property: int | None = None  # -prop N (1-based)
    prob_checks: bool = True  # -noprobchecks turns them off
    skip: str | None = None

    @property
    def label(self) -> str:
        return self.consts or "-"


@dataclass(frozen=True)
class Case:
    model: Path
    props: Path
    config: Config
    index: int  # 0-based position of the property in the file
    line: int  # line of the property in the props file
    expected: str  # the raw expected value
    consts: str  # the concrete constants this expectation is for
    skip: str | None = field(default=None)

    @property
    def id(self) -> str:
        rel = self.props.relative_to(SUITE)
        c = f"[{self.consts}]" if self.consts else ""
        return f"{rel}:{self.line}{c}"


def in_scope_models() -> list[Path]:
    out = []
    for d in IN_SCOPE_DIRS:
        root = SUITE / d
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.suffix in MODEL_SUFFIXES and p.is_file():
                if model_type_keyword(p) in corpus.IN_SCOPE_TYPES:
                    out.append(p)
    return out


def props_files(model: Path) -> list[Path]:
    """`x.pm.props` and `x.pm.<anything>.props`."""
    name = model.name
    return sorted(
        p
        for p in model.parent.iterdir()
        if p.suffix == ".props" and (p.name == name + ".props" or p.name.startswith(name + "."))
    )


def parse_args_line(line: str) -> Config:
    tokens = shlex.split(line, comments=False)
    consts: list[str] = []
    kw: dict = {}
    i = 0
    while i < len(tokens):
        t = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if t in ("-const", "--const"):
            consts.append(nxt or "")
            i += 2
            continue
        if t in ("-e", "-epsilon"):
            kw["epsilon"] = float(nxt)
            i += 2
            continue
        if t == "-maxiters":
            kw["max_iters"] = int(nxt)
            i += 2
            continue
        if t == "-absolute":
            kw["relative"] = False
        elif t == "-relative":
            kw["relative"] = True
        elif t == "-noprobchecks":
            kw["prob_checks"] = False
        elif t == "-prop":
            kw["only_property"] = int(nxt)
            i += 2
            continue
        elif t in _METHODS:
            kw["method"] = _METHODS[t]
        elif t in _OUT_OF_SCOPE:
            kw.setdefault("skip", _OUT_OF_SCOPE[t])
        elif t in _IGNORED:
            pass
        else:
            kw.setdefault("skip", f"unknown switch {t}")
        i += 2 if (t in _TAKES_VALUE and nxt is not None) else 1
    return Config(consts=",".join(c for c in consts if c), **kw)


def configs(model: Path, props: Path) -> list[Config]:
    for f in (Path(str(props) + ".args"), Path(str(model) + ".args")):
        if f.is_file():
            lines = [
                ln.strip()
                for ln in f.read_text().splitlines()
                if ln.strip() and not ln.strip().startswith("#")
            ]
            if lines:
                return [parse_args_line(ln) for ln in lines]
    return [Config()]


_RESULT_RE = re.compile(r"^\s*//\s*RESULT\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def result_annotations(text: str) -> list[tuple[int, str | None, str]]:
    """(line, constants or None, expected) for every `// RESULT` comment."""
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        m = _RESULT_RE.match(line)
        if m:
            out.append((i, m.group(1), clean_expected(m.group(2))))
    return out


def clean_expected(raw: str) -> str:
    s = raw.split("//")[0].split(";")[0].strip()
    s = re.sub(r"\s+\(.*\)\s*$", "", s).strip()  # trailing "(explanation)"
    s = s.split(" = ")[0].strip()  # "5/6 = 0.833333"
    return s


def _split_consts(s: str) -> dict[str, str]:
    out = {}
    for part in s.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def matches_setting(annotation: str, setting: str) -> bool:
    """Does `// RESULT (N=2,K=3)` apply to the concrete constants `setting`?"""
    want = _split_consts(annotation)
    have = _split_consts(setting)
    return all(
        k in have and _same_number(have[k], v) for k, v in want.items()
    )


def _same_number(a: str, b: str) -> bool:
    try:
        return float(Fraction(a)) == float(Fraction(b))
    except (ValueError, ZeroDivisionError):
        return a == b


def parse_expected(s: str):
    """An expected value as a Python value: bool, float (inf/nan), or a
    marker: ("error", msg), ("approx", float, digits), ("skip", why)."""
    low = s.lower()
    if s == "?" or s == "":
        return ("skip", "no expected value given (RESULT: ?)")
    if low.startswith("error"):
        return ("error", s[5:].lstrip(":").strip())
    if low in ("true", "false"):
        return low == "true"
    if low in ("infinity", "+infinity", "inf"):
        return float("inf")
    if low in ("-infinity", "-inf"):
        return float("-inf")
    if low == "nan":
        return float("nan")
    if s.startswith("~"):
        num = s[1:]
        digits = len(num.split(".")[1]) if "." in num else 0
        return ("approx", float(num), digits)
    if s.startswith("["):
        return ("skip", "multi-objective / interval result")
    try:
        return float(Fraction(s))
    except (ValueError, ZeroDivisionError):
        pass
    if re.fullmatch(r"[-+*/()0-9.eE ]+", s):
        try:
            return float(eval(s, {"__builtins__": {}}, {}))  # digits and + - * / only
        except Exception:
            pass
    return ("skip", f"parametric or symbolic result {s!r}")
