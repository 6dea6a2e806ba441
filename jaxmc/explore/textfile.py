"""Paths of model files, and the text of a file that may be compressed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union


PathLike = Union[str, "os.PathLike[str]"]


def read_text(path: PathLike) -> str:
    """The text of `path`, gunzipped (`.gz`) or un-xz'd (`.xz`) as its name says."""
    path = Path(path)
    if path.suffix == ".gz":
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    if path.suffix == ".xz":
        import lzma

        with lzma.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")
