"""LTL through automata products: product sizes and times per property.

    python benchmarks/ltl.py MODEL CONSTS 'P=? [ ... ]' ['Pmax=? [ ... ]' ...]

For each property: the automaton (DFA, or LDBA states met), the product's
states and choices, the time to build the product, and the wall time of the
whole `jaxmc.check` (product, end components, solve); the value at the
initial state, against Storm's (sound mode) where stormpy is installed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import jaxmc
from jaxmc.automata import product as PR
from jaxmc.automata.automaton import LDBA, Residual
from jaxmc.automata.formula import is_cosafe, is_safe, negate
from jaxmc.automata.from_ast import ltl_formula
from jaxmc.lang import parse_expression
from jaxmc.props.check import state_formulas


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def storm(model_path, consts, prop):
    try:
        from storm_oracle import storm_value

        return storm_value(model_path, consts, prop)
    except Exception as e:  # noqa: BLE001 - Storm is optional here
        return f"n/a ({type(e).__name__})"


def main(argv):
    path, consts, props = argv[0], argv[1], argv[2:]
    model = jaxmc.load_model(path, consts)
    explicit = jaxmc.build(model)
    print(f"{path} {consts}: {explicit.num_states} states")
    evaluate = state_formulas(explicit)
    jaxmc.check(model, props[0].split("[")[0] + "[ F true ]")  # compile solvers
    for prop in props:
        op = parse_expression(prop)
        f, aps = ltl_formula(op.path)
        masks = np.stack([np.asarray(evaluate(a), dtype=bool) for a in aps])
        opt = op.opt.value if op.opt is not None else None
        if is_cosafe(f) or is_safe(f):
            aut = Residual(f if is_cosafe(f) else negate(f))
        else:
            aut = LDBA(negate(f) if opt == "min" else f)
        t = time.perf_counter()
        letter = PR.letters(masks)
        if isinstance(aut, LDBA):
            prod = PR.ldba_product(PR.as_markov(explicit), aut, letter)
        else:
            prod = PR.build_product(PR.as_markov(explicit), aut, letter)
        t_prod = time.perf_counter() - t
        t = time.perf_counter()
        value = jaxmc.check(model, prop).value
        t_check = time.perf_counter() - t
        kind = type(aut).__name__
        print(
            f"{prop}: {kind}, product {prod.model.num_states} states "
            f"{prod.model.num_choices} choices, build {t_prod:.2f} s, "
            f"check {t_check:.2f} s, value {value:.9g}, "
            f"Storm {storm(path, consts, prop)}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
