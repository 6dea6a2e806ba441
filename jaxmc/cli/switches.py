"""PRISM's command-line switches, read the way PRISM reads them.

PRISM's switches are single-dash words (`-ex`, `-gs`, `-exportmodel`), and a
switch is only ever its exact spelling: `-ex` is the explicit engine, never a
prefix of `-exportmodel`. argparse, even with `allow_abbrev=False`, still
expands a single-dash prefix to the one long option it starts (so `-ex FILE`
became `-exportmodel FILE`, and the model file was overwritten with an
export). `PrismArgumentParser` matches option strings exactly, and keeps `-h`
free for PRISM's hybrid engine (help is `-help` / `--help`).

Switches that select something jaxmc does not have (another engine, a
solution method it does not implement) are accepted, and `notes` says on
stderr what jaxmc does instead.
"""

from __future__ import annotations

import argparse
from typing import Any


class PrismArgumentParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose options match only when spelled out in full,
    with `-help`/`--help` for help (not `-h`)."""

    def __init__(self, **kwargs: Any):
        super().__init__(allow_abbrev=False, add_help=False, **kwargs)
        self.add_argument(
            "--help", "-help", action="help", help="show this help and exit"
        )

    def _get_option_tuples(self, option_string: str) -> list:
        # argparse's prefix matching (also of `-ex` against `-exportmodel`,
        # which `allow_abbrev=False` does not turn off for single-dash
        # options); none: an unknown switch is an error.
        return []


#: PRISM's linear-equation methods that jaxmc has not got: switch →
#: (the jaxmc method used instead, PRISM's name of the method).
_LINEAR_STANDINS = {
    "jor": ("jacobi", "Jacobi over-relaxation"),
    "sor": ("gauss_seidel", "successive over-relaxation"),
    "bsor": ("gauss_seidel", "backwards SOR"),
    "psor": ("gauss_seidel", "pseudo-SOR"),
    "bpsor": ("gauss_seidel", "backwards pseudo-SOR"),
    "bgaussseidel": ("gauss_seidel", "backwards Gauss-Seidel"),
    "pgaussseidel": ("gauss_seidel", "pseudo-Gauss-Seidel"),
    "bpgaussseidel": ("gauss_seidel", "backwards pseudo-Gauss-Seidel"),
}
_LINEAR_ALIASES = {
    "bgaussseidel": "bgs",
    "pgaussseidel": "pgs",
    "bpgaussseidel": "bpgs",
}
_JAXMC_NAME = {"jacobi": "Jacobi iteration", "gauss_seidel": "Gauss-Seidel"}

#: PRISM's MDP solution methods other than value iteration.
_MDP_METHODS = {
    "politer": "policy iteration",
    "modpoliter": "modified policy iteration",
    "linprog": "linear programming",
}

#: PRISM's engines (`-ex` is what jaxmc is: an explicit-state engine).
_ENGINES = {
    "explicit": ("ex", "the explicit engine"),
    "sparse": ("s", "the sparse engine"),
    "hybrid": ("h", "the hybrid engine"),
    "mtbdd": ("m", "the MTBDD engine"),
}


def add_switches(
    p: argparse.ArgumentParser, meth: argparse._MutuallyExclusiveGroup
) -> None:
    """PRISM's engine, method and model-construction switches that the main
    parser takes besides its own (`meth`: the group of method switches)."""
    for flag, (std, name) in _LINEAR_STANDINS.items():
        short = _LINEAR_ALIASES.get(flag)
        names = [f"-{flag}"] + ([f"-{short}"] if short else [])
        meth.add_argument(
            *names,
            dest="method",
            action="store_const",
            const=flag,
            help=f"PRISM's {name}: not implemented, "
            f"{_JAXMC_NAME[std]} is used (with a note)",
        )
    num = _group(p, "numerical methods (PRISM's switches)")
    mdp = num.add_mutually_exclusive_group()
    for flag, name in _MDP_METHODS.items():
        names = [f"-{flag}"] + (["-lp"] if flag == "linprog" else [])
        mdp.add_argument(
            *names,
            dest="mdp_method",
            action="store_const",
            const=flag,
            help=f"PRISM's {name} for MDPs: not implemented, MDPs "
            "are solved by value iteration (with a note)",
        )
    num.add_argument(
        "-topological",
        action="store_true",
        help="PRISM's topological value iteration for MDPs: not "
        "implemented, plain value iteration is used (with a note); "
        "DTMC/CTMC linear systems are already solved component by "
        "component in topological order where they are nearly acyclic",
    )
    num.add_argument(
        "-omega",
        type=float,
        metavar="X",
        help="PRISM's over-relaxation parameter of JOR/SOR: ignored, "
        "no over-relaxation method is implemented (with a note)",
    )
    num.add_argument(
        "-nopre",
        action="store_true",
        help="PRISM's switch turning off the graph precomputation "
        "(Prob0/Prob1): ignored, jaxmc always runs it (with a note)",
    )
    eng = _group(p, "engines (PRISM's switches; the last one given counts)")
    for name, (short, what) in _ENGINES.items():
        eng.add_argument(
            f"-{short}",
            f"-{name}",
            dest="engine",
            action="store_const",
            const=name,
            help=f"PRISM's {what}: "
            + (
                "what jaxmc is (explicit-state)"
                if name == "explicit"
                else "jaxmc has one engine, explicit-state; ignored (with a note)"
            ),
        )
    eng.add_argument(
        "-exact",
        action="store_true",
        help="PRISM's exact (rational arithmetic) model checking: "
        "not supported, an error",
    )
    build = _group(p, "model construction")
    dl = build.add_mutually_exclusive_group()
    dl.add_argument(
        "-fixdl",
        dest="fixdl",
        action="store_true",
        default=True,
        help="fix deadlocks: a state without an enabled command gets a "
        'self-loop and the "deadlock" label, with a warning (default, '
        "as PRISM)",
    )
    dl.add_argument(
        "-nofixdl",
        dest="fixdl",
        action="store_false",
        help="a deadlock is an error, naming the first deadlock states",
    )


def _group(p: argparse.ArgumentParser, title: str):
    for g in p._action_groups:
        if g.title == title:
            return g
    return p.add_argument_group(title)


def apply(args: argparse.Namespace) -> list[str]:
    """Turn the PRISM switches of `args` into jaxmc's settings (in place):
    `args.method` becomes a `jaxmc.check` method. Returns the notes to print
    on stderr (what jaxmc does instead of a switch it does not implement).

    **Raises:** `UnsupportedError` for `-exact`."""
    from ..errors import UnsupportedError

    notes = []
    engine = getattr(args, "engine", None)
    if getattr(args, "exact", False):
        raise UnsupportedError(
            "-exact: exact (rational arithmetic) model checking is not supported; "
            "jaxmc computes in floating point",
            hint="leave out -exact",
        )
    if engine not in (None, "explicit"):
        notes.append(
            f"-{engine} ({_ENGINES[engine][1]}): jaxmc has one engine, "
            "explicit-state; ignored"
        )
    method = getattr(args, "method", None)
    if method in _LINEAR_STANDINS:
        std, name = _LINEAR_STANDINS[method]
        notes.append(f"-{method} ({name}) is not implemented; using {_JAXMC_NAME[std]}")
        args.method = std
    mdp = getattr(args, "mdp_method", None)
    if mdp is not None:
        notes.append(
            f"-{mdp} ({_MDP_METHODS[mdp]}) is not implemented; MDPs are "
            "solved by value iteration"
        )
    if getattr(args, "topological", False):
        notes.append(
            "-topological (topological value iteration) is not implemented; "
            "MDPs are solved by plain value iteration"
        )
    if getattr(args, "omega", None) is not None:
        notes.append(
            "-omega: no over-relaxation method (JOR/SOR) is implemented; ignored"
        )
    if getattr(args, "nopre", False):
        notes.append(
            "-nopre: jaxmc always runs the graph precomputation (Prob0/Prob1); ignored"
        )
    return notes
