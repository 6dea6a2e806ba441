"""The properties of a run: a properties file and `--prop` texts, each
reported against the text as the user gave it.

Each `--prop` text is parsed on its own, as source `<--prop N>`, so that a
syntax error quotes what was typed (and never a `;` the command line added).
The texts are then checked together, after the file (a `--prop` may refer to
the file's named properties, constants and labels): each starts on a fresh
line of the combined text, and an error located in a `--prop`'s lines is
moved back to that `--prop`'s own line and column.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class _Piece:
    name: str  # the source name in messages: the file's path, or `<--prop N>`
    text: str
    first_line: int  # 1-based line of the combined text where it starts
    n_lines: int


class PropertySources:
    """A properties file (optional) and `--prop` texts, combined for checking,
    with `relocate` to report errors against the text each came from."""

    def __init__(self, file: str | None, file_text: str | None, props: list[str]):
        self.file = file
        self.pieces: list[_Piece] = []
        parts: list[str] = []
        line = 1
        if file_text is not None:
            parts.append(file_text)
            line += file_text.count("\n") + (0 if file_text.endswith("\n") else 1)
        for k, text in enumerate(props, 1):
            n = text.count("\n") + 1
            self.pieces.append(_Piece(f"<--prop {k}>", text, line, n))
            parts.append(text)
            line += n
        self.text = "\n".join(p.rstrip("\n") if i < len(parts) - 1 else p
                              for i, p in enumerate(parts))  # fmt: skip

    def __bool__(self) -> bool:
        return bool(self.pieces) or self.file is not None

    def parse(self, jaxmc, model, setting):
        """Syntax-check each `--prop` on its own, then parse and check all
        together (`jaxmc.parse_properties`, errors kept per property)."""
        from ..lang import parse_properties

        for piece in self.pieces:
            parse_properties(piece.text, file=piece.name)
        try:
            props = jaxmc.parse_properties(
                self.text, model, setting, file=self.file, errors="keep"
            )
        except jaxmc.JaxmcError as e:
            raise self.relocate(e) from None
        for p in props:
            if p.error is not None:
                self.relocate(p.error)
        return props

    def relocate(self, err):
        """Move `err`'s location from the combined text to the `--prop` it
        lies in (in place; returns `err`)."""
        span = err.span
        if span is None or not self.pieces or span.file not in (None, self.file):
            return err
        for piece in self.pieces:
            last = piece.first_line + piece.n_lines - 1
            if piece.first_line <= span.line <= last:
                shift = piece.first_line - 1
                end = span.end_line - shift if span.end_line is not None else None
                err.span = dataclasses.replace(
                    span, file=piece.name, line=span.line - shift, end_line=end
                )
                err.source = piece.text
                err.args = (err._render(),)
                break
        return err
