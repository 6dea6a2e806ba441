"""PRISM's combined explicit model file (`.pexp`): the sections of the
`.tra`, `.sta`, `.lab`, `.srew` and `.trew` files in one file, each opened by
its comment line (`# Transitions (DTMC)`, `# States`, `# Labels`,
`# Reward structure "name"` then `# State rewards` or `# Transition
rewards`), separated by blank lines. Read with `import_pexp`, written with
`format_pexp`; `.gz` and `.xz` files are decompressed on the fly."""

from __future__ import annotations

import io
import re

from ..errors import ExplorationError, UnsupportedError
from ..lang.ast import ModelType
from .explicit_import import import_explicit
from .formats import format_lab, format_srew, format_sta, format_tra, format_trew
from .model import ExplicitModel
from .reorder import lexicographic
from .textfile import PathLike, read_text


_SECTION = re.compile(
    r"#\s*(Transitions|States|Labels|Observations|Reward structure)\b"
)


def _stream(text: str, name: str) -> io.StringIO:
    s = io.StringIO(text)
    s.name = name
    return s


def import_pexp(
    path: PathLike, *, model_type: ModelType | str | None = None
) -> ExplicitModel:
    """Read a model from a `.pexp` file (optionally `.gz`/`.xz`-compressed)."""
    text = read_text(path)
    name = str(path)
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _SECTION.match(line.strip())
        if m:
            sections.append((m.group(1), [line]))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise ExplorationError(
                f"{name}: expected a section such as `# Transitions` first"
            )
    parts: dict[str, str] = {}
    rewards: list[dict[str, str | None]] = []
    for kind, lines in sections:
        body = "\n".join(lines) + "\n"
        if kind == "Observations":
            raise UnsupportedError(
                f"{name}: partially observable models (POMDPs) are not supported"
            )
        if kind != "Reward structure":
            if kind in parts:
                raise ExplorationError(f"{name}: two `# {kind}` sections")
            parts[kind] = body
            continue
        header = lines[0].strip()
        which = (
            "trew"
            if any(re.match(r"#\s*Transition rewards", x.strip()) for x in lines)
            else "srew"
        )
        # One structure's state and transition rewards are consecutive sections
        # with the same header.
        if rewards and rewards[-1]["header"] == header and rewards[-1][which] is None:
            rewards[-1][which] = body
        else:
            rewards.append({"header": header, "srew": None, "trew": None, which: body})
    if "Transitions" not in parts:
        raise ExplorationError(f"{name}: no `# Transitions` section")
    srews = [
        _stream(r["srew"], f"{name} (state rewards {i + 1})") if r["srew"] else None
        for i, r in enumerate(rewards)
    ]
    trews = [
        _stream(r["trew"], f"{name} (transition rewards {i + 1})")
        if r["trew"]
        else None
        for i, r in enumerate(rewards)
    ]
    return import_explicit(
        _stream(parts["Transitions"], f"{name} (transitions)"),
        _stream(parts["States"], f"{name} (states)") if "States" in parts else None,
        _stream(parts["Labels"], f"{name} (labels)") if "Labels" in parts else None,
        srews,
        trews,
        model_type=model_type,
    )


def format_pexp(
    model: ExplicitModel,
    *,
    actions: bool = True,
    precision: int | None = None,
    label_names=None,
) -> str:
    """The `.pexp` text of `model`: transitions, states, labels, then each
    reward structure's state and transition rewards (states in PRISM's
    order, as `export_explicit` writes them; `actions`, `precision` and
    `label_names` as for `format_tra` and `format_lab`)."""
    model = lexicographic(model)
    blocks = [
        format_tra(model, actions=actions, precision=precision),
        format_sta(model),
        format_lab(model, label_names),
    ]
    for i in range(len(model.rewards)):
        blocks += [
            format_srew(model, i, precision=precision),
            format_trew(model, i, precision=precision),
        ]
    return "\n".join(b if b.endswith("\n") else b + "\n" for b in blocks)
