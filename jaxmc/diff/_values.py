"""Parameters → transition values and reward vectors, with the structure
fixed.

The state space is explored once, at a *build point* (concrete parameter
values), by `jaxmc.explore.build`. The builder's provenance says, for every
transition entry, which updates produced it (see `jaxmc.explore.builder`):

    val[e] = sum_{j in contributions(e)} weight[j] * prod_u prob_u(source state)

`TransitionValues` re-evaluates exactly this sum as a jittable function of the
parameters: parameter-free update probabilities are multiplied into a host
array once, and each parameter-dependent one is a small `jnp` expression on
the states where it fires (`jaxmc.explore.lower_parametric`, the builder's
evaluator on jax.numpy). Their values go into one small table (one slot
for a state-independent factor such as `(1-f)*p`, one per state otherwise),
and each contribution gathers its factor from it: one pass over the
contributions per column of the provenance, whatever the number of
parameters or updates. Why: multiplying each update's values into
the `[c]` array in turn (a scatter-multiply per update) made the gradient's
forward pass keep a `[c]` copy per update for the backward pass (residuals
growing with the number of updates; see benchmarks/RESULTS.md).

Semantics (those of Storm's and PRISM's parametric engines): the graph is
the one of the *symbolic* model. It is built once and kept for every
parameter value; a transition whose probability is 0 at some value is kept,
with value 0 (results there are limits of the parametric function, valid as
long as the value stays a well-defined probability and the graph of
positive-probability edges does not change for the property's precomputed
0/1 sets). What would change the graph is rejected up front:

- a parameter in a guard, an assignment, a label, the `init` block or a
  reward guard (variable bounds are rejected by `jaxmc.semantics`);
- a parameter-dependent probability/rate that is exactly 0 at the build
  point (the builder drops it, so the structure would be too small): build at
  a point where every parameter-dependent probability is positive.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import UnsupportedError
from ..explore.lower import lower, lower_parametric
from ..explore.model import ExplicitModel
from ..semantics.program import CheckedProgram
from ..semantics.rewrite import mentions


class VanishingAtBuildPoint(UnsupportedError):
    """A parameter-dependent probability/rate is 0 at the build point, so the
    built structure lacks transitions that other points have."""


def _err(checked: CheckedProgram, kind=UnsupportedError):
    def make(message, span, hint=None):
        err = kind(message, span, hint=hint)
        if checked.source is not None:
            err.with_source(checked.source, checked.file)
        return err

    return make


REBUILD_HINT = (
    "parameters may only appear in probabilities, rates and reward values "
    "(the state space is built once and kept for every parameter value); "
    "pass `rebuild=True` to rebuild the model for each value instead "
    "(not differentiable)"
)


def check_structure(checked: CheckedProgram) -> None:
    """Raise `UnsupportedError` if a parameter could change the graph."""
    params = frozenset(checked.parameters)
    if not params:
        return
    err = _err(checked)

    def reject(e, where):
        p = mentions(e, params)
        if p is not None:
            raise err(f"parameter `{p}` appears in {where}", e.span, REBUILD_HINT)

    for m in checked.modules:
        for c in m.commands:
            reject(c.guard, f"the guard of a command of module `{m.name}`")
            for u in c.updates:
                for var, e in u.assigns:
                    reject(e, f"the assignment to `{var}` in module `{m.name}`")
    for name, e in checked.labels.items():
        reject(e, f'label "{name}"')
    if checked.init is not None:
        reject(checked.init, "the `init ... endinit` block")
    for r in checked.rewards:
        for item in r.items:
            label = f'reward structure "{r.name}"' if r.name else "a reward structure"
            reject(item.guard, f"a guard of {label}")


class _Ctx:
    """Host data shared by the compilers: variable names and state columns."""

    def __init__(self, checked: CheckedProgram, model: ExplicitModel):
        self.checked = checked
        self.params = frozenset(checked.parameters)
        self.variables = tuple(v.name for v in checked.variables)
        self.bools = frozenset(v.name for v in checked.variables if v.is_bool)
        self.index = {v: i for i, v in enumerate(self.variables)}
        self.states = np.asarray(model.states, dtype=np.int64)
        self.err = _err(checked)

    def cols(self, rows: np.ndarray | None = None):
        s = self.states if rows is None else self.states[rows]
        return [np.ascontiguousarray(s[:, i]) for i in range(s.shape[1])]

    def host(self, e, rows, build=None) -> np.ndarray:
        lo = lower(e, self.index, bools=self.bools, params=build)
        return np.asarray(lo.on_columns(self.cols(rows), len(rows)))

    def compile(self, e, rows, what):
        return lower_parametric(
            e,
            self.params,
            self.variables,
            self.cols(rows),
            len(rows),
            xp=jnp,
            bools=self.bools,
            what=what,
            error=self.err,
        )


def _commands(checked: CheckedProgram) -> dict:
    return {c.index: c for m in checked.modules for c in m.commands}


class TransitionValues:
    """`values(arrays, theta) -> val[nnz]`: the entry values of `model` at the
    parameter point `theta` (a dict name → scalar, or → array under `vmap`).

    `arrays` (a pytree of numpy arrays, moved to the device by the caller)
    holds the host-side data; pass it as a jit *argument* so that it is not
    baked into the compiled code.
    """

    def __init__(
        self, checked: CheckedProgram, model: ExplicitModel, build_params: Mapping
    ):
        check_structure(checked)
        prov = model.provenance
        if prov is None:
            raise UnsupportedError("the model carries no provenance (was it imported?)")
        ctx = _Ctx(checked, model)
        cmds = _commands(checked)
        nnz = model.num_transitions
        counts = np.diff(prov.entry_ptr)
        e_of_j = np.repeat(np.arange(nnz), counts)
        soe = model.state_of_choice()[model.row_of_entry()]
        src_of = soe[e_of_j]  # source state of each contribution
        gids = prov.products[prov.product]  # [c, K]
        self.names = tuple(checked.parameters)
        theta_shape = {k: jax.ShapeDtypeStruct((), jnp.float64) for k in self.names}
        base = np.asarray(prov.weight, dtype=np.float64).copy()
        self._fns, self._sizes = [], []
        leaves, src = [], []
        dep_cmds = set()
        slot = 0  # next free slot of the table of parameter-dependent factors
        for m in range(gids.shape[1]):
            col = gids[:, m]
            order = np.argsort(col, kind="stable")
            sc = col[order]
            if sc.size == 0:  # no contributions (e.g. every transition vanished)
                continue
            cuts = np.flatnonzero(np.diff(sc)) + 1
            where = None  # [c]: slot of contribution j's factor of column m
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, sc.size]):
                gid = int(sc[a])
                if gid < 0:
                    continue
                js = np.sort(order[a:b])
                ci, ui = (int(x) for x in prov.updates[gid])
                cmd = cmds[ci]
                e = cmd.updates[ui].prob
                if mentions(e, ctx.params) is None:
                    base[js] *= ctx.host(e, src_of[js]).astype(np.float64)
                    continue
                dep_cmds.add(ci)
                what = f"the probability/rate of an update of module `{cmd.module}`"
                comp = ctx.compile(e, src_of[js], what)
                # A state-independent factor (`(1-fail)*p`) takes one slot,
                # shared by all its contributions; others one per contribution.
                shape = jax.eval_shape(comp.fn, comp.leaves, theta_shape).shape
                size = 1 if shape == () else js.size
                if where is None:
                    where = np.full(base.size, -1, np.int64)
                where[js] = slot + (0 if size == 1 else np.arange(js.size))
                self._fns.append(comp.fn)
                self._sizes.append(size)
                leaves.append(comp.leaves)
                slot += size
            if where is not None:
                src.append(where)
        # Factor slot `slot` is the constant 1 (contributions without a
        # parameter-dependent factor in that column).
        src = [np.where(w < 0, slot, w).astype(np.int32) for w in src]
        # every command with a parameter-dependent update, not only those with
        # contributions: a command whose transitions all vanished has none
        dep_cmds |= {
            i
            for i, c in cmds.items()
            if any(mentions(u.prob, ctx.params) is not None for u in c.updates)
        }
        self._check_vanishing(ctx, [cmds[c] for c in sorted(dep_cmds)], build_params)
        self.nnz = nnz
        self.merged = base.size != nnz
        self.arrays = {
            "base": base,
            "entry": e_of_j.astype(np.int32),
            "leaves": leaves,
            "src": src,
        }
        # The provenance must reproduce the built values at the build point.
        theta0 = {k: float(build_params[k]) for k in self.names}
        got = np.asarray(jax.jit(self.__call__)(self.arrays, theta0))
        if not np.allclose(got, model.val, rtol=1e-9, atol=1e-12):
            bad = int(np.argmax(np.abs(got - model.val)))
            raise UnsupportedError(
                "the parametric transition values do not reproduce the built model "
                f"(entry {bad}: {got[bad]!r} vs {model.val[bad]!r})",
                hint="build with prob_checks=True (no row normalisation)",
            )

    @staticmethod
    def _check_vanishing(ctx: _Ctx, commands, build_params) -> None:
        build = {k: float(v) for k, v in build_params.items()}
        all_rows = np.arange(ctx.states.shape[0])
        for cmd in commands:
            g = ctx.host(cmd.guard, all_rows).astype(bool)
            rows = np.flatnonzero(g)
            if rows.size == 0:
                continue
            for u in cmd.updates:
                if mentions(u.prob, ctx.params) is None:
                    continue
                v = ctx.host(u.prob, rows, build)
                if np.any(v == 0):
                    raise _err(ctx.checked, VanishingAtBuildPoint)(
                        f"this probability/rate is 0 at the build point "
                        f"{build}, so its transitions are missing from the built "
                        "structure",
                        u.prob.span or u.span or cmd.span,
                        "build the model at a parameter point where every "
                        "parameter-dependent probability is positive "
                        "(`build_params=` or `load_model(..., params=...)`), "
                        "or pass `rebuild=True`",
                    )

    def __call__(self, arrays, theta):
        f = jnp.asarray(arrays["base"])
        if self._fns:
            parts = [
                jnp.broadcast_to(jnp.asarray(fn(L, theta), jnp.float64), (size,))
                for fn, L, size in zip(self._fns, arrays["leaves"], self._sizes)
            ]
            table = jnp.concatenate(parts + [jnp.ones((1,), jnp.float64)])
            for src in arrays["src"]:
                f = f * table[src]
        if not self.merged:
            return f
        return jax.ops.segment_sum(
            f, arrays["entry"], num_segments=self.nnz, indices_are_sorted=True
        )


class StateRewards:
    """`rewards(arrays, theta) -> r[n]`: the state rewards of one reward
    structure (parameters allowed in values, not in guards). Transition
    rewards are taken from the built model and must not depend on
    parameters."""

    def __init__(self, checked: CheckedProgram, model: ExplicitModel, index: int):
        ctx = _Ctx(checked, model)
        struct = checked.rewards[index]
        n = model.num_states
        all_rows = np.arange(n)
        base = np.zeros(n)
        self._fns = []
        dep = []
        for item in struct.items:
            if item.transition:
                if mentions(item.value, ctx.params):
                    raise ctx.err(
                        f"parameter `{mentions(item.value, ctx.params)}` in a "
                        "transition reward: only state rewards may depend on "
                        "parameters",
                        item.value.span or item.span,
                        "use a state reward, or pass `rebuild=True`",
                    )
                continue
            g = np.flatnonzero(ctx.host(item.guard, all_rows).astype(bool))
            if g.size == 0:
                continue
            if mentions(item.value, ctx.params) is None:
                base[g] += ctx.host(item.value, g).astype(np.float64)
                continue
            comp = ctx.compile(item.value, g, "a reward value")
            self._fns.append(comp.fn)
            dep.append({"idx": g.astype(np.int32), "leaves": comp.leaves})
        rs = model.rewards[index]
        self.has_state = rs.state is not None
        self.transition = (
            None if rs.transition is None else np.asarray(rs.transition, float)
        )
        self.arrays = {"base": base, "dep": dep}
        #: Whether some state reward value depends on a parameter.
        self.parametric = bool(self._fns)

    def __call__(self, arrays, theta):
        r = jnp.asarray(arrays["base"])
        for fn, d in zip(self._fns, arrays["dep"]):
            v = jnp.broadcast_to(fn(d["leaves"], theta), d["idx"].shape)
            r = r.at[d["idx"]].add(v)
        return r
