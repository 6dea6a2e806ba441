"""The in-scope models and property files of `../shared/models`, with the
constant settings PRISM's own scripts use for them.

- `in_scope_models()`: model files (DTMC/CTMC/MDP, by keyword) under
  `prism-examples/{dtmcs,ctmcs,mdps,simple}` and the in-scope folders of
  `prism-tests`;
- `props_for(model)`: its property files;
- `constant_settings(model, props=None)`: the `-const` strings found for it:
  from `x.pm.args` / `x.pm.props.args` (regression suite: one configuration
  per line) or from the folder's `auto` script (examples: `prism m.pm p.pctl
  -const N=3`, with `foreach` loops replaced by their first value).

Everything is read relative to the repository: `SHARED_MODELS` is
`../shared/models`; `available()` is False when it is missing (tests skip).
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path


SHARED_MODELS = Path(__file__).resolve().parents[1].parent / "shared" / "models"
EXAMPLES = SHARED_MODELS / "prism-examples"
TESTS = SHARED_MODELS / "prism-tests"

EXAMPLE_DIRS = ("dtmcs", "ctmcs", "mdps", "simple")
#: Folders of `prism-tests` holding DTMC/CTMC/MDP tests, read recursively.
#: Left out (other model types or engines): `functionality/verify/{ptas,
#: poptas,pomdps,idtmcs,imdps,ltss,sim}`, `functionality/verify/mdps/{ltl-fair,
#: multi-*,coalition}` (fairness / multi-objective / games) and
#: `functionality/export/{idtmc,imdp,lts,pomdp}`.
TEST_DIRS = (
    "functionality/verify/dtmcs",
    "functionality/verify/ctmcs",
    "functionality/verify/ctl",
    "functionality/verify/exact",
    "functionality/verify/mdps/reach",
    "functionality/verify/mdps/rewards",
    "functionality/verify/mdps/pctl",
    "functionality/verify/mdps/bounded-reach",
    "functionality/verify/mdps/ltl",
    "functionality/verify/param",
    "functionality/language",
    "functionality/testing",
    "functionality/import",
    "functionality/compute",
    "functionality/export/results",
    "functionality/export/target",
    "functionality/export/vector",
    "functionality/export/dtmc",
    "functionality/export/ctmc",
    "functionality/export/mdp",
    "functionality/export/dot",
    "pmc",
    "papers",
    "bugfixes",
    "contrib",
)
#: Folders whose own files are in scope but whose subfolders are not (all
#: of them in scope are in `TEST_DIRS`): `functionality/verify` holds
#: `ctmc_csl.sm`, `multiple_bsccs_ss*`, `close_bounds.prism`, ... next to
#: `ptas/`, `pomdps/`, `sim/`, ...
TEST_DIRS_FLAT = ("functionality/verify",)
MODEL_SUFFIXES = (".pm", ".sm", ".nm", ".prism")
PROPS_SUFFIXES = (".props", ".pctl", ".csl")
_TYPE_RE = re.compile(
    r"^\s*(dtmc|ctmc|mdp|probabilistic|stochastic|nondeterministic|pta|pomdp|popta|imdp|idtmc|lts)\b",
    re.M,
)
_INTERVAL_RE = re.compile(r"\[\s*[\d.eE+-]+\s*,\s*[\d.eE+-]+\s*\]\s*:")
IN_SCOPE_TYPES = {
    "dtmc",
    "ctmc",
    "mdp",
    "probabilistic",
    "stochastic",
    "nondeterministic",
}


def test_files() -> list[Path]:
    """Every file of the in-scope `prism-tests` folders (`TEST_DIRS`
    recursively, `TEST_DIRS_FLAT` without their subfolders), sorted."""
    out: list[Path] = []
    for d in TEST_DIRS:
        root = TESTS / d
        if root.is_dir():
            out += [p for p in root.rglob("*") if p.is_file()]
    for d in TEST_DIRS_FLAT:
        root = TESTS / d
        if root.is_dir():
            out += [p for p in root.iterdir() if p.is_file()]
    return sorted(set(out))


def in_scope_type(path: Path) -> bool:
    """Is `path` a DTMC/CTMC/MDP model (no keyword: PRISM reads an MDP)?"""
    kw = model_type_keyword(path)
    return kw is None or kw in IN_SCOPE_TYPES


def available() -> bool:
    return SHARED_MODELS.is_dir()


def model_type_keyword(path: Path) -> str | None:
    text = _strip_comments(path.read_text(errors="replace"))
    m = _TYPE_RE.search(text)
    keyword = m.group(1) if m else None
    # interval probabilities `[0.8,0.9] : ...` make PRISM read an interval
    # DTMC/MDP (no keyword: an MDP)
    if _INTERVAL_RE.search(text):
        if keyword in (None, "mdp", "nondeterministic"):
            return "imdp"
        if keyword in ("dtmc", "probabilistic"):
            return "idtmc"
    return keyword


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


@cache
def in_scope_models() -> tuple[Path, ...]:
    """Model files of type dtmc/ctmc/mdp (files without a keyword, which PRISM
    reads as MDPs, are included)."""
    if not available():
        return ()
    files = []
    for d in EXAMPLE_DIRS:
        root = EXAMPLES / d
        if root.is_dir():
            files += sorted(p for p in root.rglob("*") if p.is_file())
    files += test_files()
    return tuple(p for p in files if p.suffix in MODEL_SUFFIXES and in_scope_type(p))


def props_for(model: Path) -> list[Path]:
    """Property files for `model`: `model.props`, `model.*.props` (suite), or
    those named with it in the folder's `auto` script, else every property
    file of the folder (examples)."""
    model = Path(model)
    folder = model.parent
    out = sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.name.startswith(model.name + ".")
        and p.suffix in PROPS_SUFFIXES
    )
    if out or _is_suite(model):
        return out
    named = []
    for cmd in _auto_commands(folder):
        if model.name in cmd:
            named += [folder / a for a in cmd if a.endswith(PROPS_SUFFIXES)]
    named = [p for p in dict.fromkeys(named) if p.is_file()]
    if named:
        return named
    # a model the script does not run: use the property files of its
    # siblings of the same family (wlan3.nm is run like wlan0.nm)
    shape = re.sub(r"\d+", "", model.name)
    for cmd in _auto_commands(folder):
        models = [a for a in cmd if a.endswith(MODEL_SUFFIXES)]
        if any(re.sub(r"\d+", "", a) == shape for a in models):
            named += [folder / a for a in cmd if a.endswith(PROPS_SUFFIXES)]
    named = [p for p in dict.fromkeys(named) if p.is_file()]
    if named:
        return named
    return sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix in PROPS_SUFFIXES
    )


def _is_suite(path: Path) -> bool:
    try:
        path.resolve().relative_to(TESTS.resolve())
        return True
    except ValueError:
        return False


def constant_settings(model: Path, props: Path | None = None) -> list[str]:
    """The distinct `-const` strings used for `model` (with `props`, those
    of that property file too); `[]` when none is found."""
    model = Path(model)
    out: list[str] = []
    files = [Path(str(model) + ".args")]
    if props is not None:
        files.append(Path(str(props) + ".args"))
    for f in files:
        if f.is_file():
            for line in f.read_text().splitlines():
                c = _consts_of(line.split())
                if c:
                    out.append(c)
    if not _is_suite(model):
        for cmd in _auto_commands(model.parent):
            if model.name not in cmd:
                continue
            if (
                props is not None
                and any(a.endswith(PROPS_SUFFIXES) for a in cmd)
                and props.name not in cmd
            ):
                continue
            c = _consts_of(cmd)
            if c:
                out.append(c)
    return list(dict.fromkeys(out))


def _consts_of(args: list[str]) -> str:
    vals = []
    for i, a in enumerate(args):
        if a in ("-const", "--const") and i + 1 < len(args):
            vals.append(args[i + 1])
    return ",".join(vals)


@cache
def _auto_commands(folder: Path) -> tuple[tuple[str, ...], ...]:
    """`prism ...` command lines of the folder's `auto` script, with csh
    `foreach V (a b c)` loop variables replaced by their first value."""
    auto = folder / "auto"
    if not auto.is_file():
        return ()
    loops: dict[str, str] = {}
    cmds = []
    for raw in auto.read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"foreach\s+(\w+)\s*\(([^)]*)\)", line)
        if m:
            vals = m.group(2).split()
            if vals:
                loops[m.group(1)] = vals[0]
            continue
        if not line.startswith("prism"):
            continue
        for k, v in loops.items():
            line = line.replace("${" + k + "}", v).replace("$" + k, v)
        try:
            cmds.append(tuple(shlex.split(line)))
        except ValueError:
            cmds.append(tuple(line.split()))
    return tuple(cmds)


def merged_constants(
    model: Path, props: Path | None = None, siblings: bool = True
) -> str:
    """One `-const` string covering as many constants as the scripts give:
    the settings for `model` (and `props`), merged (first value of each name
    wins; a range keeps its first value); with `siblings`, settings of other
    commands of the folder's `auto` script (same property file first) fill in
    names still missing. Names the model does not declare are harmless
    (`check_program` ignores them)."""
    model = Path(model)
    sources = constant_settings(model, props)
    if props is None:
        for pf in props_for(model):
            sources += constant_settings(model, pf)
    if siblings and not _is_suite(model):
        cmds = _auto_commands(model.parent)
        if props is not None:
            sources += [_consts_of(c) for c in cmds if props.name in c]
        sources += [_consts_of(c) for c in cmds]
    merged: dict[str, str] = {}
    for s in sources:
        for part in s.split(","):
            name, eq, value = part.partition("=")
            if eq and name and name not in merged:
                merged[name] = value.split(":")[0]
    return ",".join(f"{k}={v}" for k, v in merged.items())


def _family(name: str) -> str:
    return re.sub(r"\d+", "", name)


def constants_for_property(model: Path, props: Path, index: int) -> str:
    """The constants PRISM's `auto` script uses for property `index` (its
    `-prop N` line for this model, else for a sibling of the same family —
    herman3 is not in the script, herman7 is; ranges reduced to their first
    value), else the merged settings for the file."""
    commands = _auto_commands(model.parent)
    for same_model in (True, False):
        for cmd in commands:
            models = [a for a in cmd if a.endswith(MODEL_SUFFIXES)]
            if same_model and model.name not in models:
                continue
            if not same_model and not any(
                _family(m) == _family(model.name) for m in models
            ):
                continue
            if (
                props.name in cmd
                and "-prop" in cmd
                and cmd[cmd.index("-prop") + 1] == str(index + 1)
            ):
                return ",".join(
                    part.split(":")[0]
                    for part in _consts_of(list(cmd)).split(",")
                    if part
                )
    return merged_constants(model, props)


@cache
def declared_constants(model: Path) -> frozenset[str]:
    """The constants `model` declares."""
    from jaxmc.lang import parse_model

    program = parse_model(model.read_text(), file=str(model))
    return frozenset(c.name for c in program.constants)


def only_declared(consts: str, names) -> str:
    """The settings of `consts` for `names`: the scripts' settings merged over
    several command lines may name constants of sibling models, which jaxmc
    (unlike PRISM, which ignores them) refuses."""
    parts = [p for p in consts.split(",") if p and p.split("=")[0].strip() in names]
    return ",".join(parts)


def property_cases(models):
    """`(model, props, consts, index)` for every property of every property
    file `props_for` gives each of `models`, with the constants PRISM's
    scripts use for it (`constants_for_property`) restricted to the names the
    model and the file declare; files that do not parse are left out (the
    parser tests list them)."""
    from jaxmc.errors import JaxmcError
    from jaxmc.lang import parse_properties

    for model in models:
        for props in props_for(model):
            try:
                text = props.read_text(errors="replace")
                pf = parse_properties(text, file=str(props))
            except JaxmcError:
                continue
            names = declared_constants(model) | {c.name for c in pf.constants}
            for i in range(len(pf.properties)):
                consts = constants_for_property(model, props, i)
                yield model, props, only_declared(consts, names), i
