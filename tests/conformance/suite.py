"""PRISM's regression suite (`../shared/models/prism-tests`) as test cases.

Each property in a `.props` file is preceded by `// RESULT: value` comments
(optionally per constant setting: `// RESULT (N=2): 0.5`); `.args` files give
one configuration per line (`-const N=2 -epsilon 1e-8 ...`). This module finds
the in-scope tests and turns each (model, properties file, configuration,
property) into a `Case` with its expected value.
"""

from __future__ import annotations

import os
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
    "-m-ex", "-gs-explicit", "-cuddepsilon", "-transientmethod", "-convprog",
    "-nossdetect", "-nofair", "-pathviaautomata", "-test",
}  # fmt: skip
#: Switches that write a file PRISM's test mode compares with the one in the
#: folder (and `-importresults`, which reads one to write it again): the
#: comparisons jaxmc runs are in `exports.py`, the others are counted as
#: skips of category "export" (the RESULTs are still checked).
_EXPORTS = {
    "-exportresults", "-exportvector", "-exporttarget", "-exportlabels",
    "-exportproplabels", "-exportstrat", "-exportmodel", "-exporttransient",
    "-exportsteadystate", "-exporttrans", "-exporttransdot",
    "-exporttransdotstates", "-exportstates", "-exportstaterewards",
    "-exporttransrewards", "-exportmodelprecision", "-importresults",
}  # fmt: skip
_TAKES_VALUE = _EXPORTS - {"-exportmodelprecision"} | {
    "-cuddepsilon", "-transientmethod", "-gridresolution", "-paretoepsilon",
    "-ptamethod", "-importresults", "-exportmodelprecision", "-simsamples",
    "-simconf", "-simwidth", "-simapprox", "-simpathlen", "-simmethod",
    "-importmodel", "-importtrans", "-importlabels", "-importpepa", "-tr",
    "-transient",
}  # fmt: skip
#: PRISM's solution methods as `jaxmc.check(method=...)`.
_METHODS = {
    "-jacobi": "jacobi", "-power": "power", "-gs": "gauss_seidel",
    "-gaussseidel": "gauss_seidel", "-bgs": "gauss_seidel", "-pgs": "gauss_seidel",
    "-bicgstab": "bicgstab", "-valiter": "value_iteration",
    "-ii": "interval_iteration", "-intervaliter": "interval_iteration",
}  # fmt: skip
#: Switches whose configurations we cannot run, as "category: reason" (the
#: category names the missing feature; `python -m tests.conformance` counts
#: skips per category).
_OUT_OF_SCOPE = {
    "-exact": "exact: exact (rational) arithmetic engine",
    "--exact": "exact: exact (rational) arithmetic engine",
    "-param": "parametric: parametric model checking (rational functions)",
    "-sim": "simulation: statistical model checking",
    "-ptamethod": "PTA: probabilistic timed automata",
    "-importpepa": "import: PEPA models (-importpepa)",
    "-importtrans": "import: separate -importtrans/-importlabels switches",
    "-importlabels": "import: separate -importtrans/-importlabels switches",
    "-fair": "fairness: fairness constraints (-fair)",
    "-politer": "method: policy iteration / LP not implemented (-politer)",
    "-modpoliter": "method: policy iteration / LP not implemented (-modpoliter)",
    "-lp": "method: policy iteration / LP not implemented (-lp)",
    "-tr": "compute: transient probabilities (-tr) not implemented",
    "-ss": "compute: steady-state probabilities (-ss) not implemented",
    "-steadystate": "compute: steady-state probabilities (-ss) not implemented",
    "-transient": "compute: transient probabilities (-tr) not implemented",
    "-gridresolution": "POMDP: grid resolution (-gridresolution)",
    "-paretoepsilon": "multi-objective: Pareto curves (-paretoepsilon)",
}  # fmt: skip
#: Model-type switches and the model keywords they leave unchanged.
_CONVERSIONS = {
    "-dtmc": {"dtmc", "probabilistic"},
    "-ctmc": {"ctmc", "stochastic"},
    "-mdp": {"mdp", "nondeterministic"},
}


#: The environment variable that picks the stopping criterion the suite
#: runs with: "sound" (jaxmc's default) or "change" (PRISM's criterion and
#: default methods), e.g. `JAXMC_CONFORMANCE_CRITERION=change python -m
#: pytest tests/conformance`.
CRITERION_ENV = "JAXMC_CONFORMANCE_CRITERION"


def criterion() -> str:
    """The criterion the suite runs with (see `CRITERION_ENV`)."""
    value = os.environ.get(CRITERION_ENV, "sound") or "sound"
    if value not in ("sound", "change"):
        raise ValueError(f"{CRITERION_ENV}={value!r}: expected sound or change")
    return value


def category(reason: str) -> str:
    """The category of a skip reason ("LTL: ..." → "LTL")."""
    return reason.split(":", 1)[0].strip() if ":" in reason else reason


@dataclass(frozen=True)
class Config:
    """One line of an `.args` file, as options for jaxmc."""

    consts: str = ""
    method: str | None = None
    epsilon: float | None = None
    relative: bool = True
    max_iters: int | None = None
    #: `-prop N` (1-based index) or `-prop NAME`, as given
    only_property: str | None = None
    prob_checks: bool = True  # -noprobchecks turns them off
    skip: str | None = None
    #: export switches of the line (`-exportresults`, ...), which we do not run
    exports: tuple[str, ...] = ()
    #: `-importmodel SPEC` (relative to the folder) and `-dtmc/-ctmc/-mdp`
    import_model: str | None = None
    import_type: str | None = None

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
    #: "" for a RESULT; "export" for the comparison of an exported file
    tag: str = ""

    @property
    def id(self) -> str:
        rel = self.props.relative_to(SUITE)
        c = f"[{self.consts}]" if self.consts else ""
        t = f"#{self.tag}" if self.tag else ""
        return f"{rel}:{self.line}{c}{t}"


def in_scope_models() -> list[Path]:
    """DTMC/CTMC/MDP model files of the in-scope folders (`corpus.TEST_DIRS`
    recursively, `corpus.TEST_DIRS_FLAT` without subfolders)."""
    return [
        p for p in corpus.test_files()
        if p.suffix in MODEL_SUFFIXES and corpus.in_scope_type(p)
    ]  # fmt: skip


def props_files(model: Path) -> list[Path]:
    """`x.pm.props` and `x.pm.<anything>.props`."""
    name = model.name
    return sorted(
        p
        for p in model.parent.iterdir()
        if p.suffix == ".props"
        and (p.name == name + ".props" or p.name.startswith(name + "."))
    )


def parse_args_line(line: str, model_keyword: str | None = None) -> Config:
    """One line of PRISM switches as a `Config` (`model_keyword`: the model's
    type keyword, so that `-dtmc` on a DTMC changes nothing)."""
    tokens: list[str] = []
    for t in shlex.split(line, comments=True):
        name, eq, value = t.partition("=")
        # `-const=N=2` as `-const N=2`
        tokens += [name, value] if eq and name in ("-const", "--const") else [t]
    consts: list[str] = []
    kw: dict = {}
    exports: list[str] = []

    def skip(reason: str) -> None:
        kw.setdefault("skip", reason)

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
        if t in ("-maxiters", "-maxiter"):
            kw["max_iters"] = int(nxt)
            i += 2
            continue
        if t in ("-prop", "-property"):
            kw["only_property"] = nxt
            i += 2
            continue
        if t == "-importmodel":
            kw["import_model"] = nxt
            i += 2
            continue
        if t == "-absolute":
            kw["relative"] = False
        elif t == "-relative":
            kw["relative"] = True
        elif t == "-noprobchecks":
            kw["prob_checks"] = False
        elif t in _METHODS:
            kw["method"] = _METHODS[t]
        elif t in _CONVERSIONS:
            kw["import_type"] = t[1:]  # (a PRISM model read as that type)
        elif t in _OUT_OF_SCOPE:
            skip(_OUT_OF_SCOPE[t])
        elif t in _EXPORTS:
            exports.append(t if nxt is None or t not in _TAKES_VALUE else f"{t} {nxt}")
        elif t in _IGNORED:
            pass
        elif t.startswith("-"):
            skip(f"unknown switch: {t}")
        i += 2 if (t in _TAKES_VALUE and nxt is not None) else 1
    return Config(consts=",".join(c for c in consts if c), exports=tuple(exports), **kw)


def _args_lines(f: Path) -> list[str]:
    if not f.is_file():
        return []
    return [
        ln.strip()
        for ln in f.read_text().splitlines()
        if ln.strip() and not ln.strip().startswith("#")
    ]


def configs(model: Path, props: Path) -> list[Config]:
    """The configurations PRISM's test script runs: every line of
    `model.args` combined with every line of `props.args` (a missing file
    counts as one empty line), deduplicated once parsed (engine switches
    such as `-ex`/`-h` change nothing for us)."""
    keyword = model_type_keyword(model)
    model_lines = _args_lines(Path(str(model) + ".args")) or [""]
    props_lines = _args_lines(Path(str(props) + ".args")) or [""]
    out = [
        parse_args_line(f"{m} {p}".strip(), keyword)
        for m in model_lines
        for p in props_lines
    ]
    return list(dict.fromkeys(out))


def selects(only_property: str | None, index: int, name: str | None) -> bool:
    """Does `-prop X` (a 1-based index or a name) select the property at
    0-based `index` named `name`?"""
    if only_property is None:
        return True
    if only_property.isdigit():
        return int(only_property) == index + 1
    return only_property in (name, f'"{name}"')


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
    return all(k in have and _same_number(have[k], v) for k, v in want.items())


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
        return ("skip", "no result: no expected value given (RESULT: ?)")
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
        return ("skip", f"multi-objective: Pareto set or interval result {s!r}")
    try:
        return float(Fraction(s))
    except (ValueError, ZeroDivisionError):
        pass
    if re.fullmatch(r"[-+*/()0-9.eE ]+", s):
        try:
            return float(eval(s, {"__builtins__": {}}, {}))  # digits and + - * / only
        except Exception:
            pass
    return ("skip", f"parametric: symbolic result {s!r}")
