"""Export cases of the suite's `.args` lines: a configuration that writes a
file (`-exportresults`, `-exportvector`, `-exportstates`, `-exportlabels`,
`-exportproplabels`, `-exportmodel`, `-exporttrans`, `-exportstaterewards`,
`-exporttransrewards`, `-exporttarget`, or `-importresults` then
`-exportresults`) is run through the command line in a temporary folder, and
every file written is compared byte for byte with the file of the same name
in the test's folder (PRISM's reference, as PRISM's test mode compares
them), an MDP's choices up to their order within a state (`choices.py`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from . import suite
from .choices import canonical_choices


#: The switches the comparison runs (with a FILE argument).
RUNS = ("-exportresults", "-importresults", "-exportvector", "-exportstates",
        "-exportlabels", "-exportproplabels", "-exportmodel", "-exporttrans",
        "-exportstaterewards", "-exporttransrewards", "-exporttarget",
        "-exporttransdot", "-exporttransdotstates")  # fmt: skip


def why_not(config: suite.Config) -> str | None:
    """Why the export of `config` cannot be compared, or None."""
    for item in config.exports:
        switch, _, spec = item.partition(" ")
        if switch not in RUNS:
            return f"export: comparison of the file written by {item} not implemented"
    return None


def imports_results(config: suite.Config) -> bool:
    """PRISM checks nothing on a line that imports results."""
    return any(e.startswith("-importresults ") for e in config.exports)


def run_case(case: suite.Case) -> tuple[str, str]:
    """Run the configuration's command line and compare the files."""
    from .auto import _numeric_args, run_cli

    folder = case.props.parent
    config = case.config
    with tempfile.TemporaryDirectory() as tmp:
        argv: list[str] = []
        if not imports_results(config):
            argv = [str(case.model), str(case.props)]
            if case.consts:
                argv += ["-const", case.consts]
            if config.only_property:
                argv += ["-prop", config.only_property]
            argv += _numeric_args(config)
        for item in config.exports:
            switch, _, spec = item.partition(" ")
            where = folder if switch == "-importresults" else Path(tmp)
            argv += [switch, str(where / spec)]
        code, _, err = run_cli(argv + ["-q"])
        if code != 0:
            lines = err.splitlines()
            refused = [ln for ln in lines if ln.startswith("unsupported: -export")]
            if refused:  # an export jaxmc refuses (with its reason)
                return "skip", "export: " + refused[0].split(": ", 1)[1]
            return "fail", f"exit status {code}: {err.strip()[:300]}"
        written = sorted(Path(tmp).iterdir())
        if not written:
            return "fail", "nothing written"
        for f in written:
            want = folder / f.name
            if not want.is_file():
                return "fail", f"wrote {f.name}, which the folder does not have"
            diff = _difference(
                canonical_choices(f.name, want.read_bytes()),
                canonical_choices(f.name, f.read_bytes()),
            )
            if diff:
                return "fail", f"{f.name}: {diff}"
    return "pass", ""


def _difference(want: bytes, got: bytes) -> str | None:
    if want == got:
        return None
    a, b = want.split(b"\n"), got.split(b"\n")
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return f"line {i}: expected {x!r}, got {y!r}"
    return f"expected {len(a)} lines, got {len(b)} (end of file differs)"
