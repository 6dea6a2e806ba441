"""Reward-bounded until (`F^{rew{"r"}<=b}`): unfolded product size, blocks
and check time per property, against Storm's value and time.

    python benchmarks/reward_bounded.py MODEL CONSTS 'Pmin=? [ F^{rew{"r"}<=9} g ]' ...
    python benchmarks/reward_bounded.py --block-states 2000000 MODEL CONSTS ...

For each property: the counter values of the unfolding and the number of
blocks they are solved in (`jaxmc.numerics.reward_bounded`), the wall time
of `jaxmc.check` (after one warm-up check of a small bound, which compiles
the solvers), the value at the initial state; then Storm's value and model
checking time (sound mode; its time includes building the model) where
stormpy is installed. A model file without
a model type (PRISM's default MDP) is given to Storm with `mdp` prepended.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import jaxmc
from jaxmc.lang import parse_expression
from jaxmc.numerics import reward_bounded as RB
from jaxmc.props.check import state_formulas


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def storm(model_path: str, consts: str, prop: str):
    try:
        from storm_oracle import storm_value
    except ImportError:
        return "n/a", 0.0
    text = Path(model_path).read_text()
    first = text.lstrip().split(None, 1)[0] if text.strip() else ""
    types = ("dtmc", "mdp", "ctmc", "probabilistic", "nondeterministic", "stochastic")
    program = None if first in types else "mdp\n" + text
    t = time.perf_counter()
    try:
        value = storm_value(model_path, consts, prop, program_text=program)
    except Exception as e:  # noqa: BLE001 - Storm is only a reference here
        return f"n/a ({type(e).__name__})", 0.0
    return value, time.perf_counter() - t


def counter_values(explicit, prop: str) -> tuple[int, int]:
    """(counter values, blocks) of the unfolding of `prop`'s bound."""
    op = parse_expression(prop)
    b = op.path.bound
    rs = explicit.reward_structure(b.structure)
    inc = RB._increments(explicit, rs)
    step = RB.reward_step(inc)
    scalar = state_formulas(explicit)
    low = None if b.low is None else float(np.asarray(scalar(b.low)).flat[0])
    high = None if b.high is None else float(np.asarray(scalar(b.high)).flat[0])
    kind = b.kind.value
    win = RB.window(step, low, high, kind == ">", kind == "<")
    return win.cap + 1, len(RB.blocks_of(explicit.num_states, win))


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--block-states":  # blocks of this many states
        RB.BLOCK_STATES = RB.MAX_PRODUCT_STATES = int(argv[1])
        RB.MIN_BLOCK_COUNTERS = 1
        argv = argv[2:]
    path, consts, props = argv[0], argv[1], argv[2:]
    model = jaxmc.load_model(path, consts)
    t = time.perf_counter()
    explicit = jaxmc.build(model)
    print(
        f"{path} {consts}: {explicit.num_states:,} states, "
        f"{explicit.num_choices:,} choices (build {time.perf_counter() - t:.2f} s)"
    )
    jaxmc.check(model, props[0].replace("<=", "<=0*", 1))  # compile the solvers
    for prop in props:
        counters, blocks = counter_values(explicit, prop)
        t = time.perf_counter()
        result = jaxmc.check(model, prop)
        took = time.perf_counter() - t
        want, storm_s = storm(path, consts, prop)
        print(
            f"{prop}\n  counter values {counters:,} ({counters * explicit.num_states:,}"
            f" product states, {blocks} block(s)); check {took:.2f} s; "
            f"value {result.value!r} (bound {result.bound}); "
            f"Storm {want!r} ({storm_s:.2f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
