"""What a long-run check derives from the model alone is made once per model
(`steady_values._bsccs`: the BSCC decomposition, the BSCCs' system and its
device layout), and the certificate evaluated on the device gives the host's
bracket (`steady_bsccs.certify`)."""

import numpy as np
import pytest

import jaxmc
from jaxmc.numerics import graph, steady_bsccs, steady_longrun


# Two BSCCs (s=1: x=0..2 a cycle with a shortcut; s=2: x=0..1 a pair) behind one
# transient state, and rates that make the gains differ.
MODEL = """ctmc
module m
  s : [0..2] init 0;
  x : [0..2] init 0;
  [] s=0 -> 1 : (s'=1) + 3 : (s'=2);
  [] s=1 & x<2 -> 2 + x : (x'=x+1);
  [] s=1 & x=2 -> 5 : (x'=0);
  [] s=1 & x=1 -> 0.5 : (x'=0);
  [] s=2 & x=0 -> 4 : (x'=1);
  [] s=2 & x=1 -> 1 : (x'=0);
endmodule
rewards "r" s=1 : x; s=2 : 3 * x + 1; endrewards
"""


def _bsccs(k_per, seed):
    """A random system of BSCCs of `k_per` states each (a cycle through every
    state, so irreducible, plus random chords) as a `Bsccs`."""
    rng = np.random.default_rng(seed)
    src, dst, lab = [], [], []
    base = 0
    for b, k in enumerate(k_per):
        s = np.arange(k)
        chords = rng.integers(0, k, (3 * k, 2))
        chords = chords[chords[:, 0] != chords[:, 1]]
        src += [base + s, base + chords[:, 0]]
        dst += [base + (s + 1) % k, base + chords[:, 1]]
        lab.append(np.full(k, b))
        base += k
    src, dst = np.concatenate(src), np.concatenate(dst)
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    val = rng.uniform(0.1, 5.0, len(src))
    d = np.bincount(src, weights=val, minlength=base)
    lab = np.concatenate(lab)
    reps = np.unique(lab, return_index=True)[1]
    return steady_longrun.Bsccs(base, src, dst, val, d, lab, reps), rng


@pytest.mark.parametrize("sizes", [(40,), (7, 30, 1 + 12)])
def test_device_certificate_is_the_hosts(monkeypatch, sizes):
    B, rng = _bsccs(sizes, seed=len(sizes))
    r = rng.uniform(-2, 3, B.k)
    for h in (np.zeros(B.k), rng.normal(0, 10, B.k)):
        monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", "off")
        host = steady_bsccs.certify(B, r, h)
        monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", "on")
        dev = steady_bsccs.certify(B, r, h)
        for a, b in zip(host, dev):
            assert a.shape == b.shape == (B.nb,)
            # the same float64 evaluation up to the order of summation
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        lo, hi, floor = dev
        assert np.all(lo <= hi) and np.all(floor > 0)
    # non-finite iterates certify nothing, on either side
    h = np.full(B.k, np.nan)
    lo, hi, floor = steady_bsccs.certify(B, r, h)
    assert np.all(np.isinf(lo)) and np.all(np.isinf(hi))


def test_device_certificate_holds_the_exact_gain(monkeypatch):
    """With the device's certificate in the chain, every check still holds
    the exact value (a dense solve of each BSCC's stationary distribution),
    and gives the host's values."""
    m = jaxmc.load_model_string(MODEL)
    props = ['R{"r"}=? [ S ]', "S=? [ x=1 ]"]
    monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", "off")
    host = [jaxmc.check(m, p) for p in props]
    monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", "on")
    m2 = jaxmc.load_model_string(MODEL)
    dev = [jaxmc.check(m2, p) for p in props]
    for a, b in zip(host, dev):
        assert abs(a.value - b.value) <= a.bound + b.bound + 1e-15
    # from s=0: 1/4 to the BSCC of s=1 (x cycles 0 -2-> 1 -3-> 2 -5-> 0, and
    # 1 -0.5-> 0), 3/4 to that of s=2 (x 0 -4-> 1 -1-> 0)
    import scipy.linalg as sl

    def pi(Q):
        A = np.vstack([Q.T, np.ones(len(Q))])
        return sl.lstsq(A, np.r_[np.zeros(len(Q)), 1.0])[0]

    p1 = pi(np.array([[-2, 2, 0], [0.5, -3.5, 3], [5, 0, -5]], float))
    p2 = pi(np.array([[-4, 4], [1, -1]], float))
    exact_r = 0.25 * (p1 @ [0, 1, 2]) + 0.75 * (p2 @ [1, 4])
    exact_s = 0.25 * p1[1] + 0.75 * p2[1]
    for res, exact in zip(dev, (exact_r, exact_s)):
        assert abs(res.value - exact) <= res.bound + 1e-12


def test_bsccs_and_their_layout_are_made_once_per_model(monkeypatch):
    calls = {"bsccs": 0, "device": 0}
    real_bsccs, real_device = graph.bsccs, steady_longrun._Device

    def counting_bsccs(model):
        calls["bsccs"] += 1
        return real_bsccs(model)

    class CountingDevice(real_device):
        def __init__(self, *a):
            calls["device"] += 1
            super().__init__(*a)

    monkeypatch.setattr(graph, "bsccs", counting_bsccs)
    monkeypatch.setattr(steady_longrun, "_Device", CountingDevice)
    m = jaxmc.load_model_string(MODEL)
    first = [jaxmc.check(m, p).value for p in ('R{"r"}=? [ S ]', "S=? [ x=1 ]")]
    again = jaxmc.check(m, 'R{"r"}=? [ S ]').value
    assert calls["bsccs"] == 1
    assert calls["device"] <= 1  # (none where only LU ran)
    assert again == first[0]
    # another model object builds its own
    other = jaxmc.load_model_string(MODEL)
    assert jaxmc.check(other, "S=? [ x=1 ]").value == pytest.approx(first[1], abs=1e-9)
    assert calls["bsccs"] == 2


def test_state_sums_are_bincounts_over_the_entries():
    """`transitions.state_sums` (the long-run reward rates' per-state sums)
    against `np.bincount` of the entries' states, with states and choices
    that have no entries."""
    from types import SimpleNamespace

    from jaxmc.numerics.transitions import state_sums

    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        per_state = rng.integers(0, 3, n)
        m = int(per_state.sum())
        per_choice = rng.integers(0, 40, m)
        model = SimpleNamespace(
            num_states=n,
            choice_ptr=np.r_[0, np.cumsum(per_state)],
            row_ptr=np.r_[0, np.cumsum(per_choice)],
        )
        w = rng.normal(size=int(per_choice.sum()))
        soc = np.repeat(np.arange(n), per_state)
        ref = np.bincount(
            soc[np.repeat(np.arange(m), per_choice)], weights=w, minlength=n
        )
        np.testing.assert_allclose(state_sums(model, w), ref, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("sizes", [(40,), (7, 30, 1 + 12)])
def test_bordered_certificate_on_a_device_iterate_is_the_hosts(monkeypatch, sizes):
    """`certify(..., bordered=True)` (the representatives' entries read as
    0) of a device array on the device gives the host's bracket of the split
    iterate; a non-finite iterate gives no bracket on both."""
    import jax.numpy as jnp

    B, rng = _bsccs(sizes, seed=7 + len(sizes))
    r = rng.uniform(-2, 3, B.k)
    z = rng.normal(0, 10, B.k)
    monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", "off")
    host = steady_bsccs.certify(B, r, steady_longrun._split(B, z)[0])
    monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", "on")
    dev = steady_bsccs.certify(B, r, jnp.asarray(z), bordered=True)
    for a, b in zip(host, dev):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    z[-1] = np.nan
    lo, hi, floor = steady_bsccs.certify(B, r, jnp.asarray(z), bordered=True)
    assert np.all(lo == -np.inf) and np.all(hi == np.inf) and np.all(floor == np.inf)


@pytest.mark.parametrize("where", ["on", "off"])
def test_reward_data_of_a_long_run_check_is_made_once(monkeypatch, where):
    """A warm long-run check on the device's Krylov path (layout "ell":
    the BSCCs' system on the device) makes nothing again from its reward
    vector (`Bsccs.per_reward`: the BSCC slice, the h = 0 bracket, the
    right-hand side and first start on the device, the certificate's
    reward) and gives the first check's value; a fresh model gives it too."""
    monkeypatch.setattr(steady_bsccs, "CERTIFY_ON_DEVICE", where)
    made = []
    real = steady_bsccs.Bsccs.per_reward

    def counting(self, r, key, make):
        return real(self, r, key, lambda: made.append(key) or make())

    monkeypatch.setattr(steady_bsccs.Bsccs, "per_reward", counting)
    prop = 'R{"r"}=? [ S ]'
    m = jaxmc.load_model_string(MODEL)
    first = jaxmc.check(m, prop, layout="ell")
    assert first.method.startswith("bicgstab")
    n_first = len(made)
    assert n_first >= 3
    again = jaxmc.check(m, prop, layout="ell")
    assert len(made) == n_first
    assert again.value == first.value and again.bound == first.bound
    fresh = jaxmc.check(jaxmc.load_model_string(MODEL), prop, layout="ell")
    assert fresh.value == pytest.approx(first.value, rel=1e-12)
