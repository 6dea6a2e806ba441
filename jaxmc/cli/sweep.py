"""`jaxmc sweep`: one property over a grid of parameter values
(`jaxmc.sweep`), printed as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time


def grid(specs: list[str]) -> tuple[list[str], list[list[float]]]:
    """The parameters' names and value lists from `--param` texts such as
    `p=0.1:0.1:0.9` (PRISM's range syntax) or `q=0.2,0.3,0.5`."""
    from ..errors import SemanticError
    from ..lang.ast import ValueType
    from ..semantics.constants import expand_constants

    names: list[str] = []
    axes: list[list[float]] = []
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip()
        if not eq or not name or not values.strip():
            raise SemanticError(
                f"`--param {spec}`: expected NAME=VALUES, e.g. p=0.1:0.1:0.9 or "
                "p=0.2,0.4"
            )
        if name in names:
            raise SemanticError(f"parameter `{name}` is given twice")
        axis: list[float] = []
        for part in values.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                got = expand_constants(f"{name}={part}", types={name: ValueType.DOUBLE})
            except ValueError as e:
                raise SemanticError(f"`--param {spec}`: {e}") from None
            axis += [float(s[name]) for s in got]
        if not axis:
            raise SemanticError(f"`--param {spec}`: no values")
        names.append(name)
        axes.append(axis)
    return names, axes


def run(args: argparse.Namespace) -> int:
    """`jaxmc sweep`: load the model with the parameters symbolic, run
    `jaxmc.sweep` over the grid, print a table or JSON."""
    import numpy as np

    import jaxmc

    names, axes = grid(args.param)
    grids = np.meshgrid(*[np.asarray(a, dtype=np.float64) for a in axes], indexing="ij")
    points = {k: g.reshape(-1) for k, g in zip(names, grids)}
    total = int(grids[0].size)
    first = {k: float(v[0]) for k, v in points.items()}
    t0 = time.perf_counter()
    model = jaxmc.load_model(
        args.model, ",".join(args.const) or None, parameters=tuple(names), params=first
    )
    explicit = jaxmc.build(model)
    build_s = time.perf_counter() - t0
    for w in explicit.warnings:
        print(f"Warning: {w}", file=sys.stderr)
    if not args.quiet:
        print(
            f"model: {explicit.num_states} states, {explicit.num_transitions} "
            f"transitions ({build_s:.2f} s); {total} points",
            file=sys.stderr,
            flush=True,
        )
    t1 = time.perf_counter()
    try:
        values = jaxmc.sweep(
            model, args.prop, params=points, chunk=args.chunk, workers=args.workers,
            progress=not args.quiet, epsilon=args.epsilon, max_iters=args.max_iters,
        )  # fmt: skip
    except ValueError as e:  # e.g. a name that is not a parameter of the model
        print(f"error: {e}", file=sys.stderr)
        return 1
    sweep_s = time.perf_counter() - t1
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if args.json:
        out = {
            "model": args.model, "property": args.prop,
            "constants": ",".join(args.const) or None,
            "parameters": names, "states": explicit.num_states,
            "transitions": explicit.num_transitions, "epsilon": args.epsilon,
            "warnings": list(explicit.warnings),
            "timing": {"build": build_s, "sweep": sweep_s},
            "points": [{**{k: float(points[k][i]) for k in names},
                        "value": float(values[i])}
                       for i in range(total)],
        }  # fmt: skip
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"Sweep of {args.prop} over "
        f"{' x '.join(f'{k} ({len(a)})' for k, a in zip(names, axes))}"
        f" = {total} points: {sweep_s:.3f} s ({1e3 * sweep_s / total:.2f} ms per point)"
    )
    rows = [
        [f"{points[k][i]:.10g}" for k in names] + [f"{values[i]:.10g}"]
        for i in range(total)
    ]
    head = names + ["Result"]
    width = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
    return 0
