"""The `layout=` option of the public API: every layout gives the values of
CSR (to 1e-12) on DTMC, CTMC and MDP properties of every numerical kind
(unbounded, bounded, rewards, uniformisation, steady state), through the
plain-JAX SpMV on CPU and once through the Pallas kernel in interpret mode;
the timing breakdown of `CheckResult`; the automatic choice."""

import pytest

import jaxmc
from jaxmc.numerics import DeviceModel


DTMC = """
dtmc
const int N = 6;
module walk
  x : [0..N] init 2;
  [] x>0 & x<N -> 0.3:(x'=x-1) + 0.5:(x'=x+1) + 0.2:(x'=x);
  [] x=0 -> (x'=0);
  [] x=N -> (x'=N);
endmodule
rewards "steps" x>0 & x<N : 1; endrewards
label "goal" = x=N;
"""
DTMC_PROPS = [
    'P=? [ F "goal" ]',
    'P=? [ F<=5 "goal" ]',
    "P=? [ X x=3 ]",
    'P=? [ x>0 U[2,4] "goal" ]',
    "R=? [ F x=0 | x=N ]",
    "R=? [ C<=4 ]",
    "R=? [ I=3 ]",
    "S=? [ x=N ]",
]

CTMC = """
ctmc
const int c = 5;
module q
  s : [0..c] init 0;
  t : [0..2] init 0;
  [] s<c -> 2:(s'=s+1);
  [] s>0 -> 3:(s'=s-1);
  [] t<2 -> 0.5:(t'=t+1);
  [] t=2 -> 1.5:(t'=0);
endmodule
rewards "cust" true : s; endrewards
"""
CTMC_PROPS = [
    "P=? [ true U<=1.5 s=c ]",
    "P=? [ s<c U>=0.5 s=c ]",
    "R=? [ S ]",
    "S=? [ s>2 & t=1 ]",
    "R=? [ I=1 ]",
    "R=? [ C<=1 ]",
    "P=? [ F s=c & t=2 ]",
    "R=? [ F s=c ]",
]

MDP = """
mdp
module m
  x : [0..4] init 0;
  [a] x<4 -> 0.6:(x'=x+1) + 0.4:(x'=max(x-1,0));
  [b] x<4 -> 0.9:(x'=x) + 0.1:(x'=4);
  [] x=4 -> true;
endmodule
rewards true : 1; endrewards
"""
MDP_PROPS = [
    "Pmax=? [ F x=4 ]",
    "Pmin=? [ F<=3 x=4 ]",
    "Rmin=? [ F x=4 ]",
    "Rmax=? [ F x=4 ]",
    "Pmin=? [ X x=1 ]",
]

LAYOUTS = ["ell", "warp", "warp2", "dia"] + [
    pytest.param(k, marks=pytest.mark.slow) for k in ("sell", "compact", "vector")
]


def _values(text, props, layout, **kw):
    m = jaxmc.load_model_string(text)
    out = []
    for p in props:
        r = jaxmc.check(m, p, layout=layout, **kw)
        out.append((r.value, (r.method, r.iterations), r.layout))
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "text,props",
    [(DTMC, DTMC_PROPS), (CTMC, CTMC_PROPS), (MDP, MDP_PROPS)],
    ids=["dtmc", "ctmc", "mdp"],
)
def test_layouts_match_csr(text, props, layout):
    ref = _values(text, props, "csr")
    got = _values(text, props, layout)
    for p, (v0, it0, l0), (v, it, lay) in zip(props, ref, got):
        assert v == pytest.approx(v0, rel=1e-12, abs=1e-12), p
        if p.startswith("S") or "[ S ]" in p:
            # steady state: LU on the host for CSR, a device Krylov solve for
            # the others
            assert "bicgstab" not in it0[0] and "bicgstab" in it[0] and it[1] > 0, (
                p,
                it0,
                it,
            )
        else:
            assert it == it0, p
        if (l0, lay) != (None, None):  # None: nothing left to solve (all 0/1)
            assert l0 in ("csr", "host") and lay not in ("csr", "host", None), (
                p,
                l0,
                lay,
            )


def test_interval_iteration_on_warp():
    kw = dict(method="interval_iteration")
    ref = _values(MDP, MDP_PROPS[:4], "csr", **kw)
    got = _values(MDP, MDP_PROPS[:4], "warp", **kw)
    for (v0, _, _), (v, _, lay) in zip(ref, got):
        assert v == pytest.approx(v0, rel=1e-12)
        assert lay in ("warp", None)  # None: nothing to solve (Pmax = 1)


def test_pallas_interpret_through_check(monkeypatch):
    """The fused Pallas kernels (interpret mode on CPU) under `jaxmc.check`,
    forced as on a GPU. The model size is used by no other test, so the
    solvers are traced afresh with the kernel."""
    import importlib

    from jaxmc.layout import WarpELL

    mods = [
        importlib.import_module(f"jaxmc.{m}")
        for m in ("kernels.spmv", "kernels.fused", "solvers._linear")
    ]

    def use_pallas(matrix, impl):
        return isinstance(matrix, WarpELL) and impl in ("auto", "pallas")

    text = DTMC.replace("N = 6", "N = 11")
    props = ['P=? [ F "goal" ]', "R=? [ F x=0 | x=N ]", 'P=? [ F<=5 "goal" ]']
    # The kernel path does 4 steps per loop trip (CSR 2), so it may stop a
    # few steps later: compare converged values.
    ref = _values(text, props, "csr", epsilon=1e-13)
    for mod in mods:
        monkeypatch.setattr(mod, "use_pallas", use_pallas)
    got = _values(text, props, "warp", epsilon=1e-13)
    for (v0, _, _), (v, _, lay) in zip(ref, got):
        assert v == pytest.approx(v0, rel=1e-11)
        assert lay == "warp"


def test_auto_is_csr_on_cpu_and_bad_names_refused():
    em = jaxmc.build(jaxmc.load_model_string(DTMC))
    assert DeviceModel(em, "auto").kind == "csr"
    r = jaxmc.check(jaxmc.load_model_string(DTMC), 'P=? [ F "goal" ]')
    assert r.layout == "csr" and r.method == "bicgstab"  # (certified)
    with pytest.raises(ValueError, match="layout"):
        jaxmc.check(jaxmc.load_model_string(DTMC), 'P=? [ F "goal" ]', layout="coo")
    v = jaxmc.solve(jaxmc.load_model_string(DTMC), 'P=? [ F "goal" ]', layout="warp")
    assert float(v) == pytest.approx(r.value, rel=1e-12)


@pytest.mark.parametrize(
    "text,prop",
    [
        (DTMC, 'P=? [ F "goal" ]'),
        (CTMC, "S=? [ s>2 & t=1 ]"),
        (MDP, "Rmin=? [ F x=4 ]"),
        (CTMC, "P=? [ true U<=1.5 s=c ]"),
    ],
)
def test_timing_breakdown(text, prop):
    m = jaxmc.load_model_string(text)
    r = jaxmc.check(m, prop)
    t = r.timing
    for key in ("build", "precompute", "layout", "solve", "total"):
        assert key in t and t[key] >= 0.0, key
    assert t["precompute"] + t["layout"] + t["solve"] <= t["total"]
    assert t["solve"] > 0.0
