"""Reading PRISM source files: UTF-8 text or a located error.

Every model and properties file jaxmc reads goes through `read_source`, so a
missing file, a directory or a file in another encoding ends in a `JaxmcError`
that names the file (and, for bad bytes, the line and column), never in a
`UnicodeDecodeError` traceback.
"""

from __future__ import annotations

import os

from ..errors import JaxmcError, PrismSyntaxError, SourceFileNotFound
from .ast import Span


def read_source(path: str | os.PathLike) -> str:
    """The text of the PRISM model or properties file at `path`.

    The file must be UTF-8 (a leading byte-order mark is dropped); line ends
    are kept as they are (the lexer accepts `\\r\\n`).

    **Arguments:**
    - `path`: the file to read.

    **Returns:** the decoded text.

    **Raises:**
    - `SourceFileNotFound` (a `JaxmcError` and a `FileNotFoundError`) when
      there is no file at `path`;
    - `PrismSyntaxError` located at the first byte that is not UTF-8
      ("file is not UTF-8 text (byte 0xff)");
    - `JaxmcError` when `path` cannot be read (a directory, no permission).
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise SourceFileNotFound(name) from None
    except IsADirectoryError:
        raise JaxmcError(
            f"`{name}` is a directory, not a model or properties file",
            hint="give the path of a .pm, .sm, .nm, .prism or .props file",
        ) from None
    except OSError as e:
        raise JaxmcError(f"cannot read `{name}`: {e.strerror or e}") from None
    return decode_source(data, name)


def decode_source(data: bytes, file: str | None = None) -> str:
    """`data` decoded as UTF-8 (see `read_source`); `file` names it in errors."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        good = data[: e.start].decode("utf-8")
        line = good.count("\n") + 1
        # Columns count characters, as in every other error.
        column = len(good) - (good.rfind("\n") + 1) + 1
        bad = data[e.start]
        raise PrismSyntaxError(
            f"file is not UTF-8 text (byte 0x{bad:02x})",
            Span(file, line, column, line, column + 1),
            source=data.decode("utf-8", errors="replace"),
            hint="save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 FILE`",
        ) from None
