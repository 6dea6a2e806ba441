"""What a certified DTMC/CTMC linear solve derives from the model alone is
made once per model (`numerics.host_system`, the cached probabilities and
entry lists), and a warm check on it (the same or another property, with
another maybe-set) gives a fresh model's values: nothing stale is reused.
The certificate's products on the device (`numerics.certificate`) give
the host's bounds."""

import numpy as np
import pytest

import jaxmc
from jaxmc.numerics import certificate, host_system, methods, sound, transitions


# A walk on x (cyclic: Krylov) that can leave to y=1 and on to y=2 or y=3
# (acyclic: Gauss-Seidel), and rewards that are 0 on part of it (exact zeros).
DTMC = """dtmc
const int N = 40;
module m
  x : [0..N] init 20;
  y : [0..3] init 0;
  [] y=0 & x>0 & x<N -> 0.4 : (x'=x+1) + 0.5 : (x'=x-1) + 0.1 : (y'=1);
  [] y=0 & (x=0 | x=N) -> true;
  [] y=1 -> 0.3 : (y'=2) + 0.7 : (y'=3);
  [] y>=2 -> true;
endmodule
rewards "r" y=0 & x>25 : 1; y=1 : 2; endrewards
rewards "steps" true : 1; endrewards
"""
DTMC_PROPS = [
    "P=? [ F x=0 ]",
    "P=? [ F x=N ]",
    "P=? [ y>0 U y=2 ]",
    "P=? [ x<30 U y=3 ]",
    'R{"r"}=? [ F (x=0 | x=N | y>=2) ]',
    'R{"steps"}=? [ F y>=2 | x=0 | x=N ]',
    "P=? [ F x=0 ]",
]

# A birth-death CTMC with a failure state: the embedded DTMC's
# probabilities are what a warm check reuses.
CTMC = """ctmc
const int N = 30;
module q
  n : [0..N] init 0;
  f : bool init false;
  [] !f & n<N -> 2.0 : (n'=n+1);
  [] !f & n>0 -> 3.0 : (n'=n-1);
  [] !f & n>20 -> 0.05 : (f'=true);
endmodule
rewards "queue" !f : n; endrewards
"""
CTMC_PROPS = [
    "P=? [ F n=N ]",
    "P=? [ F f ]",
    "P=? [ n<25 U f ]",
    'R{"queue"}=? [ F n=N | f ]',
    "P=? [ F n=N ]",
]


def _same(a, b, atol=1e-12):
    """The values and bounds of two results equal to 1e-12."""
    assert a.method == b.method
    for x, y in ((a.values, b.values), (a.lower, b.lower), (a.upper, b.upper)):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=atol)


def _fresh(text, prop):
    return jaxmc.check(jaxmc.load_model_string(text), prop, all_states=True)


@pytest.mark.parametrize("where", ["off", "on"])
@pytest.mark.parametrize(
    "text,props", [(DTMC, DTMC_PROPS), (CTMC, CTMC_PROPS)], ids=["dtmc", "ctmc"]
)
def test_warm_checks_give_a_fresh_models_values(monkeypatch, text, props, where):
    monkeypatch.setattr(certificate, "CERTIFY_ON_DEVICE", where)
    m = jaxmc.load_model_string(text)
    for prop in props + props[::-1]:
        _same(jaxmc.check(m, prop, all_states=True), _fresh(text, prop))


def test_device_certificate_gives_the_hosts_bounds(monkeypatch):
    """Both paths are exercised (Krylov with its certificate, Gauss-Seidel)
    and the device's products give the host's bounds."""
    methods_seen = set()
    for prop in DTMC_PROPS:
        got = {}
        for where in ("off", "on"):
            monkeypatch.setattr(certificate, "CERTIFY_ON_DEVICE", where)
            got[where] = _fresh(DTMC, prop)
        a, b = got["off"], got["on"]
        methods_seen.add(a.method)
        _same(a, b, atol=1e-15)
        if a.lower is not None:
            assert np.all(a.lower <= a.values) and np.all(a.values <= a.upper)
    assert {"bicgstab", "gauss_seidel"} <= methods_seen


def test_model_level_structures_are_built_once(monkeypatch):
    calls = {"scc": 0, "order": 0}
    real_scc, real_order = host_system.scc_labels, host_system.topological_order

    def counting_scc(A):
        calls["scc"] += 1
        return real_scc(A)

    def counting_order(A, scc=None):
        calls["order"] += 1
        return real_order(A, scc)

    monkeypatch.setattr(host_system, "scc_labels", counting_scc)
    monkeypatch.setattr(host_system, "topological_order", counting_order)
    m = jaxmc.load_model_string(DTMC)
    em = jaxmc.build(m)
    distinct = DTMC_PROPS[:4]  # (four maybe-sets: within the memo)
    first = [jaxmc.check(m, p).value for p in distinct]
    system = host_system.host_system(em)
    assert system.built["csr"] == 1 and system.built["scc"] == 1
    after_first = dict(calls)
    again = [jaxmc.check(m, p).value for p in distinct]
    assert again == first
    assert calls == after_first  # (nothing decomposed again)
    assert system.built["csr"] == 1 and system.built["scc"] == 1
    assert host_system.host_system(em) is system
    assert transitions.probabilities(em) is system.probs
    # another model object has its own
    other = jaxmc.build(jaxmc.load_model_string(DTMC))
    assert host_system.host_system(other) is not system


def _maybe_sets(em, rng, count):
    n = em.num_states
    out = [np.ones(n, bool), em.states[:, 1] == 0, em.states[:, 1] == 1]
    out += [rng.random(n) < q for q in np.linspace(0.2, 0.95, count)]
    return out


@pytest.mark.parametrize("text", [DTMC, CTMC], ids=["dtmc", "ctmc"])
def test_cached_structure_equals_the_per_check_one(text):
    """The masked host matrix, the structural test's outcome and the exact
    zeros from the model's cached data equal their per-check versions."""
    em = jaxmc.build(jaxmc.load_model_string(text))
    system = host_system.host_system(em)
    soc, rows, cols, _ = system.host
    sr = system.state_row
    n = em.num_states
    rng = np.random.default_rng(1)
    for maybe in _maybe_sets(em, rng, 6):
        data = np.where(maybe[sr], system.probs, 0.0)
        ref = methods.host_matrix(n, data, sr, cols)
        assert np.array_equal(np.asarray(system.device_values(maybe)), data)
        got = system.masked(maybe)
        assert np.array_equal(ref.indptr, got.indptr)
        assert np.array_equal(ref.indices, got.indices)
        assert np.array_equal(ref.data, got.data)
        for gate in (False, True):
            size = 0 if gate else len(data)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(methods, "TOPOLOGICAL_MAX_ENTRIES", size)
                mp.setattr(methods, "TOPOLOGICAL_DEVICE_MAX_ENTRIES", size)
                A0, o0 = methods.auto_linear(n, data, sr, cols, maybe, True)
                A1, o1 = methods.auto_linear(
                    n, data, sr, cols, maybe, True, system=system
                )
            assert (A0 is None) == (A1 is None) and (o0 is None) == (o1 is None)
            if o0 is not None:
                assert np.array_equal(o0, o1)
                assert (A0 != A1).nnz == 0
        b = np.zeros(em.num_choices)
        b[rng.random(em.num_choices) < 0.05] = 1.0
        fixed = np.where(maybe, 0.0, (rng.random(n) < 0.1).astype(float))
        z0 = sound._zero_valued(n, data, sr, cols, maybe, soc, b, fixed)
        z1 = sound._zero_valued(n, data, sr, cols, maybe, soc, b, fixed, system)
        assert np.array_equal(z0, z1)


def test_cached_arrays_are_read_only():
    em = jaxmc.build(jaxmc.load_model_string(CTMC))
    p = transitions.probabilities(em)
    with pytest.raises(ValueError):
        p[0] = 1.0
    assert em.val.flags.writeable  # (the model's own arrays are untouched)


def test_long_run_reward_rates_are_made_once(monkeypatch):
    from jaxmc.numerics import steady_values

    calls = {"n": 0}
    real = steady_values.state_sums

    def counting(model, w):
        calls["n"] += 1
        return real(model, w)

    monkeypatch.setattr(steady_values, "state_sums", counting)
    text = """ctmc
module q
  n : [0..4] init 0;
  [up] n<4 -> 2.0 : (n'=n+1);
  [down] n>0 -> 3.0 : (n'=n-1);
endmodule
rewards "ups" [up] true : 1; endrewards
rewards "both" [up] true : 1; [down] true : 2; n>2 : 1; endrewards
"""
    m = jaxmc.load_model_string(text)
    first = [jaxmc.check(m, f'R{{"{r}"}}=? [ S ]').value for r in ("ups", "both")]
    again = [jaxmc.check(m, f'R{{"{r}"}}=? [ S ]').value for r in ("ups", "both")]
    assert calls["n"] == 2 and again == first
    fresh = jaxmc.load_model_string(text)
    assert jaxmc.check(fresh, 'R{"both"}=? [ S ]').value == pytest.approx(
        first[1], rel=1e-12
    )
    # the stationary distribution of the birth-death chain: pi_n ~ (2/3)^n
    pi = (2 / 3) ** np.arange(5)
    pi /= pi.sum()
    assert first[0] == pytest.approx(2.0 * pi[:4].sum(), rel=1e-6)


def test_state_formula_columns_are_converted_once_per_model(monkeypatch):
    """A property's state formulas read the state variables' int64 columns
    kept with the model (`props.evaluate`): only the columns read are made,
    once, and a warm check gives the first one's values, as does a fresh
    model."""
    text = """dtmc
module m
  s : [0..3] init 0;
  t : [0..2] init 0;
  [] s<3 -> 0.5 : (s'=s+1) + 0.5 : (s'=0);
  [] s=3 & t<2 -> (t'=t+1);
  [] s=3 & t=2 -> true;
endmodule
"""
    prop = "P=? [ s<3 U s=3 & t=0 ]"
    m = jaxmc.load_model_string(text)
    first = jaxmc.check(m, prop)
    em = jaxmc.build(m)
    kept = {
        k: v
        for k, v in transitions._PER_MODEL[em].items()
        if k.startswith("state_column")
    }
    assert sorted(kept) == ["state_column_0", "state_column_1"]
    assert all(v.dtype == np.int64 and not v.flags.writeable for v in kept.values())
    again = jaxmc.check(m, prop)
    assert all(transitions._PER_MODEL[em][k] is v for k, v in kept.items())
    assert again.value == first.value
    fresh = jaxmc.check(jaxmc.load_model_string(text), prop)
    assert fresh.value == first.value


def _steps_bounds_by_parts(R, bb, x, maybe, w, kw):
    """`certify_steps` as it was before its one-pass kernel: the device's
    supersolution and residual kernels, then the bounds in numpy."""
    s = certificate.steps_supersolution(R, maybe, w)
    if s is None:
        return None
    err = certificate.residual_max(R, bb, x, maybe) * s * (1.0 + 1e-9)
    if not np.all(np.isfinite(err)):
        return None
    lo = np.where(maybe, np.minimum(x - err, np.nextafter(x, -np.inf)), x)
    hi = np.where(maybe, np.maximum(x + err, np.nextafter(x, np.inf)), x)
    ok = certificate.within(lo, hi, maybe, kw["epsilon"], kw["relative"])
    return (lo, hi) if ok else None


def test_steps_certificate_in_one_device_pass():
    """`certify_steps` on `DeviceRows` (one jitted pass: supersolution,
    residual, bounds, criterion) gives the bounds of the same kernels
    followed by numpy bit for bit, refuses where they refuse, and its
    bounds hold the exact solution."""
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    n = 300
    P = sp.random(n, n, 0.02, random_state=3, format="csr")
    P = sp.csr_matrix(sp.diags(0.9 / np.maximum(P.sum(axis=1).A1, 1e-9)) @ P)
    maybe = rng.random(n) < 0.8
    P = sp.csr_matrix(sp.diags(maybe.astype(float)) @ P)
    P.sort_indices()
    bb = np.where(maybe, rng.random(n) * 0.1, 0.0)
    A = np.eye(n) - P.toarray()
    x = np.where(maybe, np.linalg.solve(A, bb), 0.0)
    w = np.where(maybe, np.linalg.solve(A, np.ones(n)), 0.0)
    R = certificate.DeviceRows(P)
    outcomes = []
    for noise in (0.0, 1e-9, 1e-3):
        xn = x * (1 + noise * rng.standard_normal(n))
        for relative in (True, False):
            kw = {"epsilon": 1e-6, "relative": relative}
            want = _steps_bounds_by_parts(R, bb, xn, maybe, w, kw)
            got = certificate.certify_steps(R, bb, xn, maybe, w, kw)
            assert (want is None) == (got is None)
            outcomes.append(got is None)
            if got is not None:
                assert np.array_equal(want[0], got[0])
                assert np.array_equal(want[1], got[1])
                assert np.all(got[0] <= x) and np.all(x <= got[1])
    assert True in outcomes and False in outcomes  # both outcomes seen
