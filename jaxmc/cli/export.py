"""PRISM's export switches on the command line: `-exportresults`,
`-importresults`, `-exportvector`, `-exportstates`, `-exportlabels`,
`-exportprism`, and the printout of `filter(print|printall|argmin|argmax,
...)`, all written as PRISM writes them (states numbered and ordered as in
PRISM's files: lexicographically in the variables' values).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import JaxmcError, UnsupportedError
from ..lang import ast
from ..lang.prism_text import prism_property_string, prism_string
from .javatext import java_text
from .model_exports import (
    add_switches as add_model_switches,
    check_specs,
    export_model_parts,
    export_target,
)
from .results import Collection, export_text, import_dataframe, parse_spec, shape_name


def add_switches(group) -> None:
    """The export switches, in the argument group `group`."""
    add_model_switches(group)
    group.add_argument("-exportresults", "--export-results", dest="export_results",
                       metavar="FILE[:csv|matrix|dataframe|comment]",
                       help="write the results of all properties (an experiment's "
                       "table) to FILE as PRISM does ('stdout' prints them); "
                       "options, comma-separated: csv, matrix, dataframe, "
                       "comment")  # fmt: skip
    group.add_argument("-importresults", "--import-results", dest="import_results",
                       metavar="FILE.csv", help="read results from a data frame "
                       "CSV (as -exportresults FILE:dataframe writes) instead of "
                       "checking a model, e.g. to export them in another "
                       "shape")  # fmt: skip
    group.add_argument("-exportvector", "--export-vector", dest="export_vector",
                       metavar="FILE", help="write each property's value in every "
                       "state to FILE, one per line in PRISM's state order "
                       "('stdout': with the states)")  # fmt: skip
    group.add_argument("-exportprism", "--export-prism", dest="export_prism",
                       metavar="FILE", help="write the parsed model as PRISM "
                       "text (jaxmc's printer: equivalent, not PRISM's "
                       "layout)")  # fmt: skip


def _write(path: str, text: str, show) -> None:
    if path == "stdout":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)


def _prism_order(explicit) -> np.ndarray:
    from ..explore.reorder import lexicographic_order

    return lexicographic_order(explicit)


def _state_texts(explicit, idx: np.ndarray) -> list[str]:
    """`(v1,v2,...)` of the states `idx`, as PRISM prints a state."""
    cols = []
    for j, v in enumerate(explicit.variables):
        c = np.asarray(explicit.states)[idx, j]
        cols.append(np.where(c != 0, "true", "false") if v.is_bool else c.astype(str))
    if not cols:
        return ["()"] * len(idx)
    return ["(" + ",".join(row) + ")" for row in zip(*cols)]


class Exports:
    """The exports a run asks for: results collected per property over
    the experiment, and the files written per model and per result."""

    def __init__(self, args):
        self.args = args
        self.collections: list[Collection] | None = None
        self._chosen: list[int] = []
        if args.export_results:
            self.results_file, self.shape, self.csv = parse_spec(args.export_results)
        check_specs(args)
        self._props = None

    @property
    def all_states(self) -> bool:
        """Whether each property is needed in every state."""
        return bool(self.args.export_vector)

    def model(self, model, explicit, props, show) -> None:
        """The model exports (once per constant setting, as PRISM)."""
        a = self.args
        self._props, self._model = props, model
        export_model_parts(model, explicit, props, a, show)
        if a.export_prism:
            program = getattr(getattr(model, "checked", None), "program", None)
            if program is None:
                raise UnsupportedError(
                    "-exportprism: an imported model has no PRISM text",
                    hint="give a PRISM model file",
                )
            from ..lang.printer import format_program

            _write(a.export_prism, format_program(program), show)

    def properties(self, model, text: str | None, props, chosen) -> None:
        """Set up a collection per chosen property (on the first setting)."""
        if self.collections is not None or not self.args.export_results:
            return
        from ..lang import parse_properties
        from ..semantics import parse_constants, range_values

        program = getattr(getattr(model, "checked", None), "program", None)
        pf = parse_properties(text or "")
        specs = parse_constants(",".join(self.args.const) or None)
        mf = [c for c in (program.constants if program else ()) if c.value is None]
        undefined_pf = [c for c in pf.constants if c.value is None]
        self.collections, self._chosen = [], [i for i, _ in chosen]
        for i, prop in chosen:
            expr = pf.properties[i].expr
            used = _used_constants(pf, expr)
            consts = mf + [c for c in undefined_pf if c.name in used]
            c = Collection(prop.name, prism_property_string(prop.name, expr),
                           _result_name(expr))  # fmt: skip
            for decl in consts:
                vals = range_values(decl.name, specs[decl.name], decl.type)
                if len(vals) > 1:
                    c.ranging.append((decl.name, vals))
                else:
                    c.fixed.append((decl.name, vals[0]))
            self.collections.append(c)

    def result(self, setting, index: int, result: Any, explicit) -> None:
        """Record one property's result (a `CheckResult` or the error)."""
        if self.collections is not None and index in self._chosen:
            c = self.collections[self._chosen.index(index)]
            c.set(setting, _value(result))
        if self.args.export_vector and not isinstance(result, JaxmcError):
            self._vector(result, explicit)
        if self.args.export_target and self._props is not None:
            export_target(self._model, self._props, index, explicit,
                          self.args.export_target)  # fmt: skip

    def _vector(self, result, explicit) -> None:
        values = result.values
        if values is None:  # a filter's single value, in every state
            if isinstance(result.filter_value, tuple):
                return  # a range has no vector
            values = np.full(explicit.num_states, result.filter_value)
        order = _prism_order(explicit)
        values = np.asarray(values)[order]
        uniq, inv = np.unique(values, return_inverse=True)
        text = np.array([java_text(v) for v in uniq.tolist()], dtype=object)[inv]
        path = self.args.export_vector
        if path == "stdout":
            print("\nExporting vector of results for all states below:")
            states = _state_texts(explicit, order)
            for i, (s, v) in enumerate(zip(states, text.tolist())):
                print(f"{i}:{s}={v}")
        else:
            Path(path).write_text("".join(t + "\n" for t in text.tolist()))

    def finish(self) -> None:
        """Write the collected results (after the whole experiment)."""
        if self.collections is None:
            return
        write_results(self.collections, self.results_file, self.shape, self.csv)


def write_results(collections, file: str, shape: str, is_csv: bool) -> None:
    text = export_text(collections, shape, is_csv)
    if file == "stdout":
        print(f"\nExporting results as {shape_name(shape, is_csv)} below:\n")
        sys.stdout.write(text)
    else:
        Path(file).write_text(text)


def import_results(args) -> int:
    """`-importresults FILE [-exportresults ...]`: read a data frame and
    export it again."""
    from ..lang.source import read_source

    path = args.import_results
    collections = import_dataframe(path, read_source(path))
    if args.export_results:
        file, shape, is_csv = parse_spec(args.export_results)
        write_results(collections, file, shape, is_csv)
    return 0


def _value(result: Any) -> Any:
    if isinstance(result, JaxmcError):
        return result
    try:
        return result.value
    except JaxmcError:
        lo, hi = result.range
        return (lo.item(), hi.item())


def _result_name(e: ast.Expr) -> str:
    """PRISM's `getResultName()` of a property."""
    if isinstance(e, (ast.ProbOp, ast.SteadyOp)) and e.threshold is None:
        opt = getattr(e, "opt", None)
        return {None: "Probability", ast.Opt.MIN: "Minimum probability",
                ast.Opt.MAX: "Maximum probability"}[opt]  # fmt: skip
    if isinstance(e, ast.RewardOp) and e.threshold is None:
        head = {None: "E", ast.Opt.MIN: "Minimum e", ast.Opt.MAX: "Maximum e"}[e.opt]
        name = e.structure if isinstance(e.structure, str) else "reward"
        return f"{head}xpected {name}"
    return "Result"


def _used_constants(pf: ast.PropertiesFile, expr: ast.Expr) -> set[str]:
    """The properties-file constants `expr` uses, through the file's
    constants, formulas, labels and the properties it names."""
    consts = {c.name: c.value for c in pf.constants}
    defs = {f.name: f.expr for f in pf.formulas}
    labels = {lb.name: lb.expr for lb in pf.labels}
    named = {p.name: p.expr for p in pf.properties if p.name}
    used: set[str] = set()
    seen: set[tuple[str, str]] = set()
    stack = [expr]
    while stack:
        for n in ast.walk(stack.pop()):
            if isinstance(n, ast.Ident):
                if n.name in consts:
                    used.add(n.name)
                key, follow = ("c", n.name), consts.get(n.name) or defs.get(n.name)
            elif isinstance(n, ast.LabelRef):
                key, follow = ("l", n.name), labels.get(n.name) or named.get(n.name)
            else:
                continue
            if follow is not None and key not in seen:
                seen.add(key)
                stack.append(follow)
    return used


def filter_entry(printed, explicit) -> dict[str, Any]:
    """The JSON entry and PRISM's printout of a `FilterOutput`."""
    order = _prism_order(explicit)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    idx = np.asarray(printed.states)
    prism_idx = rank[idx]
    srt = np.argsort(prism_idx, kind="stable")
    idx, prism_idx = idx[srt], prism_idx[srt]
    values = np.asarray(printed.values)[srt]
    filt = "true" if printed.filter is None else prism_string(printed.filter)
    is_init = isinstance(printed.filter, ast.LabelRef) and printed.filter.name == "init"
    lines = [] if is_init else ["", f"States satisfying filter {filt}: {printed.count}"]
    where = "all states" if printed.filter is None else "states satisfying filter"
    states = _state_texts(explicit, idx)
    if printed.op in ("argmin", "argmax"):
        word = "Minimum" if printed.op == "argmin" else "Maximum"
        extreme = java_text(printed.extreme)
        count = f"Number of states with {word.lower()} value: {len(idx)}"
        lines += ["", f"{word} value over {where}: {extreme}", count]
    else:
        if printed.boolean:
            also = "" if printed.filter is None else f" that are also in filter {filt}"
            lines += ["", f"Satisfying states{also}:"]
        elif printed.op == "print":
            lines += ["", f"Results (non-zero only) for filter {filt}:"]
        else:
            lines += ["", f"Results (including zeros) for filter {filt}:"]
        for i, s, v in zip(prism_idx.tolist(), states, values.tolist()):
            lines.append(f"{i}:{s}" if printed.boolean else f"{i}:{s}={java_text(v)}")
        if not len(idx):
            lines.append("(none)" if printed.boolean else "(all zero)")
    return {
        "op": printed.op,
        "filter": filt,
        "states": prism_idx.tolist(),
        "valuations": states,
        "values": values.tolist(),
        "extreme": printed.extreme,
        "text": lines,
    }
