"""Finite-memory schedulers of LTL properties on MDPs: the chain a
property's optimal scheduler induces (model state × memory), checked again
with the same formula as a DTMC, has the MDP's optimum (Pmax, Pmin, co-safe
Rmin/Rmax), on hand-made MDPs where no memoryless scheduler is optimal,
on random MDPs with random formulas, and on PRISM's MDP LTL regression
models."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.automata.memory import MemoryScheduler
from jaxmc.lang import ast
from jaxmc.strategy import format_strategy


SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
LTL = SHARED / "prism-tests" / "functionality" / "verify" / "mdps" / "ltl"
COSAFE = LTL.parent / "rewards" / "cosafe"

#: In state 0: go to a (s=1), to b (s=2), or stop (s=3); a and b lead back.
TOUR = """mdp
module m
  s : [0..3] init 0;
  [toa] s=0 -> (s'=1);
  [tob] s=0 -> (s'=2);
  [stop] s=0 -> (s'=3);
  [back] s=1 -> 0.9 : (s'=0) + 0.1 : (s'=3);
  [back] s=2 -> (s'=0);
  [] s=3 -> true;
endmodule
label "a" = s=1;
label "b" = s=2;
rewards "steps"
  true : 1;
endrewards
rewards "late"
  [back] s=2 : 3;
  [toa] true : 1;
endrewards
"""


def _plain(text: str) -> str:
    """The same property without `min`/`max` (for the induced DTMC)."""
    return re.sub(r"^([PR](\{[^}]*\})?)(min|max)", r"\1", text)


def _induced_value(model, text: str, result) -> float:
    induced = jaxmc.induced_model(model, result)
    assert jaxmc.build(induced).model_type == ast.ModelType.DTMC
    return jaxmc.check(induced, _plain(text)).value


def _agrees(model, text: str, memory: bool = True) -> MemoryScheduler:
    """Check `text` with its scheduler; the induced chain's value (checked
    by jaxmc's DTMC path, and the scheduler's own exact value) must be the
    MDP's optimum. `memory`: the scheduler must be a finite-memory one (not
    a plain `F`/`U`, whose scheduler is memoryless)."""
    result = jaxmc.check(model, text, scheduler=True)
    sched = result.scheduler
    assert isinstance(sched, MemoryScheduler) or not memory, text
    want = result.value
    got = _induced_value(model, text, result)
    init = int(np.asarray(result.initial_states)[0])
    exact = sched.values[init]
    if np.isinf(want):
        assert got == want and exact == want, (text, got, exact)
    else:
        slack = 1e-8 + 2 * (result.bound or 0.0)
        assert abs(got - want) <= slack, (text, got, want)
        assert abs(exact - want) <= slack, (text, exact, want)
    return sched


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    path = tmp_path_factory.mktemp("ltl") / "tour.nm"
    path.write_text(TOUR)
    return jaxmc.load_model(str(path))


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """`TOUR` without the leak from a: a and b can be visited forever."""
    path = tmp_path_factory.mktemp("ltl") / "loop.nm"
    path.write_text(TOUR.replace("0.9 : (s'=0) + 0.1 : (s'=3)", "(s'=0)"))
    return jaxmc.load_model(str(path))


TOUR_PROPS = [
    'Pmax=? [ F ("a" & F "b") ]',
    'Pmin=? [ F ("a" & F "b") ]',
    'Pmax=? [ G F "a" & G F "b" ]',
    'Pmin=? [ G F "a" & G F "b" ]',
    'Pmax=? [ F "a" & F "b" ]',
    'Pmin=? [ F "a" & F "b" ]',
    'Pmax=? [ G ("a" => X "b") ]',
    'Pmin=? [ F G !"a" ]',
    'Pmax=? [ X X "b" ]',
    'Pmax=? [ (F "b") & G ("b" => X X "a") ]',
    'Pmax=? [ !"a" U ("b" & X (!"b" U "a")) ]',
    'R{"steps"}min=? [ F "a" & F "b" ]',
    'R{"late"}min=? [ F ("b" & X F "a") ]',
    'R{"late"}max=? [ !"a" U "b" ]',
    'R{"late"}min=? [ F "a" & F "b" ]',
    'R{"steps"}max=? [ F "a" & F "b" ]',
]


@pytest.mark.parametrize("text", TOUR_PROPS)
def test_tour_induced_chain_has_the_optimum(tour, loop, text):
    _agrees(tour, text)
    _agrees(loop, text)


def _memoryless_values(model, text: str) -> list[float]:
    """The property's value under every memoryless scheduler of `model`."""
    explicit = jaxmc.build(model)
    counts = np.diff(explicit.choice_ptr)
    out = []
    for choice in itertools.product(*(range(int(c)) for c in counts)):
        from jaxmc.numerics.scheduler import Scheduler

        n = explicit.num_states
        sched = Scheduler(
            np.array(choice), (None,) * n, np.ones(n, bool), "", np.zeros(n)
        )
        induced = jaxmc.induced_model(model, sched)
        out.append(jaxmc.check(induced, _plain(text)).value)
    return out


@pytest.mark.parametrize(
    "text", ['Pmax=? [ F ("a" & F "b") ]', 'Pmax=? [ G F "a" & G F "b" ]']
)
def test_memory_is_needed(loop, text):
    """No memoryless scheduler attains the optimum; the memory one does, by
    choosing differently in state 0 with different memory."""
    sched = _agrees(loop, text)
    best = jaxmc.check(loop, text).value
    assert best == pytest.approx(1.0)
    assert max(_memoryless_values(loop, text)) < best - 0.1
    zero = sched.state == 0
    assert (
        len(
            {a for a, d in zip(np.array(sched.actions)[zero], sched.defined[zero]) if d}
        )
        == 2
    )


def test_generalised_buchi_takes_turns(loop):
    """`G F a & G F b` has two monitors: the memory holds whose turn it is."""
    sched = _agrees(loop, 'Pmax=? [ G F "a" & G F "b" ]')
    assert set(sched.memory_phase.tolist()) == {0, 1}


def test_update_and_choice_table(tour):
    """A run of the scheduler from the initial state: toa, back, tob."""
    r = jaxmc.check(tour, 'Pmax=? [ F ("a" & F "b") ]', scheduler=True)
    sched, ex = r.scheduler, jaxmc.build(tour)
    index = {int(ex.states[i][0]): i for i in range(ex.num_states)}
    s, m = index[0], int(sched.initial_memory[index[0]])
    seen = []
    for nxt in (1, 0, 2):
        k = sched.pair(s, m)
        seen.append(sched.actions[k])
        m = sched.update(s, m, index[nxt])
        s = index[nxt]
    assert seen == ["toa", "back", "tob"]
    assert sched.choice_at(index[0], int(sched.initial_memory[index[0]])) in (0, 1, 2)


def test_export_formats(tour):
    r = jaxmc.check(tour, 'Pmax=? [ F ("a" & F "b") ]', scheduler=True)
    sched = r.scheduler
    text = format_strategy(tour, r)
    lines = text.splitlines()
    assert lines and all(re.fullmatch(r"\(\d\),\d+=\w*", ln) for ln in lines)
    assert len(lines) == int(sched.defined.sum())
    assert {"(0)," + str(m) for m in range(sched.memory_states)} & {
        ln.split("=")[0] for ln in lines if ln.endswith("=toa")
    }
    idx = format_strategy(tour, r, "indices").splitlines()
    assert len(idx) == len(sched.state)
    tra = format_strategy(tour, r, "induced").splitlines()
    tra = [ln for ln in tra if not ln.startswith("#")]
    n, nnz = map(int, tra[0].split())
    assert n == len(sched.state) and nnz == len(tra) - 1
    rows = np.array([ln.split()[:3] for ln in tra[1:]], dtype=float)
    sums = np.bincount(rows[:, 0].astype(int), weights=rows[:, 2], minlength=n)
    assert np.allclose(sums, 1.0)


def test_cli_exportstrat_ltl(tour, tmp_path):
    from jaxmc.cli.command import main

    out = tmp_path / "strat.txt"
    code = main(
        [str(tour.path), "--prop", 'Pmax=? [ F ("a" & F "b") ]',
         "-exportstrat", str(out)]
    )  # fmt: skip
    assert code == 0
    assert "=toa" in out.read_text()


# ------------------------------------------------------------- random MDPs


def _random_mdp(rng: random.Random, n: int = 5) -> str:
    lines = ["mdp", "module m", f"  s : [0..{n - 1}] init 0;"]
    for s in range(n):
        for act in rng.sample(["x", "y", "z"], rng.randint(1, 3)):
            succ = rng.sample(range(n), rng.randint(1, 2))
            w = [rng.randint(1, 3) for _ in succ]
            upd = " + ".join(f"{wi}/{sum(w)} : (s'={t})" for wi, t in zip(w, succ))
            lines.append(f"  [{act}] s={s} -> {upd};")
    lines.append("endmodule")
    for lab in "abc":
        sub = [s for s in range(n) if rng.random() < 0.4] or [n - 1]
        lines.append(f'label "{lab}" = ' + " | ".join(f"s={x}" for x in sub) + ";")
    lines += ["rewards", "  true : 1;", "  [x] s=0 : 2;", "endrewards"]
    return "\n".join(lines) + "\n"


def _formula(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        p = f'"{rng.choice("abc")}"'
        return p if rng.random() < 0.7 else f"!{p}"
    op = rng.choice(["&", "|", "X", "F", "G", "U", "F", "G", "W", "R"])
    if op in ("X", "F", "G"):
        return f"{op} ({_formula(rng, depth - 1)})"
    return f"({_formula(rng, depth - 1)}) {op} ({_formula(rng, depth - 1)})"


@pytest.mark.parametrize("seed", range(8))
def test_random_mdps(seed, tmp_path):
    rng = random.Random(1000 + seed)
    path = tmp_path / "m.nm"
    path.write_text(_random_mdp(rng))
    model = jaxmc.load_model(str(path))
    for _ in range(3):
        f = _formula(rng, 3)
        if not re.search(r"[XFGUWR]", f):
            f = f"F ({f})"  # a state formula has no scheduler
        for opt in ("min", "max"):
            _agrees(model, f"P{opt}=? [ {f} ]", memory=False)
    for opt in ("min", "max"):
        _agrees(model, f'R{opt}=? [ F ("a" & X F "b") ]')


# ------------------------------------------- PRISM's MDP LTL regression models


def _ltl_cases():
    for props in sorted([*LTL.glob("*.props"), *COSAFE.glob("*.props")]):
        for ext in (".nm", ".prism"):
            if ext in props.name:
                stem = props.name[: props.name.index(ext) + len(ext)]
                yield pytest.param(props.with_name(stem), props, id=props.name)


@pytest.mark.parametrize("model_path, props_path", list(_ltl_cases()) or [(None, None)])
def test_regression_models(model_path, props_path):
    if model_path is None or not model_path.exists():
        pytest.skip("shared models not available")
    model = jaxmc.load_model(str(model_path))
    props = jaxmc.load_properties(str(props_path), model, errors="keep")
    checked = 0
    for i, prop in enumerate(props):
        e = prop.expr
        if prop.error is not None or not isinstance(e, (ast.ProbOp, ast.RewardOp)):
            continue
        if e.threshold is not None or e.opt is None:
            continue
        try:
            result = jaxmc.check(model, i, properties=props, scheduler=True)
        except jaxmc.UnsupportedError:
            continue
        if not isinstance(result.scheduler, MemoryScheduler):
            continue  # a plain `F`/`U`: memoryless (tested elsewhere)
        _agrees(model, prop.text)
        checked += 1
    assert checked, props_path.name


def test_induced_chain_init_label_is_its_initial_states(tour, tmp_path):
    """State 0 is met again with other memory (after a): those pairs are
    not initial; the chain's "init" label and its exported `.lab` say so."""
    r = jaxmc.check(tour, 'Pmax=? [ F ("a" & F "b") ]', scheduler=True)
    chain = jaxmc.build(jaxmc.induced_model(tour, r))
    assert np.sum(chain.states[:, 0] == 0) > 1  # s=0 with several memories
    init = np.flatnonzero(chain.labels["init"])
    assert init.tolist() == sorted(np.asarray(chain.initial_states).tolist())
    jaxmc.export_model(chain, str(tmp_path / "chain.lab"))
    lines = (tmp_path / "chain.lab").read_text().splitlines()
    assert lines[1].startswith('0="init"')
    marked = [ln for ln in lines[2:] if "0" in ln.split(":")[1].split()]
    assert len(marked) == 1
