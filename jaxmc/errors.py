"""The exceptions jaxmc raises, all subclasses of `JaxmcError`.

Front-end errors carry a `Span` and render as

    model.pm:12:17: error: expected ';' after the command
       12 |   [] s=0 -> (s'=1)
          |                   ^
    hint: every command ends with ';'

so that a user sees where and what, never a parser traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from .lang.ast import Span


class JaxmcError(Exception):
    """Base class of every error jaxmc raises on purpose.

    **Arguments:**
    - `message`: what went wrong, one line.
    - `span`: where, if it comes from a source file.
    - `source`: the text of that file, to quote the line.
    - `hint`: how to fix it, if we can guess.
    """

    kind = "error"

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        *,
        source: str | None = None,
        hint: str | None = None,
    ):
        self.message = message
        self.span = span
        self.source = source
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"{self.span}: " if self.span is not None else ""
        lines = [f"{head}{self.kind}: {self.message}"]
        quoted = _quote(self.source, self.span)
        if quoted:
            lines.append(quoted)
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)

    def with_source(self, source: str, file: str | None = None) -> JaxmcError:
        """Attach the source text (and file name) after the fact, e.g. when the
        error was raised by code that only had the AST."""
        import dataclasses

        self.source = source
        if self.span is not None and file is not None and self.span.file is None:
            self.span = dataclasses.replace(self.span, file=file)
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class PrismSyntaxError(JaxmcError):
    """The text is not in the PRISM model or property language."""

    kind = "syntax error"


class SourceFileNotFound(JaxmcError, FileNotFoundError):
    """A model or properties file that does not exist. Also a
    `FileNotFoundError`, so code that catches the built-in keeps working."""

    def __init__(self, path: str, *, hint: str | None = None):
        JaxmcError.__init__(
            self,
            f"file `{path}` does not exist",
            hint=hint or "check the path (it is relative to the current directory)",
        )
        self.filename = path
        self.errno = 2
        self.strerror = "No such file or directory"


class SemanticError(JaxmcError):
    """Well-formed text that means nothing: an unknown name, a type clash, a
    missing constant value, an initial value out of range, ..."""


class UnsupportedError(JaxmcError):
    """Valid PRISM that jaxmc does not handle (yet). Never silently ignored."""

    kind = "unsupported"


class ExplorationError(JaxmcError):
    """A problem found while building the state space: an update out of a
    variable's range, probabilities not summing to one, a deadlock (when
    deadlocks are errors), too many states."""


class ConvergenceError(JaxmcError):
    """An iterative method stopped before meeting its convergence criterion."""


class ModelCheckingError(JaxmcError):
    """A property that cannot be checked on this model (wrong model type,
    unknown reward structure, several initial states without a filter, ...)."""


def _quote(source: str | None, span: Span | None) -> str:
    if not source or span is None or span.line < 1:
        return ""
    lines = source.splitlines()
    if span.line > len(lines):
        return ""
    text = lines[span.line - 1].expandtabs(1)
    width = len(str(span.line))
    col = max(span.column, 1)
    if span.end_line == span.line and span.end_column and span.end_column > col:
        carets = "^" * (span.end_column - col)
    else:
        carets = "^"
    if len(text) > _QUOTE_WIDTH:
        # a window of the line around the column (generated models have
        # lines of many thousands of characters)
        start = max(0, col - 1 - _QUOTE_WIDTH // 4)
        end = start + _QUOTE_WIDTH
        head = "..." if start > 0 else ""
        tail = "..." if end < len(text) else ""
        text = head + text[start:end] + tail
        col = col - start + len(head)
        carets = carets[: max(1, len(text) - col + 1)]
    return f" {span.line} | {text}\n {' ' * width} | {' ' * (col - 1)}{carets}"


#: The most characters of a source line an error message quotes.
_QUOTE_WIDTH = 100
