"""`-importmodel` and `-exportmodel`: PRISM's explicit model files, named
the way PRISM's command lines name them.

- `BASE.tra,sta,lab,srew,trew` (any subset), `BASE.all` or `BASE`: the
  separate files. With several reward structures PRISM writes one file per
  structure, numbered from 1 (`BASE1.srew`, `BASE2.srew`, ..., likewise
  `.trew`), each naming its structure in a `# Reward structure "name"`
  comment; import reads them all (or `BASE.srew` when there is one).
- `BASE.pexp`: the combined file.
- a trailing `.gz` or `.xz` (`dice.all.gz`, `dice.pexp.xz`): every file is
  compressed (import only).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..errors import SemanticError, UnsupportedError


PARTS = ("tra", "sta", "lab", "srew", "trew")
COMPRESSIONS = (".gz", ".xz")


def split(spec: str) -> tuple[str, list[str], str, bool]:
    """PRISM's `BASE.tra,sta,lab` / `BASE.all` / `BASE.pexp` / `BASE` (with
    an optional `.gz`/`.xz`) → (BASE, parts, compression suffix, whether
    all parts were asked for, so that absent optional files are skipped)."""
    comp = next((c for c in COMPRESSIONS if spec.endswith(c)), "")
    spec = spec[: len(spec) - len(comp)]
    head, *rest = spec.split(",")
    base, dot, ext = head.rpartition(".")
    if dot and ext == "pexp" and not rest:
        return base, ["pexp"], comp, True
    if not dot or ext not in PARTS + ("all",):
        if rest:
            raise SemanticError(
                f"`{spec}`: expected BASE.EXT,EXT,... with EXT one of "
                f"{', '.join(PARTS)}"
            )
        return spec, list(PARTS), comp, True
    parts = [ext, *rest]
    bad = [p for p in parts if p not in PARTS + ("all",)]
    if bad:
        raise SemanticError(
            f"`{spec}`: unknown explicit file kind `{bad[0]}`",
            hint=f"the kinds are {', '.join(PARTS)}, all (or BASE.pexp)",
        )
    if "all" in parts:
        return base, list(PARTS), comp, True
    return base, parts, comp, False


def export(spec: str, explicit, show) -> None:
    """`-exportmodel SPEC`: write the built model's files."""
    from ..explore import export_explicit
    from ..explore.pexp import format_pexp

    base, parts, comp, _ = split(spec)
    if comp:
        raise UnsupportedError(
            f"-exportmodel {spec}: compressed export is not supported",
            hint=f"leave out `{comp}`",
        )
    if parts == ["pexp"]:
        path = Path(base + ".pexp")
        path.write_text(format_pexp(explicit))
        written = [path]
    else:
        written = export_explicit(explicit, base, parts=parts)
    show.note("Exported model to " + ", ".join(str(p) for p in written))


def _numbered(base: str, kind: str, comp: str) -> list[str]:
    """PRISM's reward files of one kind: `BASE1.kind`, `BASE2.kind`, ... if
    the first exists, else `BASE.kind` if it exists, else none."""
    found = []
    while os.path.exists(p := f"{base}{len(found) + 1}.{kind}{comp}"):
        found.append(p)
    if not found and os.path.exists(p := f"{base}.{kind}{comp}"):
        found.append(p)
    return found


def read(spec: str, model_type: str | None):
    """The `ExplicitModel` of `-importmodel SPEC` and the path reported as
    the model's file."""
    from ..explore import import_explicit
    from ..explore.pexp import import_pexp

    base, parts, comp, every = split(spec)
    if parts == ["pexp"]:
        path = f"{base}.pexp{comp}"
        return import_pexp(path, model_type=model_type), path
    files: dict[str, object] = {}
    for part in ("tra", "sta", "lab"):
        path = f"{base}.{part}{comp}"
        if part in parts and (not every or part == "tra" or os.path.exists(path)):
            files[part] = path
    for kind in ("srew", "trew"):
        if kind not in parts:
            continue
        found = _numbered(base, kind, comp)
        if not found and not every:
            raise FileNotFoundError(
                2, "No such file", f"{base}.{kind}{comp} (or {base}1.{kind}{comp})"
            )
        files[kind] = found
    n = max(len(files.get("srew", [])), len(files.get("trew", [])))
    for kind in ("srew", "trew"):  # one entry per structure (None: none of this kind)
        if kind in files:
            files[kind] = files[kind] + [None] * (n - len(files[kind]))
    explicit = import_explicit(
        files["tra"],
        files.get("sta"),
        files.get("lab"),
        files.get("srew"),
        files.get("trew"),
        model_type=model_type,
    )
    return explicit, files["tra"]


def import_model(spec: str, model_type: str | None, jaxmc):
    """An explicit model read from PRISM's files, wrapped as a `jaxmc.Model`
    whose checked program declares only what properties can refer to: the
    `.sta` variables, the `.lab` labels and the reward structures (by name
    and number; a property naming one that is not there is an error). (This
    belongs in the API as `jaxmc.import_model`; it lives here until the API
    has it.)"""
    from ..lang import ast
    from ..semantics.program import CheckedProgram, CheckedRewardStruct, CheckedVar

    t0 = time.perf_counter()
    explicit, path = read(spec, model_type)
    seconds = time.perf_counter() - t0
    builtin = {"init", "deadlock"}
    checked = CheckedProgram(
        program=ast.Program(model_type=explicit.model_type),
        model_type=explicit.model_type,
        constants={},
        variables=tuple(
            CheckedVar(v.name, None, v.is_bool, v.low, v.high, None)
            for v in explicit.variables
        ),
        modules=(),
        init=None,
        labels={k: ast.BoolLit(True) for k in explicit.labels if k not in builtin},
        rewards=tuple(CheckedRewardStruct(r.name, ()) for r in explicit.rewards),
        system=None,
        file=path,
    )
    return jaxmc.Model(
        checked=checked, path=path, _explicit=explicit, build_time=seconds
    )
