"""PRISM's switches that write parts of the built model: `-exportstates`,
`-exportlabels`, `-exportproplabels`, `-exporttrans`, `-exportstaterewards`,
`-exporttransrewards`, `-exporttransdot`, `-exporttransdotstates`, the global
`-exportmatlab`/`-exportrows`, `-exportmodel`'s `:proplabels` (labels of the
properties file) and `-exporttarget` (the target states of a reachability
property, as PRISM's explicit engine writes them). Formats and options are
`jaxmc.explore.export_options`'s.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from ..errors import UnsupportedError
from ..explore import export_options as eo
from ..explore.formats import format_lab
from ..explore.reorder import lexicographic
from ..lang import ast
from ..lang.prism_text import prism_string


#: switch → (argparse dest, what it writes, the part written, its options)
SWITCHES = {
    "-exportstates": ("export_states", "the states (.sta format)", "sta",
                      eo.ENTITY_OPTIONS),
    "-exportlabels": ("export_labels", "the model's labels (.lab format; "
                      ":proplabels also those of the properties file, :matlab)",
                      "lab", eo.LABEL_OPTIONS),
    "-exportproplabels": ("export_proplabels", "the properties file's labels "
                          "(.lab format; :matlab)", "lab", eo.PROPLABEL_OPTIONS),
    "-exporttrans": ("export_trans", "the transition matrix (.tra format)",
                     "tra", eo.ENTITY_OPTIONS),
    "-exportstaterewards": ("export_staterewards", "the state rewards (.srew "
                            "format; FILE1.srew, FILE2.srew, ... for several "
                            "structures)", "srew", eo.ENTITY_OPTIONS),
    "-exporttransrewards": ("export_transrewards", "the transition rewards "
                            "(.trew format, numbered as -exportstaterewards)",
                            "trew", eo.ENTITY_OPTIONS),
    "-exporttransdot": ("export_transdot", "the transition graph (Graphviz)",
                        "dot", ()),
    "-exporttransdotstates": ("export_transdotstates", "the transition graph "
                              "(Graphviz) with each state's valuation", "dot", ()),
}  # fmt: skip


def add_switches(group) -> None:
    """The model export switches, in the argument group `group`."""
    for switch, (dest, what, _, options) in SWITCHES.items():
        opts = f"[:{'|'.join(options)}]" if options else ""
        group.add_argument(
            switch,
            dest=dest,
            metavar=f"FILE{opts}",
            help=f"write {what} to FILE ('stdout' prints it)",
        )
    group.add_argument(
        "-exportmatlab",
        dest="export_matlab",
        action="store_true",
        help="write the model exports in Matlab format",
    )
    group.add_argument(
        "-exportrows",
        dest="export_rows",
        action="store_true",
        help="write matrices (.tra, .trew) one row per line",
    )
    group.add_argument("-exporttarget", dest="export_target", metavar="FILE",
                       help="write the initial and target states of each "
                       "unbounded reachability property (P [ F ], P [ U ], "
                       "MDP R [ F ]) as a .lab file, as PRISM does")  # fmt: skip


def _write(path: str, text: str) -> None:
    if path == "stdout":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)


def check_specs(args) -> None:
    """Refuse unknown options before anything is built."""
    for switch, (dest, _, _, allowed) in SWITCHES.items():
        spec = getattr(args, dest, None)
        if spec:
            eo.parse_options(switch, spec, allowed)
    if args.export_model:
        eo.parse_options("-exportmodel", model_spec(args), eo.MODEL_OPTIONS)


def model_spec(args) -> str:
    """`-exportmodel`'s spec with the global `-exportmatlab`/`-exportrows`."""
    spec = args.export_model
    extra = [o for o, on in (("matlab", args.export_matlab),
                             ("rows", args.export_rows)) if on]  # fmt: skip
    if not extra:
        return spec
    _, opts = eo.split_spec(spec)
    return spec + ("," if opts else ":") + ",".join(extra)


def property_labels(model, props, explicit) -> dict[str, np.ndarray]:
    """The labels of the properties file, per state of `explicit`."""
    import jaxmc

    if props is None:
        return {}
    out = {}
    for name, expr in props.labels.items():
        r = jaxmc.check(model, prism_string(expr), properties=props, all_states=True)
        out[name] = np.asarray(r.values, bool)
    return out


def export_model_parts(model, explicit, props, args, show) -> None:
    """`-exportmodel` and the single-part switches."""
    import jaxmc

    needs_props = args.export_proplabels or any(
        ":" in (s or "") and "proplabels" in eo.split_spec(s)[1]
        for s in (args.export_model, args.export_labels)
    )
    extra = property_labels(model, props, explicit) if needs_props else None
    if args.export_model:
        written = jaxmc.export_model(explicit, model_spec(args), labels=extra)
        show.note("Exported model to " + ", ".join(str(p) for p in written))
    for switch, (dest, _, part, allowed) in SWITCHES.items():
        spec = getattr(args, dest, None)
        if not spec:
            continue
        file, _ = eo.split_spec(spec)
        opts = eo.parse_options(switch, spec, allowed)
        opts = dataclasses.replace(
            opts,
            format="matlab" if args.export_matlab else opts.format,
            rows=opts.rows or args.export_rows,
        )
        if switch == "-exportproplabels":
            m, names = eo.with_labels(explicit, extra, only=True)
        else:
            m, names = eo.with_labels(explicit, extra if opts.proplabels else None)
        m = lexicographic(m)
        if part == "dot":
            from ..explore.formats_dot import format_dot

            texts = [format_dot(m, states=switch.endswith("states"))]
        else:
            texts = eo.part_texts(m, part, opts, names)
        for i, t in enumerate(texts):
            _write(file if file == "stdout" else eo.numbered(file, i, len(texts)), t)


# ---------------------------------------------------------------- -exporttarget


def _temporal(e: ast.Expr) -> bool:
    """Whether `e` has a path operator outside nested P/R/S operators."""
    if isinstance(e, ast.Temporal):
        return True
    if isinstance(e, (ast.ProbOp, ast.RewardOp, ast.SteadyOp)):
        return False
    return any(_temporal(c) for c in ast.children(e))


def reach_target(expr: ast.Expr, nondeterministic: bool) -> ast.Expr | None:
    """The target of the unbounded reachability PRISM computes last for
    `expr` (operands before operators), or None if there is none: `b` of
    `P [ F b ]` / `P [ a U b ]`, `!a` of `P [ G a ]` (checked as
    1 - P [ F !a ]), `b` of an MDP's `R [ F b ]`."""
    found = None

    def visit(e: ast.Expr) -> None:
        nonlocal found
        for child in ast.children(e):
            visit(child)
        path = getattr(e, "path", None)
        if not isinstance(e, (ast.ProbOp, ast.RewardOp)):
            return
        simple = isinstance(path, ast.Temporal) and not any(
            _temporal(x) for x in (path.left, path.right) if x is not None
        )
        if not simple and _temporal(path):
            raise UnsupportedError(
                "-exporttarget: the target of an LTL property is a set of "
                "states of PRISM's product with its automaton, which jaxmc "
                "numbers differently",
                hint="use a P [ F ... ] or P [ a U b ] property",
            )
        if not simple or path.bound is not None:
            return
        op = path.op
        if isinstance(e, ast.RewardOp):
            if nondeterministic and op == ast.TemporalOp.EVENTUALLY:
                found = path.right
        elif op in (ast.TemporalOp.EVENTUALLY, ast.TemporalOp.UNTIL):
            found = path.right
        elif op == ast.TemporalOp.GLOBALLY:
            found = ast.Unary(op=ast.UnaryOp.NOT, operand=path.right)

    visit(expr)
    return found


def export_target(model, props, index: int, explicit, file: str) -> None:
    """Write `init` and `target` of property `index` as PRISM's `.lab`."""
    import jaxmc

    target = reach_target(props[index].expr, explicit.is_nondeterministic)
    if target is None:
        return
    r = jaxmc.check(model, prism_string(target), properties=props, all_states=True)
    labels = {"init": explicit.labels["init"], "target": np.asarray(r.values, bool)}
    m = lexicographic(dataclasses.replace(explicit, labels=labels))
    _write(file, format_lab(m, ["init", "target"]))
