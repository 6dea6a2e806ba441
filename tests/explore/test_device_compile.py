"""The device explorer compiles once per program and size bucket: a model
built again, or the same program under other constant values with the same
sizes, compiles nothing, and still gives the host builder's model (the
constants are arguments of the compiled code, not baked into it)."""

from __future__ import annotations

import numpy as np
from test_device_explorer import _checked, assert_same_model

from jaxmc.explore import build
from jaxmc.numerics.timing import compile_totals


MODEL = """
dtmc
const double p;
const int K;
module M
  x : [0..40] init 0;
  y : [0..3] init 0;
  [a] x < 40 -> p : (x'=x+1) + 1-p : (y'=mod(y+K,4));
  [b] x = 40 -> (x'=0);
endmodule
rewards "r"
  [a] true : p;
  x = 1 : 2*p;
endrewards
label "end" = x = 40;
"""


def _device_build(consts: str):
    checked = _checked(MODEL, consts)
    before = compile_totals()[1]
    device = build(checked, explorer="device")
    compiles = compile_totals()[1] - before
    assert_same_model(build(checked, explorer="host"), device)
    return device, compiles


def test_other_constants_same_bucket_compile_nothing():
    first, _ = _device_build("p=0.3,K=1")
    second, compiles = _device_build("p=0.45,K=1")
    assert compiles == 0
    # the values follow the constants (they are not the first model's)
    assert not np.array_equal(first.val, second.val)
    third, compiles = _device_build("p=0.45,K=3")
    assert compiles == 0
    assert not np.array_equal(second.states, third.states)
