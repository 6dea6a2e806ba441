"""Herman's self-stabilising protocol on a ring of 5 processes.

Every configuration of the ring is an initial state; the protocol reaches a
stable configuration (a single token) with probability 1 from all of them.
We ask for the worst-case expected number of steps to get there (16/5, as
Storm's exact engine also finds), the value from one given configuration,
and the worst-case probability of being stable within 3 steps.

    python examples/herman.py
"""

from pathlib import Path

import numpy as np

import jaxmc


MODELS = Path(__file__).resolve().parent / "models"


def main() -> dict[str, float]:
    model = jaxmc.load_model(MODELS / "herman5.pm")
    props = jaxmc.load_properties(MODELS / "herman5.pm.props", model)
    explicit = jaxmc.build(model)
    print(f"herman N=5: {explicit.num_states} states, "
          f"{len(explicit.initial_states)} initial")  # fmt: skip

    stabilises = jaxmc.check(model, 0, properties=props).value
    print(f"stabilises from every configuration: {stabilises}")

    worst = jaxmc.check(model, "worst", properties=props).value
    print(f"worst-case expected steps = {worst:.8f}")

    # Without a filter the result has a value per initial state: `range`
    # gives PRISM's "range over initial states", `at_initial` all of them.
    steps = jaxmc.check(model, 'R{"steps"}=? [ F "stable" ]')
    lo, hi = steps.range
    print(f"expected steps over initial states: [{lo:.6f}, {hi:.6f}], "
          f"mean {np.mean(steps.at_initial):.6f}")  # fmt: skip

    from_3 = jaxmc.check(model, "from_3", properties=props).value
    print(f"expected steps from 0,0,0,0,1 = {from_3:.8f}")
    within3 = jaxmc.check(model, "within3", properties=props).value
    print(f"worst-case P(stable within 3 steps) = {within3:.8f}")
    return {"stabilises": stabilises, "worst": worst, "from_3": from_3,
            "within3": within3, "min": float(lo), "max": float(hi)}  # fmt: skip


if __name__ == "__main__":
    main()
