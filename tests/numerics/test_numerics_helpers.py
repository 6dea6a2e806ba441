"""Helpers for the numerics tests: build `ExplicitModel`s from arrays, random
models with a fixed seed, and dense/brute-force references (policy
enumeration for MDPs)."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import scipy.linalg

from jaxmc.explore.model import ExplicitModel, RewardStructure, StateVar
from jaxmc.lang.ast import ModelType


jax.config.update("jax_enable_x64", True)


def make_model(model_type, choices, *, rewards=(), initial=(0,)):
    """`choices[s]` is a list of dicts `{succ: value}` (one per choice; exactly
    one for DTMC/CTMC). Rewards: list of `(state [n], trans_fn(s, c, t) or
    None)`."""
    n = len(choices)
    choice_ptr, row_ptr, col, val = [0], [0], [], []
    trans = [[] for _ in rewards]
    for s, cs in enumerate(choices):
        for ci, dist in enumerate(cs):
            for t in sorted(dist):
                col.append(t)
                val.append(dist[t])
                for k, (_, fn) in enumerate(rewards):
                    trans[k].append(fn(s, ci, t) if fn else 0.0)
            row_ptr.append(len(col))
        choice_ptr.append(len(row_ptr) - 1)
    init = np.zeros(n, bool)
    init[list(initial)] = True
    rs = tuple(
        RewardStructure(
            f"r{k}",
            None if st is None else np.asarray(st, float),
            None if fn is None else np.asarray(trans[k], float),
        )
        for k, (st, fn) in enumerate(rewards)
    )
    return ExplicitModel(
        model_type=ModelType(model_type),
        variables=(StateVar("s", 0, n - 1),),
        states=np.arange(n, dtype=np.int32)[:, None],
        initial_states=np.asarray(initial, dtype=np.int64),
        choice_ptr=np.asarray(choice_ptr, np.int64),
        row_ptr=np.asarray(row_ptr, np.int64),
        col=np.asarray(col, np.int64),
        val=np.asarray(val, np.float64),
        labels={"init": init, "deadlock": np.zeros(n, bool)},
        rewards=rs,
    )


def random_choices(rng, n, *, max_choices=1, absorbing=1, max_succ=3, rates=False):
    """Random distributions; the last `absorbing` states are absorbing
    (self-loop, or no transitions for a CTMC)."""
    out = []
    for s in range(n):
        if s >= n - absorbing:
            out.append([{} if rates else {s: 1.0}])
            continue
        cs = []
        for _ in range(rng.integers(1, max_choices + 1)):
            k = rng.integers(1, max_succ + 1)
            succ = rng.choice(n, size=k, replace=False)
            w = rng.random(k) + 0.05
            if rates:
                w = w * 4
            else:
                w = w / w.sum()
            cs.append({int(t): float(x) for t, x in zip(succ, w)})
        out.append(cs)
    return out


def random_model(kind, n, seed, **kw):
    rng = np.random.default_rng(seed)
    ch = random_choices(
        rng, n, rates=(kind == "ctmc"), max_choices=3 if kind == "mdp" else 1, **kw
    )
    st = rng.integers(0, 3, n).astype(float)
    rewards = [(st, lambda s, c, t: float((s + t + c) % 2))]
    return make_model(kind, ch, rewards=rewards), rng


def dense(model):
    """Dense [m, n] matrix of the choices (probabilities or rates)."""
    P = np.zeros((model.num_choices, model.num_states))
    np.add.at(P, (model.row_of_entry(), model.col), model.val)
    return P


def dense_trans_reward(model, k=0):
    R = np.zeros((model.num_choices, model.num_states))
    tr = model.rewards[k].transition
    if tr is not None:
        np.add.at(R, (model.row_of_entry(), model.col), tr)
    return R


def embedded(model):
    Q = dense(model)
    e = Q.sum(1)
    P = np.where(e[:, None] > 0, Q / np.where(e > 0, e, 1)[:, None], 0.0)
    P[e == 0, np.nonzero(e == 0)[0]] = 1.0
    return P


def reach_set(P, target, through):
    """States reaching `target` with positive probability via `through`."""
    r = target.copy()
    while True:
        new = r | (through & ((P > 0) @ r > 0))
        if (new == r).all():
            return r
        r = new


def dtmc_until(P, phi, psi):
    n = len(P)
    can = reach_set(P, psi, phi & ~psi)
    maybe = can & ~psi
    x = psi.astype(float)
    idx = np.nonzero(maybe)[0]
    if len(idx):
        A = np.eye(len(idx)) - P[np.ix_(idx, idx)]
        b = P[np.ix_(idx, np.nonzero(psi)[0])].sum(1)
        x[idx] = np.linalg.solve(A, b)
    del n
    return x


def dtmc_reach_reward(P, r, target):
    """r: per-state expected one-step reward."""
    n = len(P)
    x = np.full(n, np.inf)
    x[target] = 0
    p = dtmc_until(P, np.ones(n, bool), target)
    fin = np.isclose(p, 1.0, atol=1e-12) & ~target
    idx = np.nonzero(fin)[0]
    if len(idx):
        A = np.eye(len(idx)) - P[np.ix_(idx, idx)]
        x[idx] = np.linalg.solve(A, r[idx])
    return x


def policies(model):
    ranges = [
        range(model.choice_ptr[s], model.choice_ptr[s + 1])
        for s in range(model.num_states)
    ]
    return itertools.product(*ranges)


def by_policy(model, fn, opt):
    """min/max over memoryless deterministic policies of `fn(P, choices)`."""
    P = dense(model)
    best = None
    for pol in policies(model):
        pol = np.asarray(pol)
        v = fn(P[pol], pol)
        best = (
            v
            if best is None
            else (np.minimum(best, v) if opt == "min" else np.maximum(best, v))
        )
    return best


def expm_transient(Q_rates, t):
    Q = Q_rates - np.diag(Q_rates.sum(1))
    return scipy.linalg.expm(Q * t)


def test_make_model_is_stochastic():
    m, _ = random_model("mdp", 8, 0)
    P = dense(m)
    assert np.allclose(P.sum(1), 1.0)
    assert m.num_choices >= m.num_states
