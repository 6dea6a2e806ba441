"""The command line's argument parsers: the main one (`jaxmc MODEL
[PROPS_FILE]`, with PRISM's switches from `jaxmc.cli.switches`), and those
of `jaxmc sweep` and `jaxmc plot-matrix`."""

from __future__ import annotations

import argparse

from ..options import LAYOUTS, PRECISIONS
from .export import add_switches as add_export_switches
from .switches import PrismArgumentParser, add_switches


#: PRISM's method switches → the `method=` names of `jaxmc.check`.
METHODS = {
    "jacobi": "jacobi",
    "gaussseidel": "gauss_seidel",
    "power": "power",
    "bicgstab": "bicgstab",
    "valiter": "value_iteration",
    "ii": "interval_iteration",
}
_METHOD_HELP = {
    "jacobi": "Jacobi iteration (the default for DTMC/CTMC linear equation systems "
    "unless nearly acyclic; those get topological Gauss-Seidel)",
    "gaussseidel": "Gauss-Seidel for DTMC/CTMC linear systems (sequential: runs on "
    "the host CPU, one sparse triangular solve per sweep, components in topological "
    "order; value iteration on MDPs)",
    "power": "the power method",
    "bicgstab": "BiCGStab (Krylov solver)",
    "valiter": "value iteration (default for MDPs)",
    "ii": "interval iteration (sound lower/upper bounds)",
}
#: PRISM's other spellings of the method switches.
_METHOD_ALIASES = {
    "jacobi": ("-jac",),
    "gaussseidel": ("-gs",),
    "power": ("-pow", "-pwr"),
    "ii": ("-intervaliter",),
}


def parser() -> argparse.ArgumentParser:
    p = PrismArgumentParser(
        prog="jaxmc",
        usage="jaxmc MODEL [PROPS_FILE] [options]\n"
        "       jaxmc -importmodel BASE.tra,sta,lab [PROPS_FILE] [options]\n"
        "       jaxmc sweep MODEL --prop PROP --param p=0.1:0.1:0.9 [options]\n"
        "       jaxmc plot-matrix MODEL [--const ...] -o OUT.png",
        description="Probabilistic model checking of PRISM models (DTMC .pm, "
        "CTMC .sm, MDP .nm) on JAX: PCTL/CSL properties with rewards, checked "
        "as PRISM checks them. PRISM's single-dash switches are accepted.",
        epilog="Exit status: 0 ok; 1 an error in the model, a property or the "
        "numerics (a located message on stderr; a property that does not "
        "converge is an error); 2 a usage error. "
        "Examples: jaxmc examples/models/die.pm examples/models/die.pm.props; "
        "jaxmc examples/models/die.pm --prop 'P=? [ F s=7 & d=6 ]'; "
        "jaxmc herman5.pm herman.pctl --property 3 --const k=1:2:5,K=0. "
        "See 'jaxmc sweep --help' for parameter sweeps and 'jaxmc plot-matrix "
        "--help' for the matrix plot.",
    )
    p.add_argument("model", nargs="?", help="PRISM model file (.pm, .sm, .nm, .prism)")
    p.add_argument(
        "props_file", nargs="?", help="PRISM properties file (.props, .pctl, .csl)"
    )
    p.add_argument(
        "--prop", "-pf", "-pctl", "-csl", action="append", default=[], metavar="PROP",
        help="a property to check, e.g. 'P=? [ F \"goal\" ]' (repeatable; "
        "checked after those of PROPS_FILE, and may refer to them by name)",
    )  # fmt: skip
    p.add_argument(
        "--property", "-prop", "-property", action="append", default=[],
        metavar="NAME|INDEX",
        help="check only this property: a name, or a 1-based index in the "
        "list PROPS_FILE then --prop (repeatable, or comma-separated)",
    )  # fmt: skip
    p.add_argument(
        "--const", "-const", action="append", default=[], metavar="N=3,p=0.1",
        help="values of undefined constants (model or properties); a range "
        "N=1:9 or N=1:2:9 (low:step:high) runs an experiment, one row per "
        "setting, the last constant varying fastest (repeatable)",
    )  # fmt: skip

    num = p.add_argument_group("numerical methods (PRISM's switches)")
    num.add_argument("-epsilon", "--epsilon", "-e", type=float, default=1e-6,
                     help="convergence threshold (default 1e-6)")  # fmt: skip
    num.add_argument("-maxiters", "--max-iters", type=int, default=10000,
                     dest="max_iters", metavar="N",
                     help="iteration limit (default 10000); reaching it is an "
                     "error (exit 1) naming the iterations and "
                     "the residual")  # fmt: skip
    crit = num.add_mutually_exclusive_group()
    crit.add_argument("-relative", "--relative", "-rel", dest="relative",
                      action="store_true", default=True,
                      help="relative convergence criterion (default)")  # fmt: skip
    crit.add_argument(
        "-absolute",
        "--absolute",
        "-abs",
        dest="relative",
        action="store_false",
        help="absolute convergence criterion",
    )
    num.add_argument(
        "--criterion", choices=("sound", "change"), default="sound",
        help="sound (default): every result certified, printed with its error "
        "bound, value (±bound); change: PRISM's criterion (the change between "
        "iterates below epsilon) and PRISM's default methods, for PRISM's "
        "numbers",
    )  # fmt: skip
    meth = num.add_mutually_exclusive_group()
    for flag, method in METHODS.items():
        meth.add_argument(f"-{flag}", f"--{flag}", *_METHOD_ALIASES.get(flag, ()),
                          dest="method", action="store_const", const=method,
                          help=_METHOD_HELP[flag])  # fmt: skip

    dev = p.add_argument_group("device and data layout")
    dev.add_argument(
        "--device", choices=("cpu", "gpu"),
        help="JAX platform to run on (default: JAX's choice, i.e. a GPU if "
        "jax[cuda12] is installed and one is visible); set before JAX starts",
    )  # fmt: skip
    dev.add_argument("--layout", choices=LAYOUTS, default="auto",
                     help="sparse matrix layout of the iterative solves: auto (CSR "
                     "on a CPU, a warp-segment sliced ELL run by the Pallas kernels "
                     "on a GPU), csr, ell, sell (sliced ELLPACK), warp / warp2 "
                     "(warp-segment, full / half warp), compact / compact2 (their "
                     "compact-value variants), vector (CSR-vector, a warp per row, "
                     "for long rows), dia (compact diagonals in PRISM's state order, "
                     "for box-shaped state spaces such as tandem's; compact where the "
                     "matrix is not a few diagonals; auto picks it for GPU "
                     "steady-state solves where it fits; default auto)")  # fmt: skip
    dev.add_argument(
        "--devices", type=int, default=None, metavar="N",
        help="split the iterative solves over the first N devices (rows of the "
        "matrix and the iterate in BFS-order blocks, halo exchanges between "
        "them; default 1), and with --explorer device the exploration (states "
        "owned by hash, successors exchanged per level). Simulated CPU devices: "
        "XLA_FLAGS=--xla_force_host_platform_device_count=N",
    )  # fmt: skip
    dev.add_argument(
        "--coordinator", default=None, metavar="HOST:PORT",
        help="join jax.distributed as one of --num-processes processes (one "
        "per host or per GPU), process 0 listening at HOST:PORT; every process "
        "runs the same command and the solves split over all their devices "
        "(--devices defaults to all of them); only process 0 prints and "
        "writes exports (docs/multi-device.md)",
    )  # fmt: skip
    dev.add_argument("--num-processes", type=int, default=None, metavar="N",
                     help="the number of processes (with --coordinator)")  # fmt: skip
    dev.add_argument("--process-id", type=int, default=None, metavar="I",
                     help="this process's index, 0 .. N-1")  # fmt: skip
    dev.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp64",
        help="floating-point precision of the iterative solves (default fp64)",
    )

    p.add_argument("--explorer", choices=("auto", "host", "device"), default="auto",
                   help="where the state space is explored: 'host' (numpy), "
                   "'device' (jitted loops with a find-or-put hash table on the "
                   "default JAX device; for the largest models on a GPU), or "
                   "'auto' (default: the host)")  # fmt: skip
    p.add_argument("--max-states", type=int, default=None, metavar="N",
                   help="stop exploring after N states with an error naming the "
                   "variables whose range keeps growing (default: no limit; the "
                   "build stops anyway when it would run out of memory)")  # fmt: skip

    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print the model summaries and results as one JSON "
                     "document on stdout (nothing else on stdout)")  # fmt: skip
    out.add_argument("--timing", action="store_true",
                     help="print a timing breakdown (parse, build, and each "
                     "property's stages) after the results")  # fmt: skip
    out.add_argument("--quiet", "-q", action="store_true",
                     help="no progress on stderr (exploration progress is a line "
                     "updated in place on a terminal, else a plain line every few "
                     "seconds of a long build)")  # fmt: skip

    io = p.add_argument_group("model import/export (PRISM's explicit files, "
                              "Storm's DRN, UMB)")  # fmt: skip
    io.add_argument("-exportmodel", "--export-model", "--exportbuild",
                    metavar="BASE[.tra,sta,...|.all]|FILE.drn|FILE.umb",
                    help="write the built model as BASE.tra/.sta/.lab/.srew/.trew; "
                    "'BASE.tra,lab' writes only those, 'BASE.all' or 'BASE' "
                    "all of them; FILE.drn: Storm's DRN format; FILE.umb: "
                    "the UMB binary format")  # fmt: skip
    io.add_argument("-exportstrat", "--export-strat", metavar="FILE[:OPTIONS]",
                    help="write the optimal scheduler (strategy) of each MDP "
                    "property Pmin/Pmax [ U ], Rmin/Rmax [ F ] as PRISM does: "
                    "'state=action' lines (type=actions, the default), "
                    "'index=choice' (type=indices) or the induced model's .tra "
                    "(type=induced, the default for FILE.tra; mode=reduce|"
                    "restrict); states=false writes indices for states; FILE "
                    "'stdout' prints it")  # fmt: skip
    io.add_argument("-importmodel", "--import-model", "--explicit-drn",
                    metavar="BASE.tra[,sta,lab,srew,trew]|BASE.all|FILE.drn|FILE.umb",
                    help="read the model from PRISM explicit files (or a DRN "
                    "file, or a UMB archive) instead of a PRISM model (then "
                    "the first positional argument is the properties file); "
                    "properties may use the "
                    "variables of the .sta file (DRN: of its valuation "
                    "comments) and the labels of the .lab (DRN) file")  # fmt: skip
    add_export_switches(io)
    mt = io.add_mutually_exclusive_group()
    for kind in ("dtmc", "ctmc", "mdp"):
        mt.add_argument(f"-{kind}", f"--{kind}", dest="import_type",
                        action="store_const", const=kind,
                        help=f"read the model as a {kind.upper()}, whatever "
                        "its type keyword (with -importmodel: the files hold "
                        "one; default: from the .tra header)")  # fmt: skip
    add_switches(p, meth)
    return p


def plot_parser() -> argparse.ArgumentParser:
    p = PrismArgumentParser(
        prog="jaxmc plot-matrix",
        description="Draw the non-zero pattern of a model's transition matrix, "
        "side by side: in PRISM's state order (lexicographic in the variable "
        "valuations, as PRISM's sparse engines number states) and in jaxmc's "
        "BFS order (the builder's). Each panel's title reports the padding a "
        "sliced-ELL layout (slices of 32 rows, each padded to its longest "
        "row) would store in that order. Needs "
        "matplotlib (pip install 'jaxmc[plot]').",
    )
    p.add_argument("model", help="PRISM model file")
    p.add_argument("--const", "-const", action="append", default=[],
                   metavar="N=3,p=0.1", help="values of undefined constants "
                   "(no ranges)")  # fmt: skip
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.png",
        help="the image file to write",
    )
    p.add_argument(
        "--dpi", type=int, default=150, help="image resolution (default 150)"
    )
    return p


def sweep_parser() -> argparse.ArgumentParser:
    p = PrismArgumentParser(
        prog="jaxmc sweep",
        usage="jaxmc sweep MODEL --prop PROP --param NAME=VALUES [--param ...] "
        "[options]",
        description="One property at every point of a grid of parameter values, "
        "in one batched computation (jaxmc.sweep): the state space is built once, "
        "the parameters' values only change the transition probabilities, rates "
        "and rewards. A parameter is an undefined `const double` of the model that "
        "occurs only in probabilities, rates, rewards or time bounds (not in guards "
        "or variable bounds). Progress on stderr; a table, or JSON, on stdout.",
        epilog='Example: jaxmc sweep examples/models/queue.sm --prop \'S=? [ "empty" '
        "]' --param lambda=0.5:0.5:2.5 --param mu=3,4. "
        "Exit status: 0 ok; 1 an error in the model, the property, a parameter or "
        "a point that did not converge; 2 a usage error.",
    )
    p.add_argument("model", help="PRISM model file (.pm, .sm, .nm, .prism)")
    p.add_argument(
        "--prop",
        "-pf",
        required=True,
        metavar="PROP",
        help="the property, e.g. 'P=? [ F \"goal\" ]'",
    )
    p.add_argument(
        "--param",
        action="append",
        required=True,
        metavar="p=0.1:0.1:0.9",
        help="a parameter and its values: low:step:high, low:high (step 1), "
        "a comma list of values, or one value (repeatable; the points are "
        "all combinations, the last parameter varying fastest)",
    )
    p.add_argument(
        "--const",
        "-const",
        action="append",
        default=[],
        metavar="N=3",
        help="values of the model's other undefined constants (no ranges)",
    )
    p.add_argument(
        "-epsilon",
        "--epsilon",
        "-e",
        type=float,
        default=1e-6,
        help="relative convergence threshold (default 1e-6, PRISM's)",
    )
    p.add_argument(
        "-maxiters",
        "--max-iters",
        type=int,
        default=200_000,
        help="iteration limit per point (default 200000)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="points per batched solve (default: chosen from the model's size)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="batches solved at once on host threads (default: one per CPU "
        "core on the CPU, 1 on a GPU)",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "gpu"),
        default=None,
        help="JAX backend (default: JAX's own choice)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p
