"""Reading PRISM's explicit model files (`.tra`, `.sta`, `.lab`, `.srew`,
`.trew`; formats described in `jaxmc.explore.formats`) into an `ExplicitModel`.

Lines starting with `#` are comments. PRISM's rules apply: the
model type comes from the caller (or the `.tra` comment, or the shape of its
header), states without outgoing transitions get a self-loop and the
`"deadlock"` label, a missing `.sta` gives one variable `x : [0..n-1]`, and a
missing `.lab` makes state 0 the only initial state.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Sequence
from typing import IO

import numpy as np

from ..errors import ExplorationError, UnsupportedError
from ..lang.ast import ModelType
from .model import ExplicitModel, RewardStructure, StateVar
from .textfile import PathLike, read_text


def _read(src: PathLike | IO[str]) -> tuple[str, str]:
    if isinstance(src, io.TextIOBase) or hasattr(src, "read"):
        return src.read(), getattr(src, "name", "<stream>")  # type: ignore[union-attr]
    return read_text(src), str(src)  # type: ignore[arg-type]


def _content_lines(text: str) -> list[str]:
    return [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]


def _comments(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.lstrip().startswith("#")]


def _bad(file: str, msg: str) -> ExplorationError:
    return ExplorationError(f"{file}: {msg}")


def _parse_tra(text: str, file: str, model_type: ModelType | None):
    lines = _content_lines(text)
    if not lines:
        raise _bad(file, "empty transition file")
    header = lines[0].split()
    if model_type is None:
        model_type = ModelType.DTMC
        for c in _comments(text):
            m = re.match(r"#\s*Transitions\s*\((\w+)\)", c)
            if m:
                kinds = {
                    "DTMC": ModelType.DTMC,
                    "CTMC": ModelType.CTMC,
                    "MDP": ModelType.MDP,
                }
                if m.group(1) not in kinds:
                    raise UnsupportedError(
                        f"{file}: model type {m.group(1)} is not supported"
                    )
                model_type = kinds[m.group(1)]
        if len(header) == 3 and model_type != ModelType.MDP:
            model_type = ModelType.MDP
    nd = model_type == ModelType.MDP
    want = 3 if nd else 2
    if len(header) != want:
        raise _bad(
            file,
            f"expected a header of {want} numbers for a {model_type.value}, got "
            f"{lines[0]!r}",
        )
    n = int(header[0])
    ncols = 4 if nd else 3
    body = [ln.split() for ln in lines[1:]]
    if any(len(p) < ncols or len(p) > ncols + 1 for p in body):
        bad = next(
            ln for ln, p in zip(lines[1:], body) if len(p) < ncols or len(p) > ncols + 1
        )
        raise _bad(file, f"malformed transition line {bad!r}")
    if any(p[ncols - 1].startswith("[") for p in body):
        raise UnsupportedError(f"{file}: interval models are not supported")
    ints = np.array(
        [[int(x) for x in p[: ncols - 1]] for p in body], dtype=np.int64
    ).reshape(-1, ncols - 1)
    vals = np.array([float(p[ncols - 1]) for p in body], dtype=np.float64)
    acts = [p[ncols] if len(p) > ncols else None for p in body]
    if ints.size and (
        ints[:, 0].max() >= n or ints[:, -1].max() >= n or ints.min() < 0
    ):
        raise _bad(file, f"state index out of range 0..{n - 1}")
    return model_type, n, ints, vals, acts


def _parse_sta(text: str, file: str, n: int):
    lines = _content_lines(text)
    m = re.fullmatch(r"\((.*)\)", lines[0]) if lines else None
    if m is None:
        raise _bad(file, "expected a header `(x,y,...)`")
    names = [x.strip() for x in m.group(1).split(",") if x.strip()]
    k = len(names)
    states = np.zeros((n, k), dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    is_bool = np.zeros(k, dtype=bool)
    for ln in lines[1:]:
        mm = re.fullmatch(r"(\d+)\s*:\s*\((.*)\)", ln)
        if mm is None:
            raise _bad(file, f"malformed state line {ln!r}")
        i = int(mm.group(1))
        if i >= n:
            raise _bad(file, f"state {i} out of range 0..{n - 1}")
        vals = [x.strip() for x in mm.group(2).split(",")] if k else []
        if len(vals) != k:
            raise _bad(file, f"state {i} has {len(vals)} values, expected {k}")
        for j, x in enumerate(vals):
            if x in ("true", "false"):
                is_bool[j] = True
                states[i, j] = x == "true"
            else:
                states[i, j] = int(x)
        seen[i] = True
    if not seen.all():
        raise _bad(file, f"no valuation for state {int(np.argmin(seen))}")
    variables = tuple(
        StateVar(name, 0, 1, True) if is_bool[j] else
        StateVar(name, int(states[:, j].min(initial=0)) if n else 0,
                 int(states[:, j].max(initial=0)) if n else 0)
        for j, name in enumerate(names)
    )  # fmt: skip
    return variables, states


def _parse_lab(text: str, file: str, n: int) -> dict[str, np.ndarray]:
    lines = _content_lines(text)
    if not lines:
        return {}
    decl = re.findall(r'(\d+)="([^"]*)"', lines[0])
    names = {int(i): name for i, name in decl}
    labels = {name: np.zeros(n, dtype=bool) for name in names.values()}
    for ln in lines[1:]:
        s, _, rest = ln.partition(":")
        try:
            state = int(s)
            ids = [int(x) for x in rest.split()]
        except ValueError:
            raise _bad(file, f"malformed label line {ln!r}") from None
        if not 0 <= state < n:
            raise _bad(file, f"state {state} out of range 0..{n - 1}")
        for i in ids:
            if i not in names:
                raise _bad(file, f"undeclared label index {i}")
            labels[names[i]][state] = True
    return labels


def _reward_name(text: str) -> str | None:
    for c in _comments(text):
        m = re.match(r'#\s*Reward structure\s*"([^"]*)"', c)
        if m:
            return m.group(1)
    return None


def import_explicit(
    tra: PathLike | IO[str],
    sta: PathLike | IO[str] | None = None,
    lab: PathLike | IO[str] | None = None,
    srew: PathLike | IO[str] | Sequence[PathLike] | None = None,
    trew: PathLike | IO[str] | Sequence[PathLike] | None = None,
    *,
    model_type: ModelType | str | None = None,
) -> ExplicitModel:
    """Read a model from PRISM's explicit files.

    **Arguments:**

    - `tra`: the transitions file (path, `.gz` path, or text stream).
    - `sta`, `lab`: states and labels files (optional).
    - `srew`, `trew`: a state/transition rewards file, or a list of them (one
      per reward structure, paired by position; None where a structure has
      none of that kind). A structure's name comes from the files'
      `# Reward structure "name"` comment.
    - `model_type`: "dtmc", "ctmc" or "mdp". If None, the `# Transitions (...)`
      comment decides, else a 3-number header means an MDP, else a DTMC.

    **Returns:** an `ExplicitModel` with states numbered as in the files.
    Deadlock states get a self-loop (probability/rate 1), as in PRISM, and are
    marked by the `"deadlock"` label (as are states the `.lab` file marks).
    """
    if isinstance(model_type, str):
        model_type = ModelType(model_type.lower())
    text, file = _read(tra)
    model_type, n, ints, vals, acts = _parse_tra(text, file, model_type)
    nd = model_type == ModelType.MDP
    src = ints[:, 0]
    if nd:
        cidx, dst = ints[:, 1], ints[:, 2]
    else:
        cidx, dst = np.zeros_like(src), ints[:, 1]
    # Choices are the distinct (state, choice index) pairs; deadlocks get one.
    deadlock = np.ones(n, dtype=bool)
    deadlock[src] = False
    dl = np.nonzero(deadlock)[0]
    src = np.concatenate([src, dl])
    cidx = np.concatenate([cidx, np.zeros_like(dl)])
    dst = np.concatenate([dst, dl])
    vals = np.concatenate([vals, np.ones(dl.size)])
    acts = acts + [None] * dl.size
    order = np.lexsort((dst, cidx, src))
    src, cidx, dst, vals = src[order], cidx[order], dst[order], vals[order]
    acts = [acts[i] for i in order.tolist()]
    new_choice = np.ones(src.size, dtype=bool)
    new_choice[1:] = (src[1:] != src[:-1]) | (cidx[1:] != cidx[:-1])
    choice_of_entry = np.cumsum(new_choice) - 1
    m = int(new_choice.sum())
    if np.any((src[1:] == src[:-1]) & (cidx[1:] == cidx[:-1]) & (dst[1:] == dst[:-1])):
        raise _bad(file, "duplicate transition")
    row_ptr = np.zeros(m + 1, dtype=np.int64)
    np.add.at(row_ptr, choice_of_entry + 1, 1)
    row_ptr = np.cumsum(row_ptr)
    choice_state = src[row_ptr[:-1]]
    choice_ptr = np.searchsorted(choice_state, np.arange(n + 1)).astype(np.int64)
    choice_action = tuple(acts[i] for i in row_ptr[:-1].tolist()) if nd else None
    entry_action, action_names = None, (None,)
    if not nd and any(acts):
        action_names = (None, *sorted({a for a in acts if a is not None}))
        index = {a: i for i, a in enumerate(action_names)}
        entry_action = np.array([index[a] for a in acts], dtype=np.int32)

    if sta is not None:
        stext, sfile = _read(sta)
        variables, states = _parse_sta(stext, sfile, n)
    else:
        variables = (StateVar("x", 0, max(n - 1, 0)),)
        states = np.arange(n, dtype=np.int64)[:, None]

    labels: dict[str, np.ndarray] = {}
    if lab is not None:
        ltext, lfile = _read(lab)
        labels = _parse_lab(ltext, lfile, n)
    init = labels.pop("init", None)
    if init is None:
        init = np.zeros(n, dtype=bool)
        init[:1] = True
    # States that were deadlocks before an earlier export fixed them keep the
    # label; states without transitions in this file are new deadlocks.
    given = labels.pop("deadlock", None)
    if given is not None:
        deadlock = deadlock | given
    labels = {"init": init, "deadlock": deadlock, **labels}

    rewards = _import_rewards(srew, trew, n, nd, choice_ptr, row_ptr, dst)
    return ExplicitModel(
        model_type=model_type,
        variables=variables,
        states=states.astype(np.int32),
        initial_states=np.nonzero(init)[0].astype(np.int64),
        choice_ptr=choice_ptr,
        row_ptr=row_ptr,
        col=dst.astype(np.int64),
        val=vals.astype(np.float64),
        labels=labels,
        rewards=rewards,
        choice_action=choice_action,
        entry_action=entry_action,
        action_names=action_names,
    )


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, (str, os.PathLike)) or hasattr(x, "read"):
        return [x]
    return list(x)


def _import_rewards(
    srew, trew, n, nd, choice_ptr, row_ptr, col
) -> tuple[RewardStructure, ...]:
    srews, trews = _as_list(srew), _as_list(trew)
    out = []
    for i in range(max(len(srews), len(trews))):
        name = None
        state = transition = None
        if i < len(srews) and srews[i] is not None:
            text, file = _read(srews[i])
            name = _reward_name(text)
            lines = _content_lines(text)
            state = np.zeros(n)
            for ln in lines[1:]:
                s, r = ln.split()
                if not 0 <= int(s) < n:
                    raise _bad(file, f"state {s} out of range 0..{n - 1}")
                state[int(s)] = float(r)
        if i < len(trews) and trews[i] is not None:
            text, file = _read(trews[i])
            name = name or _reward_name(text)
            lines = _content_lines(text)
            transition = np.zeros(col.size)
            for ln in lines[1:]:
                p = ln.split()
                if nd:
                    s, c, t, r = int(p[0]), int(p[1]), int(p[2]), float(p[3])
                else:
                    s, c, t, r = int(p[0]), 0, int(p[1]), float(p[2])
                if not 0 <= s < n or c >= choice_ptr[s + 1] - choice_ptr[s]:
                    raise _bad(file, f"no choice {c} in state {s}")
                row = choice_ptr[s] + c
                lo, hi = row_ptr[row], row_ptr[row + 1]
                j = lo + np.searchsorted(col[lo:hi], t)
                if j >= hi or col[j] != t:
                    raise _bad(file, f"reward on a missing transition {ln!r}")
                transition[j] = r
        out.append(RewardStructure(name, state, transition))
    return tuple(out)
