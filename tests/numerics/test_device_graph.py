"""The device fixed points (`jaxmc.numerics.graph_device`) against the host
versions of `jaxmc.numerics.graph`: the same sets on random graphs (DTMC
and MDP shaped, with zero-probability entries, states without choices,
choices without entries, long chains) and on example models with their
labels as φ and ψ; and `graph`'s dispatch to the device path."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxmc
from jaxmc.explore.model import ExplicitModel
from jaxmc.lang.ast import ModelType
from jaxmc.numerics import graph, graph_device


jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "models"
SHARED = ROOT / ".." / "shared" / "models" / "prism-examples"

FUNCS = ("prob0", "prob1", "prob0E", "prob1E", "prob1A")


def _random_model(seed: int, n: int, mdp: bool, chain: bool = False) -> ExplicitModel:
    rng = np.random.default_rng(seed)
    if mdp:
        per_state = rng.choice([0, 1, 2, 3], size=n, p=[0.05, 0.45, 0.3, 0.2])
    else:
        per_state = np.ones(n, dtype=np.int64)
    choice_ptr = np.concatenate([[0], np.cumsum(per_state)])
    m = int(choice_ptr[-1])
    owner = np.repeat(np.arange(n), per_state)
    row_ptr, cols, vals = [0], [], []
    for c in range(m):
        k = int(rng.choice([0, 1, 2, 3], p=[0.03, 0.4, 0.37, 0.2]))
        s = owner[c]
        if chain:  # mostly forward by one: a deep search
            cand = np.unique(np.clip(s + rng.integers(-1, 3, size=k), 0, n - 1))
        else:
            cand = np.unique(rng.integers(0, n, size=k))
        v = rng.random(len(cand))
        v[rng.random(len(cand)) < 0.1] = 0.0  # not an edge
        cols.append(cand)
        vals.append(v)
        row_ptr.append(row_ptr[-1] + len(cand))
    return ExplicitModel(
        model_type=ModelType.MDP if mdp else ModelType.DTMC,
        variables=(),
        states=np.zeros((n, 0), np.int32),
        initial_states=np.zeros(1, np.int64),
        choice_ptr=choice_ptr.astype(np.int64),
        row_ptr=np.asarray(row_ptr, np.int64),
        col=np.concatenate(cols).astype(np.int64),
        val=np.concatenate(vals),
        labels={},
    )


def _on(mode, name, model, phi, psi):
    saved = graph_device.MODE
    graph_device.MODE = mode
    try:
        return getattr(graph, name)(model, phi, psi)
    finally:
        graph_device.MODE = saved


def _compare(model, phi, psi, funcs=FUNCS):
    for name in funcs:
        want = _on("off", name, model, phi, psi)
        got = _on("on", name, model, phi, psi)
        assert got.dtype == bool and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("mdp", [False, True])
@pytest.mark.parametrize(
    "seed,n,chain", [(0, 1, False), (1, 40, False), (2, 600, False), (3, 300, True)]
)
def test_random_graphs(seed, n, chain, mdp):
    model = _random_model(seed, n, mdp, chain)
    rng = np.random.default_rng(seed + 100)
    funcs = FUNCS if mdp else ("prob0", "prob1")
    for p_phi, p_psi in [(1.0, 0.02), (0.8, 0.1), (0.5, 0.3), (1.0, 0.0), (0.0, 0.5)]:
        phi = rng.random(n) < p_phi
        psi = rng.random(n) < p_psi
        _compare(model, phi, psi, funcs)


MODELS = [
    (EXAMPLES / "die.pm", None),
    (EXAMPLES / "herman5.pm", None),
    (EXAMPLES / "queue.sm", None),
    (EXAMPLES / "robot.nm", None),
    (SHARED / "dtmcs" / "brp" / "brp.pm", "N=16,MAX=2"),
    (SHARED / "mdps" / "consensus" / "coin2.nm", "K=2"),
    (SHARED / "mdps" / "zeroconf" / "zeroconf.nm", "N=20,K=2,reset=true,err=0.1"),
]


@pytest.mark.parametrize("path,consts", MODELS, ids=lambda p: getattr(p, "name", p))
def test_models_with_their_labels(path, consts):
    if not path.exists():
        pytest.skip(f"{path} not present")
    em = jaxmc.build(jaxmc.load_model(str(path), consts))
    n = em.num_states
    funcs = FUNCS if em.is_nondeterministic else ("prob0", "prob1")
    labels = [v for k, v in sorted(em.labels.items())]
    true = np.ones(n, bool)
    for psi in labels:
        _compare(em, true, psi, funcs)
    for phi, psi in zip(labels, labels[1:]):
        _compare(em, ~phi, psi, funcs)


def test_graph_dispatches_to_the_device(monkeypatch):
    model = _random_model(7, 200, True)
    phi = np.ones(200, bool)
    psi = np.zeros(200, bool)
    psi[::17] = True
    calls = []
    real = graph_device.exists_reach

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(graph_device, "exists_reach", spy)
    monkeypatch.setattr(graph_device, "MODE", "on")
    graph.prob01(model, phi, psi)
    assert len(calls) == 2  # prob0, then prob1
    monkeypatch.setattr(graph_device, "MODE", "auto")
    assert not graph_device.use_device(model)  # small, or no GPU


def test_searches_past_the_round_limit_are_finished_on_the_host(monkeypatch):
    """A chain needs a round per state; with few rounds allowed, the device
    stops early (not converged) and the host finishes from its set."""
    model, phi, psi = _chain_to_its_end(120)
    y, done = graph_device.exists_reach(model, psi, phi)
    assert done
    monkeypatch.setattr(graph_device, "MAX_ROUNDS", 3)
    part, done = graph_device.exists_reach(model, psi, phi)
    assert not done and not (part & ~y).any() and part.sum() < y.sum()
    _compare(model, phi, psi, FUNCS)
    assert _on("on", "prob1", model, phi, psi).all()


def test_markov_searches_stop_sooner_under_auto(monkeypatch):
    """Under "auto" a DTMC's search stops after `MARKOV_MAX_ROUNDS` rounds
    (the host finishes a deep one); an MDP's, and any under "on", after
    `MAX_ROUNDS`; the answer is the host's either way."""
    dtmc, mdp = _random_model(3, 300, False), _random_model(3, 300, True)
    assert graph_device.max_rounds(dtmc) == graph_device.MARKOV_MAX_ROUNDS
    assert graph_device.max_rounds(mdp) == graph_device.MAX_ROUNDS
    monkeypatch.setattr(graph_device, "MODE", "on")
    assert graph_device.max_rounds(dtmc) == graph_device.MAX_ROUNDS
    monkeypatch.setattr(graph_device, "MODE", "auto")
    monkeypatch.setattr(graph_device, "MARKOV_MAX_ROUNDS", 3)
    monkeypatch.setattr(graph_device, "use_device", lambda model: True)
    model, phi, psi = _chain_to_its_end(120)
    part, done = graph_device.exists_reach(model, psi, phi)
    assert not done and part.sum() < 120
    assert graph.prob1(model, phi, psi).all()  # (the host finished it)


def _chain_to_its_end(n):
    """`(model, phi, psi)`: `F` the chain's last state, a round per state."""
    psi = np.zeros(n, bool)
    psi[-1] = True
    return _chain(n), np.ones(n, bool), psi


def _chain(n):
    return dataclasses.replace(
        _random_model(11, n, False),
        row_ptr=np.arange(n + 1, dtype=np.int64),
        col=np.minimum(np.arange(n, dtype=np.int64) + 1, n - 1),
        val=np.ones(n),
    )


def test_models_of_similar_size_share_the_padded_shapes():
    assert [graph_device.bucket(k) for k in (0, 8, 9, 17, 1000, 1025)] == [
        8,
        8,
        9,
        18,
        1024,
        1152,
    ]
    for k in range(1, 5000, 37):
        assert k <= graph_device.bucket(k) <= max(8, k * 1.125)
    a, b = graph_device.structure(_chain(1000)), graph_device.structure(_chain(1003))
    assert (a.n, a.m, a.ent_choice.shape) == (b.n, b.m, b.ent_choice.shape)
    assert (a.states, b.states) == (1000, 1003)
