"""Errors located in their source: the text attached to an error raised
while checking, and a span written as `file:line`."""

from __future__ import annotations

import dataclasses

from ..errors import JaxmcError
from ..lang import ast


def attach_source(err: JaxmcError, source: str | None, file: str | None) -> JaxmcError:
    if source is not None:
        err.with_source(source, file)
    elif file is not None and err.span is not None and err.span.file is None:
        err.span = dataclasses.replace(err.span, file=file)
        err.args = (err._render(),)
    return err


def where(span: ast.Span | None) -> str:
    if span is None:
        return "elsewhere"
    return f"{span.file or '<string>'}:{span.line}"
