"""Stage 3: expression lowering and state-space construction."""

from __future__ import annotations

import numpy as np
import pytest

from jaxmc.explore.lower import Kind, lower
from jaxmc.lang import ast as A


# ------------------------------------------------------------------- lowering

X, Y, B = A.Ident("x"), A.Ident("y"), A.Ident("b")
VARS = ["x", "y", "b"]
STATES = np.array([[0, 1, 1], [3, -2, 0], [5, 0, 1], [-7, 4, 0]])


def _bin(op, a, b):
    return A.Binary(A.BinaryOp(op), a, b)


def _ev(e):
    f = lower(e, VARS, bools={"b"})
    out = f(STATES)
    assert out.shape == (len(STATES),)
    return f.kind, out.tolist()


def test_lower_arithmetic_types():
    assert _ev(_bin("+", X, A.IntLit(1))) == (Kind.INT, [1, 4, 6, -6])
    assert _ev(_bin("*", X, A.RealLit(0.5))) == (Kind.DOUBLE, [0, 1.5, 2.5, -3.5])
    # `/` is real division, even of two ints.
    assert _ev(_bin("/", X, A.IntLit(2))) == (Kind.DOUBLE, [0, 1.5, 2.5, -3.5])
    assert _ev(A.Unary(A.UnaryOp.NEG, Y)) == (Kind.INT, [-1, 2, 0, -4])


def test_lower_division_by_zero_in_untaken_branch():
    e = A.Ite(_bin(">", Y, A.IntLit(0)), _bin("/", X, Y), A.RealLit(-1.0))
    with np.errstate(all="raise"):
        assert _ev(e) == (Kind.DOUBLE, [0.0, -1.0, -1.0, -1.75])


def test_lower_functions():
    call = lambda f, *a: A.Call(f, a)  # noqa: E731
    # PRISM's mod is non-negative for a positive divisor.
    assert _ev(call("mod", X, A.IntLit(4))) == (Kind.INT, [0, 3, 1, 1])
    with pytest.raises(
        ExplorationError,
        match=r"non-positive divisor: mod\(3, -2\) in state \(x=3, y=-2, b=false\)",
    ):
        _ev(call("mod", X, Y))  # PRISM rejects a non-positive divisor
    assert _ev(call("max", X, Y, A.IntLit(2))) == (Kind.INT, [2, 3, 5, 4])
    assert _ev(call("min", X, A.RealLit(0.5))) == (Kind.DOUBLE, [0, 0.5, 0.5, -7])
    assert _ev(call("min", X)) == (Kind.INT, [0, 3, 5, -7])
    # round(x) = floor(x + 0.5), so round(-3.5) = -3 and round(2.5) = 3.
    half = _bin("/", X, A.IntLit(2))
    assert _ev(call("round", half)) == (Kind.INT, [0, 2, 3, -3])
    assert _ev(call("floor", half)) == (Kind.INT, [0, 1, 2, -4])
    assert _ev(call("ceil", half)) == (Kind.INT, [0, 2, 3, -3])
    assert _ev(call("pow", X, A.IntLit(2))) == (Kind.INT, [0, 9, 25, 49])
    with pytest.raises(
        ExplorationError, match=r"negative exponent .* in state \(x=3, y=-2"
    ):
        _ev(_bin("^", A.IntLit(2), Y))
    assert _ev(_bin("^", A.RealLit(2.0), Y)) == (Kind.DOUBLE, [2, 0.25, 1, 16])
    kind, out = _ev(call("log", A.IntLit(8), A.IntLit(2)))
    assert kind == Kind.DOUBLE and np.allclose(out, 3.0)


def test_lower_booleans():
    assert _ev(B) == (Kind.BOOL, [True, False, True, False])
    assert _ev(A.Unary(A.UnaryOp.NOT, B)) == (Kind.BOOL, [False, True, False, True])
    assert _ev(_bin("=>", B, _bin(">", X, A.IntLit(1)))) == (
        Kind.BOOL,
        [False, True, True, True],
    )
    assert _ev(_bin("<=>", B, _bin("=", Y, A.IntLit(0))))[1] == [
        False,
        True,
        True,
        True,
    ]
    assert _ev(_bin("|", _bin("&", B, A.BoolLit(False)), _bin("!=", X, A.IntLit(3))))[
        1
    ] == [True, False, True, True]
    assert _ev(A.BoolLit(True)) == (Kind.BOOL, [True] * 4)
    assert _ev(A.Ite(B, X, Y)) == (Kind.INT, [0, -2, 5, 4])


def test_lower_parameters_and_columns():
    f = lower(_bin("*", A.Ident("p"), X), ["x"], params={"p": 0.5})
    assert f.kind == Kind.DOUBLE and f.reads == (0,)
    assert f.on_columns([np.array([2, 4])], 2).tolist() == [1.0, 2.0]
    g = lower(A.IntLit(3), ["x"])
    assert g.is_constant and g(np.zeros((2, 1), int)).tolist() == [3, 3]


# ------------------------------------------------------------- building models

import re  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from jaxmc.errors import ExplorationError  # noqa: E402
from jaxmc.explore import ExplicitModel, Provenance, build  # noqa: E402
from jaxmc.lang import parse_model  # noqa: E402
from jaxmc.lang.ast import ModelType  # noqa: E402
from jaxmc.semantics import check_program  # noqa: E402


SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "models"
EXAMPLES = SHARED / "prism-examples"
needs_examples = pytest.mark.skipif(
    not EXAMPLES.is_dir(), reason="shared models absent"
)


def _checked(text: str, consts=None, file="test.pm"):
    return check_program(parse_model(text, file), consts, source=text, file=file)


def _build_text(text: str, consts=None, **kw) -> ExplicitModel:
    return build(_checked(text, consts), **kw)


def _build_file(path: Path, consts: str | None = None, **kw) -> ExplicitModel:
    text = Path(path).read_text()
    return build(
        check_program(
            parse_model(text, str(path)), consts or None, source=text, file=str(path)
        ),
        **kw,
    )


def _rows(m: ExplicitModel, names: list[str] | None = None) -> dict[tuple, list]:
    """{state valuation: [ (action, {successor valuation: value}) per choice ]}
    (valuations restricted to the variables `names`, all by default)."""
    cols = [i for i, v in enumerate(m.variables) if names is None or v.name in names]
    vals = [tuple(r) for r in m.states[:, cols].tolist()]
    out = {}
    for s in range(m.num_states):
        choices = []
        for c in range(m.choice_ptr[s], m.choice_ptr[s + 1]):
            lo, hi = m.row_ptr[c], m.row_ptr[c + 1]
            dist = {
                vals[t]: v for t, v in zip(m.col[lo:hi].tolist(), m.val[lo:hi].tolist())
            }
            act = m.choice_action[c] if m.choice_action is not None else None
            choices.append((act, dist))
        out[vals[s]] = choices
    return out


# ------------------------------------------------------------- Storm as oracle


def _storm_build(path: Path, consts: str | None):
    stormpy = pytest.importorskip("stormpy")
    text = Path(path).read_text()
    if not re.search(
        r"^\s*(dtmc|ctmc|mdp|probabilistic|stochastic|nondeterministic)\b",
        re.sub(r"//[^\n]*", "", text),
        re.M,
    ):
        # PRISM reads a model without a type keyword as an MDP; Storm wants one.
        tmp = tempfile.NamedTemporaryFile("w", suffix=".nm", delete=False)
        tmp.write("mdp\n" + text)
        tmp.close()
        path = Path(tmp.name)
    prog = stormpy.parse_prism_program(str(path), prism_compatibility=True)
    undefined = {c.name for c in prog.constants if not c.defined}
    use = ",".join(
        kv for kv in (consts or "").split(",") if kv and kv.split("=")[0] in undefined
    )
    if use:
        prog, _ = stormpy.instantiate_constants(prog, use)
    if re.search(r"^\s*system\b", re.sub(r"//[^\n]*", "", text), re.M):
        # Storm's explicit builder rejects custom system clauses; its symbolic
        # engine gives the counts.
        return stormpy.build_model(prog, engine=stormpy.Engine.DD)
    return stormpy.build_model(prog, options=stormpy.BuilderOptions(build_full=True))


def _storm_rows(sm, names: list[str]) -> dict[tuple, list]:
    import json

    sv = sm.state_valuations
    vals = []
    for s in range(sm.nr_states):
        d = json.loads(str(sv.to_json(s))) or {}
        vals.append(tuple(int(d[n]) for n in names if n in d))
    M = sm.transition_matrix
    nd = sm.is_nondeterministic_model
    out = {}
    for s in range(sm.nr_states):
        choices = []
        start, end = M.get_row_group_start(s), M.get_row_group_end(s)
        for r in range(start, end):
            dist = {}
            for e in M.get_row(r):
                v = e.value() if callable(e.value) else e.value
                dist[vals[e.column]] = dist.get(vals[e.column], 0.0) + float(v)
            act = None
            if nd and sm.has_choice_labeling():
                labs = sorted(sm.choice_labeling.get_labels_of_choice(r))
                act = labs[0] if labs else None
            choices.append((act, dist))
        out[vals[s]] = choices
    return out


def _assert_rows_equal(ours: dict, theirs: dict, nondet: bool) -> None:
    assert ours.keys() == theirs.keys()
    for s in ours:
        a, b = ours[s], theirs[s]
        assert len(a) == len(b), s
        key = lambda c: (c[0] or "", sorted(c[1].items()))  # noqa: E731
        for (act_a, da), (act_b, db) in zip(sorted(a, key=key), sorted(b, key=key)):
            if nondet:
                assert act_a == act_b, s
            assert da.keys() == db.keys(), s
            for t in da:
                assert da[t] == pytest.approx(db[t], rel=1e-12, abs=1e-15), (s, t)


def _compare_with_storm(
    path: Path, consts: str | None = None, m: ExplicitModel | None = None
):
    if m is None:
        m = _build_file(path, consts)
    sm = _storm_build(path, consts)
    assert (m.num_states, m.num_choices, m.num_transitions) == (
        sm.nr_states,
        sm.nr_choices,
        sm.nr_transitions,
    )
    if not hasattr(sm, "transition_matrix"):
        return m, sm  # symbolic model: counts only
    import json

    # Storm drops variables that are never assigned (constants): compare on
    # the variables it keeps (the dropped ones are constant, so this is exact).
    kept = (
        set(json.loads(str(sm.state_valuations.to_json(0))) or ())
        if sm.nr_states
        else set()
    )
    names = [v.name for v in m.variables if v.name in kept]
    _assert_rows_equal(_rows(m, names), _storm_rows(sm, names), m.is_nondeterministic)
    # Initial states.
    cols = [i for i, v in enumerate(m.variables) if v.name in kept]
    ours_init = {tuple(m.states[i, cols].tolist()) for i in m.initial_states.tolist()}
    storm_rows_vals = list(_storm_rows(sm, names))  # state order of Storm
    theirs_init = {storm_rows_vals[i] for i in sm.initial_states}
    assert ours_init == theirs_init
    return m, sm


# ------------------------------------------------------- semantics, small models

DTMC_OVERLAP = """
dtmc
module m
  x : [0..3] init 0;
  [] x=0 -> 0.5:(x'=1) + 0.5:(x'=2);
  [] x=0 -> (x'=3);
  [] x>0 -> true;
endmodule
rewards "r"
  x=0 : 1;
  [] x=0 : 4;
endrewards
"""


def test_dtmc_uniform_resolution(tmp_path):
    m = _build_text(DTMC_OVERLAP)
    assert m.model_type == ModelType.DTMC
    rows = _rows(m)
    assert rows[(0,)] == [(None, {(1,): 0.25, (2,): 0.25, (3,): 0.5})]
    assert any("resolved uniformly" in w for w in m.warnings)
    p = tmp_path / "overlap.pm"
    p.write_text(DTMC_OVERLAP)
    _compare_with_storm(p)


CTMC_SYNC = """
ctmc
module a
  x : [0..1] init 0;
  [go] x=0 -> 2:(x'=1);
  [] x=1 -> 1:(x'=0);
endmodule
module b
  y : [0..1] init 0;
  [go] y=0 -> 3:(y'=1);
  [go] y=0 -> 0.5:(y'=0);
  [] y=1 -> 4:(y'=0);
  [] y=1 -> 1:(y'=0);
endmodule
"""


def test_ctmc_rates_multiply_and_add(tmp_path):
    m = _build_text(CTMC_SYNC)
    rows = _rows(m)
    # [go]: 2*3 to (1,1) and 2*0.5 to (1,0).
    assert rows[(0, 0)] == [(None, {(1, 0): 1.0, (1, 1): 6.0})]
    # Two unlabelled commands race: rates add up.
    assert rows[(1, 1)] == [(None, {(0, 1): 1.0, (1, 0): 5.0})]
    p = tmp_path / "sync.sm"
    p.write_text(CTMC_SYNC)
    _compare_with_storm(p)


SYSTEMS = {
    "full": "A || B || C",
    "interleave": "A ||| B ||| C",
    "partial": "A |[x]| (B ||| C)",
    "hide": "(A || B) / {x} || C",
    "rename": "A || (B {y <- x}) || C",
    "nested": "(A |[y]| C) || B",
}

SYS_MODEL = """
mdp
module A
  a : [0..2] init 0;
  [x] a<2 -> 0.5:(a'=a+1) + 0.5:(a'=a);
  [y] a=2 -> (a'=0);
  [] a=1 -> (a'=2);
endmodule
module B
  b : [0..2] init 0;
  [x] b<2 -> (b'=b+1);
  [y] true -> (b'=0);
  [z] b=1 -> (b'=2);
endmodule
module C = B [b=c, z=w] endmodule
system
  {system}
endsystem
"""


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_system_clause_matches_storm(name, tmp_path):
    text = SYS_MODEL.replace("{system}", SYSTEMS[name])
    p = tmp_path / f"sys_{name}.nm"
    p.write_text(text)
    _compare_with_storm(p)


def test_hiding_stops_synchronisation():
    m = _build_text(SYS_MODEL.replace("{system}", SYSTEMS["hide"]))
    rows = _rows(m)
    # x of A||B is hidden: it no longer waits for C, and C's x runs alone.
    assert sorted(rows[(0, 0, 0)], key=lambda c: c[0] or "") == [
        (None, {(1, 1, 0): 0.5, (0, 1, 0): 0.5}),
        ("x", {(0, 0, 1): 1.0}),
    ]


def test_default_system_synchronises_shared_actions():
    m = _build_text(SYS_MODEL.replace("system\n  {system}\nendsystem", ""))
    rows = _rows(m)
    # From (0,0,0): [x] needs A, B and C together; [y] is blocked in A.
    acts = sorted(a or "" for a, _ in rows[(0, 0, 0)])
    assert acts == ["x"]
    ((_, dist),) = rows[(0, 0, 0)]
    assert dist == {(1, 1, 1): 0.5, (0, 1, 1): 0.5}


GLOBALS = """
mdp
global g : [0..3] init 0;
module p
  s : [0..1] init 0;
  [] s=0 & g<3 -> (g'=g+1) & (s'=1);
  [] s=1 -> (s'=0);
endmodule
module q
  t : bool init false;
  [] g>0 & !t -> (g'=g-1) & (t'=true);
  [] t -> (t'=false);
endmodule
"""


def test_global_variables(tmp_path):
    p = tmp_path / "globals.nm"
    p.write_text(GLOBALS)
    m, _ = _compare_with_storm(p)
    assert [v.name for v in m.variables] == ["g", "s", "t"]
    assert m.variables[2].is_bool


INIT_BLOCK = """
dtmc
module m
  x : [0..3];
  b : bool;
  [] x<3 -> 0.5:(x'=x+1) + 0.5:(b'=!b);
  [] x=3 -> true;
endmodule
init x<2 endinit
"""


def test_init_block_several_initial_states(tmp_path):
    m = _build_text(INIT_BLOCK)
    # All valuations with x<2, in lexicographic order, numbered first.
    assert m.initial_states.tolist() == [0, 1, 2, 3]
    assert m.states[:4].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert m.labels["init"].sum() == 4
    p = tmp_path / "init.pm"
    p.write_text(INIT_BLOCK)
    _compare_with_storm(p)


def test_out_of_range_update_error():
    text = "dtmc\nmodule m\n  x : [0..2] init 0;\n  [] x>=0 -> (x'=x+1);\nendmodule\n"
    with pytest.raises(ExplorationError) as info:
        _build_text(text)
    msg = str(info.value)
    assert "test.pm:4:" in msg  # the command's line
    assert "`x` = 3" in msg and "[0..2]" in msg
    assert "(x=2)" in msg  # the state
    assert "[] x>=0 -> (x'=x+1);" in msg  # quoted source line


def test_probabilities_not_summing_error():
    text = (
        "dtmc\nmodule m\n  x : [0..2] init 0;\n  [] x=0 -> 0.5:(x'=1) + 0.3:(x'=2);\n"
        "  [] x>0 -> true;\nendmodule\n"
    )
    with pytest.raises(ExplorationError, match=r"sum to 0\.8.*\(x=0\)") as info:
        _build_text(text)
    assert "test.pm:4:" in str(info.value)
    # PRISM's -noprobchecks: DTMC rows are normalised by their sum.
    m = _build_text(text, prob_checks=False)
    assert _rows(m)[(0,)] == [(None, {(1,): 0.625, (2,): 0.375})]


def test_negative_rate_error():
    text = (
        "ctmc\nmodule m\n  x : [0..2] init 0;\n  [] x<2 -> (1-2*x):(x'=x+1);\n"
        "endmodule\n"
    )
    with pytest.raises(ExplorationError, match=r"negative rate.*\(x=1\)"):
        _build_text(text)


DEADLOCK = "dtmc\nmodule m\n  x : [0..2] init 0;\n  [] x<2 -> (x'=x+1);\nendmodule\n"


def test_deadlocks_fixed_with_self_loops():
    m = _build_text(DEADLOCK)
    assert m.labels["deadlock"].tolist() == [False, False, True]
    assert _rows(m)[(2,)] == [(None, {(2,): 1.0})]
    assert any("deadlocks in 1 states" in w and "(x=2)" in w for w in m.warnings)


def test_ctmc_deadlock_self_loop_has_rate_one(tmp_path):
    text = DEADLOCK.replace("dtmc", "ctmc").replace("->", "-> 3:")
    m = _build_text(text)
    assert _rows(m)[(2,)] == [(None, {(2,): 1.0})]
    p = tmp_path / "dl.sm"
    p.write_text(text)
    _compare_with_storm(p)


def test_deadlocks_error_option():
    with pytest.raises(ExplorationError, match=r"1 deadlock state .*\n  \(x=2\)"):
        _build_text(DEADLOCK, deadlocks="error")


def test_max_states_and_progress():
    text = (
        "dtmc\nmodule m\n  x : [0..100] init 0;\n  [] x<100 -> (x'=x+1);\n"
        "  [] x=100 -> true;\nendmodule\n"
    )
    with pytest.raises(ExplorationError, match=r"more than 50 states \(max_states\)"):
        _build_text(text, max_states=50)
    calls = []
    m = _build_text(text, progress=calls.append)
    assert m.num_states == 101
    assert calls and calls[-1].states == 101 and calls[-1].queued == 0
    assert calls[-1].done
    assert calls[-1].levels == 101


def test_zero_probability_updates_are_dropped(tmp_path):
    text = (
        "dtmc\nmodule m\n  x : [0..2] init 0;\n  [] x=0 -> 1:(x'=1) + 0:(x'=2);\n"
        "  [] x>0 -> true;\nendmodule\n"
    )
    m = _build_text(text)
    assert m.num_states == 2
    p = tmp_path / "zero.pm"
    p.write_text(text)
    _compare_with_storm(p)


def test_multiword_state_keys(tmp_path):
    # Ranges whose product exceeds 2^63 need several key words.
    text = (
        "dtmc\nmodule m\n"
        + "".join(f"  v{i} : [0..1000000] init 0;\n" for i in range(4))
        + "  [] v0<3 -> 0.5:(v0'=v0+1) + 0.5:(v3'=1000000-v0);\n"
        + "  [] v0=3 -> 0.5:(v1'=min(v1+1,2)) + 0.5:(v2'=1000000);\n"
        + "endmodule\n"
    )
    c = _checked(text)
    from jaxmc.explore.statetable import Encoding

    assert Encoding.for_ranges([(v.low, v.high) for v in c.variables]).n_words == 2
    p = tmp_path / "wide.pm"
    p.write_text(text)
    _compare_with_storm(p, m=build(c))


def test_provenance_recomputes_values():
    text = SYS_MODEL.replace("system\n  {system}\nendsystem", "").replace("mdp", "dtmc")
    for model_text in (DTMC_OVERLAP, CTMC_SYNC, text, GLOBALS):
        c = _checked(model_text)
        m = build(c)
        prov = m.provenance
        assert isinstance(prov, Provenance)
        assert prov.entry_ptr.shape == (m.num_transitions + 1,)
        # Recompute every entry from the update probabilities.
        names = [v.name for v in c.variables]
        bools = {v.name for v in c.variables if v.is_bool}
        cmds = {cmd.index: cmd for mod in c.modules for cmd in mod.commands}
        probs = [
            lower(cmds[ci].updates[ui].prob, names, bools=bools)(m.states)
            for ci, ui in prov.updates.tolist()
        ]
        src = m.state_of_choice()[m.row_of_entry()]
        contrib_entry = np.repeat(np.arange(m.num_transitions), np.diff(prov.entry_ptr))
        value = prov.weight.copy()
        for col in range(prov.products.shape[1]):
            g = prov.products[prov.product, col]
            for u in np.unique(g[g >= 0]).tolist():
                sel = g == u
                value[sel] *= probs[u][src[contrib_entry[sel]]]
        recomputed = np.bincount(
            contrib_entry, weights=value, minlength=m.num_transitions
        )
        np.testing.assert_allclose(recomputed, m.val, rtol=1e-12)


REWARDS = """
{kind}
module m
  x : [0..3] init 0;
  [a] x<3 -> 0.25:(x'=x+1) + 0.75:(x'=0);
  [b] x<2 -> (x'=x+2);
  [] x=3 -> (x'=0);
endmodule
rewards "both"
  x>0 : x;
  x=3 : 0.5;
  [a] x<2 : 2;
  [b] true : 3*x+1;
  [] true : 7;
endrewards
rewards "state_only"
  true : 1;
endrewards
"""


@pytest.mark.parametrize("kind", ["dtmc", "ctmc", "mdp"])
def test_rewards_match_storm(kind, tmp_path):
    p = tmp_path / f"rew.{ {'dtmc': 'pm', 'ctmc': 'sm', 'mdp': 'nm'}[kind] }"
    p.write_text(REWARDS.format(kind=kind))
    m, sm = _compare_with_storm(p)
    names = [v.name for v in m.variables]
    storm_index = {v: i for i, v in enumerate(_storm_rows(sm, names))}
    perm = np.array([storm_index[tuple(r)] for r in m.states.tolist()])
    assert [r.name for r in m.rewards] == ["both", "state_only"]
    for r in m.rewards:
        srm = sm.reward_models[r.name]
        np.testing.assert_allclose(
            r.state, np.array(srm.state_rewards)[perm], rtol=1e-12
        )
    r = m.rewards[0]
    sa = np.array(sm.reward_models["both"].state_action_rewards)
    if kind == "mdp":
        # Per choice: the same value on every entry of the row.
        first = r.transition[m.row_ptr[:-1]]
        for s in range(m.num_states):
            cs = range(m.choice_ptr[s], m.choice_ptr[s + 1])
            lo = sm.transition_matrix.get_row_group_start(int(perm[s]))
            hi = sm.transition_matrix.get_row_group_end(int(perm[s]))
            assert sorted(first[list(cs)]) == pytest.approx(sorted(sa[lo:hi]))
            for c in cs:
                seg = r.transition[m.row_ptr[c] : m.row_ptr[c + 1]]
                assert np.all(seg == seg[0])
    else:
        # Expected reward of one step (DTMC) / per jump (CTMC) matches Storm.
        row = m.row_of_entry()
        exp = np.bincount(row, weights=m.val * r.transition, minlength=m.num_states)
        if kind == "ctmc":
            exp = exp / np.bincount(row, weights=m.val, minlength=m.num_states)
        np.testing.assert_allclose(exp, sa[perm], rtol=1e-12)
    assert m.rewards[1].transition is None


# ------------------------------------------- the shared corpus, against Storm

import corpus  # noqa: E402


CORPUS_MAX_STATES = 3000


def _corpus_models():
    return [
        pytest.param(p, id=str(p.relative_to(corpus.SHARED_MODELS)))
        for p in corpus.in_scope_models()
    ]


def _no_prob_checks(path: Path) -> bool:
    args = [Path(str(path) + ".args")] + list(path.parent.glob(path.name + ".*.args"))
    return any(a.is_file() and "-noprobchecks" in a.read_text() for a in args)


# Instances whose very first states have millions of successors: finding out
# that they exceed the cap costs seconds, so they are skipped up front.
_HUGE = re.compile(r"herman(1[5-9]|2\d)\.pm$")


@pytest.mark.storm
@pytest.mark.parametrize("path", _corpus_models())
def test_corpus_model_matches_storm(path: Path):
    """Counts, initial states and every transition value agree with Storm on
    each in-scope model (constants from PRISM's scripts; small ones only)."""
    from jaxmc.errors import SemanticError, UnsupportedError

    if _HUGE.search(path.name):
        pytest.skip(f"more than {CORPUS_MAX_STATES} states")
    consts = corpus.merged_constants(path) or None
    text = path.read_text()
    try:
        c = check_program(
            parse_model(text, str(path)), consts, source=text, file=str(path)
        )
    except (SemanticError, UnsupportedError) as e:
        pytest.skip(f"not checkable: {str(e).splitlines()[0]}")
    try:
        m = build(
            c, max_states=CORPUS_MAX_STATES, prob_checks=not _no_prob_checks(path)
        )
    except ExplorationError as e:
        if "raise max_states" in str(e) or "can be enumerated" in str(e):
            pytest.skip(f"more than {CORPUS_MAX_STATES} states")
        raise
    if m.num_transitions > 50 * CORPUS_MAX_STATES:
        pytest.skip("too many transitions for a quick comparison")
    if _no_prob_checks(path):
        pytest.skip("Storm has no -noprobchecks")
    try:
        _storm_build(path, consts)
    except RuntimeError as e:
        pytest.skip(f"Storm cannot build it: {str(e).splitlines()[0]}")
    _compare_with_storm(path, consts, m=m)


# Counts from Storm 2.0 (stormpy, PRISM compatibility), written in so that they
# are checked without an oracle: (states, choices, transitions).
KNOWN_COUNTS = [
    ("ctmcs/tandem/tandem.sm", "c=31", (2016, 2016, 6819)),
    ("ctmcs/cluster/cluster.sm", "N=4", (820, 820, 3616)),
    ("dtmcs/herman/herman7.pm", None, (128, 128, 2188)),
    ("ctmcs/kanban/kanban.sm", "t=1", (160, 160, 616)),
    ("ctmcs/polling/poll8.sm", None, (3072, 3072, 14848)),
    ("ctmcs/fms/fms.sm", "n=1", (54, 54, 155)),
    ("dtmcs/brp/brp.pm", "N=16,MAX=2", (677, 677, 867)),
    ("dtmcs/leader_sync/leader4_4.pm", None, (812, 812, 1067)),
    ("ctmcs/embedded/embedded.sm", "MAX_COUNT=2", (3478, 3478, 14639)),
    ("mdps/consensus/coin2.nm", "K=2", (272, 400, 492)),
    # Storm needs `new`/`old` renamed and `mdp` moved first to parse zeroconf.
    ("mdps/zeroconf/zeroconf.nm", "N=1000,K=2,reset=true,err=0.1", (670, 827, 997)),
]


@needs_examples
@pytest.mark.parametrize(
    "rel,consts,counts", KNOWN_COUNTS, ids=[k[0] for k in KNOWN_COUNTS]
)
def test_known_counts(rel, consts, counts):
    m = _build_file(EXAMPLES / rel, consts)
    assert (m.num_states, m.num_choices, m.num_transitions) == counts
    # Structural invariants of the contract.
    assert m.choice_ptr[0] == 0 and m.choice_ptr[-1] == m.num_choices
    assert m.row_ptr[-1] == m.num_transitions
    for lo, hi in zip(m.row_ptr[:-1].tolist(), m.row_ptr[1:].tolist()):
        assert np.all(np.diff(m.col[lo:hi]) > 0)
    if m.model_type != ModelType.CTMC:
        sums = np.add.reduceat(m.val, m.row_ptr[:-1])
        np.testing.assert_allclose(sums, 1.0, atol=1e-12)
    assert m.initial_states.tolist() == list(range(len(m.initial_states)))


@pytest.mark.slow
@pytest.mark.storm
@pytest.mark.parametrize("path", _corpus_models())
def test_corpus_model_counts_large(path: Path):
    """Counts only, up to 200k states (the instances the quick test skips)."""
    from jaxmc.errors import SemanticError, UnsupportedError

    if _HUGE.search(path.name) or _no_prob_checks(path):
        pytest.skip("too large / needs -noprobchecks")
    consts = corpus.merged_constants(path) or None
    text = path.read_text()
    try:
        c = check_program(
            parse_model(text, str(path)), consts, source=text, file=str(path)
        )
        m = build(c, max_states=200_000)
    except (SemanticError, UnsupportedError) as e:
        pytest.skip(f"not checkable: {str(e).splitlines()[0]}")
    except ExplorationError as e:
        if "raise max_states" in str(e) or "can be enumerated" in str(e):
            pytest.skip("more than 200000 states")
        raise
    if m.num_states <= CORPUS_MAX_STATES:
        pytest.skip("compared in full by the quick test")
    if m.initial_states.size > 256:
        # Storm enumerates `init` blocks with an SMT solver: minutes here.
        pytest.skip("too many initial states for Storm")
    try:
        sm = _storm_build(path, consts)
    except RuntimeError as e:
        pytest.skip(f"Storm cannot build it: {str(e).splitlines()[0]}")
    assert (m.num_states, m.num_choices, m.num_transitions) == (
        sm.nr_states,
        sm.nr_choices,
        sm.nr_transitions,
    )
