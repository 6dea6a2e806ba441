"""Turning lark's exceptions into located, readable `PrismSyntaxError`s.

lark reports what it saw and the set of terminals it would have accepted; we
name those terminals the way a user writes them (`';'`, `')'`, "an
expression"), point at the right place (for a missing `;`, just after the
previous token rather than at the start of the next line) and add a hint for
the slips PRISM users make most often.
"""

from __future__ import annotations

import re

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from ..errors import PrismSyntaxError
from .ast import Span


#: How terminals are shown in messages; anonymous string terminals are shown
#: as their text, in quotes.
_NAMES = {
    "NAME": "an identifier",
    "NUMBER": "a number",
    "STRING": 'a quoted name ("...")',
    "PRIMED": "a primed variable (x')",
    "CALLNAME": "a function",
    "$END": "the end of the input",
    "MULTI": "multi(...)",
    "REW": 'a reward bound (rew{"r"})',
    "REW_ANY": 'a reward bound (rew{"r"})',
    "STEPS": "steps",
    "TIME": "time",
}

#: Terminals that can start an expression: when several are expected, they are
#: summarised as "an expression".
_EXPR_START = {
    "NAME", "NUMBER", "LPAR", "MINUS", "NOT", "TRUE", "FALSE", "CALLNAME",
    "MIN", "MAX", "FUNC", "STRING", "P", "RELEASE", "S", "EXISTS", "FORALL",
    "PMIN", "PMAX", "RMIN", "RMAX", "SMIN", "SMAX", "FILTER", "NEXT", "FUTURE",
    "GLOBALLY", "MULTI", "FUTURE_REW",
}  # fmt: skip
#: Binary operators: summarised as "an operator".
_OPERATORS = {
    "PLUS", "MINUS", "STAR", "SLASH", "EQ", "NE", "LT", "LE", "GT", "GE", "AND",
    "OR", "IMPLIES", "IFF", "QMARK", "POW", "UNTIL", "WEAK", "RELEASE", "UNTIL_REW",
}  # fmt: skip

#: Keywords that start a top-level item of a model or property file.
_ITEM_STARTS = (
    "MODULE", "CONST", "FORMULA", "LABEL", "GLOBAL", "REWARDS", "INIT", "SYSTEM",
    "ENDMODULE", "ENDREWARDS", "ENDINIT", "ENDSYSTEM", "RATE", "PROB",
)  # fmt: skip

_MAX_ALTERNATIVES = 6
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")


def _describe_terminal(name: str, parser: lark.Lark) -> str:
    if name in _NAMES:
        return _NAMES[name]
    try:
        term = parser.get_terminal(name)
    except KeyError:
        return name
    pattern = term.pattern
    if pattern.type == "str":
        return f"'{pattern.value}'"
    return name.lower()


def describe_expected(expected: set[str], parser: lark.Lark) -> str:
    """A short English list of what the parser would have accepted."""
    expected = set(expected)
    groups: list[str] = []
    if len(expected & _EXPR_START) >= 3:
        expected -= _EXPR_START
        expr_group = ["an expression"]
    else:
        expr_group = []
    if len(expected & _OPERATORS) >= 3:
        expected -= _OPERATORS
        op_group = ["an operator"]
    else:
        op_group = []
    # Punctuation and keywords first, in a stable order; then the groups.
    names = sorted(_describe_terminal(t, parser) for t in expected)
    names = [n for n in names if n.startswith("'")] + [
        n for n in names if not n.startswith("'")
    ]
    groups = names + expr_group + op_group
    if len(groups) > _MAX_ALTERNATIVES:
        groups = groups[:_MAX_ALTERNATIVES] + ["..."]
    if not groups:
        return "the end of the input"
    if groups == ["the end of the input"]:
        return "the end of the input"
    if len(groups) == 1:
        return groups[0]
    return ", ".join(groups[:-1]) + " or " + groups[-1]


def _blank_comments(text: str) -> str:
    """`text` with `//` comments replaced by spaces (offsets unchanged)."""
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group()), text)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def _previous_token_end(text: str, offset: int) -> int:
    """Offset just after the last non-blank, non-comment character before
    `offset` (where a missing `;` belongs)."""
    blanked = _blank_comments(text)
    i = offset
    while i > 0 and blanked[i - 1].isspace():
        i -= 1
    return i


def _statement_before(text: str, offset: int) -> str:
    """The text of the current statement up to `offset` (from the previous
    `;`, or keyword block start), comments removed: used by the hints."""
    blanked = _blank_comments(text)[:offset]
    cut = max(blanked.rfind(";"), blanked.rfind("endmodule"), blanked.rfind("\nmodule"))
    return blanked[cut + 1 :]


def _token_text(tok) -> str:
    if tok.type == "$END":
        return "end of input"
    return f"'{tok.value}'"


def translate_lark_error(
    e: lark.exceptions.UnexpectedInput, text: str, file: str | None, parser: lark.Lark
) -> PrismSyntaxError:
    """The `PrismSyntaxError` to raise for lark's exception `e`."""
    if isinstance(e, UnexpectedCharacters):
        return _unexpected_characters(e, text, file, parser)
    if isinstance(e, UnexpectedToken):
        return _unexpected_token(e, text, file, parser)
    if isinstance(e, UnexpectedEOF):
        offset = _previous_token_end(text, len(text))
        line, col = _line_col(text, offset)
        expected = describe_expected(set(e.expected), parser)
        return PrismSyntaxError(
            f"unexpected end of the input; expected {expected}",
            Span(file, line, col),
            source=text,
        )
    return PrismSyntaxError(str(e), source=text)  # pragma: no cover


def _unexpected_characters(
    e: UnexpectedCharacters, text, file, parser
) -> PrismSyntaxError:
    char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
    span = Span(file, e.line, e.column, e.line, e.column + 1)
    hint = None
    following = text[e.pos_in_stream : e.pos_in_stream + 2]
    if char == "'":
        m = re.search(r"[A-Za-z_]\w*$", text[: e.pos_in_stream])
        if m:  # `x'` where no update can be: lark lexed `x`, then stopped at the prime
            return _primed_outside_update(m.group(), m.start(), text, file)
        hint = "a prime must follow a variable name directly, as in (x'=x+1)"
    elif char == '"':
        hint = 'a quoted name must be closed on the same line: "name"'
    elif following == ":=":
        hint = "PRISM updates are written (x'=e), not x := e"
    elif char == "#":
        hint = "PRISM preprocessor (#...#) is not supported; use prismpp first"
    if hint is None:
        hint = f"{char!r} is not part of the PRISM language"
    allowed = getattr(e, "allowed", None)
    message = f"unexpected character {char!r}"
    if allowed:
        message += f"; expected {describe_expected(set(allowed), parser)}"
    return PrismSyntaxError(message, span, source=text, hint=hint)


def _unexpected_token(e: UnexpectedToken, text, file, parser) -> PrismSyntaxError:
    tok = e.token
    expected = set(e.expected)
    if tok.type == "$END":
        offset = _previous_token_end(text, len(text))
        line, col = _line_col(text, offset)
        span = Span(file, line, col)
        start = len(text)
    else:
        span = Span(file, tok.line, tok.column, tok.end_line, tok.end_column)
        start = tok.start_pos
    message = (
        f"unexpected {_token_text(tok)}; expected {describe_expected(expected, parser)}"
    )
    hint = None
    statement = _statement_before(text, start)

    # A keyword where a name belongs (but a keyword that starts a new
    # declaration more likely means the previous one was not closed).
    if (
        "NAME" in expected
        and tok.type not in ("NAME", "$END", *_ITEM_STARTS)
        and isinstance(tok.value, str)
        and _IDENT.match(tok.value)
    ):
        message = f"'{tok.value}' is a keyword and cannot be used as a name here"
        hint = (
            "rename it (PRISM reserves e.g. "
            + ", ".join(["init", "module", "rate", "min", "max", "F", "G", "U", "X"])
            + ")"
        )

    # A primed variable outside an update.
    elif tok.type == "PRIMED":
        return _primed_outside_update(tok.value[:-1], start, text, file)

    # A missing ';' (the parser sees the next line's first token).
    elif "SEMICOLON" in expected and tok.type != "SEMICOLON":
        prev_end = _previous_token_end(text, start)
        prev_line, prev_col = _line_col(text, prev_end)
        if tok.type == "$END" or prev_line < tok.line:
            span = Span(file, prev_line, prev_col)
            message = f"missing ';' before {_token_text(tok)}"
            hint = "every declaration, command and reward item ends with ';'"
    if hint is None:
        hint = _hint(tok, expected, statement, text, start)
    return PrismSyntaxError(message, span, source=text, hint=hint)


def _primed_outside_update(name: str, start: int, text: str, file) -> PrismSyntaxError:
    line, col = _line_col(text, start)
    span = Span(file, line, col, line, col + len(name) + 1)
    statement = _statement_before(text, start)
    if re.search(r"\]\s*[^\[\]]*=>\s*\(?\s*$", statement):
        hint = "a command is written [action] guard -> updates; with '->', not '=>'"
    else:
        hint = (
            f"{name}' may only appear on the left of an update, as in ({name}'=...); "
            f"a guard or expression refers to the current value {name}"
        )
    return PrismSyntaxError(
        f"unexpected primed variable {name}'", span, source=text, hint=hint
    )


def _unclosed_call(statement: str) -> str | None:
    """The name before the innermost unclosed '(' of `statement`, if any."""
    depth = 0
    for i in range(len(statement) - 1, -1, -1):
        c = statement[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", statement[:i])
                return m.group(1) if m else None
            depth -= 1
    return None


_BUILTIN_NAMES = (
    "min",
    "max",
    "floor",
    "ceil",
    "round",
    "pow",
    "mod",
    "log",
    "func",
    "filter",
    "multi",
)


def _hint(tok, expected: set[str], statement: str, text: str, start: int) -> str | None:
    value = tok.value if isinstance(tok.value, str) else ""
    after = text[start : start + 2]
    if after == ":=" or (value == "=" and statement.rstrip().endswith(":")):
        return "PRISM updates are written (x'=e), not x := e"
    # `(s=1)` where an update `(s'=1)` was meant: lark parsed `(s=1)` as a
    # probability and now wants ':'.
    if "COLON" in expected and "->" in statement:
        tail = statement[statement.rfind("->") :]
        m = re.search(r"\(\s*([A-Za-z_]\w*)\s*=[^=>]", tail)
        if m:
            name = m.group(1)
            return f"an update assigns the next value with a prime: ({name}'=...)"
    if tok.type == "ARROW" or value == "->":
        return (
            "implication is written '=>'; '->' separates a command's guard from its "
            "updates"
        )
    if value in ("&", "|", "=") and text[start - 1 : start] == value:
        doubled = {"&": "'&' (not '&&')", "|": "'|' (not '||')", "=": "'=' (not '==')"}
        return f"PRISM writes {doubled[value]}"
    if value == "(" and re.search(r"[A-Za-z_]\w*\s*$", statement):
        name = re.search(r"([A-Za-z_]\w*)\s*$", statement).group(1)
        return (
            f"'{name}' is not a built-in function (min, max, floor, ceil, round, pow, "
            "mod, log)"
        )
    if value == "(" and "COLON" in expected and "->" in statement:
        return "a probability and its update are separated by ':', as in 0.5 : (x'=1)"
    callee = _unclosed_call(statement)
    if (
        callee is not None
        and callee not in _BUILTIN_NAMES
        and not re.fullmatch(r"[PRSEA]|Pm..|Rm..|Sm..", callee)
    ):
        return (
            f"'{callee}' is not a built-in function (min, max, floor, ceil, round, "
            "pow, mod, log)"
        )
    if tok.type == "RPAR" or (value == ")" and "RPAR" not in expected):
        return "unbalanced parentheses: this ')' has no matching '('"
    if "RPAR" in expected and statement.count("(") > statement.count(")"):
        return "unbalanced parentheses: a '(' is not closed"
    if "ENDMODULE" in expected and (
        tok.type in ("$END", "MODULE") or value == "module"
    ):
        return "a module must be closed with 'endmodule'"
    if "ENDREWARDS" in expected and tok.type == "$END":
        return "a reward structure must be closed with 'endrewards'"
    if value == "(" and re.search(r"[A-Za-z_]\w*\s*$", statement):
        name = re.search(r"([A-Za-z_]\w*)\s*$", statement).group(1)
        return (
            f"'{name}' is not a built-in function (min, max, floor, ceil, round, pow, "
            "mod, log)"
        )
    return _fallback_hint(tok, expected, statement, value)


_CLOSERS = {"SEMICOLON", "RPAR", "RSQB", "RBRACE", "COMMA", "COLON", "ARROW", "$END"}
_BLOCK_ENDS = ("endmodule", "endrewards", "endinit", "endsystem")


def _fallback_hint(tok, expected: set[str], statement: str, value: str) -> str | None:
    """Hints for the slips the specific rules above do not name."""
    body = statement.strip()
    if value in _BLOCK_ENDS and value.upper() not in expected:
        return f"this '{value}' closes no block (is it written twice?)"
    if "RSQB" in expected and statement.count("[") > statement.count("]"):
        if body.startswith("[") and expected == {"RSQB"}:
            return "a command starts with [] or [action], then its guard: [] s=0 -> ..."
        return "unbalanced brackets: a '[' is not closed"
    if "RBRACE" in expected and statement.count("{") > statement.count("}"):
        return "unbalanced braces: a '{' is not closed"
    if "STRING" in expected and re.search(r"\blabel\s*$", statement):
        return 'a label\'s name is quoted: label "name" = ...;'
    if tok.type == "STRING" and "STRING" not in expected:
        return "a quoted name is a label: it can be used in properties, not in a model"
    operator = re.search(r"\b([PRS](min|max)?|R\{[^}]*\})\s*$", statement)
    if operator and "LSQB" not in expected:
        return "an operator is followed by =? or a bound: P=? [ F φ ] or P>=0.9 [ F φ ]"
    if expected == {"LSQB"} and re.search(r"(=\?|[<>]=?[^\[]*)\s*$", statement):
        return "the operand of P, R or S is written in brackets: P=? [ F φ ]"
    if re.search(r"\bfilter\s*\(\s*$", statement):
        return "filter's first argument is an operator, e.g. filter(max, P=? [ F φ ])"
    if expected == {"NAME"}:
        return "a name is missing here (e.g. const int N = 3;)"
    if tok.type in _CLOSERS and len(expected & _EXPR_START) >= 3:
        shown = "the end of the input" if tok.type == "$END" else f"'{value}'"
        return f"an expression is missing before {shown}"
    if tok.type in ("NUMBER", "NAME", "LPAR", "PRIMED", "CALLNAME"):
        if "PLUS" in expected and "->" in statement:
            return "probabilistic updates are joined by '+': 0.5:(s'=1) + 0.5:(s'=2)"
        if expected & _OPERATORS or "SEMICOLON" in expected:
            return "two expressions follow each other: an operator (or ';') is missing"
    return None
