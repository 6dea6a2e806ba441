"""Cases from the suite's `*.auto` files: PRISM command lines without a
`// RESULT` to compare, e.g. `-importmodel dice.all dice.pm.props` or
`-importmodel lec3.all -exportmodel lec3.all` (import, export again and
compare with the files of the folder).

- a line with `-importmodel SPEC` and a properties file: one case per
  annotated property, checked on the imported model through the CLI;
- a line with `-exportmodel SPEC` (after `-importmodel`, or of the model the
  file is named after, `dice.pm.exportmodel.auto` → `dice.pm`): one case that
  writes the files through the CLI and compares them with the folder's;
- a line with `-exporttransdot`/`-exporttransdotstates FILE` of the model
  the file is named after: one case that writes and compares the `.dot`;
- any other line (`-tr`, `-importpepa`, `.xz` files, `-exact`): one case
  skipped with its category.

Exported MDP files are compared up to the order of each state's choices
(`choices.py`).

PRISM has disabled some of these files (`*.auto.disabled`); they are read
too, as they are the only ones that check properties on imported models.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shlex
import tempfile
from pathlib import Path

from . import suite
from .choices import canonical_choices


#: The explicit files `-importmodel`/`-exportmodel` read and write here.
EXPLICIT = ("tra", "sta", "lab", "srew", "trew")


def auto_files() -> list[Path]:
    return [
        p
        for p in suite.corpus.test_files()
        if p.name.endswith((".auto", ".auto.disabled")) and p.name != "auto"
    ]


def _owner(auto: Path) -> Path | None:
    """The model an `.auto` file is named after (`dice.pm.exportmodel.auto`
    → `dice.pm`), if it is in the folder."""
    parts = auto.name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        cand = auto.with_name(".".join(parts[:i]))
        if cand.suffix in suite.MODEL_SUFFIXES and cand.is_file():
            return cand
    return None


def _lines(auto: Path) -> list[tuple[int, list[str]]]:
    out = []
    for n, raw in enumerate(auto.read_text(errors="replace").splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((n, shlex.split(line, comments=True)))
    return out


def _value(tokens: list[str], switch: str) -> str | None:
    for i, t in enumerate(tokens[:-1]):
        if t == switch:
            return tokens[i + 1]
    return None


def spec_problem(spec: str) -> str | None:
    """Why `-importmodel/-exportmodel SPEC` cannot run here, or None.
    `SPEC` is PRISM's `BASE.all`, `BASE.tra,sta,...` or a single file."""
    head, _, options = spec.partition(":")
    known = ("matlab", "rows", "actions", "headers", "precision", "proplabels")
    unknown = [o for o in options.split(",") if o and o.split("=")[0] not in known]
    if unknown:
        return f"export: format option :{unknown[0]} not implemented"
    if head.endswith(".xz"):
        return "import: xz-compressed explicit files not run here"
    if head.endswith(".gz"):
        return (
            "import: gzipped explicit files (BASE.all.gz) not supported by -importmodel"
        )
    if head.endswith(".pexp"):
        return None
    base, _, rest = head.rpartition(".")
    parts = [rest.split(",")[0], *rest.split(",")[1:]]
    if parts[0] != "all" and not set(parts) <= set(EXPLICIT):
        return f"import: explicit files {spec!r} not understood"
    return None


def cases() -> list[suite.Case]:
    out: list[suite.Case] = []
    for auto in auto_files():
        owner = _owner(auto)
        keyword = suite.model_type_keyword(owner) if owner else None
        if owner is not None and not suite.corpus.in_scope_type(owner):
            continue
        # the model's own `.args` (cluster.sm.args: `-const N=2`)
        consts = [
            suite.parse_args_line(ln, keyword).consts
            for ln in suite._args_lines(Path(f"{owner}.args") if owner else auto)
        ] if owner else []  # fmt: skip
        seen = set()
        for n, tokens in _lines(auto):
            config = suite.parse_args_line(shlex.join(tokens), keyword)
            if consts and consts[0] and not config.consts:
                config = _replace(config, consts=consts[0])
            key = (config, _value(tokens, "-exportmodel"))
            if key in seen:  # differs only in the engine (-ex, -h, ...)
                continue
            seen.add(key)
            out += _cases_of_line(auto, n, tokens, config, owner)
    return out


def _imported_type(folder: Path, spec: str) -> str | None:
    """The model type the `.tra` file of `-importmodel SPEC` declares in its
    `# Transitions (TYPE)` header, if any."""
    head = spec.partition(":")[0]
    base = head.rpartition(".")[0] if "." in head else head
    tra = folder / f"{base}.tra"
    if not tra.is_file():
        return None
    with tra.open(errors="replace") as f:
        first = f.readline()
    m = re.match(r"#\s*Transitions\s*\((\w+)\)", first)
    return m.group(1).upper() if m else None


def _replace(config: suite.Config, **kw) -> suite.Config:
    from dataclasses import replace

    return replace(config, **kw)


def _cases_of_line(auto, n, tokens, config, owner) -> list[suite.Case]:
    keyword = suite.model_type_keyword(owner) if owner else None

    def one(skip: str | None, kind: str) -> suite.Case:
        return suite.Case(
            auto, auto, config, -1, n, "", config.consts, skip=skip, tag=kind
        )

    imported = config.import_model
    props = [t for t in tokens if t.endswith(suite.corpus.PROPS_SUFFIXES)]
    export = _value(tokens, "-exportmodel")
    problem = config.skip
    for spec in (imported, export):
        if problem is None and spec is not None:
            problem = spec_problem(spec)
    kind = _imported_type(auto.parent, imported) if imported else None
    if problem is None and kind not in (None, "DTMC", "CTMC", "MDP"):
        problem = f"model type: {kind} (not a DTMC/CTMC/MDP)"
    if imported is not None and props:
        return _result_cases(auto, config, auto.parent / props[0], problem)
    if export is not None and (imported is not None or owner is not None):
        return [one(problem, "export")]
    if owner is not None and any(t in _DOT for t in tokens):
        if keyword is None and problem is None:
            problem = (
                "model type: a model without a type keyword (PRISM reads it as an "
                "LTS when it has no probabilities; jaxmc builds an MDP)"
            )
        return [one(problem, "export")]
    return [one(problem or _why_not(tokens), "export")]


#: The Graphviz export switches (run by `run_export_case`).
_DOT = ("-exporttransdot", "-exporttransdotstates")


def _why_not(tokens: list[str]) -> str:
    return "export: " + " ".join(tokens)


def _result_cases(auto, config, props: Path, problem) -> list[suite.Case]:
    text = props.read_text(errors="replace")
    annotations = suite.result_annotations(text)
    out = []
    prev = 0
    from .cases import property_lines

    lines = property_lines(props)
    if isinstance(lines, str):
        return [suite.Case(auto, props, config, -1, 1, "parse", "", skip=problem)]
    for index, (line, name) in enumerate(lines):
        mine = [a for a in annotations if prev < a[0] < line and not a[1]]
        prev = line
        if mine and suite.selects(config.only_property, index, name):
            out.append(
                suite.Case(
                    auto, props, config, index, line, mine[0][2], "", skip=problem
                )
            )
    return out


# ------------------------------------------------------------------ running


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`jaxmc.cli.main(argv)` in this process: (exit status, stdout, stderr)."""
    from jaxmc import cli

    os.environ.setdefault("JAXMC_CACHE_DIR", "")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse's usage errors
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _numeric_args(config: suite.Config) -> list[str]:
    argv = []
    if config.import_type:
        argv.append(f"-{config.import_type}")
    if config.epsilon is not None:
        argv += ["-epsilon", repr(config.epsilon)]
    if config.max_iters is not None:
        argv += ["-maxiters", str(config.max_iters)]
    if not config.relative:
        argv.append("-absolute")
    if suite.criterion() != "sound":
        argv += ["--criterion", suite.criterion()]
    return argv


@functools.lru_cache(maxsize=16)
def _imported_results(folder: str, config: suite.Config, props: str):
    """The CLI's JSON results for the imported model, or its error text."""
    argv = ["-importmodel", str(Path(folder) / config.import_model), props, "--json"]
    code, out, err = run_cli(argv + _numeric_args(config))
    if code != 0:
        return err.strip() or f"exit status {code}"
    return json.loads(out)["runs"][0]["properties"]


def run_import_case(case: suite.Case) -> tuple[str, str, object]:
    """("value", "", value) or ("error", message, None)."""
    got = _imported_results(str(case.model.parent), case.config, str(case.props))
    if isinstance(got, str):
        return "error", got, None
    return "value", "", got[case.index]["value"]


def run_export_case(case: suite.Case) -> tuple[str, str]:
    """Export through the CLI and compare each file written with the one of
    the same name in the folder."""
    tokens = dict(_lines(case.model))[case.line]
    folder = case.model.parent
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["--quiet"]
        for switch in ("-exportmodel",) + _DOT:
            spec = _value(tokens, switch)
            if spec is not None:
                argv += [switch, str(Path(tmp) / spec)]
        if case.config.import_model is not None:
            argv = ["-importmodel", str(folder / case.config.import_model)] + argv
        else:
            argv = [str(_owner(case.model))] + argv
            if case.consts:
                argv += ["-const", case.consts]
        code, _, err = run_cli(argv + _numeric_args(case.config))
        if code != 0:
            return "fail", f"exit status {code}: {err.strip()}"
        written = sorted(Path(tmp).iterdir())
        if not written:
            return "fail", "nothing exported"
        # as PRISM's test script: the files with a reference in the folder are
        # compared (poll2.all's .trew has none), at least one of them
        if not any((folder / f.name).is_file() for f in written):
            return "fail", f"wrote {written[0].name}, which the folder does not have"
        for f in written:
            want = folder / f.name
            if not want.is_file():
                continue
            diff = _first_difference(
                canonical_choices(f.name, want.read_bytes()).decode(),
                canonical_choices(f.name, f.read_bytes()).decode(),
            )
            if diff:
                return "fail", f"{f.name}: {diff}"
    return "pass", ""


def _first_difference(want: str, got: str) -> str | None:
    a, b = want.splitlines(), got.splitlines()
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x.strip() != y.strip():
            return f"line {i}: expected {x!r}, got {y!r}"
    if len(a) != len(b):
        return f"expected {len(a)} lines, got {len(b)}"
    return None
