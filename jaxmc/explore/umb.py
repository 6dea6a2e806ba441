"""UMB, the unified Markov binary format (PRISM 4.10, Storm 2.0): read into
an `ExplicitModel` (`import_umb`) and written from one (`export_umb`).

The specification is public: `spec.md` of github.com/pmc-tools/umb (dated
2026-01-26), format-version 1, revision 0, which is what this module reads
and writes. A `.umb` file is a tar archive (plain, gzip or xz) of an
`index.json` (model type, counts, annotations, valuations) and little-endian
binary arrays: CSR offsets (`state-to-choices`, `choice-to-branches`), one
value per entity (`branch-to-target`, `branch-to-probability`,
`state-to-exit-rate`; booleans as bit sets: `state-is-initial`),
annotations (`annotations/aps/<id>/states`, `annotations/rewards/<id>/
{states,choices,branches}`), choice actions with their strings, and the
state valuations, bit-packed per the index's valuation class.

DTMCs, CTMCs and MDPs with double or 128-bit rational values are read; a
CTMC's branches hold probabilities, its rates are `probability x exit rate`.
Branches to the same target of a choice are merged (their rewards by the
probability-weighted mean, as the builder merges commands). Choice rewards
become the rewards of every entry of the choice, and jaxmc's transition
rewards are written as the expected reward of their choice (`sum_t P(t)
r(t)`, as PRISM and Storm write PRISM's); expectations are unchanged.
Imported models are checked as built ones are (probabilities sum to one,
targets in range, an initial state); errors name the file and the member
of the archive. Interval and parametric values, games, Markov automata and
POMDPs are refused.
"""

from __future__ import annotations

import json
import tarfile

import numpy as np

from ..errors import ExplorationError, UnsupportedError
from ..lang.ast import ModelType
from .expand import SUM_TOLERANCE
from .model import ExplicitModel, RewardStructure, StateVar
from .textfile import PathLike
from .umb_write import export_umb as export_umb


FORMAT_VERSION = 1


class _Archive:
    """The members of a UMB archive and the checks of their sizes."""

    def __init__(self, path: PathLike):
        self.file = str(path)
        try:
            with tarfile.open(path, "r:*") as tar:
                self.files = {
                    m.name.lstrip("./"): tar.extractfile(m).read()  # type: ignore[union-attr]
                    for m in tar.getmembers()
                    if m.isfile()
                }
        except (tarfile.TarError, EOFError, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise self.error(f"not a UMB archive ({e})") from None
        if "index.json" not in self.files:
            raise self.error("no index.json in the archive")

    def error(self, msg: str, member: str | None = None) -> ExplorationError:
        where = f"{self.file}" + (f" ({member})" if member else "")
        return ExplorationError(
            f"{where}: {msg}", hint="see the UMB specification (pmc-tools/umb)"
        )

    def raw(self, name: str, itemsize: int, count: int) -> bytes | None:
        data = self.files.get(name)
        if data is not None and len(data) != itemsize * count:
            raise self.error(
                f"{len(data)} bytes, expected {itemsize * count} "
                f"({count} values of {itemsize} bytes)",
                name,
            )
        return data

    def ints(self, name: str, dtype: str, count: int) -> np.ndarray | None:
        data = self.raw(name, np.dtype(dtype).itemsize, count)
        return None if data is None else np.frombuffer(data, dtype).astype(np.int64)

    def csr(self, name: str, count: int, total: int) -> np.ndarray:
        ptr = self.ints(name, "<u8", count + 1)
        if ptr is None:  # the default: index i to [i, i]
            if count != total:
                raise self.error(f"missing, but {count} != {total}", name)
            return np.arange(count + 1, dtype=np.int64)
        if ptr[0] != 0 or ptr[-1] != total or np.any(np.diff(ptr) < 0):
            raise self.error(f"not offsets from 0 to {total}", name)
        return ptr

    def bits(self, name: str, count: int) -> np.ndarray | None:
        data = self.raw(name, 8, -(-count // 64))
        if data is None:
            return None
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[:count].astype(bool)

    def values(self, name: str, typ: dict, count: int) -> np.ndarray | None:
        """Continuous numeric values (double, or 128-bit rationals)."""
        kind, size = typ.get("type"), typ.get("size")
        if kind == "double" and size in (None, 64):
            data = self.raw(name, 8, count)
            return None if data is None else np.frombuffer(data, "<f8").copy()
        if kind == "rational" and size in (None, 128):
            data = self.raw(name, 16, count)
            if data is None:
                return None
            pairs = np.frombuffer(data, [("num", "<i8"), ("den", "<u8")])
            if np.any(pairs["den"] == 0):
                raise self.error("a rational with denominator 0", name)
            return pairs["num"] / pairs["den"].astype(np.float64)
        raise UnsupportedError(
            f"{self.file} ({name}): values of type {kind} (size {size}) are not "
            "supported",
            hint="jaxmc reads double and 128-bit rational values",
        )

    def strings(self, folder: str, count: int) -> list[str] | None:
        ptr = self.ints(f"{folder}/string-mapping.bin", "<u8", count + 1)
        if ptr is None:
            return None
        text = self.files.get(f"{folder}/strings.bin", b"")
        return [text[a:b].decode("utf-8") for a, b in zip(ptr[:-1], ptr[1:])]


def _model_type(a: _Archive, ts: dict) -> ModelType:
    t, players = ts.get("time"), ts.get("#players")
    if ts.get("#observations", 0):
        raise UnsupportedError(f"{a.file}: partially observable models (POMDPs)")
    if "branch-probability-type" not in ts:
        raise UnsupportedError(f"{a.file}: models without probabilities (LTS)")
    kinds = {
        ("discrete", 0): ModelType.DTMC,
        ("discrete", 1): ModelType.MDP,
        ("stochastic", 0): ModelType.CTMC,
    }
    if (t, players) not in kinds:
        raise UnsupportedError(
            f"{a.file}: {t} time with {players} players is not supported",
            hint="jaxmc checks DTMCs, CTMCs and MDPs",
        )
    return kinds[(t, players)]


def import_umb(path: PathLike) -> ExplicitModel:
    """Read a model from a UMB archive (see the module's description)."""
    a = _Archive(path)
    try:
        index = json.loads(a.files["index.json"].decode("utf-8"))
        ts = index["transition-system"]
        n, m, nb = ts["#states"], ts["#choices"], ts["#branches"]
    except (ValueError, KeyError, TypeError) as e:
        raise a.error(f"index.json is not a UMB index ({e})") from None
    if index.get("format-version") != FORMAT_VERSION:
        raise UnsupportedError(
            f"{a.file}: UMB format-version {index.get('format-version')}",
            hint=f"jaxmc reads format-version {FORMAT_VERSION}",
        )
    mt = _model_type(a, ts)
    choice_ptr = a.csr("state-to-choices.bin", n, m)
    row_ptr = a.csr("choice-to-branches.bin", m, nb)
    target = a.ints("branch-to-target.bin", "<u8", nb)
    target = np.zeros(nb, np.int64) if target is None else target
    if nb and (target.min() < 0 or target.max() >= n):
        raise a.error(f"a target out of range 0..{n - 1}", "branch-to-target.bin")
    prob = a.values("branch-to-probability.bin", ts["branch-probability-type"], nb)
    if prob is None:
        raise a.error("missing", "branch-to-probability.bin")
    if not np.all(np.isfinite(prob)) or np.any(prob < 0):
        raise a.error("a probability that is negative or not finite")
    sums = np.add.reduceat(prob, row_ptr[:-1]) if nb else np.zeros(m)
    sums[np.diff(row_ptr) == 0] = 0.0
    bad = np.abs(sums - 1.0) > SUM_TOLERANCE
    if bad.any():
        c = int(np.argmax(bad))
        s = int(np.searchsorted(choice_ptr, c, side="right") - 1)
        raise a.error(
            f"the probabilities of choice {c} (state {s}) sum to {float(sums[c])!r}",
            "branch-to-probability.bin",
        )
    row = np.repeat(np.arange(m), np.diff(row_ptr))
    state_of_choice = np.repeat(np.arange(n), np.diff(choice_ptr))
    val = prob
    if mt == ModelType.CTMC:
        exit_type = ts.get("exit-rate-type", {"type": "double"})
        rates = a.values("state-to-exit-rate.bin", exit_type, n)
        if rates is None:
            raise a.error("a CTMC without exit rates", "state-to-exit-rate.bin")
        val = prob * rates[state_of_choice[row]]
    ann = index.get("annotations") or {}
    rewards = _read_rewards(a, ann.get("rewards") or {}, n, m, nb, row, prob)
    labels = _read_aps(a, ann.get("aps") or {}, n)
    init = a.bits("state-is-initial.bin", n)
    if init is None or not init.any():
        raise a.error("no initial state", "state-is-initial.bin")
    labels.pop("init", None)
    actions = _read_actions(a, ts, m)
    model = _merge(mt, n, choice_ptr, row, target, val, prob, rewards, actions)
    dead = np.diff(choice_ptr) == 0
    labels["deadlock"] = labels.get("deadlock", np.zeros(n, bool)) | dead
    variables, states = _read_valuations(a, index, n)
    return ExplicitModel(
        model_type=mt,
        variables=variables,
        states=states.astype(np.int32),
        initial_states=np.flatnonzero(init).astype(np.int64),
        labels={"init": init, **labels},
        **model,
    )


def _read_rewards(a, groups, n, m, nb, row, prob):
    """Per reward annotation: (name, state [n], per entry [nb]) (None: none)."""
    out = []
    for ident, desc in groups.items():
        base = f"annotations/rewards/{ident}"
        typ = desc.get("type", {"type": "double"})
        state = a.values(f"{base}/states/values.bin", typ, n)
        choice = a.values(f"{base}/choices/values.bin", typ, m)
        branch = a.values(f"{base}/branches/values.bin", typ, nb)
        per_entry = None
        if choice is not None:
            per_entry = choice[row]
        if branch is not None:
            per_entry = branch if per_entry is None else per_entry + branch
        out.append((desc.get("alias", ident), state, per_entry))
    return out


def _read_aps(a, groups, n) -> dict[str, np.ndarray]:
    labels = {}
    for ident, desc in groups.items():
        mask = a.bits(f"annotations/aps/{ident}/states/values.bin", n)
        labels[desc.get("alias", ident)] = np.zeros(n, bool) if mask is None else mask
    return labels


def _read_actions(a, ts, m) -> list[str | None] | None:
    k = ts.get("#choice-actions", 0)
    if not k:
        return None
    ids = a.ints("actions/choices/values.bin", "<u4", m)
    ids = np.zeros(m, np.int64) if ids is None else ids
    names = a.strings("actions/choices", k)
    if names is None or (ids.size and ids.max() >= k):
        return None
    table = [x or None for x in names]
    return [table[i] for i in ids.tolist()]


def _merge(mt, n, choice_ptr, row, target, val, prob, rewards, actions):
    """Row-grouped CSR with each choice's entries sorted by target and
    duplicates merged; a self-loop for every state without choices."""
    m = choice_ptr[-1]
    dead = np.flatnonzero(np.diff(choice_ptr) == 0)
    # choices, with one new choice per deadlock, in state order
    state_of = np.concatenate([np.repeat(np.arange(n), np.diff(choice_ptr)), dead])
    corder = np.argsort(state_of, kind="stable")
    new_of_old = np.empty_like(corder)
    new_of_old[corder] = np.arange(corder.size)
    row = np.concatenate([new_of_old[row], new_of_old[m + np.arange(dead.size)]])
    target = np.concatenate([target, dead])
    val = np.concatenate([val, np.ones(dead.size)])
    weight = np.concatenate([prob, np.ones(dead.size)])
    key = row * n + target
    uniq, inv = np.unique(key, return_inverse=True)
    merged_w = np.bincount(inv, weights=weight)
    out_rewards = []
    for name, state, per_entry in rewards:
        trans = None
        if per_entry is not None:
            per_entry = np.concatenate([per_entry, np.zeros(dead.size)])
            total = np.bincount(inv, weights=per_entry * weight)
            trans = np.divide(total, merged_w, out=np.zeros_like(total),
                              where=merged_w > 0)  # fmt: skip
        neg = np.zeros(n, bool)
        if state is not None:
            neg |= state < 0
        if trans is not None and (trans < 0).any():
            neg[state_of[corder][uniq[trans < 0] // n]] = True
        neg = neg if neg.any() else None
        out_rewards.append(RewardStructure(name, state, trans, neg))
    new_row, col = uniq // n, uniq % n
    mm = corder.size
    row_ptr = np.zeros(mm + 1, np.int64)
    np.cumsum(np.bincount(new_row, minlength=mm), out=row_ptr[1:])
    choice_ptr2 = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(state_of, minlength=n), out=choice_ptr2[1:])
    acts = None
    if actions is not None:
        every = actions + [None] * dead.size
        acts = [every[c] for c in corder.tolist()]
    entry_action, names, choice_action = None, (None,), None
    if mt == ModelType.MDP:
        choice_action = tuple(acts) if acts is not None else (None,) * mm
    elif acts is not None and any(acts):
        names = (None, *sorted({x for x in acts if x is not None}))
        idx = {x: i for i, x in enumerate(names)}
        entry_action = np.array([idx[x] for x in acts], np.int32)[new_row]
    return dict(
        choice_ptr=choice_ptr2,
        row_ptr=row_ptr,
        col=col.astype(np.int64),
        val=np.bincount(inv, weights=val),
        rewards=tuple(out_rewards),
        choice_action=choice_action,
        entry_action=entry_action,
        action_names=names,
    )


def _read_valuations(a: _Archive, index: dict, n: int):
    """The state variables of the index's single valuation class (ints,
    uints with offsets, bools), or one variable `x` = the state index where
    there are none or they are not of that kind (strings, optional values,
    several classes)."""
    plain = (StateVar("x", 0, max(n - 1, 0)),), np.arange(n, dtype=np.int64)[:, None]
    desc = (index.get("valuations") or {}).get("states")
    if not desc or len(desc.get("classes", [])) != 1:
        return plain
    if "valuations/states/valuation-to-class.bin" in a.files:
        return plain
    fields = desc["classes"][0].get("variables", [])
    width = sum(f.get("padding", 0) + f.get("type", {}).get("size", 0) for f in fields)
    if width % 8 or any(f.get("is-optional") for f in fields):
        return plain
    data = a.raw("valuations/states/valuations.bin", width // 8, n)
    if data is None or width == 0:
        return plain
    bits = np.unpackbits(
        np.frombuffer(data, np.uint8).reshape(n, width // 8), axis=1, bitorder="little"
    ).astype(np.int64)
    variables, columns, pos = [], [], 0
    for f in fields:
        if "padding" in f:
            pos += f["padding"]
            continue
        typ = f.get("type", {})
        kind, size = typ.get("type"), typ.get("size", 0)
        if kind not in ("bool", "int", "uint") or not 0 < size <= 62:
            return plain
        value = bits[:, pos : pos + size] @ (1 << np.arange(size, dtype=np.int64))
        pos += size
        if kind == "int":
            value = np.where(value >= 1 << (size - 1), value - (1 << size), value)
        if kind == "bool":
            variables.append(StateVar(f["name"], 0, 1, True))
            value = (value != 0).astype(np.int64)
        else:
            value = value + int(f.get("offset", 0))
            lo = int(value.min()) if n else 0
            hi = int(value.max()) if n else 0
            variables.append(StateVar(f["name"], lo, hi))
        columns.append(value)
    if not columns or len({v.name for v in variables}) != len(variables):
        return plain
    return tuple(variables), np.stack(columns, axis=1)
