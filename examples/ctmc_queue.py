"""A CTMC: the M/M/1/K queue (arrivals at rate 2, service at rate 3, K=10).

A time-bounded (transient) property by uniformisation, steady-state
properties, and an expected cumulative reward; the steady state is compared
with its closed form pi(q) = rho^q (1 - rho) / (1 - rho^(K+1)).

    python examples/ctmc_queue.py
"""

from pathlib import Path

import jaxmc


MODELS = Path(__file__).resolve().parent / "models"


def closed_form(lam: float = 2.0, mu: float = 3.0, K: int = 10) -> tuple[float, float]:
    """(P(idle), mean number of customers) in the long run."""
    rho = lam / mu
    pi = [rho**q * (1 - rho) / (1 - rho ** (K + 1)) for q in range(K + 1)]
    return pi[0], sum(q * p for q, p in enumerate(pi))


def main() -> dict[str, float]:
    model = jaxmc.load_model(MODELS / "queue.sm")
    props = jaxmc.load_properties(MODELS / "queue.sm.props", model)
    explicit = jaxmc.build(model)
    print(f"M/M/1/10 queue: {explicit.num_states} states ({explicit.model_type.value})")

    full = jaxmc.check(model, "full_by_T", properties=props).value
    print(f"P(full within T=5) = {full:.10f}")
    # Other time bounds, given in the property itself.
    full_20 = jaxmc.check(model, 'P=? [ F<=20 "full" ]').value
    print(f"P(full within 20)  = {full_20:.10f}")

    idle = jaxmc.check(model, "idle", properties=props).value
    mean = jaxmc.check(model, "mean", properties=props).value
    exact_idle, exact_mean = closed_form()
    print(f"long-run P(idle) = {idle:.8f} (closed form {exact_idle:.8f})")
    print(f"long-run E[customers] = {mean:.8f} (closed form {exact_mean:.8f})")

    served = jaxmc.check(model, "served", properties=props).value
    print(f"E[served by T=5] = {served:.8f}")
    return {"full_by_T": full, "full_20": full_20, "idle": idle, "mean": mean,
            "served": served}  # fmt: skip


if __name__ == "__main__":
    main()
