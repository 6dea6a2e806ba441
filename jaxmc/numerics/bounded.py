"""Step-bounded properties of DTMCs and MDPs: `X ψ`, `φ U<=k ψ`, `φ U>=k ψ`,
`φ U[k1,k2] ψ` (PRISM semantics: ψ at some step j in the interval, φ at every
step before j), from which the property layer builds `F`, `G` (= 1 - F ¬),
`W` and `R` by duality.

Each is a fixed number of masked Bellman steps `x' = where(active, opt(b + P
x), const)` in one jitted `lax.fori_loop` whose trip count is traced, so
changing `k` or any value does not recompile.

The step counts are exact, so the results' certified `bound` is 0: it
covers the method, not floating-point rounding (as the bounds of the
iterative solves do not). For `U>=k` the unbounded part's bound carries
over (the masked steps do not increase an error: probabilities weigh it)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel
from ..kernels.spmv import spmv
from ..lang.ast import ModelType
from ..layout import host_array
from ..options import SolveOptions
from .device import DeviceModel, device_model_for
from .matrices import host_structure, layout_name, valued
from .methods import check_type
from .result import NumericResult
from .timing import stage
from .transitions import probabilities


@eqx.filter_jit
def _steps(M, b, active, const, x0, k, opt):
    def body(_, x):
        y = M.group_reduce(b + spmv(M.matrix, x), opt)
        return jnp.where(active, y, const)

    return lax.fori_loop(0, k, body, x0)


def masked_steps(
    model: ExplicitModel,
    x0,
    k: int,
    *,
    opt=None,
    b=None,
    active=None,
    const=None,
    probs=None,
    device_model: DeviceModel | None = None,
    info: dict | None = None,
) -> np.ndarray:
    """`k` steps of `x' = where(active, opt_c(b_c + (P x)_c), const)` from `x0`
    (defaults: `b = 0`, every state active), the SpMV on `device_model`'s
    layout (its name put in `info["layout"]` if `info` is given). Returns
    numpy [n]."""
    if k < 0:
        raise ModelCheckingError(f"step bound {k} is negative")
    dm = device_model_for(model, None, device_model)
    kind, M = dm.kind, dm.sparse()
    with stage("solve"):
        probs = probabilities(model) if probs is None else probs
        _, _, cols, indptr = host_structure(model)
        M = valued(M, kind, probs, indptr, cols)
        if info is not None:
            info["layout"] = layout_name(M)
        n, m = model.num_states, model.num_choices
        b = np.zeros(m) if b is None else b
        active = np.ones(n, dtype=bool) if active is None else active
        const = np.zeros(n) if const is None else const
        out = _steps(
            M,
            jnp.asarray(b, dtype=jnp.float64),
            jnp.asarray(active),
            jnp.asarray(const, dtype=jnp.float64),
            jnp.asarray(x0, dtype=jnp.float64),
            jnp.asarray(k, dtype=jnp.int32),
            opt or "max",
        )
        return host_array(out)


def _discrete(model):
    if model.model_type == ModelType.CTMC:
        raise ModelCheckingError(
            "step bounds on a CTMC are time bounds",
            hint="use jaxmc.numerics.ctmc_bounded_until",
        )


def next_probabilities(
    model: ExplicitModel,
    psi,
    *,
    opt=None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state `P(X ψ)` (min/max for MDPs; the embedded DTMC for CTMCs)."""
    check_type(model, opt)
    psi = np.asarray(psi, dtype=np.float64)
    info = {}
    dm = device_model_for(model, options, device_model)
    x = masked_steps(model, psi, 1, opt=opt, device_model=dm, info=info)
    return NumericResult(x, method="next", extra=info, bound=0.0)


def bounded_until(
    model: ExplicitModel,
    phi,
    psi,
    upper: int | None,
    *,
    lower: int = 0,
    opt: str | None = None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state `P(φ U[lower, upper] ψ)` for a DTMC or MDP (`opt`).

    - `upper=k, lower=0`: `φ U<=k ψ`.
    - `upper=None, lower=k`: `φ U>=k ψ` (the unbounded until, then `k`
      φ-constrained steps); `options` go to `until_probabilities`.
    - `device_model`: the device matrix of the steps and solves.
    - `upper=k2, lower=k1`: `φ U[k1,k2] ψ`.
    """
    check_type(model, opt)
    _discrete(model)
    phi = np.asarray(phi, dtype=bool)
    psi = np.asarray(psi, dtype=bool)
    if upper is not None and upper < lower:
        return NumericResult(np.zeros(model.num_states), method="bounded", bound=0.0)
    status, iters, resid = NumericResult(None).status, 0, 0.0
    bound = 0.0
    info = {}
    dm = device_model_for(model, options, device_model)
    attempts = ()
    if upper is None:
        from .reach import until_probabilities

        res = until_probabilities(
            model, phi, psi, opt=opt, options=options, device_model=dm
        )
        x, status, iters, resid = res.values, res.status, res.iterations, res.residual
        attempts = res.attempts
        info["layout"] = res.extra.get("layout")
        bound = res.bound
    else:
        x = masked_steps(
            model,
            psi.astype(np.float64),
            upper - lower,
            opt=opt,
            active=phi & ~psi,
            const=psi.astype(np.float64),
            device_model=dm,
            info=info,
        )
    if lower > 0:
        x = masked_steps(
            model,
            x,
            lower,
            opt=opt,
            active=phi,
            const=np.zeros(len(x)),
            device_model=dm,
            info=info,
        )
    return NumericResult(
        x,
        status,
        iters,
        resid,
        method="bounded",
        extra=info,
        attempts=attempts,
        bound=bound,
    )
