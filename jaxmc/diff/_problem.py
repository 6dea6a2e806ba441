"""A property compiled into a pure, jittable function of the parameters.

`Problem(...)` does everything that depends on the structure only, once, on
the host: it evaluates the state sub-formulas to masks, runs the qualitative
precomputation (prob0/prob1, BSCCs; Storm's `graph.h`) on the graph built at
the build point, and picks the numerical scheme. `Problem.__call__(theta)`
is then a pure function of the parameter values (`jax.grad`, `jax.jvp`,
`jax.jacrev` and `jax.vmap` apply), compiled once: new values never retrace.

How each property is differentiated:

- unbounded `P=? [φ U ψ]`, `R=? [F ψ]` (DTMC; CTMC on the embedded DTMC):
  one linear solve `(I - A) x = b` through `lax.custom_linear_solve`
  (implicit function theorem; the backward pass is one transposed solve,
  stopped when the gradient has converged: `linear_solve`'s `relevance`);
- bounded `F<=k`, `C<=k` (DTMC, MDP): the `k` steps as a `lax.scan`,
  differentiated directly (with checkpointing, memory O(sqrt(k) n));
- CTMC `P=? [φ U<=t ψ]`: uniformisation, `sum_i Poisson(i; q t) v_i` as a
  scan; differentiable in the rates and in `t` (the rate `q` is held
  constant: the result does not depend on it);
- `S=? [φ]`, `R=? [S]`: stationary distributions of the BSCCs by power
  iteration, then made differentiable through the stationary equations
  `pi (I - P) = 0, sum pi = 1` (an implicit solve; GMRES for tangents and
  cotangents), combined with the absorption probabilities into the BSCCs;
- MDP `Pmax/Pmin`, `Rmax/Rmin`: value iteration (not differentiated), then
  the optimal scheduler is fixed and the value is re-expressed as the
  solution of that scheduler's linear system, differentiated implicitly.
  Where two choices are optimal (a tie) the optimal value is not
  differentiable; the derivative returned is that of the scheduler picked,
  which prefers choices that make progress towards the target (this keeps
  the linear system nonsingular).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._config import cpu_solver_options
from ..errors import ModelCheckingError, SemanticError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..lang.ast import ModelType, TemporalOp, TimeBoundKind
from ..numerics import graph
from ..props.check import _Checker
from ..props.result import CheckOptions
from ..props.rewards import require_nonnegative
from ._expr import evaluate_scalar, mentions
from ._linalg import Options, Pattern, linear_solve, spmv, spmv_t
from ._structure import GraphLog
from ._values import StateRewards, TransitionValues


_DYNAMIC = (ast.ProbOp, ast.RewardOp, ast.SteadyOp, ast.Filter, ast.PathQuantifier)


def _checkpointed_scan(step, x0, xs, length: int):
    """`lax.scan(step, x0, xs)` for the final carry only, with sqrt
    checkpointing: reverse mode stores O(sqrt(length)) carries."""
    if length == 0:
        return x0
    block = max(1, int(math.isqrt(length)))
    nb = -(-length // block)
    pad = nb * block - length
    if xs is None:
        xs = jnp.zeros((length,))
    valid = jnp.concatenate([jnp.ones(length, bool), jnp.zeros(pad, bool)])
    xs = jnp.concatenate([xs, jnp.zeros((pad,) + xs.shape[1:], xs.dtype)])
    xs = xs.reshape((nb, block) + xs.shape[1:])
    valid = valid.reshape(nb, block)

    @jax.checkpoint
    def inner(x, blk):
        def one(x, item):
            a, ok = item
            y = step(x, a)
            return jax.tree_util.tree_map(lambda u, v: jnp.where(ok, u, v), y, x), None

        x, _ = lax.scan(one, x, blk)
        return x, None

    x, _ = lax.scan(inner, x0, (xs, valid))
    return x


def _concrete(tree) -> bool:
    """No leaf of `tree` is a tracer (a call outside any transformation)."""
    return not any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(tree))


class Problem:
    """One property on one parametric model.

    **Arguments:**
    - `checked`: the `CheckedProgram` (with `parameters`).
    - `model`: the `ExplicitModel` built at `build_params`.
    - `prop`, `properties`: a checked property and its collection.
    - `build_params`: the build point (dict name → float).
    - `options`: `Options` (tolerance, iteration limit).

    Call it with a dict name → value (scalars, or traced values): returns the
    value at the initial state (or the values at the initial states, if
    several) as a JAX array.
    """

    def __init__(self, checked, model: ExplicitModel, prop, properties, build_params, options=None):
        self.checked = checked
        self.model = model
        self.names = tuple(checked.parameters)
        self.params = frozenset(self.names)
        self.opts = options or Options()
        self.build_params = {k: float(build_params[k]) for k in self.names}
        self.tv = TransitionValues(checked, model, build_params)
        self.checker = _Checker(model, properties, CheckOptions())
        #: the qualitative precomputations, recorded to compare other points' graphs
        self.graph = GraphLog(model)
        m = model
        self.n = m.num_states
        self.mtype = m.model_type
        self.is_mdp = m.model_type == ModelType.MDP
        self.is_ctmc = m.model_type == ModelType.CTMC
        self.row = m.row_of_entry()
        self.coc = m.state_of_choice()
        self.soe = self.coc[self.row]
        self.col = np.asarray(m.col, dtype=np.int64)
        self.init = np.asarray(m.initial_states, dtype=np.int64)
        # PRISM's state order (lexicographic in the variables' values): the
        # solves' diagonal layout (`_linalg.dia_layout`) is found in it
        st = np.asarray(m.states)
        self.lex = np.lexsort(st.T[::-1]) if st.ndim == 2 and st.shape[1] else None
        self.host: dict = {"tv": self.tv.arrays, "init": self.init.astype(np.int32)}
        self.statics: dict = {}
        self._rewards: dict = {}
        self.traces = 0
        self._plan = self._compile(prop.expr)
        self.arrays = jax.tree_util.tree_map(jnp.asarray, self.host)
        self._make_jits()

    # ------------------------------------------------------------ plumbing

    def _run(self, arrays, theta):
        self.traces += 1  # Python side effect: counts traces, not calls
        x = self._plan(arrays, theta)
        return x[arrays["init"][0]] if self.init.size == 1 else x[arrays["init"]]

    def _make_jits(self):
        """The compiled entry points. With `cpu_solver_options` (the CPU
        backend), a top-level call compiles with them; a nested jit (under
        `jit`, `vmap`, `jvp`) takes no compiler options, so only eager calls
        and eager `jax.grad`/`jax.vjp` get them, the latter through a
        `custom_vjp` whose forward (the value and the VJP's residuals) and
        backward passes are each a top-level call on concrete arrays. Both
        passes are `jax.vjp` of the same function, so the gradient is the
        same as without it."""
        opts = cpu_solver_options()
        self._jit_nested = jax.jit(self._run)
        self._jit = jax.jit(self._run, compiler_options=opts)
        self._reverse = None
        if opts is None:
            return
        fwd_jit = jax.jit(lambda a, th: jax.vjp(lambda t: self._run(a, t), th), compiler_options=opts)
        bwd_jit = jax.jit(lambda vjp_fn, g: vjp_fn(g)[0], compiler_options=opts)

        @jax.custom_vjp
        def reverse(th):
            return self._jit_nested(self.arrays, th)

        def fwd(th):
            if _concrete(th):
                return fwd_jit(self.arrays, th)
            return jax.vjp(lambda t: self._jit_nested(self.arrays, t), th)

        def bwd(vjp_fn, g):
            if _concrete((vjp_fn, g)):
                return (bwd_jit(vjp_fn, g),)
            return (vjp_fn(g)[0],)

        reverse.defvjp(fwd, bwd)
        self._reverse = reverse

    def __call__(self, theta):
        missing = [k for k in self.names if k not in theta]
        if missing:
            raise SemanticError(
                f"`params` lacks a value for parameter `{missing[0]}`",
                hint=f"the parameters are: {', '.join(self.names)}",
            )
        extra = [k for k in theta if k not in self.params]
        if extra:
            raise SemanticError(
                f"`{extra[0]}` is not a parameter of the model (parameters: {', '.join(self.names)})"
            )
        th = {k: _f64(theta[k]) for k in self.names}
        if _concrete(th):
            return self._jit(self.arrays, th)
        if self._reverse is not None:
            try:
                return self._reverse(th)
            except TypeError as e:  # forward mode (jax.jvp) meets the custom_vjp
                if "custom_vjp" not in str(e):
                    raise
        return self._jit_nested(self.arrays, th)

    def ensure(self, theta) -> None:
        """Make the static number of uniformisation terms (CTMC time bounds)
        large enough for the concrete points `theta` (recompiles if not)."""
        if "lam_fn" not in self.statics:
            return
        try:
            th = {k: np.atleast_1d(np.asarray(theta[k], dtype=np.float64)) for k in self.names}
        except (TypeError, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
            return
        lam = jax.jit(jax.vmap(self.statics["lam_fn"], in_axes=(None, 0)))(self.arrays, th)
        lam = float(np.max(np.asarray(lam)))
        if lam > self.statics["cap"]:
            self.statics["cap"] = 1.25 * lam
            self.statics["K"] = _poisson_terms(1.25 * lam)
            self._make_jits()
            self._batched = None

    def structure_differs(self, point) -> str | None:
        """At the concrete parameter point `point`, None if the entries
        positive there give the same qualitative precomputation as the
        built structure (then the compiled values are the model's at that
        point); else the name of the precomputation that differs."""
        th = {k: jnp.asarray(float(point[k]), jnp.float64) for k in self.names}
        if getattr(self, "_tv_jit", None) is None:
            self._tv_jit = jax.jit(self.tv.__call__)
        return self.graph.differs(np.asarray(self._tv_jit(self.arrays["tv"], th)))

    def vanishing(self, theta) -> np.ndarray:
        """For a batch `theta` (name -> [k] arrays), whether some entry is 0
        (or negative) at each point: only there can the graph differ."""
        if getattr(self, "_vanish_jit", None) is None:
            self._vanish_jit = jax.jit(
                jax.vmap(lambda a, t: jnp.any(self.tv(a, t) <= 0), in_axes=(None, 0))
            )
        th = {k: jnp.asarray(theta[k], jnp.float64) for k in self.names}
        return np.asarray(self._vanish_jit(self.arrays["tv"], th))

    def batched(self):
        """`theta (name -> [k] arrays) -> [k] values`: `jax.vmap` of the
        problem, compiled once per batch size."""
        if getattr(self, "_batched", None) is None:
            self._batched = jax.jit(
                jax.vmap(self._run, in_axes=(None, 0)), compiler_options=cpu_solver_options()
            )
        jb = self._batched
        return lambda th: jb(self.arrays, {k: jnp.asarray(th[k], jnp.float64) for k in self.names})

    def values_fn(self):
        """The pure function `(arrays, theta) -> values at all states`."""
        return self._plan

    def _put(self, key, value):
        self.host[key] = value
        return key

    def _mask(self, e: ast.Expr) -> np.ndarray:
        for node in ast.walk(e):
            if isinstance(node, _DYNAMIC):
                raise UnsupportedError(
                    "nested P/R/S operators and filters are not supported with "
                    "parameters (their thresholds would change the structure)",
                    node.span,
                )
        p = mentions(e, self.params)
        if p is not None:
            raise UnsupportedError(f"parameter `{p}` in a state formula of the property", e.span)
        return np.asarray(self.checker.bool(e), dtype=bool)

    def _probs(self, arrays, theta):
        """Entry probabilities (embedded DTMC for a CTMC) and raw values."""
        val = self.tv(arrays["tv"], theta)
        if not self.is_ctmc:
            return val, val
        e = jax.ops.segment_sum(val, arrays["soe"], num_segments=self.n, indices_are_sorted=True)
        return val / e[arrays["soe"]], val

    def _need_soe(self):
        self.host["soe"] = self.soe.astype(np.int32)

    # ------------------------------------------------------------ dispatch

    def _compile(self, e: ast.Expr):
        self._need_soe()
        if self.is_mdp:
            self.host["coc"] = self.coc.astype(np.int32)
        if isinstance(e, ast.ProbOp):
            self._no_threshold(e)
            opt = self._opt(e.opt)
            return self._path(e.path, opt)
        if isinstance(e, ast.RewardOp):
            self._no_threshold(e)
            opt = self._opt(e.opt)
            key = e.structure
            if isinstance(key, ast.Node):
                key = int(self.checker._scalar(key))
            rs = self.model.reward_structure(key)
            require_nonnegative(self.model, rs, e.span)
            ridx = next(i for i, r in enumerate(self.model.rewards) if r is rs)
            return self._reward(e.path, ridx, opt)
        if isinstance(e, ast.SteadyOp):
            self._no_threshold(e)
            if self.is_mdp:
                raise UnsupportedError("S on MDPs", e.span)
            phi = self._mask(e.operand)
            return self._steady(lambda arrays, theta, P, val: jnp.asarray(phi, jnp.float64))
        raise UnsupportedError(
            "with parameters, the property must be a P=?, R=? or S=? operator "
            "(no filters or arithmetic at the top level)",
            getattr(e, "span", None),
        )

    def _no_threshold(self, e):
        if e.threshold is not None:
            raise UnsupportedError(
                "a property with a threshold (P>=0.5 [...]) is not differentiable",
                e.span,
                hint="use the numerical query form, P=? [ ... ]",
            )

    def _opt(self, opt):
        if not self.is_mdp:
            return None
        if opt is None:
            raise ModelCheckingError("an MDP property needs min or max", hint="write Pmin=?/Pmax=?")
        return opt.value

    def _path(self, path, opt):
        n = self.n
        true = np.ones(n, bool)
        if not isinstance(path, ast.Temporal):
            raise UnsupportedError("expected a temporal path formula", getattr(path, "span", None))
        flip = {None: None, "min": "max", "max": "min"}[opt]
        op, bound = path.op, path.bound
        if op == TemporalOp.NEXT:
            if bound is not None:
                raise UnsupportedError("bounded X", path.span)
            return self._next(self._mask(path.right), opt)
        if op == TemporalOp.EVENTUALLY:
            return self._until(true, self._mask(path.right), bound, opt)
        if op == TemporalOp.UNTIL:
            return self._until(self._mask(path.left), self._mask(path.right), bound, opt)
        if op == TemporalOp.GLOBALLY:
            inner = self._until(true, ~self._mask(path.right), bound, flip)
            return lambda a, t: 1.0 - inner(a, t)
        raise UnsupportedError(f"temporal operator {op.value} with parameters", path.span)

    # ------------------------------------------------------------ next

    def _next(self, phi, opt):
        rows = self.row.astype(np.int32)
        k = self._put("next_phi", phi[self.col].astype(np.float64))
        self.host["row"] = rows
        m = self.model.num_choices

        def plan(arrays, theta):
            P, _ = self._probs(arrays, theta)
            q = jax.ops.segment_sum(P * arrays[k], arrays["row"], num_segments=m, indices_are_sorted=True)
            return self._group(arrays, q, opt)

        return plan

    def _group(self, arrays, q, opt):
        if not self.is_mdp:
            return q
        self.host.setdefault("coc", self.coc.astype(np.int32))
        f = jax.ops.segment_max if opt == "max" else jax.ops.segment_min
        return f(q, arrays["coc"], num_segments=self.n, indices_are_sorted=True)

    # ------------------------------------------------------------ until

    def _bound(self, bound):
        """`(kind, high_expr)` of an upper time bound; others unsupported."""
        if bound.kind not in (TimeBoundKind.LE, TimeBoundKind.LT) or bound.low is not None:
            raise UnsupportedError(
                "with parameters, only upper time bounds (<=, <) are supported", bound.span
            )
        return bound.high

    def _until(self, phi, psi, bound, opt):
        if bound is not None:
            high = self._bound(bound)
            if self.is_ctmc:
                return self._ctmc_bounded(phi, psi, high)
            if mentions(high, self.params):
                raise UnsupportedError("a step bound cannot depend on a parameter", high.span)
            k = int(self.checker._scalar(high))
            if bound.kind == TimeBoundKind.LT:
                k -= 1
            if k < 0:
                raise ModelCheckingError("the bound admits no step", bound.span)
            return self._bounded(phi, psi, k, opt)
        if self.is_mdp:
            no, yes = self.graph(graph.prob01_max if opt == "max" else graph.prob01_min, phi, psi)
        else:
            no, yes = self.graph(graph.prob01, phi, psi)
        maybe = ~no & ~yes
        fixed = yes.astype(np.float64)
        if self.is_mdp:
            return self._mdp(maybe, fixed, None, None, opt)
        return self._dtmc_linear(maybe, fixed, None)

    # ------------------------------------------------------------ DTMC linear

    def _dtmc_linear(self, maybe, fixed, reward):
        """`x = P x + r` on `maybe`, `x = fixed` elsewhere (`reward(arrays,
        theta, P, val) -> r[n]` or None)."""
        soe, col = self.soe, self.col
        km = np.flatnonzero(maybe[soe] & maybe[col])
        kb = np.flatnonzero(maybe[soe] & ~maybe[col] & (fixed[col] != 0))
        pat = Pattern(soe[km], col[km], (self.n, self.n), self.lex)
        tag = f"lin{len(self.host)}"
        self.host[tag] = {
            "pat": pat.arrays,
            "classes": self._value_classes(km),
            "km": km.astype(np.int32),
            "kb": kb.astype(np.int32),
            "kb_rows": soe[kb].astype(np.int32),
            "kb_fixed": fixed[col[kb]],
            "kb_bound": np.maximum(
                _row_bound(soe[kb], fixed[col[kb]], self.n),
                getattr(reward, "bound", 0.0),
            ),
            "fixed": np.where(maybe, 0.0, fixed),
            "maybe": maybe,
        }
        if reward is None:
            # b is zero but on the fixed states and next to them
            nz = np.union1d(np.flatnonzero(np.where(maybe, 0.0, fixed)), soe[kb])
            if nz.size <= self.n // 4:
                self.host[tag]["rhs_rows"] = nz.astype(np.int32)
        weigh = reward is None or not getattr(reward, "parametric", True)
        n, opts = self.n, self.opts

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            b = h["fixed"] + jax.ops.segment_sum(
                P[h["kb"]] * h["kb_fixed"], h["kb_rows"], num_segments=n, indices_are_sorted=True
            )
            if reward is not None:
                b = b + jnp.where(h["maybe"], reward(arrays, theta, P, val), 0.0)
            rel = {"b_scale": jnp.maximum(h["kb_bound"], jnp.abs(b))} if weigh else None
            return linear_solve(P[h["km"]], pat, h["pat"], b, opts, classes=h["classes"], relevance=rel,
                                rhs_rows=h.get("rhs_rows") if weigh else None)

        return plan

    def _value_classes(self, km: np.ndarray) -> dict:
        """Entries of the linear system `A = P[km]` whose Jacobi weights
        `A[e] / (1 - A_ii)` are the same function of the parameters, found
        numerically at three random points near the build point: `{"cls":
        [nnz] class of each entry, "rep": [C] one entry per class}`, or `{}`
        when there are too many classes to gain anything. A batched solve
        (`jaxmc.sweep`) then reads a `[C, k]` table per sweep instead of
        `[nnz, k]` values, after checking at the actual points that the
        classes hold (`jaxmc.diff._linalg`); a wrong guess costs speed, never
        accuracy."""
        if not self.names or km.size == 0:
            return {}
        rng = np.random.default_rng(12345)
        arrays = jax.tree_util.tree_map(jnp.asarray, {"tv": self.host["tv"], "soe": self.host["soe"]})
        rows, cols = self.soe[km], self.col[km]
        diag = rows == cols
        keys = []
        for _ in range(3):
            theta = {k: jnp.asarray(v * (1.0 + 0.2 * (rng.random() - 0.5))) for k, v in self.build_params.items()}
            with np.errstate(all="ignore"):
                a = np.asarray(self._probs(arrays, theta)[0])[km]
                dg = 1.0 - np.bincount(rows[diag], weights=a[diag], minlength=self.n)
                keys.append(np.where(diag, 0.0, a) / dg[rows])
        keys = np.stack(keys, axis=1)
        if not np.all(np.isfinite(keys)):
            return {}
        _, rep, cls = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        if rep.size > max(256, km.size // 16):
            return {}
        return {"cls": cls.reshape(-1).astype(np.int32), "rep": rep.astype(np.int32)}

    # ------------------------------------------------------------ MDP

    def _mdp(self, maybe, fixed, choice_reward, disabled, opt):
        """Optimal values of `x_s = opt_c (r_c + sum P x)` on `maybe`."""
        m = self.model
        nc = m.num_choices
        row, col, coc = self.row, self.col, self.coc
        km = np.flatnonzero(maybe[col] & maybe[coc[row]])
        kb = np.flatnonzero(maybe[coc[row]] & ~maybe[col] & (fixed[col] != 0))
        st_rows = coc[row[km]]
        pat = Pattern(st_rows, col[km], (self.n, self.n), self.lex)
        if disabled is None:
            disabled = np.zeros(nc, bool)
        tag = f"mdp{len(self.host)}"
        self.host.setdefault("coc", coc.astype(np.int32))
        self.host[tag] = {
            "pat": pat.arrays,
            "km": km.astype(np.int32),
            "km_choice": row[km].astype(np.int32),
            "kb": kb.astype(np.int32),
            "kb_choice": row[kb].astype(np.int32),
            "kb_fixed": fixed[col[kb]],
            "kb_bound": np.maximum(
                _row_bound(coc[row[kb]], fixed[col[kb]], self.n),
                getattr(choice_reward, "bound", 0.0),
            ),
            "fixed": np.where(maybe, 0.0, fixed),
            "maybe": maybe,
            "cmaybe": maybe[coc] & ~disabled,
            "disabled": disabled,
            "row": row.astype(np.int32),
            "col": col.astype(np.int32),
        }
        n, opts = self.n, self.opts
        weigh = choice_reward is None or not getattr(choice_reward, "parametric", True)
        big = jnp.inf if opt == "min" else -jnp.inf
        red = jax.ops.segment_max if opt == "max" else jax.ops.segment_min

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            b = jax.ops.segment_sum(
                P[h["kb"]] * h["kb_fixed"], h["kb_choice"], num_segments=nc, indices_are_sorted=True
            )
            if choice_reward is not None:
                b = b + choice_reward(arrays, theta, P, val)
            b = jnp.where(h["disabled"], big, b)
            A = P[h["km"]]
            coc_ = arrays["coc"]

            def q_of(x):
                return b + jax.ops.segment_sum(
                    A * x[h["pat"]["cols"]], h["km_choice"], num_segments=nc, indices_are_sorted=True
                )

            def bellman(x):
                v = red(q_of(x), coc_, num_segments=n, indices_are_sorted=True)
                return jnp.where(h["maybe"], v, h["fixed"])

            # Value iteration (forward only: never differentiated).
            from ._linalg import _jacobi

            x_vi, _, ok = _jacobi(
                lambda x: bellman(lax.stop_gradient(x)),
                lax.stop_gradient(h["fixed"]),
                jnp.asarray(opts.epsilon, jnp.float64),
                opts.max_iters,
            )
            x_vi = lax.stop_gradient(jnp.where(ok, x_vi, jnp.nan))
            sigma = lax.stop_gradient(self._scheduler(h, q_of(x_vi), x_vi, opt))
            # The chosen scheduler's linear system, solved for a correction
            # to x_vi so that gradients are those of the policy's value.
            chosen = sigma[coc_] == jnp.arange(nc, dtype=jnp.int32)
            a_sig = jnp.where(chosen[h["km_choice"]], A, 0.0)
            b_sig = jax.ops.segment_sum(
                jnp.where(chosen & h["cmaybe"], b, 0.0), coc_, num_segments=n, indices_are_sorted=True
            )
            c = jnp.where(h["maybe"], b_sig, h["fixed"])
            r = c + spmv(a_sig, h["pat"]["rows"], h["pat"]["cols"], n, x_vi) - x_vi
            r = jnp.where(h["maybe"], r, 0.0)
            rel = {"b_scale": jnp.maximum(h["kb_bound"], jnp.abs(c)), "offset": x_vi} if weigh else None
            return x_vi + linear_solve(a_sig, pat, h["pat"], r, opts, relevance=rel)

        return plan

    def _scheduler(self, h, q, x, opt):
        """An optimal choice per state, preferring progress towards the
        non-maybe states among (near-)optimal choices, so that the induced
        chain leaves the maybe states with probability 1."""
        n, nc = self.n, self.model.num_choices
        coc = self.host["coc"]
        coc_j = jnp.asarray(coc)
        tol = 1e-9 * jnp.maximum(1.0, jnp.abs(x))
        good = (jnp.abs(q - x[coc_j]) <= tol[coc_j]) & h["cmaybe"]
        cidx = jnp.arange(nc, dtype=jnp.int32)

        def body(c):
            reached, sigma, _ = c
            hit = jax.ops.segment_max(
                reached[h["col"]].astype(jnp.int32), h["row"], num_segments=nc, indices_are_sorted=True
            ) > 0
            cand = good & hit & ~reached[coc_j]
            best = jax.ops.segment_min(
                jnp.where(cand, cidx, nc), coc_j, num_segments=n, indices_are_sorted=True
            )
            new = best < nc
            return reached | new, jnp.where(new, best, sigma).astype(jnp.int32), jnp.any(new)

        reached0 = ~h["maybe"]
        sigma0 = jnp.full(n, -1, jnp.int32)
        reached, sigma, _ = lax.while_loop(lambda c: c[2], body, (reached0, sigma0, jnp.asarray(True)))
        # Fallback (should not happen): the first optimal choice.
        first = jax.ops.segment_min(jnp.where(good, cidx, nc), coc_j, num_segments=n, indices_are_sorted=True)
        return jnp.where(sigma >= 0, sigma, jnp.minimum(first, nc - 1)).astype(jnp.int32)

    # ------------------------------------------------------------ bounded

    def _bounded(self, phi, psi, k, opt):
        no = self.graph(graph.prob0 if not self.is_mdp else graph.prob0A, phi, psi)
        maybe = phi & ~psi & ~no
        tag = self._put(f"bnd{len(self.host)}", {
            "maybe": maybe, "psi": psi.astype(np.float64),
            "row": self.row.astype(np.int32), "col": self.col.astype(np.int32),
        })
        nc = self.model.num_choices

        def plan(arrays, theta):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)

            def step(x, _):
                q = jax.ops.segment_sum(P * x[h["col"]], h["row"], num_segments=nc, indices_are_sorted=True)
                v = self._group(arrays, q, opt)
                return jnp.where(h["maybe"], v, h["psi"])

            return _checkpointed_scan(step, h["psi"], None, k)

        return plan

    def _ctmc_bounded(self, phi, psi, high):
        no = self.graph(graph.prob0, phi, psi)
        maybe = phi & ~psi & ~no
        km = np.flatnonzero(maybe[self.soe])
        tag = self._put(f"ctmc{len(self.host)}", {
            "km": km.astype(np.int32), "rows": self.soe[km].astype(np.int32),
            "cols": self.col[km].astype(np.int32), "psi": psi.astype(np.float64),
        })
        n = self.n
        # Static number of Poisson terms, from the build point with margin.
        val0 = self.model.val
        e0 = np.bincount(self.soe[km], weights=val0[km], minlength=n)
        t0 = float(np.asarray(evaluate_scalar(high, self.params, self.build_params)))
        lam0 = 1.02 * max(float(e0.max(initial=0.0)), 1e-300) * t0
        self.statics["cap"] = 1.5 * lam0
        self.statics["K"] = _poisson_terms(1.5 * lam0)

        def lam_fn(arrays, theta):
            h = arrays[tag]
            R = self.tv(arrays["tv"], theta)[h["km"]]
            E = jax.ops.segment_sum(R, h["rows"], num_segments=n, indices_are_sorted=True)
            t = evaluate_scalar(high, self.params, theta, what="the time bound")
            return 1.02 * jnp.max(E, initial=0.0) * t

        self.statics["lam_fn"] = lam_fn

        def plan(arrays, theta):
            h = arrays[tag]
            val = self.tv(arrays["tv"], theta)
            R = val[h["km"]]
            E = jax.ops.segment_sum(R, h["rows"], num_segments=n, indices_are_sorted=True)
            q = lax.stop_gradient(1.02 * jnp.maximum(jnp.max(E), 1e-300))
            t = evaluate_scalar(high, self.params, theta, what="the time bound")
            lam = q * t
            K = self.statics["K"]
            i = jnp.arange(K + 1, dtype=jnp.float64)
            logw = -lam + i * jnp.log(jnp.maximum(lam, 1e-300)) - jax.scipy.special.gammaln(i + 1)
            w = jnp.where(lam > 0, jnp.exp(logw), (i == 0).astype(jnp.float64))

            def step(c, wi):
                v, acc = c
                acc = acc + wi * v
                v = v + (spmv(R, h["rows"], h["cols"], n, v) - E * v) / q
                return (v, acc)

            _, acc = _checkpointed_scan(step, (h["psi"], jnp.zeros(n)), w, K + 1)
            return acc

        return plan

    # ------------------------------------------------------------ rewards

    def _reward_fn(self, ridx, per_choice: bool):
        """`(arrays, theta, P, val) -> r` per state (DTMC/CTMC; a CTMC's
        state rewards are divided by the exit rate, as on the embedded
        chain) or per choice (MDP)."""
        sr = StateRewards(self.checked, self.model, ridx)
        key = self._put(f"rew{ridx}", {"s": sr.arrays, "t": sr.transition if sr.transition is not None else np.zeros(0), "row": self.row.astype(np.int32)})
        n, nc = self.n, self.model.num_choices
        has_t = sr.transition is not None

        def r(arrays, theta, P, val):
            h = arrays[key]
            st = sr(h["s"], theta)
            if self.is_ctmc:
                E = jax.ops.segment_sum(val, arrays["soe"], num_segments=n, indices_are_sorted=True)
                st = jnp.where(E > 0, st / jnp.where(E > 0, E, 1.0), 0.0)
            if per_choice:
                st = st[arrays["coc"]]
            if has_t:
                st = st + jax.ops.segment_sum(
                    P * h["t"], h["row"] if per_choice else arrays["soe"],
                    num_segments=nc if per_choice else n, indices_are_sorted=True,
                )
            return st

        # For the gradient's adjoint stop rule (`linear_solve`'s
        # `relevance`): rewards whose values depend on parameters have no
        # bound on their derivative from their values (a reward `p` at
        # p = 0), so they turn the weighting off; transition rewards are
        # constants times probabilities, bounded per state by the largest
        # `|t|` of its transitions.
        r.parametric = sr.parametric
        r.bound = _row_bound(self.soe, sr.transition, n) if has_t else np.zeros(n)
        return r

    def _reward(self, path, ridx, opt):
        m, n = self.model, self.n
        true = np.ones(n, bool)
        if isinstance(path, ast.Temporal) and path.op == TemporalOp.EVENTUALLY and path.bound is None:
            target = self._mask(path.right)
            if self.is_mdp:
                self.host.setdefault("coc", self.coc.astype(np.int32))
                finite = self.graph(graph.prob1A if opt == "max" else graph.prob1E, true, target)
                inf = ~finite
                maybe = ~target & finite
                disabled = None
                if opt == "min":
                    keep = m.val > 0
                    leaves = np.bincount(self.row[keep][inf[self.col[keep]]], minlength=m.num_choices) > 0
                    disabled = leaves & maybe[self.coc]
                inner = self._mdp(maybe, np.zeros(n), self._reward_fn(ridx, True), disabled, opt)
            else:
                finite = self.graph(graph.prob1, true, target)
                inf = ~finite
                maybe = ~target & finite
                inner = self._dtmc_linear(maybe, np.zeros(n), self._reward_fn(ridx, False))
            key = self._put(f"inf{len(self.host)}", inf)
            return lambda a, t: jnp.where(a[key], jnp.inf, inner(a, t))
        if isinstance(path, ast.RewardPath):
            if path.kind == ast.RewardPathKind.LONG_RUN:
                if self.is_mdp:
                    raise UnsupportedError("R [ S ] on MDPs", path.span)
                return self._steady_reward(ridx)
            if path.kind == ast.RewardPathKind.CUMULATIVE and path.bound is not None and not self.is_ctmc:
                high = self._bound(path.bound)
                k = int(self.checker._scalar(high))
                if path.bound.kind == TimeBoundKind.LT:
                    k -= 1
                rf = self._reward_fn(ridx, self.is_mdp)
                tag = self._put(f"cum{len(self.host)}", {"row": self.row.astype(np.int32), "col": self.col.astype(np.int32)})
                nc = m.num_choices

                def plan(arrays, theta):
                    h = arrays[tag]
                    P, val = self._probs(arrays, theta)
                    r = rf(arrays, theta, P, val)

                    def step(x, _):
                        q = r + jax.ops.segment_sum(P * x[h["col"]], h["row"], num_segments=nc, indices_are_sorted=True)
                        return self._group(arrays, q, opt)

                    return _checkpointed_scan(step, jnp.zeros(n), None, max(k, 0))

                return plan
        raise UnsupportedError(
            "with parameters, reward properties R=? [F φ], R=? [C<=k] (DTMC/MDP) "
            "and R=? [S] are supported",
            getattr(path, "span", None),
        )

    # ------------------------------------------------------------ steady state

    def _steady_reward(self, ridx):
        sr = StateRewards(self.checked, self.model, ridx)
        key = self._put(f"lr{ridx}", {"s": sr.arrays, "t": sr.transition if sr.transition is not None else np.zeros(0)})
        has_t = sr.transition is not None
        n = self.n

        def f(arrays, theta, P, val):
            h = arrays[key]
            r = sr(h["s"], theta)
            if has_t:  # DTMC: expected one-step reward; CTMC: rate (val = rates)
                w = val if self.is_ctmc else P
                r = r + jax.ops.segment_sum(w * h["t"], arrays["soe"], num_segments=n, indices_are_sorted=True)
            return r

        return self._steady(f)

    def _steady(self, f):
        """`sum_B P(reach B) sum_{s in B} pi_B(s) f(s)` at every state."""
        n = self.n
        labels, count = self.graph(graph.bsccs)
        inb = labels >= 0
        soe, col = self.soe, self.col
        kin = np.flatnonzero(inb[soe])  # entries inside BSCCs (rows in a BSCC)
        sizes = np.bincount(labels[inb], minlength=count)
        pi0 = np.zeros(n)
        pi0[inb] = 1.0 / sizes[labels[inb]]
        rep = np.zeros(n, bool)
        first = np.full(count, -1)
        idx = np.flatnonzero(inb)
        first_idx = np.unique(labels[idx], return_index=True)[1]
        first[labels[idx[first_idx]]] = idx[first_idx]
        rep[first[first >= 0]] = True
        pat = Pattern(soe[kin], col[kin], (n, n), self.lex)
        lab = np.where(inb, labels, count)
        tag = self._put(f"ss{len(self.host)}", {
            "kin": kin.astype(np.int32), "pat": pat.arrays, "pi0": pi0, "inb": inb,
            "rep": rep, "lab": lab.astype(np.int32),
        })
        # Absorption into the BSCCs: x = P x + b on transient states.
        trans = ~inb
        absorb = self._dtmc_linear_general(trans)
        opts = self.opts
        ctmc = self.is_ctmc

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            W = (val if ctmc else P)[h["kin"]]
            rows = h["pat"]["rows"]
            E = jax.ops.segment_sum(W, rows, num_segments=n, indices_are_sorted=True)

            def flow(pi):  # pi (D - W)  as a column vector: D pi - W^T pi
                return (E if ctmc else h["inb"].astype(jnp.float64)) * pi - spmv_t(W, h["pat"], n, pi)

            q = lax.stop_gradient(1.02 * jnp.maximum(jnp.max(E), 1e-300)) if ctmc else 2.0

            def power(pi):
                return pi - flow(pi) / q

            from ._linalg import _jacobi

            pi_p, _, ok = _jacobi(
                lambda p: power(lax.stop_gradient(p)), h["pi0"],
                jnp.asarray(opts.epsilon, jnp.float64), opts.max_iters,
            )
            pi_p = lax.stop_gradient(jnp.where(ok, pi_p, jnp.nan))

            def matvec(pi):
                y = jnp.where(h["inb"], flow(pi), pi)
                mass = jax.ops.segment_sum(pi, h["lab"], num_segments=count + 1)
                return jnp.where(h["rep"], mass[h["lab"]], y)

            rhs = h["rep"].astype(jnp.float64) - matvec(pi_p)
            pi = pi_p + _implicit_gmres(matvec, rhs, opts)
            g_b = jax.ops.segment_sum(jnp.where(h["inb"], pi * f(arrays, theta, P, val), 0.0),
                                      h["lab"], num_segments=count + 1)
            g = jnp.where(h["inb"], g_b[h["lab"]], 0.0)
            return absorb(arrays, theta, g)

        return plan

    def _dtmc_linear_general(self, maybe):
        """`(arrays, theta, fixed) -> x` with `x = P x` on `maybe` and
        `x = fixed` elsewhere (fixed is traced)."""
        soe, col, n = self.soe, self.col, self.n
        km = np.flatnonzero(maybe[soe] & maybe[col])
        kb = np.flatnonzero(maybe[soe] & ~maybe[col])
        pat = Pattern(soe[km], col[km], (n, n), self.lex)
        tag = self._put(f"abs{len(self.host)}", {
            "pat": pat.arrays, "km": km.astype(np.int32), "kb": kb.astype(np.int32),
            "kb_rows": soe[kb].astype(np.int32), "kb_cols": col[kb].astype(np.int32),
            "maybe": maybe,
        })
        opts = self.opts

        def solve(arrays, theta, fixed):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)
            b = jnp.where(h["maybe"], 0.0, fixed) + jax.ops.segment_sum(
                P[h["kb"]] * fixed[h["kb_cols"]], h["kb_rows"], num_segments=n, indices_are_sorted=True
            )
            if not maybe.any():
                return b
            return linear_solve(P[h["km"]], pat, h["pat"], b, opts)

        return solve


def _f64(v):
    """`v` as a float64 JAX value, without a conversion op where it already
    is one: under an un-jitted `jax.grad` each op costs tracing and
    linearization time on every call (16 conversions were 40% of a
    16-parameter `jax.grad(problem)` call's host time)."""
    if isinstance(v, jax.core.Tracer) and v.dtype == jnp.float64 and v.ndim == 0:
        return v  # (weak-typed or not: one more compiled signature at most)
    return jnp.asarray(v, jnp.float64)


def _row_bound(rows: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """`[n]`: the largest `|values|` per row (0 for rows without any): a
    bound on the scale of a right-hand side made of these values times
    probabilities, and so of its derivative (`linear_solve`'s
    `relevance`)."""
    out = np.zeros(n)
    np.maximum.at(out, rows, np.abs(values))
    return out


def _implicit_gmres(matvec, rhs, opts):
    """`matvec^{-1} rhs`, differentiable implicitly (GMRES for the primal,
    tangent and cotangent solves)."""
    from jax.scipy.sparse.linalg import gmres

    tol = max(opts.epsilon, 1e-14)

    def solve(mv, b):
        x, _ = gmres(mv, b, tol=tol, atol=0.0, restart=50, maxiter=200)
        return x

    return lax.custom_linear_solve(matvec, rhs, solve, solve)


def _poisson_terms(lam: float) -> int:
    """Terms `0..K` of the Poisson(λ) sum for a right tail below ~1e-14,
    rounded up to a multiple of 32 (so nearby λ share one compilation)."""
    k = lam + 12.0 * math.sqrt(max(lam, 1.0)) + 40.0
    return int(32 * math.ceil(k / 32))
