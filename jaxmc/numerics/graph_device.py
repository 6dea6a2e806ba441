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


#: "auto" (the device on a GPU, for models of `MIN_STATES` states or more),
#: "on" (always the device) or "off" (always the host). Read at each call.
MODE = "auto"

#: Smallest model for which "auto" runs the fixed points on a GPU: below it
#: the host search is a millisecond and the device's compilation dominates.
MIN_STATES = 200_000


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

    @classmethod
    def from_arrays(cls, choice_ptr, row_ptr, col, val) -> Structure:
        """From row-grouped CSR arrays (JAX or numpy): `choice_ptr` [n+1],
        `row_ptr` [m+1], `col`, `val` [e]."""
        choice_ptr = jnp.asarray(choice_ptr)
        row_ptr = jnp.asarray(row_ptr)
        n, m = choice_ptr.shape[0] - 1, row_ptr.shape[0] - 1
        return _structure(choice_ptr, row_ptr, jnp.asarray(col), jnp.asarray(val), n, m)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _structure(choice_ptr, row_ptr, col, val, n, m):
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
    )


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def structure(model: ExplicitModel) -> Structure:
    """`model`'s `Structure`, moved to the device once and kept while the
    model lives."""
    got = _CACHE.get(model)
    if got is None:
        got = Structure.from_arrays(model.choice_ptr, model.row_ptr, model.col, model.val)
        _CACHE[model] = got
    return got


def use_device(model: ExplicitModel) -> bool:
    """Whether `graph` runs its fixed points here (`MODE`)."""
    if MODE == "on":
        return True
    if MODE == "off":
        return False
    return jax.default_backend() == "gpu" and model.num_states >= MIN_STATES


# ---------------------------------------------------------------------------
# fixed points (jitted; masks in and out as device bool arrays)


def _any_into(hit, ids, count):
    """`out[i]`: some `hit` entry has `ids == i` (ids sorted)."""
    got = jax.ops.segment_max(
        hit.astype(jnp.int8), ids, num_segments=count, indices_are_sorted=True
    )
    return got > 0


def _exists(g: Structure, target, through, choice_ok=None):
    """Least `Y ⊇ target` with every `s ∈ through` having an allowed choice
    with a positive entry into `Y` in `Y`."""
    edge = g.positive & through[g.ent_state]
    if choice_ok is not None:
        edge &= choice_ok[g.ent_choice]

    def body(carry):
        y, _ = carry
        new = y | _any_into(edge & y[g.dst], g.ent_state, g.n)
        return new, jnp.any(new != y)

    y, _ = jax.lax.while_loop(lambda c: c[1], body, (target, jnp.bool_(True)))
    return y


def _forall(g: Structure, target, through):
    """Least `Y ⊇ target` with every `s ∈ through` (with a choice) whose
    every choice has a positive entry into `Y` in `Y` (an attractor)."""
    allowed = through & g.has_choice

    def body(carry):
        y, _ = carry
        hit = _any_into(g.positive & y[g.dst], g.ent_choice, g.m)
        every = jax.ops.segment_min(
            hit.astype(jnp.int8), g.state_of_choice, num_segments=g.n,
            indices_are_sorted=True,
        ) > 0
        new = y | (allowed & every)
        return new, jnp.any(new != y)

    y, _ = jax.lax.while_loop(lambda c: c[1], body, (target, jnp.bool_(True)))
    return y


@jax.jit
def _prob0(g, phi, psi):
    return ~_exists(g, psi, phi & ~psi)


@jax.jit
def _prob1(g, phi, psi, no):
    return ~_exists(g, no, phi & ~psi)


@jax.jit
def _prob0E(g, phi, psi):
    return ~_forall(g, psi, phi & ~psi)


@jax.jit
def _prob1E(g, phi, psi):
    """νZ. μY. ψ ∪ (φ ∧ ∃c: succ(c) ⊆ Z ∧ succ(c) ∩ Y ≠ ∅)."""

    def body(carry):
        z, _ = carry
        leaves = _any_into(g.positive & ~z[g.dst], g.ent_choice, g.m)
        y = _exists(g, psi, phi & ~psi & z, choice_ok=~leaves)
        return y, jnp.any(y != z)

    z, _ = jax.lax.while_loop(
        lambda c: c[1], body, (jnp.ones(g.n, bool), jnp.bool_(True))
    )
    return z


# ---------------------------------------------------------------------------
# the model-level functions (`graph`'s signatures; numpy masks out)


def _masks(g: Structure, *masks):
    return tuple(jnp.asarray(np.asarray(x, dtype=bool)) for x in masks)


def prob0(model: ExplicitModel, phi, psi, g: Structure | None = None) -> np.ndarray:
    g = structure(model) if g is None else g
    return np.asarray(_prob0(g, *_masks(g, phi, psi)))


def prob1(model: ExplicitModel, phi, psi, no=None, g=None) -> np.ndarray:
    g = structure(model) if g is None else g
    phi, psi = _masks(g, phi, psi)
    no = _prob0(g, phi, psi) if no is None else jnp.asarray(np.asarray(no, bool))
    return np.asarray(_prob1(g, phi, psi, no))


def prob0E(model: ExplicitModel, phi, psi, g=None) -> np.ndarray:
    g = structure(model) if g is None else g
    return np.asarray(_prob0E(g, *_masks(g, phi, psi)))


def prob1A(model: ExplicitModel, phi, psi, no=None, g=None) -> np.ndarray:
    g = structure(model) if g is None else g
    phi, psi = _masks(g, phi, psi)
    no = _prob0E(g, phi, psi) if no is None else jnp.asarray(np.asarray(no, bool))
    return np.asarray(_prob1(g, phi, psi, no))


def prob1E(model: ExplicitModel, phi, psi, g=None) -> np.ndarray:
    g = structure(model) if g is None else g
    return np.asarray(_prob1E(g, *_masks(g, phi, psi)))
