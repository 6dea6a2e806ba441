"""PRISM's model export options (`-exportmodel FILE:matlab,actions=false`,
`-exportlabels FILE:proplabels`, ...) and the files a model export writes
under them: PRISM's explicit files (plain, Matlab or rows), the combined
`.pexp` file and the Graphviz `.dot` graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import SemanticError, UnsupportedError
from . import formats, formats_dot, formats_matlab, formats_rows
from .model import ExplicitModel
from .pexp import format_pexp
from .reorder import lexicographic


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How a model part is written (PRISM's `ModelExportOptions`)."""

    #: "explicit", "matlab" or "dot" (`format=`, `matlab`, or the file's extension)
    format: str = "explicit"
    #: one line per matrix row (`rows`)
    rows: bool = False
    #: actions on transitions/choices (`actions=false` leaves them out)
    actions: bool = True
    #: the `#` comment headers (`headers=false` leaves them out)
    headers: bool = True
    #: significant digits of values (`precision=N`; default PRISM's)
    precision: int | None = None
    #: also the labels of the properties file (`proplabels`)
    proplabels: bool = False


#: The options of each switch (PRISM's option parsers).
MODEL_OPTIONS = ("format", "matlab", "rows", "actions", "headers", "precision",
                 "proplabels")  # fmt: skip
ENTITY_OPTIONS = ("headers", "precision")
LABEL_OPTIONS = ("headers", "precision", "matlab", "proplabels")
PROPLABEL_OPTIONS = ("headers", "precision", "matlab")
_NOT_HERE = ("rewards", "labels", "states", "obs", "zip", "text")


def split_spec(spec: str) -> tuple[str, str]:
    """`FILE:options` → (FILE, options); (spec, "") without options (a
    colon inside a path, `C:/x` or `a/b:c/d`, is not one)."""
    head, colon, opts = spec.rpartition(":")
    if colon and opts and "/" not in opts and "\\" not in opts and len(head) > 1:
        return head, opts
    return spec, ""


def parse_options(switch: str, spec: str, allowed: Sequence[str]) -> ExportOptions:
    """The options of `switch FILE:opt,opt=v,...` (those in `allowed`)."""
    _, text = split_spec(spec)
    kw: dict = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, eq, value = item.partition("=")
        if key not in allowed:
            if key in _NOT_HERE:
                raise UnsupportedError(
                    f"{switch} {spec}: the option `{key}` is not supported",
                    hint="options: " + ", ".join(allowed),
                )
            raise SemanticError(
                f"{switch} {spec}: unknown option `{item}`",
                hint="options: " + ", ".join(allowed),
            )
        if key in ("matlab", "rows", "proplabels"):
            if eq:
                raise SemanticError(f"{switch} {spec}: `{key}` takes no value")
            kw.update({"matlab": {"format": "matlab"}, "rows": {"rows": True},
                       "proplabels": {"proplabels": True}}[key])  # fmt: skip
        elif key in ("actions", "headers"):
            if value not in ("true", "false"):
                raise SemanticError(
                    f"{switch} {spec}: `{key}` is true or false, not `{value}`"
                )
            kw[key] = value == "true"
        elif key == "precision":
            if not value.isdigit() or not 1 <= int(value) <= 17:
                raise SemanticError(
                    f"{switch} {spec}: precision is a number of digits, 1 to 17"
                )
            kw["precision"] = int(value)
        else:  # format
            if value not in ("explicit", "matlab", "dot", "drn", "umb"):
                raise SemanticError(
                    f"{switch} {spec}: format is explicit, matlab, dot, drn or umb"
                )
            kw["format"] = value
    return ExportOptions(**kw)


def with_labels(
    model: ExplicitModel, extra: Mapping[str, np.ndarray] | None, only: bool = False
) -> tuple[ExplicitModel, list[str] | None]:
    """`model` with the labels `extra` (per state, in `model`'s order) added,
    and the label names a `.lab` file lists: PRISM's ("init", "deadlock",
    the model's) then the new ones; only the new ones with `only`."""
    if not extra:
        return model, ([] if only else None)
    names = [] if only else formats._label_order(model)
    names += [k for k in extra if k not in names]
    labels = {**model.labels, **{k: np.asarray(v, bool) for k, v in extra.items()}}
    return dataclasses.replace(model, labels=labels), names


def part_texts(
    model: ExplicitModel,
    part: str,
    opts: ExportOptions,
    label_names: Sequence[str] | None = None,
) -> list[str]:
    """The text of one part (`tra`, `sta`, `lab`, `srew`, `trew`, `pexp`,
    `dot`) of `model` (in PRISM's state order already); one text per reward
    structure for `srew`/`trew`."""
    p, a = opts.precision, opts.actions
    matlab = opts.format == "matlab"
    if part == "dot" or opts.format == "dot":
        return [formats_dot.format_dot(model, actions=a, precision=p)]
    if part == "pexp":
        if not opts.headers:
            raise SemanticError("a .pexp file needs its headers (headers=false)")
        return [format_pexp(model, actions=a, precision=p, label_names=label_names)]
    k = range(len(model.rewards))
    if part == "tra":
        if matlab:
            texts = [formats_matlab.format_tra(model, precision=p)]
        elif opts.rows:
            texts = [formats_rows.format_tra(model, actions=a, precision=p)]
        else:
            texts = [formats.format_tra(model, actions=a, precision=p)]
    elif part == "sta":
        texts = [(formats_matlab if matlab else formats).format_sta(model)]
    elif part == "lab":
        texts = [(formats_matlab if matlab else formats).format_lab(model, label_names)]
    elif part == "srew":
        mod = formats_matlab if matlab else formats
        texts = [mod.format_srew(model, i, precision=p) for i in k]
    elif part == "trew":
        mod = formats_matlab if matlab else formats_rows if opts.rows else formats
        texts = [mod.format_trew(model, i, precision=p) for i in k]
    else:
        raise ValueError(f"unknown model part {part!r}")
    if not opts.headers:
        texts = [_no_headers(t) for t in texts]
    return texts


def _no_headers(text: str) -> str:
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    return "".join(lines[i:])


def numbered(path: str, i: int, k: int) -> str:
    """PRISM's name of reward structure `i` (0-based) of `k` in `path`:
    `base.srew` → `base1.srew`, ... when there are several."""
    if k <= 1:
        return path
    stem, dot, ext = path.rpartition(".")
    return f"{stem}{i + 1}.{ext}" if dot and "/" not in ext else f"{path}{i + 1}"


def export_parts(
    model: ExplicitModel,
    base: str,
    parts: Sequence[str],
    opts: ExportOptions,
    extra_labels: Mapping[str, np.ndarray] | None = None,
) -> list[Path]:
    """Write the `parts` of `model` as `base.<part>` (reward structures
    numbered as PRISM numbers them) under `opts`; `extra_labels` (with
    `opts.proplabels`) are added to the `.lab`/`.pexp` labels.
    **Returns:** the paths written."""
    model, names = with_labels(model, extra_labels if opts.proplabels else None)
    model = lexicographic(model)
    written = []
    for part in parts:
        texts = part_texts(model, part, opts, names)
        for i, text in enumerate(texts):
            path = Path(numbered(f"{base}.{part}", i, len(texts)))
            path.write_text(text)
            written.append(path)
    return written
