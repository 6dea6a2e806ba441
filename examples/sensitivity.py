"""Sensitivity analysis: the gradient of model-checking results with respect
to every parameter of a model, with `jax.grad` through `jaxmc.solve`.

The model is the M/M/1/K queue of `models/queue.sm` (arrival rate `lambda`,
service rate `mu`, both `const double`s). Naming them in `params=` makes them
parameters: the state space is built once and each result becomes a
differentiable function of them. All partial derivatives come from one
reverse-mode pass (one transposed solve for the steady state), not one
solve per parameter.

The steady state has a closed form, pi(0) = (1 - rho) / (1 - rho^(K+1)) with
rho = lambda/mu, so its derivatives are checked exactly; the time-bounded
probability (uniformisation, differentiated also w.r.t. the time bound `T`)
is checked by central finite differences.

    python examples/sensitivity.py
"""

from pathlib import Path

import jax

import jaxmc


MODELS = Path(__file__).resolve().parent / "models"
POINT = {"lambda": 2.0, "mu": 3.0}


def idle_closed_form(lam: float, mu: float, K: int = 10) -> float:
    rho = lam / mu
    return (1 - rho) / (1 - rho ** (K + 1))


def main() -> dict[str, float]:
    model = jaxmc.load_model(MODELS / "queue.sm")
    out: dict[str, float] = {}
    print("M/M/1/10 queue, parameters", POINT)
    print(f"{'property':34s} {'value':>12s} " + " ".join(f"{'d/d' + k:>12s}" for k in POINT))

    def report(name, prop, f, point):
        value = float(f(point))
        grad = jax.grad(f)(point)
        print(f"{prop:34s} {value:12.8f} " + " ".join(f"{float(grad[k]):12.8f}" for k in POINT))
        out[name] = value
        for k in grad:
            out[f"{name}_d{k}"] = float(grad[k])
        return grad

    prop = 'S=? [ "empty" ]'
    report("idle", prop, lambda th: jaxmc.solve(model, prop, params=th), POINT)
    # The time bound as a parameter too: T is a property constant, so use
    # a model copy where T is an undefined model constant.
    text = (MODELS / "queue.sm").read_text().replace("const int K = 10;", "const int K = 10;\nconst double T;")
    timed = jaxmc.load_model_string(text, parameters=("T",), params={"T": 5.0})
    prop_t = 'P=? [ F<=T "full" ]'
    point_t = {**POINT, "T": 5.0}
    g = jax.grad(lambda th: jaxmc.solve(timed, prop_t, params=th))(point_t)
    value = float(jaxmc.solve(timed, prop_t, params=point_t))
    print(f"{prop_t:34s} {value:12.8f} " + " ".join(f"{float(g[k]):12.8f}" for k in POINT)
          + f"   d/dT {float(g['T']):.8f}")
    out["full_by_T"] = value
    out.update({f"full_by_T_d{k}": float(v) for k, v in g.items()})

    # Checks: the closed form (exact derivative by jax on the formula) and FD.
    exact = jax.grad(lambda th: idle_closed_form(th["lambda"], th["mu"]))(POINT)
    print("closed form d idle:", {k: round(float(v), 10) for k, v in exact.items()})
    h = 1e-5
    fd = {}
    for k in point_t:
        a, b = dict(point_t), dict(point_t)
        a[k] += h
        b[k] -= h
        fa = float(jaxmc.solve(timed, prop_t, params=a))
        fb = float(jaxmc.solve(timed, prop_t, params=b))
        fd[k] = (fa - fb) / (2 * h)
    print("finite differences d full_by_T:", {k: round(v, 8) for k, v in fd.items()})
    out["idle_exact_dlambda"] = float(exact["lambda"])
    out["idle_exact_dmu"] = float(exact["mu"])
    out.update({f"fd_d{k}": v for k, v in fd.items()})
    return out


if __name__ == "__main__":
    main()
