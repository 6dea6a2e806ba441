"""LTL probabilities against Storm (sound mode) on random small DTMCs and
MDPs with random LTL formulas over three labels."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

import jaxmc


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytest.importorskip("stormpy")
pytestmark = pytest.mark.storm


def model_text(rng: random.Random, mdp: bool, n: int = 5) -> str:
    lines = ["mdp" if mdp else "dtmc", "module m", f"  s : [0..{n - 1}] init 0;"]
    for s in range(n):
        for act in ["x", "y"] if mdp else [""]:
            succ = rng.sample(range(n), rng.randint(1, 3))
            w = [rng.randint(1, 4) for _ in succ]
            upd = " + ".join(f"{wi}/{sum(w)} : (s'={t})" for wi, t in zip(w, succ))
            lines.append(f"  [{act}] s={s} -> {upd};")
    lines.append("endmodule")
    for lab in "abc":
        sub = [s for s in range(n) if rng.random() < 0.4] or [0]
        lines.append(f'label "{lab}" = ' + " | ".join(f"s={x}" for x in sub) + ";")
    return "\n".join(lines) + "\n"


def formula(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        p = f'"{rng.choice("abc")}"'
        return p if rng.random() < 0.7 else f"!{p}"
    op = rng.choice(["&", "|", "X", "F", "G", "U", "F", "G", "W", "R"])
    if op in ("X", "F", "G"):
        return f"{op} ({formula(rng, depth - 1)})"
    a, b = formula(rng, depth - 1), formula(rng, depth - 1)
    if op == "R":  # Storm's parser has no R: a R b = !(!a U !b)
        return f"!((!({a})) U (!({b})))"
    if op == "W":  # nor W: a W b = (a U b) | G a
        return f"((({a}) U ({b})) | G ({a}))"
    return f"({a}) {op} ({b})"


@pytest.mark.parametrize("seed", range(6))
def test_random_ltl_agrees_with_storm(seed, tmp_path):
    from storm_oracle import storm_value

    rng = random.Random(seed)
    mdp = seed % 2 == 1
    path = tmp_path / "m.prism"
    path.write_text(model_text(rng, mdp))
    model = jaxmc.load_model(str(path))
    for _ in range(2):
        f = formula(rng, 3)
        for op in ["Pmax", "Pmin"] if mdp else ["P"]:
            prop = f"{op}=? [ {f} ]"
            want = storm_value(str(path), "", prop)
            assert jaxmc.check(model, prop).value == pytest.approx(want, abs=1e-6), prop
