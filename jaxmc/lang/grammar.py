"""Loading the lark grammars and building the LALR parsers (once per process).

The grammars live in the top-level `grammars/` folder of the source tree and
are shipped in the wheel as `jaxmc/grammars/` (see `force-include` in
pyproject.toml). `common.lark` holds the declarations and expressions that
models and properties share; `prism.lark` and `props.lark` are appended to it
(lark's `%import` namespaces imported rules, which would stop `props.lark`
from extending the shared `atom` rule, so we concatenate instead).
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

import lark


def _grammar_dir():
    """The folder holding the `.lark` files: the installed package data if
    present, else the source tree (editable installs)."""
    try:
        packaged = importlib.resources.files("jaxmc") / "grammars"
        if packaged.joinpath("common.lark").is_file():
            return packaged
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover
        pass
    source = Path(__file__).resolve().parents[2] / "grammars"
    if (source / "common.lark").is_file():
        return source
    raise FileNotFoundError(  # pragma: no cover
        "jaxmc's grammar files were not found: neither jaxmc/grammars/ (installed) "
        f"nor {source} (source tree) holds common.lark"
    )


def grammar_text(name: str) -> str:
    """The full text of grammar `name` ("prism" or "props"): common.lark followed
    by `<name>.lark`."""
    folder = _grammar_dir()
    common = folder.joinpath("common.lark").read_text(encoding="utf-8")
    own = folder.joinpath(f"{name}.lark").read_text(encoding="utf-8")
    return common + "\n" + own


@functools.cache
def get_parser(name: str) -> lark.Lark:
    """The LALR parser for `name`: "prism" (model files) or "props" (property
    files; its second start symbol `expr` parses a single expression, as in
    `-const N=3` or a property given on the command line)."""
    return lark.Lark(
        grammar_text(name),
        parser="lalr",
        # The contextual lexer only tries the terminals the parser can accept
        # next, so property keywords (`F`, `U`, `C`, ...) and `rate`/`prob` are
        # keywords only where PRISM expects them and names elsewhere.
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=False,
        start=["start", "expr"] if name == "props" else "start",
    )
