"""Stage 1: PRISM text → AST (`jaxmc.lang.ast`).

lark parses with the LALR grammars of `grammars/` (see `grammar.py`); the
`AstBuilder` transformer (`transform.py`, `transform_expr.py`) turns the
parse tree into AST nodes, each with a `Span`. It builds syntax only: no
scoping, no typing, no constant values.

Every lark exception is translated into a `PrismSyntaxError` (see `_errors.py`),
so that a user never sees a parser traceback.
"""

from __future__ import annotations

from pathlib import Path

import lark

from ..errors import JaxmcError, PrismSyntaxError
from . import ast
from ._errors import translate_lark_error
from .grammar import ReservedName, get_parser
from .source import read_source
from .transform import AstBuilder
from .transform_expr import tok_span
from .tree import balance_chains


__all__ = [
    "parse_model",
    "parse_model_file",
    "parse_properties",
    "parse_properties_file",
    "parse_expression",
]


# ----------------------------------------------------------------- public API


def parse_model(text: str, file: str | None = None) -> ast.Program:
    """Parse the text of a PRISM model file (`.pm`, `.sm`, `.nm`, `.prism`).

    **Arguments:**
    - `text`: the model source.
    - `file`: its file name, used in spans and error messages.

    **Returns:** an `ast.Program`.

    **Raises:** `PrismSyntaxError` for text outside the PRISM language and
    `UnsupportedError` for PRISM constructs jaxmc does not parse (observables).
    """
    tree = _parse("prism", text, file, "start")
    return _build(tree, text, file)


def parse_model_file(path: str | Path) -> ast.Program:
    """Read and parse a model file; spans carry its path."""
    path = Path(path)
    return parse_model(read_source(path), str(path))


def parse_properties(text: str, file: str | None = None) -> ast.PropertiesFile:
    """Parse the text of a PRISM property file (`.props`, `.pctl`, `.csl`).

    As in PRISM, the `;` after a property is optional (a new property may start
    on the next line); constants, formulas and labels may be declared.
    """
    tree = _parse("props", text, file, "start")
    return _build(tree, text, file, props=True)


def parse_properties_file(path: str | Path) -> ast.PropertiesFile:
    """Read and parse a property file; spans carry its path."""
    path = Path(path)
    return parse_properties(read_source(path), str(path))


def parse_expression(text: str, file: str | None = None) -> ast.Expr:
    """Parse a single expression, which may be a property (`P=? [F s=2]`).

    Used for `-const N=3` values and properties given on the command line.
    """
    tree = _parse("props", text, file, "expr")
    return _build(tree, text, file, props=True)


# ------------------------------------------------------------------- driving


def _parse(grammar: str, text: str, file: str | None, start: str) -> lark.Tree:
    parser = get_parser(grammar)
    try:
        return parser.parse(text, start=start)
    except lark.exceptions.UnexpectedInput as e:
        raise translate_lark_error(e, text, file, parser) from None
    except ReservedName as e:
        tok = e.token
        raise PrismSyntaxError(
            f"'{tok.value}' is a PRISM keyword and cannot be used as a name",
            tok_span(tok, file),
            source=text,
            hint="choose another name",
        ) from None


def _build(tree, text: str, file: str | None, props: bool = False):
    # The builder walks the parse tree without recursion (a generated model's
    # expressions may be thousands of levels deep); long chains of `+`, `*`,
    # `&`, `|` are then rebuilt as balanced trees (see `tree.balance_chains`).
    builder = AstBuilder(file, props)
    try:
        result = builder.transform(tree)
    except lark.exceptions.VisitError as e:
        orig = e.orig_exc
        if isinstance(orig, JaxmcError):
            if orig.source is None:
                orig.with_source(text, file)
            raise orig from None
        raise  # a bug in the builder: let it show
    if builder.long_chain:
        result = balance_chains(result)
    return result
