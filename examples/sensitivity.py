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

Then a PRISM case study, Herman's self-stabilising ring (`models/herman5.pm`,
whose coins have the bias `p`, a `const double` as in PRISM's herman
examples): how the expected number of steps to stabilise, and the
probability to be stable within 3 steps, change with the bias (at p = 1/2
both derivatives are 0 by symmetry, so the example looks at p = 0.3), each
checked by central finite differences.

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
    print(
        f"{'property':34s} {'value':>12s} "
        + " ".join(f"{'d/d' + k:>12s}" for k in POINT)
    )

    def report(name, prop, f, point):
        value = float(f(point))
        grad = jax.grad(f)(point)
        print(
            f"{prop:34s} {value:12.8f} "
            + " ".join(f"{float(grad[k]):12.8f}" for k in POINT)
        )
        out[name] = value
        for k in grad:
            out[f"{name}_d{k}"] = float(grad[k])
        return grad

    prop = 'S=? [ "empty" ]'
    report("idle", prop, lambda th: jaxmc.solve(model, prop, params=th), POINT)
    # The time bound as a parameter too: T is a property constant, so use
    # a model copy where T is an undefined model constant.
    text = (
        (MODELS / "queue.sm")
        .read_text()
        .replace("const int K = 10;", "const int K = 10;\nconst double T;")
    )
    timed = jaxmc.load_model_string(text, parameters=("T",), params={"T": 5.0})
    prop_t = 'P=? [ F<=T "full" ]'
    point_t = {**POINT, "T": 5.0}
    g = jax.grad(lambda th: jaxmc.solve(timed, prop_t, params=th))(point_t)
    value = float(jaxmc.solve(timed, prop_t, params=point_t))
    print(
        f"{prop_t:34s} {value:12.8f} "
        + " ".join(f"{float(g[k]):12.8f}" for k in POINT)
        + f"   d/dT {float(g['T']):.8f}"
    )
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

    # Herman's ring from three adjacent tokens (one initial state, so that
    # each result is a scalar), the coin's bias `p` as the parameter.
    text = (
        (MODELS / "herman5.pm")
        .read_text()
        .replace("init true endinit", "init x1=0&x2=0&x3=0&x4=0&x5=1 endinit")
    )
    herman = jaxmc.load_model_string(text, params={"p": 0.3})
    print("\nHerman's ring (N=5), from three adjacent tokens, coin bias p = 0.3")
    for name, prop in (
        ("steps", 'R{"steps"}=? [ F "stable" ]'),
        ("within3", 'P=? [ F<=3 "stable" ]'),
    ):
        f = lambda th, prop=prop: jaxmc.solve(herman, prop, params=th)  # noqa: E731
        value = float(f({"p": 0.3}))
        grad = float(jax.grad(f)({"p": 0.3})["p"])
        fd_p = (float(f({"p": 0.3 + h})) - float(f({"p": 0.3 - h}))) / (2 * h)
        print(
            f"{prop:34s} {value:12.8f}   d/dp {grad:12.8f}   (finite differences "
            f"{fd_p:.8f})"
        )
        out[f"herman_{name}"] = value
        out[f"herman_{name}_dp"] = grad
        out[f"herman_{name}_fd"] = fd_p
    return out


if __name__ == "__main__":
    main()
