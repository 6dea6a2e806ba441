"""The optimal scheduler of a checked property's top-level operator
(`jaxmc.check(..., scheduler=True)`, the command line's `-exportstrat`).

Memoryless deterministic schedulers are optimal, and are computed, for
`Pmin/Pmax` of unbounded `U`/`F` (and `G`, `W`, `R` through their duals:
the scheduler of the dual's until is optimal for the original, and its
`values` are the original's, one minus the until's) and for
`Rmin/Rmax [ F ]` (`jaxmc.numerics.scheduler`). The others are refused
with an `UnsupportedError` saying why: step-bounded properties need a
step counter (their optimal schedulers are not memoryless), and the
remaining operators have no scheduler computed here.

LTL (`Pmin/Pmax [ψ]`, co-safe `Rmin/Rmax [ψ]`) gets a finite-memory
scheduler whose memory is the automaton's state
(`jaxmc.automata.strategy`, a `jaxmc.automata.memory.MemoryScheduler`),
made from the product the property was checked on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..automata.memory import MemoryScheduler
from ..automata.strategy import ltl_scheduler
from ..errors import UnsupportedError
from ..lang import ast
from ..numerics.scheduler import (
    Scheduler,
    reach_reward_scheduler,
    until_scheduler,
)


_WHY = {
    "bounded": (
        "a step-bounded property's optimal scheduler needs memory (the "
        "number of steps taken), and jaxmc computes memoryless schedulers only",
        "drop the step bound (`F` instead of `F<=k`) for a memoryless scheduler",
    ),
}


def optimal_scheduler(checker: Any, expr: ast.Expr) -> Scheduler | MemoryScheduler:
    """The optimal scheduler of the top-level operator of `expr` (memoryless,
    or finite-memory for LTL), from the last solve `checker` ran (its
    `sched_ctx`)."""
    if not checker.is_mdp:
        raise UnsupportedError(
            f"only MDPs have schedulers; this model is a "
            f"{checker.model.model_type.value.upper()}",
            hint="check the property without asking for a scheduler",
        )
    operand = expr.operand if isinstance(expr, ast.Filter) else expr
    ctx = checker.sched_ctx
    if not isinstance(operand, (ast.ProbOp, ast.RewardOp)) or ctx is None:
        raise UnsupportedError(
            "jaxmc computes schedulers for Pmin/Pmax [ φ U ψ ] (and F, G, W, "
            "R) and Rmin/Rmax [ F ψ ] at the top level of a property",
            getattr(expr, "span", None),
            hint="check such a property to get its optimal scheduler",
        )
    if ctx[0] in _WHY:
        message, hint = _WHY[ctx[0]]
        raise UnsupportedError(message, getattr(expr, "span", None), hint=hint)
    o = checker.options
    kw = dict(tol=o.epsilon, relative=o.relative)
    if ctx[0] == "ltl":
        objective = _objective(operand)
        return ltl_scheduler(checker.model, ctx[1], objective, **kw)
    if ctx[0] in ("until", "dual"):
        _, phi, psi, opt, res = ctx
        sched = until_scheduler(checker.model, phi, psi, opt, res, **kw)
        if ctx[0] == "dual":  # G, W, R: the property's values are 1 - the until's
            objective = f"{_objective(operand)} (as 1 - {sched.objective})"
            sched = replace(sched, values=1.0 - sched.values, objective=objective)
        return sched
    _, reward, target, opt, res = ctx
    return reach_reward_scheduler(checker.model, reward, target, opt, res, **kw)


def _objective(op: ast.Expr) -> str:
    """`Pmax [ ψ ]` and the like, for messages."""
    from ..lang.printer import format_expr

    kind = "P" if isinstance(op, ast.ProbOp) else "R"
    opt = op.opt.value if op.opt is not None else ""
    return f"{kind}{opt} [ {format_expr(op.path)} ]"
