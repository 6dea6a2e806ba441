"""Knuth and Yao's die: a fair six-sided die simulated with a fair coin.

Shows the three ways to ask for a value: `jaxmc.solve` (the value at the
initial state), `jaxmc.check` (values in every state, iterations, timing) and
a named property from a properties file; plus an expected reward.

    python examples/die.py
"""

from pathlib import Path

import jaxmc


MODELS = Path(__file__).resolve().parent / "models"


def main() -> dict[str, float]:
    model = jaxmc.load_model(MODELS / "die.pm")
    explicit = jaxmc.build(model)
    print(f"die: {explicit.num_states} states, {explicit.num_transitions} transitions")

    # The probability of rolling a six: 1/6 (up to the solver's 1e-6).
    six = float(jaxmc.solve(model, "P=? [ F s=7 & d=6 ]"))
    print(f"P(six) = {six:.10f}")

    # All six outcomes at once, with the solver's statistics.
    outcomes = []
    for k in range(1, 7):
        result = jaxmc.check(model, f"P=? [ F s=7 & d={k} ]", method="bicgstab")
        outcomes.append(result.value)
    print(
        "P(d=k) =", " ".join(f"{p:.6f}" for p in outcomes), f"(sum {sum(outcomes):.8f})"
    )

    # Expected number of coin flips until the die is decided: 11/3.
    flips = jaxmc.check(model, 'R{"coin_flips"}=? [ F "done" ]')
    print(
        f"E[flips] = {flips.value:.10f} ({flips.iterations} iterations, {flips.status})"
    )

    # The same, by name, from the properties file.
    props = jaxmc.load_properties(MODELS / "die.pm.props", model)
    named = jaxmc.check(model, "flips", properties=props).value
    print(f'E[flips] (property "flips") = {named:.10f}')
    return {
        "six": six,
        "flips": flips.value,
        "named_flips": named,
        "sum": sum(outcomes),
    }


if __name__ == "__main__":
    main()
