"""Parameter sweeps: a property at many parameter points in one vmapped
computation (`jaxmc.sweep`), on the M/M/1/K queue of `models/queue.sm`.

The state space is built once; every point shares it, and each iteration of
the solver processes all points in one pass over the matrix.

- 1-D: the long-run probability that the server is idle, as the arrival rate
  `lambda` goes from 0.5 to 6 (service rate 3), against its closed form;
- 2-D: the probability that the queue fills up within 5 time units over a
  grid of (`lambda`, `mu`).

With matplotlib installed, both are plotted to `sweep.png` (or the path
given as the first argument); otherwise a summary is printed.

    python examples/sweep.py [out.png]
"""

import sys
import time
from pathlib import Path

import numpy as np

import jaxmc


MODELS = Path(__file__).resolve().parent / "models"


def idle_closed_form(lam, mu, K=10):
    rho = lam / mu
    return (1 - rho) / (1 - rho ** (K + 1))


def main(out: str | None = None) -> dict[str, float]:
    model = jaxmc.load_model(MODELS / "queue.sm")
    lams = np.linspace(0.5, 6.0, 64)
    t0 = time.perf_counter()
    idle = jaxmc.sweep(model, 'S=? [ "empty" ]', params={"lambda": lams, "mu": 3.0})
    t1 = time.perf_counter()
    err = float(np.max(np.abs(idle - idle_closed_form(lams, 3.0))))
    print(
        f"1-D sweep: {lams.size} points in {t1 - t0:.2f} s; max |error| vs closed form "
        f"{err:.2e}"
    )
    L, M = np.meshgrid(np.linspace(0.5, 6.0, 24), np.linspace(1.0, 6.0, 20))
    t0 = time.perf_counter()
    full = jaxmc.sweep(model, 'P=? [ F<=5 "full" ]', params={"lambda": L, "mu": M})
    t1 = time.perf_counter()
    print(
        f"2-D sweep: {L.size} points in {t1 - t0:.2f} s; "
        f"P(full by 5) from {full.min():.3g} to {full.max():.3g}"
    )
    i, j = np.unravel_index(np.argmin(np.abs(full - 0.5)), full.shape)
    print(f"closest to 0.5: lambda={L[i, j]:.3f}, mu={M[i, j]:.3f} -> {full[i, j]:.4f}")
    values = {
        "idle_at_2": float(np.interp(2.0, lams, idle)),
        "idle_err": err,
        "full_min": float(full.min()),
        "full_max": float(full.max()),
    }
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return values
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(lams, idle, label="jaxmc.sweep")
    a.plot(lams, idle_closed_form(lams, 3.0), "--", label="closed form")
    a.set_xlabel("arrival rate λ (μ = 3)")
    a.set_ylabel('S=? [ "empty" ]')
    a.legend()
    c = b.contourf(L, M, full, levels=20)
    fig.colorbar(c, ax=b, label='P=? [ F<=5 "full" ]')
    b.set_xlabel("arrival rate λ")
    b.set_ylabel("service rate μ")
    fig.tight_layout()
    path = out or "sweep.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot written to {path}")
    values["png"] = path
    return values


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
