"""A model to check: [`jaxmc.Model`][], made from a PRISM model file
([`jaxmc.load_model`][]) or from PRISM's explicit files
([`jaxmc.import_model`][]), and written back to explicit files
([`jaxmc.export_model`][]).

Explicit files are named the way PRISM's command lines name them:

- `BASE.tra,sta,lab,srew,trew` (any subset), `BASE.all` or `BASE`: the
  separate files. With several reward structures PRISM writes one file per
  structure, numbered from 1 (`BASE1.srew`, `BASE2.srew`, ..., likewise
  `.trew`), each naming its structure in a `# Reward structure "name"`
  comment; import reads them all (or `BASE.srew` when there is one).
- `BASE.pexp`: the combined file.
- `FILE.drn`: Storm's explicit format (`jaxmc.explore.drn`), in and out; a
  file whose header starts with `@` is read as DRN whatever its name.
- `FILE.umb`: the unified Markov binary format of PRISM 4.10 and Storm 2.0
  (`jaxmc.explore.umb`), in and out.
- a trailing `.gz` or `.xz` (`dice.all.gz`, `dice.pexp.xz`): every file is
  compressed (import only).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import lang, semantics
from .errors import SemanticError, UnsupportedError
from .explore import ExplicitModel, build as _build
from .lang import ast
from .numerics.timing import collect as collect_timing
from .props.resolve import api_hints
from .semantics.constants import constant_setting


ConstantsArg = str | Mapping[str, Any] | None


@dataclass(eq=False)
class Model:
    """A PRISM model parsed and checked, with its constants fixed; built into
    an `ExplicitModel` on first use (then cached).

    Create it with [`jaxmc.load_model`][] (or [`jaxmc.import_model`][]).
    """

    checked: semantics.CheckedProgram
    path: str | None = None
    build_options: dict[str, Any] = field(default_factory=dict)
    _explicit: ExplicitModel | None = field(default=None, repr=False)
    build_time: float | None = None
    #: Of `build_time`: seconds spent compiling (JAX tracing, lowering and
    #: backend compilation, e.g. the device explorer's loop).
    build_compile_time: float | None = None
    #: Constants declared by the properties loaded for this model so far
    #: (the names of its constant setting that are not the model's may
    #: belong to any of them).
    _declared_by_properties: set[str] = field(default_factory=set, repr=False)

    @property
    def model_type(self) -> ast.ModelType:
        return self.checked.model_type

    @property
    def constants(self) -> Mapping[str, Any]:
        return self.checked.constants

    @property
    def constant_setting(self) -> Mapping[str, Any]:
        """The constants given to [`jaxmc.load_model`][], names for the
        properties included (they serve the properties files loaded for
        this model)."""
        return self.checked.constant_setting

    def build(self, **options: Any) -> ExplicitModel:
        """Explore the state space (once; later calls return the cached model
        unless different options are given)."""
        if self._explicit is None or (options and options != self.build_options):
            if options:
                self.build_options = dict(options)
            start = time.perf_counter()
            with collect_timing() as stages:
                self._explicit = _build(self.checked, **self.build_options)
            self.build_time = time.perf_counter() - start
            self.build_compile_time = stages.get("compile", 0.0)
        return self._explicit


def load_model(
    path: str | os.PathLike,
    constants: ConstantsArg = None,
    *,
    parameters: tuple[str, ...] = (),
    model_type: str | ast.ModelType | None = None,
    **build_options: Any,
) -> Model:
    """Parse and check a PRISM model file.

    **Arguments:**
    - `path`: a `.pm` (DTMC), `.sm` (CTMC), `.nm` (MDP) or `.prism` file.
    - `constants`: values for undefined constants, either as PRISM's
      `-const` string `"N=3,p=0.2"` or as a mapping. As with PRISM's
      `-const`, one setting serves the model and its properties: names the
      model does not declare are kept for the properties files loaded with
      [`jaxmc.load_properties`][] (and property strings given to
      [`jaxmc.check`][]), which report a name that none of them declares. A
      value for a constant the file defines is an error (as in PRISM).
    - `parameters`: constants to keep symbolic (for gradients).
    - `model_type`: `"dtmc"`, `"ctmc"` or `"mdp"` to read the model as that
      type whatever its keyword says (PRISM's `-dtmc`, `-ctmc`, `-mdp`): a
      DTMC read as an MDP has a choice per enabled command, as a CTMC its
      probabilities are rates.
    - `build_options`: passed to the builder when the model is built
      (`max_states`, `deadlocks="fix"|"error"`, `progress`).

    **Returns:** a [`jaxmc.Model`][]; the state space is built lazily.
    """
    path = os.fspath(path)
    text = lang.read_source(path)
    return load_model_string(
        text,
        constants,
        file=path,
        parameters=parameters,
        model_type=model_type,
        **build_options,
    )


def load_model_string(
    text: str,
    constants: ConstantsArg = None,
    *,
    file: str | None = None,
    parameters: tuple[str, ...] = (),
    model_type: str | ast.ModelType | None = None,
    **build_options: Any,
) -> Model:
    """Like [`jaxmc.load_model`][] but from the model's text."""
    with api_hints():
        setting = constant_setting(constants)
        program = lang.parse_model(text, file=file)
        if model_type is not None:
            program = replace(program, model_type=_forced(model_type))
        checked = semantics.check_program(
            program,
            setting,
            source=text,
            file=file,
            parameters=parameters,
        )
    return Model(checked=checked, path=file, build_options=dict(build_options))


def _forced(model_type: str | ast.ModelType) -> ast.ModelType:
    """The type of `load_model(..., model_type=...)`."""
    allowed = (ast.ModelType.DTMC, ast.ModelType.CTMC, ast.ModelType.MDP)
    try:
        t = ast.ModelType(model_type)
    except ValueError:
        t = None
    if t not in allowed:
        raise SemanticError(
            f"cannot read a model as {model_type!r}",
            hint="model_type is 'dtmc', 'ctmc' or 'mdp'",
        )
    return t


def build(model: Model | ExplicitModel, **options: Any) -> ExplicitModel:
    """The explicit state space of `model` (built on first use, then cached;
    `options` are `jaxmc.explore.build`'s, e.g. `explorer="device"` and
    `devices=N` to explore partitioned over `N` devices)."""
    if isinstance(model, ExplicitModel):
        return model
    return model.build(**options)


# ------------------------------------------------------ PRISM's explicit files


PARTS = ("tra", "sta", "lab", "srew", "trew")
COMPRESSIONS = (".gz", ".xz")


def split_explicit_spec(spec: str) -> tuple[str, list[str], str, bool]:
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


def export_model(
    model: Model | ExplicitModel,
    spec: str,
    *,
    labels: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write the built model as PRISM's explicit files named by `spec`
    (`BASE.tra,sta,...`, `BASE.all`, `BASE` or `BASE.pexp`), as a Graphviz
    graph (`FILE.dot`), as a DRN file (`FILE.drn`) or a UMB archive
    (`FILE.umb`); see `jaxmc.model`. PRISM's options may follow a colon:
    `BASE.all:matlab` (Matlab format), `:rows` (a matrix row per line),
    `:actions=false`, `:headers=false`, `:precision=N`, `:proplabels` (with
    `labels`, extra labels per state in the built model's order, e.g. those
    of a properties file, written after the model's).
    **Returns:** the paths written."""
    from .explore import export_options as eo

    file, options = eo.split_spec(spec)
    opts = eo.parse_options("-exportmodel", spec, eo.MODEL_OPTIONS)
    explicit = build(model)
    binary = opts.format in ("drn", "umb") or file.endswith((".drn", ".umb"))
    if binary and options:
        raise UnsupportedError(
            f"-exportmodel {spec}: options of DRN/UMB exports are not supported",
            hint=f"write -exportmodel {file}",
        )
    if file.endswith(".drn") or opts.format == "drn":
        return [export_drn(explicit, file)]
    if file.endswith(".umb") or opts.format == "umb":
        from .explore.umb import export_umb

        return [export_umb(explicit, file)]
    if file.endswith(".dot") or opts.format == "dot":
        base = file[:-4] if file.endswith(".dot") else file
        return eo.export_parts(explicit, base, ["dot"], opts, labels)
    base, parts, comp, _ = split_explicit_spec(file)
    if comp:
        raise UnsupportedError(
            f"-exportmodel {spec}: compressed export is not supported",
            hint=f"leave out `{comp}`",
        )
    return eo.export_parts(explicit, base, parts, opts, labels)


def is_drn(spec: str) -> bool:
    """Whether `spec` names a DRN file: `FILE.drn` (`.gz`/`.xz` too), or an
    existing file whose first line that is not blank or a `//` comment starts
    with `@` (PRISM's explicit files never do)."""
    comp = next((c for c in COMPRESSIONS if spec.endswith(c)), "")
    if spec[: len(spec) - len(comp)].endswith(".drn"):
        return True
    if comp or not os.path.isfile(spec):
        return False
    with open(spec, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith("//"):
                return line.lstrip().startswith("@")
    return False


def export_drn(model: Model | ExplicitModel, path: str | os.PathLike) -> Path:
    """Write the built model as a DRN file (Storm's explicit format).
    **Returns:** the path written."""
    from .explore.drn import export_drn as _export

    return _export(build(model), path)


def load_drn(path: str | os.PathLike) -> Model:
    """A model read from a DRN file (Storm's explicit format; `.gz`/`.xz`
    too): the same as [`jaxmc.import_model`][] of a `.drn` file."""
    return import_model(os.fspath(path))


def _numbered(base: str, kind: str, comp: str) -> list[str]:
    """PRISM's reward files of one kind: `BASE1.kind`, `BASE2.kind`, ... if
    the first exists, else `BASE.kind` if it exists, else none."""
    found = []
    while os.path.exists(p := f"{base}{len(found) + 1}.{kind}{comp}"):
        found.append(p)
    if not found and os.path.exists(p := f"{base}.{kind}{comp}"):
        found.append(p)
    return found


def _read_explicit(spec: str, model_type: str | None) -> tuple[ExplicitModel, str]:
    """The `ExplicitModel` of the files `spec` names, and the path reported
    as the model's file."""
    from .explore import import_explicit
    from .explore.drn import import_drn
    from .explore.pexp import import_pexp

    if is_drn(spec) or spec.endswith(".umb"):
        if spec.endswith(".umb"):
            from .explore.umb import import_umb

            explicit = import_umb(spec)
        else:
            explicit = import_drn(spec)
        if model_type is not None and model_type.lower() != explicit.model_type.value:
            raise SemanticError(
                f"{spec}: the file holds a {explicit.model_type.value.upper()}, "
                f"not a {model_type.upper()}",
                hint="leave out the model type switch: DRN files name their type",
            )
        return explicit, spec
    base, parts, comp, every = split_explicit_spec(spec)
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


def import_model(spec: str, model_type: str | None = None) -> Model:
    """A model read from PRISM's explicit files named by `spec`
    (`BASE.tra[,sta,lab,srew,trew]`, `BASE.all`, `BASE` or `BASE.pexp`,
    optionally `.gz`/`.xz`; see `jaxmc.model`) or from a DRN file
    (`FILE.drn`: Storm's explicit format, labels, reward models and, where
    the file has them, state valuations) or a UMB archive (`FILE.umb`).

    `model_type` (`"dtmc"`, `"ctmc"`, `"mdp"`) overrides the `.tra` header.
    The model's checked program declares only what properties can refer to:
    the `.sta` variables, the `.lab` labels and the reward structures (by
    name and number; a property naming one that is not there is an error).
    """
    from .semantics.program import CheckedProgram, CheckedRewardStruct, CheckedVar

    t0 = time.perf_counter()
    explicit, path = _read_explicit(spec, model_type)
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
    return Model(checked=checked, path=path, _explicit=explicit, build_time=seconds)
