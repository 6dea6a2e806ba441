"""The graph fixed points of `jaxmc.numerics.graph` (prob0/prob1 for
DTMCs/CTMCs, prob0A/prob0E/prob1A/prob1E for MDPs) on the device: jitted
boolean fixed points over the edge list, each round one pass over all
entries in a `lax.while_loop` (a gather of the current set at the entries'
successors and a segment maximum into their states or choices), nested
loops for prob1E's greatest fixed point. The sets are the host versions',
exactly: the fixed points are unique, only the order of discovery differs.

A round costs O(entries) whatever the frontier, and the number of rounds is
the depth of the backward search (the longest shortest path to the target
through the allowed states), so the device pays off where passes over the
edges are cheap (a GPU) and the search is shallow relative to the model's
size; the host versions (a breadth-first search, work proportional to the
edges once) stay the default on the CPU. `use_device(model)` is the choice
`graph` makes (`MODE`).

`Structure` is the edge list on the device (made once per model and kept
while the model lives); `Structure.from_arrays` takes device CSR arrays, so
a device explorer's output needs no host round trip.
"""

from __future__ import annotations

import functools
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from ..explore.model import ExplicitModel
from ..layout.device_pad import bucket, pad_tail


#: "auto" (the device on a GPU, for models of `MIN_STATES` states or more),
#: "on" (always the device) or "off" (always the host). Read at each call.
#: An MDP's nested prob1E/prob0A fixed points gain on the device outright
#: (`benchmarks/precompute.py`, RESULTS.md). A DTMC's or CTMC's prob0/prob1
#: is one breadth-first search each on the host: the device wins where the
#: search is shallow (kanban, cluster, polling, crowds: RESULTS.md) and loses
#: where it is deep (tandem, brp: a pass over every edge per level), so for
#: them "auto" stops after `MARKOV_MAX_ROUNDS` rounds and
#: the host finishes from the set found (a deep search costs those rounds
#: more than the host's; the edges are moved once per model).
MODE = "auto"

#: Smallest model for which "auto" runs the fixed points on a GPU: below it
#: the host search is a millisecond and the device's compilation dominates.
MIN_STATES = 200_000

#: Rounds after which a device search stops and the host finishes it from
#: the set found so far (a deep, narrow graph such as brp's would otherwise
#: pay a pass over every edge per level). Read at each call.
MAX_ROUNDS = 4096

#: The same for DTMCs and CTMCs under "auto" (see `MODE`). Read at each call.
MARKOV_MAX_ROUNDS = 256


class Structure(eqx.Module):
    """The transition graph on the device: per entry its choice, state,
    successor and whether its value is positive (only positive entries are
    edges); per choice its state; per state its number of choices."""

    ent_choice: Int[Array, " e"]
    ent_state: Int[Array, " e"]
    dst: Int[Array, " e"]
    positive: Bool[Array, " e"]
    state_of_choice: Int[Array, " m"]
    has_choice: Bool[Array, " n"]
    n: int = eqx.field(static=True)
    m: int = eqx.field(static=True)
    states: int = eqx.field(static=True)

    @classmethod
    def from_arrays(cls, choice_ptr, row_ptr, col, val) -> Structure:
        """From row-grouped CSR arrays (JAX or numpy): `choice_ptr` [n+1],
        `row_ptr` [m+1], `col`, `val` [e].

        The sizes are padded up to buckets (`bucket`), so that models of
        similar size share one compilation of every fixed point: one padding
        state, past the real ones, holds one padding choice with every
        padding entry (not positive: no edge); the other padding states and
        choices are empty. Masks are padded with False and cut back."""
        n, m, e = choice_ptr.shape[0] - 1, row_ptr.shape[0] - 1, col.shape[0]
        nb, mb, eb = bucket(n + 1), bucket(m + 1), bucket(e)
        arrays = (
            pad_tail(choice_ptr, nb + 1, m, last=mb),
            pad_tail(row_ptr, mb + 1, e, last=eb),
            pad_tail(col, eb, 0),
            pad_tail(val, eb, 0),
        )
        return _structure(*(jnp.asarray(a) for a in arrays), nb, mb, n)


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _structure(choice_ptr, row_ptr, col, val, n, m, states):
    def owner(ptr, count):  # the segment of each element of `ptr`'s segments
        marks = jnp.zeros(count + 1, jnp.int32).at[ptr[1:-1]].add(1)
        return jnp.cumsum(marks)[:count]

    ent_choice = owner(row_ptr, col.shape[0])
    soc = owner(choice_ptr, m)
    return Structure(
        ent_choice=ent_choice,
        ent_state=soc[ent_choice],
        dst=col.astype(jnp.int32),
        positive=val > 0,
        state_of_choice=soc,
        has_choice=choice_ptr[1:] > choice_ptr[:-1],
        n=n,
        m=m,
        states=states,
    )


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def structure(model: ExplicitModel) -> Structure:
    """`model`'s `Structure`, moved to the device once and kept while the
    model lives."""
    got = _CACHE.get(model)
    if got is None:
        got = Structure.from_arrays(
            model.choice_ptr, model.row_ptr, model.col, model.val
        )
        _CACHE[model] = got
    return got


def use_device(model: ExplicitModel) -> bool:
    """Whether `graph` runs its fixed points here (`MODE`)."""
    if MODE == "on":
        return True
    if MODE == "off":
        return False
    return jax.default_backend() == "gpu" and model.num_states >= MIN_STATES


def max_rounds(model: ExplicitModel) -> int:
    """The rounds a search may take before the host finishes it."""
    if MODE == "auto" and not model.is_nondeterministic:
        return min(MAX_ROUNDS, MARKOV_MAX_ROUNDS)
    return MAX_ROUNDS


# ---------------------------------------------------------------------------
# fixed points (jitted; masks in and out as device bool arrays)


def _any_into(hit, ids, count):
    """`out[i]`: some `hit` entry has `ids == i` (ids sorted)."""
    got = jax.ops.segment_max(
        hit.astype(jnp.int8), ids, num_segments=count, indices_are_sorted=True
    )
    return got > 0


#: Rounds per trip of a search loop: the loop's condition is read once per
#: trip (on a GPU, a device-to-host copy), so a few rounds go together.
#: The steps are monotone: no change over a trip means no change in a round.
UNROLL = 4


def _loop(step, y, rounds):
    """Iterate `step` from `y` until nothing changes or about `rounds`
    rounds: `(y, converged)`."""

    def body(carry):
        y, _, k = carry
        new = y
        for _ in range(UNROLL):
            new = step(new)
        return new, jnp.any(new != y), k + UNROLL

    y, changed, _ = jax.lax.while_loop(
        lambda c: c[1] & (c[2] < rounds), body, (y, jnp.bool_(True), jnp.int32(0))
    )
    return y, ~changed


def _exists(g: Structure, target, through, rounds, choice_ok=None):
    """Least `Y ⊇ target` with every `s ∈ through` having an allowed choice
    with a positive entry into `Y` in `Y`; `(Y so far, converged)`."""
    edge = g.positive & through[g.ent_state]
    if choice_ok is not None:
        edge &= choice_ok[g.ent_choice]
    return _loop(
        lambda y: y | _any_into(edge & y[g.dst], g.ent_state, g.n), target, rounds
    )


def _forall(g: Structure, target, through, rounds):
    """Least `Y ⊇ target` with every `s ∈ through` (with a choice) whose
    every choice has a positive entry into `Y` in `Y` (an attractor);
    `(Y so far, converged)`."""
    allowed = through & g.has_choice

    def step(y):
        hit = _any_into(g.positive & y[g.dst], g.ent_choice, g.m)
        every = jax.ops.segment_min(
            hit.astype(jnp.int8),
            g.state_of_choice,
            num_segments=g.n,
            indices_are_sorted=True,
        )
        return y | (allowed & (every > 0))

    return _loop(step, target, rounds)


@jax.jit
def _exists_jit(g, target, through, rounds):
    return _exists(g, target, through, rounds)


@jax.jit
def _forall_jit(g, target, through, rounds):
    return _forall(g, target, through, rounds)


@jax.jit
def _prob1E(g, phi, psi, rounds):
    """νZ. μY. ψ ∪ (φ ∧ ∃c: succ(c) ⊆ Z ∧ succ(c) ∩ Y ≠ ∅); `(Z, converged)`
    (every inner search within `rounds`)."""

    def body(carry):
        z, _, ok = carry
        leaves = _any_into(g.positive & ~z[g.dst], g.ent_choice, g.m)
        y, done = _exists(g, psi, phi & ~psi & z, rounds, choice_ok=~leaves)
        return y, jnp.any(y != z) & done, ok & done

    z, _, ok = jax.lax.while_loop(
        lambda c: c[1], body, (jnp.ones(g.n, bool), jnp.bool_(True), jnp.bool_(True))
    )
    return z, ok


# ---------------------------------------------------------------------------
# the model-level functions (`graph`'s signatures; numpy masks out)


def _masks(g: Structure, *masks):
    """The masks padded to the structure's states (False)."""
    out = []
    for x in masks:
        x = np.asarray(x, dtype=bool)
        out.append(jnp.asarray(np.concatenate([x, np.zeros(g.n - len(x), bool)])))
    return out


def _run(fixed_point, model, *args):
    g = structure(model)
    y, done = fixed_point(g, *_masks(g, *args), jnp.int32(max_rounds(model)))
    return np.asarray(y)[: g.states], bool(done)


def exists_reach(model: ExplicitModel, target, through) -> tuple[np.ndarray, bool]:
    """`(Y, converged)`: `graph._exists_reach`'s least fixed point, or the
    set found within `max_rounds` rounds (a subset, from which the host can
    go on)."""
    return _run(_exists_jit, model, target, through)


def forall_reach(model: ExplicitModel, target, through) -> tuple[np.ndarray, bool]:
    """`(Y, converged)`: `graph._forall_reach`'s attractor, or the subset
    found within `max_rounds` rounds."""
    return _run(_forall_jit, model, target, through)


def prob1E(model: ExplicitModel, phi, psi) -> tuple[np.ndarray, bool]:
    """`(Z, converged)`: `graph.prob1E`'s set where every inner search
    converged within `max_rounds` rounds (else not converged, and `Z` is
    no answer)."""
    return _run(_prob1E, model, phi, psi)
