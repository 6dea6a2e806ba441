"""Storm's explicit format (DRN, "direct encoding"): read into an
`ExplicitModel` (`import_drn`) and written from one (`format_drn`,
`export_drn`), for DTMCs, CTMCs and MDPs with double or rational values.

The format, as Storm writes (`DirectEncodingExporter`) and reads it
(`DirectEncodingParser`)::

    // comment lines start with //
    @type: MDP                      DTMC, CTMC or MDP (also MA, POMDP: refused)
    @value_type: double             or rational (1/3); parametric and
    @parameters                     interval models are refused
                                    (one line: the parameters; empty here)
    @reward_models
    steps energy                    names, in the order of the [..] lists
    @nr_states
    4
    @nr_choices
    5
    @model
    state 0 [0, 1.5] init goal      state index (0, 1, ... in order), for a
    //[s=0	& b	& !c]                CTMC the exit rate `!2.5` next, then
        action dash [1, 0]          the state rewards, then the labels
            1 : 0.8                 (quoted if they contain whitespace);
            2 : 0.2                 Storm writes the valuation as a comment;
        action corridor [1, 0]      each choice: its action (`__NOLABEL__`
            3 : 1                   for none) and action rewards, then its
                                    transitions `target : value`

Values of a CTMC's transitions are rates. A state reward is a reward per
step (DTMC, MDP) or per time unit (CTMC); an action reward is earned when
the choice is taken (CTMC: when the state is left). jaxmc's transition
rewards (per entry) are written as the expected reward of the choice
(`sum_t P(t) r(t)`, what Storm makes of PRISM's transition rewards), and an
action reward read is given to each entry of its choice; expectations are
unchanged. Imported models are checked as built ones are: probabilities
sum to one (within PRISM's tolerance), an exit rate is the sum of its rates,
targets and state indices are in range; errors name `file:line`. States
without choices get a self-loop and the `deadlock` label, as PRISM does.
"""

from __future__ import annotations

import io
import math
import re
from fractions import Fraction
from typing import IO

import numpy as np

from ..errors import ExplorationError, UnsupportedError
from ..lang.ast import ModelType, Span
from .drn_build import assemble
from .drn_format import (
    NOLABEL,
    TYPES,
    export_drn as export_drn,
    format_drn as format_drn,
)
from .model import ExplicitModel
from .textfile import PathLike, read_text


_OTHER_TYPES = ("MA", "MARKOV AUTOMATON", "POMDP", "S2PG", "SMG")
_LABEL = re.compile(r'"([^"]+?)"(?=\s|$|")|([^\s"]+)')


class _Parser:
    """One pass over the lines of a DRN file."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.lines = text.splitlines()
        self.i = 0  # index of the next line

    # ------------------------------------------------------------ errors

    def error(self, msg: str, line: int | None = None, hint: str | None = None):
        line = self.i if line is None else line
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        col = len(text) - len(text.lstrip()) + 1
        span = Span(self.file, line, col) if line > 0 else None
        where = "" if span else f"{self.file}: "
        return ExplorationError(where + msg, span, source=self.text, hint=hint)

    def unsupported(self, msg: str, hint: str):
        span = Span(self.file, self.i, 1)
        return UnsupportedError(msg, span, source=self.text, hint=hint)

    def next_line(self) -> str:
        if self.i >= len(self.lines):
            raise self.error("unexpected end of file in the header", line=0)
        self.i += 1
        return self.lines[self.i - 1]

    def optional_line(self) -> str:
        """The next line, unless it is the next `@` section (or the end)."""
        if self.i >= len(self.lines) or self.lines[self.i].startswith("@"):
            return ""
        return self.next_line()

    # ------------------------------------------------------------ values

    def number(self, s: str, what: str) -> float:
        s = s.strip()
        if s.startswith("$"):
            if s[1:] not in self.placeholders:
                raise self.error(f"unknown placeholder `{s}`")
            return self.placeholders[s[1:]]
        try:
            v = float(s)
        except ValueError:
            try:
                v = float(Fraction(s))
            except (ValueError, ZeroDivisionError):
                raise self.error(
                    f"{what} `{s}` is not a number",
                    hint="values are decimals (0.25, 1e-3) or fractions (1/4)",
                ) from None
        if not math.isfinite(v):
            raise self.error(f"{what} `{s}` is not finite")
        return v

    # ------------------------------------------------------------ header

    def header(self) -> None:
        self.model_type: ModelType | None = None
        self.n = self.nr_choices = 0
        self.reward_names: list[str] = []
        self.placeholders: dict[str, float] = {}
        while self.i < len(self.lines):
            line = self.next_line().strip()
            if not line or line.startswith("//"):
                continue
            if line.startswith("@type:"):
                name = line[6:].strip()
                if name.upper() in _OTHER_TYPES:
                    raise self.unsupported(
                        f"{name} models are not supported",
                        "jaxmc checks DTMCs, CTMCs and MDPs",
                    )
                if name.upper() not in TYPES:
                    raise self.error(f"unknown model type `{name}`")
                self.model_type = TYPES[name.upper()]
            elif line.startswith("@value_type:"):
                kind = line[12:].strip()
                if kind not in ("double", "rational"):
                    raise self.unsupported(
                        f"DRN files with {kind} values are not supported",
                        "jaxmc reads double and rational values; instantiate "
                        "the parameters (or intervals) before exporting",
                    )
            elif line == "@parameters":
                params = self.optional_line().split()
                if params:
                    raise self.unsupported(
                        "parametric DRN files (with rational functions) are not "
                        f"supported (parameters: {' '.join(params)})",
                        "instantiate the parameters in Storm before exporting, "
                        "or check the PRISM model with jaxmc's parametric path "
                        "(jaxmc.solve(..., params=...), jaxmc.parametric)",
                    )
            elif line == "@placeholders":
                while self.i < len(self.lines) and not self.lines[self.i].startswith(
                    "@"
                ):
                    entry = self.next_line().strip()
                    name, colon, value = entry.partition(":")
                    if not colon or not name.strip().startswith("$"):
                        raise self.error("expected `$name : value`")
                    self.placeholders[name.strip()[1:]] = self.number(value, "value")
            elif line == "@reward_models":
                self.reward_names = self.optional_line().split()
            elif line in ("@nr_states", "@nr_choices"):
                text = self.next_line().strip()
                if not text.isdigit():
                    raise self.error(f"{line} is followed by `{text}`, not a count")
                if line == "@nr_states":
                    self.n = int(text)
                else:
                    self.nr_choices = int(text)
            elif line == "@model":
                if self.model_type is None:
                    raise self.error("@model before @type", hint="start with @type")
                if self.n == 0:
                    raise self.error("@model before @nr_states (or no states)")
                return
            else:
                raise self.error(
                    f"unexpected line `{line}` in the header",
                    hint="the header has @type, @value_type, @parameters, "
                    "@placeholders, @reward_models, @nr_states, @nr_choices, "
                    "then @model",
                )
        raise self.error("no @model section", line=0, hint="is this a DRN file?")

    # ------------------------------------------------------------ body

    def body(self) -> None:
        """One pass over the lines after `@model`: transitions (most lines)
        are kept as text and converted in bulk, as are rewards and rates."""
        self.first = self.i  # the lines before are the header
        trans: list[str] = []
        add = trans.append
        heads: list[str] = []
        self.state_lines: list[int] = []
        self.valuations: list[str | None] = []
        self.choice_state: list[int] = []
        self.choice_lines: list[int] = []
        self.choice_start: list[int] = []  # its first transition
        action_texts: list[str] = []
        state, has_choice = -1, False
        for number, raw in enumerate(self.lines[self.i :], self.i + 1):
            line = raw.strip()
            if has_choice and line[:1].isdigit():
                add(line)
                continue
            if not line:
                continue
            self.i = number
            if line.startswith("//"):
                if line.startswith("//[") and state >= 0 and not has_choice:
                    self.valuations[state] = line[2:]
            elif line.startswith("state "):
                state += 1
                has_choice = False
                heads.append(line[6:])
                self.state_lines.append(number)
                self.valuations.append(None)
            elif state < 0:
                raise self.error("a transition or action before the first state")
            elif line.startswith("action ") or line == "action":
                self.new_choice(state, len(trans))
                action_texts.append(line[7:].strip())
                has_choice = True
            elif line[:1].isdigit() and ":" in line:  # an implicit single choice
                self.new_choice(state, len(trans))
                action_texts.append("")
                has_choice = True
                add(line)
            else:
                raise self.error(
                    f"expected `state`, `action` or `target : value`, got `{line}`"
                )
        if state + 1 != self.n:
            raise self.error(f"{state + 1} states, but @nr_states is {self.n}", line=0)
        self.states(heads)
        self.choices(action_texts)
        self.transitions(trans)

    def new_choice(self, state: int, start: int) -> None:
        cs = self.choice_state
        if cs and cs[-1] == state and self.model_type != ModelType.MDP:
            raise self.error(
                f"state {state} of a {self.model_type.value.upper()} has a "
                "second choice",
                hint="only MDPs have several actions per state",
            )
        cs.append(state)
        self.choice_lines.append(self.i)
        self.choice_start.append(start)

    def states(self, heads: list[str]) -> None:
        """Check the state lines' numbers; read exit rates, rewards, labels."""
        n, ctmc = self.n, self.model_type == ModelType.CTMC
        ids = [h.partition(" ")[0] for h in heads]
        if ids != [str(i) for i in range(n)]:
            s = next(i for i, x in enumerate(ids) if x != str(i))
            self.i = self.state_lines[s]
            raise self.error(
                f"expected state {s}, got `state {ids[s]}`",
                hint="states are numbered 0, 1, 2, ... in order",
            )
        rates, rewards = [], []
        self.labels: dict[str, list[int]] = {}
        for s, head in enumerate(heads):
            rest = head[len(ids[s]) :].strip()
            if ctmc:
                if not rest.startswith("!"):
                    self.i = self.state_lines[s]
                    raise self.error(f"exit rate `!rate` missing for state {s}")
                rate, _, rest = rest[1:].partition(" ")
                rates.append(rate)
                rest = rest.lstrip()
            rew, rest = self.bracket(rest, self.state_lines[s])
            rewards.append(rew)
            if rest:
                for m in _LABEL.finditer(rest):
                    self.labels.setdefault(m.group(1) or m.group(2), []).append(s)
        self.exit = self.numbers(rates, self.state_lines, "exit rate") if ctmc else None
        self.state_rew = self.reward_matrix(rewards, self.state_lines)

    def choices(self, texts: list[str]) -> None:
        """The choices' actions and rewards."""
        self.actions: list[str | None] = []
        rewards = []
        for c, text in enumerate(texts):
            name, _, rest = text.partition(" ")
            self.actions.append(None if not name or name == NOLABEL else name)
            rewards.append(self.bracket(rest.strip(), self.choice_lines[c])[0])
        self.action_rew = self.reward_matrix(rewards, self.choice_lines)

    def bracket(self, text: str, line: int) -> tuple[str | None, str]:
        """A leading `[r1, r2, ...]` of `text` (its inside) and the rest."""
        if not text.startswith("["):
            return None, text
        end = text.find("]")
        if end < 0:
            self.i = line
            raise self.error("`]` missing after the rewards")
        return text[1:end], text[end + 1 :].strip()

    def reward_matrix(self, texts: list[str | None], lines: list[int]):
        """`[len(texts), k]` rewards of the bracket texts (None: none given)."""
        k = max((t.count(",") + 1 for t in texts if t is not None), default=0)
        if k == 0:
            return np.zeros((len(texts), 0))
        full = [t if t is not None else ",".join("0" * k) for t in texts]
        if all(t.count(",") == k - 1 for t in full):
            flat = ",".join(full).split(",")
            try:
                out = np.array(flat, dtype=np.float64).reshape(len(texts), k)
                if np.all(np.isfinite(out)):
                    return out
            except ValueError:
                pass
        out = np.zeros((len(texts), k))
        for i, t in enumerate(full):
            self.i = lines[i]
            for j, x in enumerate(t.split(",")):
                out[i, j] = self.number(x, "reward")
        return out

    def numbers(self, texts: list[str], lines, what: str) -> np.ndarray:
        """The values of `texts` in bulk; one by one (with the line of the
        first bad one) where that fails."""
        try:
            out = np.array(texts, dtype=np.float64) if texts else np.zeros(0)
            if np.all(np.isfinite(out)):
                return out
        except ValueError:
            pass
        out = np.zeros(len(texts))
        for j, text in enumerate(texts):
            try:  # the line is looked up only for an error
                out[j] = self.number(text, what)
            except ExplorationError:
                self.i = lines(j) if callable(lines) else lines[j]
                out[j] = self.number(text, what)
        return out

    def transitions(self, trans: list[str]) -> None:
        """Targets, values and the choice of each transition line."""
        n, ctmc = self.n, self.model_type == ModelType.CTMC
        what = "rate" if ctmc else "probability"
        tokens = "\n".join(trans).replace(":", " : ").split()
        if len(tokens) == 3 * len(trans) and tokens[1::3] == [":"] * len(trans):
            targets, values = tokens[0::3], tokens[2::3]
        else:
            targets, values = [], []
            for j, line in enumerate(trans):
                target, colon, value = line.partition(":")
                if not colon or len(value.split()) != 1:
                    self.i = self.transition_line(j)
                    raise self.error(f"expected `target : value`, got `{line}`")
                targets.append(target)
                values.append(value)
        try:
            self.cols = np.array(targets, dtype=np.int64) if trans else np.zeros(0, int)
        except (ValueError, OverflowError):
            j = next(j for j, t in enumerate(targets) if not t.strip().isdigit())
            self.i = self.transition_line(j)
            raise self.error(f"target `{targets[j].strip()}` is not a state") from None
        self.vals = self.numbers(values, self.transition_line, what)
        starts = np.asarray(self.choice_start + [len(trans)], dtype=np.int64)
        m = len(self.choice_state)
        self.rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(starts))
        self.choice_state = np.asarray(self.choice_state, dtype=np.int64)
        bad = self.cols >= n
        if bad.any():
            j = int(np.argmax(bad))
            msg = f"target state {self.cols[j]} out of range 0..{n - 1}"
            raise self.error(msg, line=self.transition_line(j))
        bad = self.vals < 0
        if bad.any():
            j = int(np.argmax(bad))
            msg = f"negative {what} {float(self.vals[j])!r}"
            raise self.error(msg, line=self.transition_line(j))

    def transition_line(self, j: int) -> int:
        """The line number of transition `j` (counted again: errors only)."""
        count = -1
        for number, raw in enumerate(self.lines[self.first :], self.first + 1):
            if raw.strip()[:1].isdigit():  # as `body` reads them
                count += 1
                if count == j:
                    return number
        return 0


def import_drn(src: PathLike | IO[str]) -> ExplicitModel:
    """Read a model from a DRN file (path, `.gz`/`.xz` path or text stream).

    **Returns:** an `ExplicitModel` with the file's state numbering, its
    labels (`init` marks the initial states), reward models (by the names of
    `@reward_models`), action labels and, where Storm wrote the state
    valuations as comments, the state variables (else one variable
    `x = state index`).
    """
    if isinstance(src, io.TextIOBase) or hasattr(src, "read"):
        text, file = src.read(), getattr(src, "name", "<stream>")  # type: ignore[union-attr]
    else:
        text, file = read_text(src), str(src)  # type: ignore[arg-type]
    p = _Parser(text, file)
    p.header()
    p.body()
    return assemble(p)
