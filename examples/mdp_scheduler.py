"""An MDP: a robot choosing between a risky dash and a slow corridor.

`Pmax`/`Pmin` give the best and worst probability of reaching the goal over
all schedulers (resolutions of the nondeterminism), `Rmin` the fewest
expected steps, and a step-bounded `Pmax` shows that the best choice depends
on the horizon.

Note: this version of jaxmc reports the optimal *values* only. The optimal
scheduler (which action to take in each state) is not exposed by the API yet
(`CheckResult.scheduler` is reserved for it and is None), so the scheduler
described below is read off the model, not computed by jaxmc.

    python examples/mdp_scheduler.py
"""

from pathlib import Path

import jaxmc


MODELS = Path(__file__).resolve().parent / "models"


def main() -> dict[str, float]:
    model = jaxmc.load_model(MODELS / "robot.nm")
    props = jaxmc.load_properties(MODELS / "robot.nm.props", model)
    explicit = jaxmc.build(model)
    print(f"robot MDP: {explicit.num_states} states, {explicit.num_choices} choices")

    values = {}
    for name in ("pmax", "pmin", "rmin", "pmax3"):
        result = jaxmc.check(model, name, properties=props)
        values[name] = result.value
        print(f"{name:6s} = {result.value:.8f}  ({props.get(name).text})")
    # The maximum is attained by always taking the corridor (probability 1,
    # 20/9 steps on average); the minimum by always dashing (0.8).
    print("scheduler: not exposed by the API yet (values only)")
    return values


if __name__ == "__main__":
    main()
