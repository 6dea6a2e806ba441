"""Grammar-aware mutants of PRISM models and properties, and a worker process
that runs them through jaxmc's public path with a time limit.

- `seeds()`: (name, model text, properties text, suffix) of the example
  models and of small generated models;
- `mutants(n, seed)`: `n` mutants, each one mutation of the model or of its
  properties, made on the token stream of jaxmc's lark lexer (delete,
  duplicate or swap tokens, replace a name or a number, drop a `;`, change
  an operator, insert a keyword, empty a variable's range, nest deeply);
- `Runner`: one spawned worker process that runs mutants, restarted when a
  case passes its time limit (reported as a hang, never waited on).
"""

from __future__ import annotations

import multiprocessing
import random
import re
import traceback
from dataclasses import dataclass
from pathlib import Path


EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models"

#: Replacements for a number token.
NUMBERS = ("0", "-1", "2", "1099511627776", "1e308", "1e-320", "0.0",
           "99999999999999999999999999999999", "1/0", "0.5")  # fmt: skip
#: Operators, each may become another.
OPERATORS = ("+", "-", "*", "/", "<", "<=", ">", ">=", "=", "!=", "&", "|",
             "=>", "<=>", "!", "?", ":", "'", "..", "->")  # fmt: skip
#: Keywords to insert (model and property languages).
KEYWORDS = ("module", "endmodule", "init", "const", "int", "double", "bool",
            "formula", "label", "rewards", "endrewards", "dtmc", "mdp", "ctmc",
            "true", "false", "min", "max", "P", "R", "S", "F", "G", "U", "X",
            "C", "I", "filter", "func", "system", "endsystem", "rate", "prob",
            "global", "floor", "pow", "log", "mod")  # fmt: skip
UNKNOWN_NAME = "zz_unknown"


def _generated(rng: random.Random, i: int) -> tuple[str, str, str, str]:
    """A small random model of each type with labels, rewards and formulas."""
    kind = ("dtmc", "ctmc", "mdp")[i % 3]
    n = rng.randint(2, 6)
    p = round(rng.uniform(0.1, 0.9), 2)
    rate = "r" if kind == "ctmc" else "p"
    other = "" if kind == "ctmc" else "1-"
    model = f"""{kind}

const int N = {n};
const double {rate} = {p if kind != "ctmc" else rng.randint(1, 5)};
formula done = x=N;

module walker
    x : [0..N] init 0;
    b : bool init false;
    [go] x<N -> {rate} : (x'=x+1) + {other}{rate} : (x'=max(0, x-1));
    [stay] x<N & !b -> 1 : (b'=true);
    [] done -> 1 : (x'=N);
endmodule

module other
    y : [0..2] init 0;
    [go] y<2 -> (y'=y+1);
    [go] y=2 -> (y'=0);
endmodule

label "goal" = done;
rewards "steps"
    [go] true : 1;
    x>0 : x/2;
endrewards
"""
    op = "Pmax" if kind == "mdp" else "P"
    rop = 'R{"steps"}max' if kind == "mdp" else 'R{"steps"}'
    bound = "<=3" if kind != "ctmc" else "<=1.5"
    props = (
        f'"reach": {op}=? [ F "goal" ];\n'
        f"{op}=? [ F{bound} x>=N-1 ];\n"
        f'{rop}=? [ F "goal" ];\n'
        f"{op}>0.5 [ !b U done ];\n"
    )
    suffix = {"dtmc": ".pm", "ctmc": ".sm", "mdp": ".nm"}[kind]
    return f"generated{i}", model, props, suffix


def seeds(n_generated: int = 6, seed: int = 0) -> list[tuple[str, str, str, str]]:
    out = []
    for model in sorted(EXAMPLES.glob("*.[psn]m")):
        props = Path(str(model) + ".props")
        text = props.read_text() if props.is_file() else ""
        out.append((model.name, model.read_text(), text, model.suffix))
    rng = random.Random(seed)
    out += [_generated(rng, i) for i in range(n_generated)]
    return out


@dataclass(frozen=True)
class Mutant:
    name: str  # seed and mutation, for the report
    model: str
    props: str
    suffix: str


def _tokens(text: str, grammar: str) -> list:
    from jaxmc.lang.grammar import get_parser

    try:
        return list(get_parser(grammar).lex(text))
    except Exception:  # noqa: BLE001 - a seed the basic lexer cannot split
        return []


def _splice(text: str, tok, new: str) -> str:
    return text[: tok.start_pos] + new + text[tok.end_pos :]


def mutate(text: str, grammar: str, rng: random.Random) -> tuple[str, str]:
    """One grammar-aware mutation of `text`: (new text, description)."""
    toks = _tokens(text, grammar)
    if not toks:
        return text + " )", "append )"
    names = sorted({t.value for t in toks if t.type == "NAME"}) or [UNKNOWN_NAME]
    op = rng.choice(
        ("delete", "duplicate", "swap", "name", "number", "semicolon",
         "operator", "keyword", "range", "nest", "chain")
    )  # fmt: skip
    tok = rng.choice(toks)
    if op == "delete":
        return _splice(text, tok, ""), f"delete {tok.value!r}"
    if op == "duplicate":
        return _splice(
            text, tok, f"{tok.value} {tok.value}"
        ), f"duplicate {tok.value!r}"
    if op == "swap":
        i = toks.index(tok)
        if i + 1 < len(toks):
            a, b = toks[i], toks[i + 1]
            new = text[: a.start_pos] + b.value + text[a.end_pos : b.start_pos]
            return new + a.value + text[b.end_pos :], f"swap {a.value!r} {b.value!r}"
    candidates = {
        "name": [t for t in toks if t.type == "NAME"],
        "number": [t for t in toks if t.type == "NUMBER"],
        "semicolon": [t for t in toks if t.value == ";"],
        "operator": [t for t in toks if t.value in OPERATORS],
        "nest": [t for t in toks if t.type in ("NUMBER", "NAME")],
        "chain": [t for t in toks if t.type in ("NUMBER", "NAME")],
    }.get(op, [])
    if candidates:
        tok = rng.choice(candidates)
    if op == "name" and candidates:
        new = rng.choice([n for n in names if n != tok.value] + [UNKNOWN_NAME])
        return _splice(text, tok, new), f"name {tok.value!r} -> {new!r}"
    if op == "number" and candidates:
        new = rng.choice([n for n in NUMBERS if n != tok.value])
        return _splice(text, tok, new), f"number {tok.value!r} -> {new!r}"
    if op == "semicolon" and candidates:
        return _splice(text, tok, ""), f"drop ';' at {tok.line}:{tok.column}"
    if op == "operator" and candidates:
        new = rng.choice([o for o in OPERATORS if o != tok.value])
        return _splice(text, tok, new), f"operator {tok.value!r} -> {new!r}"
    if op == "range":
        m = list(re.finditer(r"\[\s*(\w+)\s*\.\.\s*(\w+)\s*\]", text))
        if m:
            r = rng.choice(m)
            new = rng.choice((f"[{r.group(2)}..{r.group(1)}]", "[5..2]", "[0..-1]"))
            return text[: r.start()] + new + text[r.end() :], f"range -> {new}"
    if op == "nest" and candidates:
        depth = rng.choice((50, 400, 3000))
        new = "(" * depth + tok.value + ")" * depth
        return _splice(text, tok, new), f"nest {tok.value!r} in {depth} parentheses"
    if op == "chain" and candidates:
        length = rng.choice((100, 2000, 20000))
        new = "+".join([tok.value] * length)
        return _splice(text, tok, new), f"chain {tok.value!r} x{length}"
    kw = rng.choice(KEYWORDS)
    return _splice(
        text, tok, f"{kw} {tok.value}"
    ), f"insert {kw!r} before {tok.value!r}"


def mutants(n: int, seed: int = 1234) -> list[Mutant]:
    """`n` mutants of `seeds()`, deterministic in `seed`: each mutates the
    model (2 of 3) or the properties, once or (1 in 4) twice."""
    rng = random.Random(seed)
    pool = seeds(seed=seed)
    out = []
    for i in range(n):
        name, model, props, suffix = pool[i % len(pool)]
        what = []
        for _ in range(2 if rng.random() < 0.25 else 1):
            if rng.random() < 2 / 3 or not props:
                model, d = mutate(model, "prism", rng)
                what.append(f"model: {d}")
            else:
                props, d = mutate(props, "props", rng)
                what.append(f"props: {d}")
        out.append(Mutant(f"{i}:{name}: " + "; ".join(what), model, props, suffix))
    return out


# --------------------------------------------------------------- running

#: Most states a mutant may build (the mutants are small models; a mutated
#: bound could ask for 2^40 states).
MAX_STATES = 2000
#: Properties checked per mutant.
MAX_PROPERTIES = 2


def run_api(m: Mutant) -> dict:
    """Load, build and check `m` through the public API; the outcome as a
    dict: {"outcome": "ok"}, {"outcome": "error", "type", "located",
    "message"} for a `JaxmcError`, or {"outcome": "crash", "type",
    "traceback"} for anything else."""
    import jaxmc

    try:
        model = jaxmc.load_model_string(m.model, file="mutant" + m.suffix)
        jaxmc.build(model, max_states=MAX_STATES)
        if m.props.strip():
            props = jaxmc.parse_properties(m.props, model, file="mutant.props")
            for i in range(min(len(props), MAX_PROPERTIES)):
                jaxmc.check(model, i, properties=props, max_iters=2000)
    except jaxmc.JaxmcError as e:
        span = e.span
        located = span is not None and span.line >= 1 and span.column >= 1
        return {"outcome": "error", "type": type(e).__name__, "located": located,
                "message": str(e)[:400]}  # fmt: skip
    except BaseException as e:  # noqa: BLE001 - what the test is looking for
        return {"outcome": "crash", "type": type(e).__name__,
                "traceback": traceback.format_exc(limit=-4)[-1500:]}  # fmt: skip
    return {"outcome": "ok"}


def run_cli(m: Mutant, folder: str, raw: bytes | None = None) -> dict:
    """Write `m` into `folder` and run `jaxmc.cli.main([model, props])` in
    this process: {"code", "output"} (stdout and stderr), or a crash."""
    import contextlib
    import io

    from jaxmc import cli

    model = Path(folder) / ("mutant" + m.suffix)
    props = Path(folder) / "mutant.props"
    model.write_bytes(raw if raw is not None else m.model.encode())
    props.write_text(m.props)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = cli.main([str(model), str(props), "--quiet", "-maxiters", "2000"])
    except SystemExit as e:
        code = e.code
    except BaseException as e:  # noqa: BLE001 - the CLI must not raise
        return {"outcome": "crash", "type": type(e).__name__,
                "traceback": traceback.format_exc(limit=-4)[-1500:]}  # fmt: skip
    return {"outcome": "cli", "code": code, "output": out.getvalue()[-2000:]}


def _worker(conn) -> None:
    import os

    os.environ.setdefault("JAXMC_CACHE_DIR", "")
    import jax

    jax.config.update("jax_enable_x64", True)
    while True:
        job = conn.recv()
        if job is None:
            return
        kind, args = job
        conn.send(run_api(*args) if kind == "api" else run_cli(*args))


class Runner:
    """A worker process running mutants one at a time; a mutant that takes
    longer than `timeout` seconds is reported as a hang and the worker is
    replaced."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._ctx = multiprocessing.get_context("spawn")
        self._proc = None
        self._conn = None

    def _start(self) -> None:
        self._conn, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker, args=(child,), daemon=True)
        self._proc.start()

    def run(self, kind: str, *args) -> dict:
        if self._proc is None or not self._proc.is_alive():
            self._start()
        self._conn.send((kind, args))
        # the first job also waits for the worker to import jax
        if self._conn.poll(self.timeout):
            try:
                return self._conn.recv()
            except (EOFError, OSError):  # the worker died mid-answer
                pass
        died = not self._proc.is_alive()
        self.close()
        if died:
            return {"outcome": "crash", "type": "worker died", "traceback": ""}
        return {"outcome": "hang", "type": f"no answer within {self.timeout} s"}

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                try:
                    self._conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
                self._proc.join(1)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
        self._proc = self._conn = None
