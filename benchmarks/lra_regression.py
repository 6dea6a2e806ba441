"""MDP long-run averages on the MDPs of PRISM's regression suite, against
Storm: `Smax/Smin=? [ "l" ]` for every label `l` of the model and
`R{"r"}max/min=? [ S ]` for every named reward structure (`Rmax/Rmin` for
an unnamed first one).

    python benchmarks/lra_regression.py [--max-states 20000] [--out rows.json]
    python benchmarks/lra_regression.py --table rows.json

PRISM's suite has no `S` on MDPs (PRISM does not check it), so the models
are the suite's in-scope MDPs (`../shared/models/prism-tests`, the folders
of `tests/conformance`) with the first constant setting their test cases
use; a model whose constants are not all given there, or with more than
`--max-states` states, is left out (the summary says how many). jaxmc runs
in this process with its defaults (sound, relative 1e-6); Storm in a child
process per property (`../shared/tools/storm_ref.py --solver sound`, the
model reprinted for Storm where its parser needs it). A row agrees when
the values differ by at most 1e-6 relative (+1e-9).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _peers import ROOT, STORM_REF, load_cache, run_child, save_cache, storm_input


sys.path.insert(0, str(ROOT / "tests"))


def models() -> list[tuple[Path, str]]:
    """(model, constants) of the suite's MDPs: the first concrete setting
    of each model's cases."""
    import corpus
    from conformance.cases import all_cases

    out: dict[Path, str] = {}
    for case in all_cases():
        if case.model.suffix not in corpus.MODEL_SUFFIXES:
            continue  # (a `.auto` file's cases)
        keyword = corpus.model_type_keyword(case.model)
        if keyword not in (None, "mdp", "nondeterministic"):
            continue
        if case.config.import_model or case.config.import_type:
            continue
        out.setdefault(case.model, case.consts)
    return sorted(out.items())


def properties(explicit) -> list[str]:
    props = []
    for label in sorted(explicit.labels):
        if label in ("init", "deadlock"):
            continue
        props += [f'Smax=? [ "{label}" ]', f'Smin=? [ "{label}" ]']
    for i, r in enumerate(explicit.rewards):
        if r.name:
            props += [f'R{{"{r.name}"}}{o}=? [ S ]' for o in ("max", "min")]
        elif i == 0:
            props += ["Rmax=? [ S ]", "Rmin=? [ S ]"]
    return props


def storm(path: Path, consts: str, prop: str, timeout: float) -> dict:
    cmd = [sys.executable, str(STORM_REF), str(path), "--prop", prop]
    cmd += ["--solver", "sound", "--quiet-storm"]
    if consts:
        cmd += ["--const", consts]
    out = run_child(cmd, timeout, width=200)
    if "error" in out or not out.get("ok", True):
        # Storm's parser refuses some files PRISM reads: reprinted
        cmd[2] = str(storm_input(path))
        out = run_child(cmd, timeout, width=200)
    return out


def run(args) -> None:
    import jaxmc

    suite = ROOT.parent / "shared" / "models" / "prism-tests"
    left_out = {}
    for path, consts in models():
        key0 = f"{path.relative_to(suite)}[{consts}]"
        try:
            model = jaxmc.load_model(str(path), consts or None)
            explicit = jaxmc.build(model)
        except jaxmc.JaxmcError as e:
            left_out[key0] = f"jaxmc: {type(e).__name__}: {e.message[:80]}"
            continue
        if explicit.num_states > args.max_states:
            left_out[key0] = f"{explicit.num_states:,} states"
            continue
        rows = {}
        for prop in properties(explicit):
            key = f"{key0} {prop}"
            t = time.perf_counter()
            try:
                r = jaxmc.check(model, prop, all_states=True)
                at = np.asarray(r.values, np.float64)[explicit.initial_states]
                value, bound, err = [float(at.min()), float(at.max())], r.bound, None
            except jaxmc.JaxmcError as e:
                value, bound, err = None, None, f"{type(e).__name__}: {e.message[:120]}"
            check_s = time.perf_counter() - t
            s = storm(path, consts, prop, args.timeout)
            sv = [s.get("init_min", s.get("value")), s.get("init_max", s.get("value"))]
            sv = None if sv[0] is None else [float(x) for x in sv]
            agree = (
                value is not None
                and sv is not None
                and all(abs(a - b) <= 1e-6 * abs(b) + 1e-9 for a, b in zip(value, sv))
            )
            rows[key] = dict(
                key=key, states=explicit.num_states, jaxmc=value, bound=bound,
                jaxmc_error=err, storm=sv, storm_error=s.get("error"),
                agree=agree, check_s=check_s, storm_s=s.get("check_s"),
            )  # fmt: skip
            print(f"{key}: {value} {sv} {'ok' if agree else 'DIFFER'}", flush=True)
        save_cache(rows, Path(args.out))
    save_cache({"_left_out": left_out}, Path(args.out))


def _pair(v) -> str:
    lo, hi = v
    return f"{lo:.10g}" if lo == hi else f"{lo:.10g}..{hi:.10g}"


def table(path: Path) -> None:
    rows = load_cache(path)
    left = rows.pop("_left_out", {})
    agree = sum(r["agree"] for r in rows.values())
    models_seen = {k.split(" ", 1)[0] for k in rows}
    print(f"{len(rows)} properties on {len(models_seen)} models: {agree} agree, "
          f"{len(rows) - agree} do not; {len(left)} models left out")  # fmt: skip
    print()
    print("Several initial states: the least and the largest value over them.")
    print()
    print("| model [constants] | property | states | jaxmc ± bound | Storm | agree |")
    print("|---|---|--:|--:|--:|:-:|")
    for k, r in sorted(rows.items()):
        model, prop = k.split(" ", 1)
        if r["jaxmc"] is None:
            j = f"error: {r['jaxmc_error']}"
        else:
            b = "" if r["bound"] is None else f" ± {r['bound']:.1e}"
            j = _pair(r["jaxmc"]) + b
        s = r["storm_error"] if r["storm"] is None else _pair(r["storm"])
        ok = "yes" if r["agree"] else "**no**"
        print(f"| {model} | `{prop}` | {r['states']:,} | {j} | {s} | {ok} |")
    if left:
        print()
        print("Left out: " + "; ".join(f"{k}: {v}" for k, v in sorted(left.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-states", type=int, default=20_000)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", default="lra_regression.json")
    ap.add_argument("--table", metavar="JSON")
    args = ap.parse_args()
    if args.table:
        table(Path(args.table))
    else:
        run(args)


if __name__ == "__main__":
    main()
