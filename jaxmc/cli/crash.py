"""The last resort: an exception that is not a `JaxmcError` is a bug in
jaxmc (or in a library under it). The user gets one line naming it and the
path of a report file holding the traceback, never a raw traceback; the exit
status is 3."""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import traceback


#: Exit status of an internal error.
EXIT_INTERNAL = 3


def report(exc: BaseException, argv: list[str] | None = None) -> int:
    """Write the traceback of `exc` to a temporary report file, print
    `internal error: <type>: <message>` and the file's path on stderr, and
    return the exit status 3."""
    what = f"{type(exc).__name__}: {exc}".rstrip(": ")
    first = what.splitlines()[0] if what else type(exc).__name__
    try:
        fd, path = tempfile.mkstemp(prefix="jaxmc-crash-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(_details(exc, argv))
        where = f"a report with the traceback is in {path}"
    except OSError as e:  # no writable temporary folder: say so, still no traceback
        where = f"(could not write a crash report: {e})"
    print(f"internal error: {first}", file=sys.stderr)
    print(
        f"{where}\nplease report this as a jaxmc bug, with that file", file=sys.stderr
    )
    return EXIT_INTERNAL


def _details(exc: BaseException, argv: list[str] | None) -> str:
    from .. import __version__

    lines = [
        f"jaxmc {__version__}, Python {platform.python_version()}, "
        f"{platform.platform()}",
        f"command: jaxmc {' '.join(argv if argv is not None else sys.argv[1:])}",
    ]
    jax = sys.modules.get("jax")
    if jax is not None:
        lines.append(f"jax {getattr(jax, '__version__', '?')}")
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return "\n".join(lines) + "\n\n" + tb
