"""Writing UMB archives (format-version 1; the format is described in
`jaxmc.explore.umb`, which reads it): a gzip-compressed tar of `index.json`
and the binary arrays, as PRISM and Storm write them by default."""

from __future__ import annotations

import io
import json
import re
import tarfile
import time
from pathlib import Path

import numpy as np

from ..errors import UnsupportedError
from ..lang.ast import ModelType
from .drn_format import choice_actions
from .model import ExplicitModel
from .textfile import PathLike


_DOUBLE = {"type": "double", "size": 64}
_BOOL = {"type": "bool", "size": 1}


def _bits(mask: np.ndarray) -> bytes:
    """A bit set padded to whole 64-bit words."""
    n = mask.size
    out = np.zeros(-(-n // 64) * 64, dtype=np.uint8)
    out[:n] = np.asarray(mask, bool)
    return np.packbits(out, bitorder="little").tobytes()


def _u64(a) -> bytes:
    return np.asarray(a, dtype="<u8").tobytes()


def _f64(a) -> bytes:
    return np.asarray(a, dtype="<f8").tobytes()


def _identifier(name: str, taken: set[str]) -> str:
    """An annotation id (`[0-9a-z_-]+`) for `name`, unique among `taken`."""
    base = re.sub(r"[^0-9a-z_-]", "_", name.lower()) or "a"
    ident, k = base, 1
    while ident in taken:
        ident, k = f"{base}_{k}", k + 1
    taken.add(ident)
    return ident


def _valuations(model: ExplicitModel) -> tuple[list[dict], bytes]:
    """One valuation class: each variable as a `uint` of the fewest bits
    that hold `value - low` (offset `low`), booleans as 1 bit, padded to
    whole bytes; and the bit-packed valuations."""
    n = model.num_states
    fields, columns = [], []
    for j, v in enumerate(model.variables):
        col = model.states[:, j].astype(np.int64)
        if v.is_bool:
            fields.append({"name": v.name, "type": _BOOL})
            columns.append(((col != 0).astype(np.int64), 1))
            continue
        lo = int(col.min()) if n else 0
        hi = int(col.max()) if n else 0
        size = max(1, (hi - lo).bit_length())
        fields.append({"name": v.name, "type": {"type": "uint", "size": size},
                       "offset": lo, "lower": lo, "upper": hi})  # fmt: skip
        columns.append((col - lo, size))
    width = sum(size for _, size in columns)
    if width % 8:
        fields.append({"padding": 8 - width % 8})
        width += 8 - width % 8
    bits = np.zeros((n, width), dtype=np.uint8)
    pos = 0
    for col, size in columns:
        bits[:, pos : pos + size] = (col[:, None] >> np.arange(size)) & 1
        pos += size
    packed = np.packbits(bits, axis=1, bitorder="little")
    return fields, packed.tobytes()


def export_umb(model: ExplicitModel, path: PathLike) -> Path:
    """Write `model` as a UMB archive (states numbered as in `model`);
    **returns** the path written."""
    n, m, nnz, mt = (model.num_states, model.num_choices, model.num_transitions,
                     model.model_type)  # fmt: skip
    if mt not in (ModelType.DTMC, ModelType.CTMC, ModelType.MDP):
        raise UnsupportedError(f"UMB export of a {mt.value} is not supported")
    row = model.row_of_entry()
    files: dict[str, bytes] = {}
    total = np.add.reduceat(model.val, model.row_ptr[:-1]) if m else np.zeros(0)
    ctmc = mt == ModelType.CTMC
    prob = model.val / total[row] if ctmc else model.val
    if ctmc:
        files["state-to-exit-rate.bin"] = _f64(total[model.choice_ptr[:-1]])
    if mt == ModelType.MDP:
        files["state-to-choices.bin"] = _u64(model.choice_ptr)
    files["state-is-initial.bin"] = _bits(model.labels["init"])
    files["choice-to-branches.bin"] = _u64(model.row_ptr)
    files["branch-to-target.bin"] = _u64(model.col)
    files["branch-to-probability.bin"] = _f64(prob)
    acts = choice_actions(model, row, ",", "").tolist()
    names = sorted(set(acts))
    index_of = {a: i for i, a in enumerate(names)}
    files["actions/choices/values.bin"] = np.array(
        [index_of[a] for a in acts], dtype="<u4"
    ).tobytes()
    encoded = [a.encode("utf-8") for a in names]
    files["actions/choices/string-mapping.bin"] = _u64(
        np.concatenate([[0], np.cumsum([len(e) for e in encoded])])
    )
    files["actions/choices/strings.bin"] = b"".join(encoded)
    aps, taken = {}, set()
    for name, mask in model.labels.items():
        if name == "init":
            continue
        ident = _identifier(name, taken)
        aps[ident] = {"alias": name, "applies-to": ["states"], "type": _BOOL}
        files[f"annotations/aps/{ident}/states/values.bin"] = _bits(mask)
    rewards, taken = {}, set()
    for i, r in enumerate(model.rewards):
        name = r.name if r.name else f"rew{i}"
        ident = _identifier(name, taken)
        base = f"annotations/rewards/{ident}"
        applies = []
        if r.state is not None:
            applies.append("states")
            files[f"{base}/states/values.bin"] = _f64(r.state)
        if r.transition is not None:  # the expected reward of each choice
            weights = prob * np.asarray(r.transition, float)
            applies.append("choices")
            files[f"{base}/choices/values.bin"] = _f64(
                np.bincount(row, weights=weights, minlength=m)
            )
        rewards[ident] = {"alias": name, "applies-to": applies or ["states"],
                          "type": _DOUBLE}  # fmt: skip
        if not applies:
            files[f"{base}/states/values.bin"] = _f64(np.zeros(n))
    index: dict = {
        "format-version": 1,
        "format-revision": 0,
        "file-data": {"tool": "jaxmc", "creation-date": int(time.time())},
        "transition-system": {
            "time": "stochastic" if ctmc else "discrete",
            "#players": 1 if mt == ModelType.MDP else 0,
            "#states": n,
            "#initial-states": int(np.asarray(model.labels["init"]).sum()),
            "#choices": m,
            "#choice-actions": len(names),
            "#branches": nnz,
            "#branch-actions": 0,
            "#observations": 0,
            "branch-probability-type": _DOUBLE,
            **({"exit-rate-type": _DOUBLE} if ctmc else {}),
        },
        "annotations": {"aps": aps, "rewards": rewards},
    }
    if model.variables:
        fields, packed = _valuations(model)
        index["valuations"] = {
            "states": {"unique": False, "classes": [{"variables": fields}]}
        }
        files["valuations/states/valuations.bin"] = packed
    path = Path(path)
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in [("index.json", json.dumps(index, indent=1).encode())] + [
            *files.items()
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = index["file-data"]["creation-date"]
            tar.addfile(info, io.BytesIO(data))
    return path
