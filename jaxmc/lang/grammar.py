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


#: PRISM's keywords of the model language. lark's contextual lexer would
#: accept most of them as names wherever the keyword itself cannot occur; PRISM
#: reserves them everywhere, and so do we (a name token with one of these
#: values is rejected by `_reject_keyword`). The property keywords (`P`, `F`,
#: `U`, `C`, ...) are only keywords inside properties, where the grammar has them.
RESERVED = frozenset(
    """bool clock const ctmc double dtmc endinit endinvariant endmodule
    endobservables endrewards endsystem false formula filter func global init
    invariant int label max mdp min module nondeterministic observable
    observables of pomdp popta probabilistic prob pta rate rewards stochastic
    system true""".split()
)


class ReservedName(Exception):
    """Raised by the lexer for a keyword used as a name (see `RESERVED`)."""

    def __init__(self, token: lark.Token):
        super().__init__(token.value)
        self.token = token


def _reject_keyword(token: lark.Token) -> lark.Token:
    if token.value in RESERVED:
        raise ReservedName(token)
    return token


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
        lexer_callbacks={"NAME": _reject_keyword},
        start=["start", "expr"] if name == "props" else "start",
    )
