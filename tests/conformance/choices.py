"""Exported MDP files compared up to the order of each state's choices.

PRISM's engines order the choices of a state differently (its own test
scripts skip the comparison across engines for that; jaxmc orders them as
its commands come), so the suite compares an MDP's `.tra`/`.trew` (plain and
rows), Matlab `S<c>`/`C<r><c>` matrices and `.dot` graphs with each state's
choices sorted and renumbered. Other files are compared as they are.
"""

from __future__ import annotations

import re


def canonical_choices(name: str, data: bytes) -> bytes:
    """`data` (the file `name`) with each state's choices in a canonical order."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data
    if name.endswith(".dot"):
        out = _dot(text)
    elif name.endswith(".pexp"):  # sections separated by blank lines
        out = "\n".join(_plain(b + "\n").rstrip("\n") for b in text.split("\n\n"))
        out = out.rstrip("\n") + "\n"
    elif _MATLAB_HEAD.match(text):
        out = _matlab(text)
    else:
        out = _plain(text)
    return out.encode()


def _plain(text: str) -> str:
    """Plain (`s c t v [a]` after `n c nnz`) or rows (`s v:t ... [a]`)."""
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#")]
    first = lines[heads[0]].split() if heads else []
    if len(first) != 3 or not all(x.isdigit() for x in first):
        return text
    body = [lines[i] for i in heads[1:]]
    out = lines[: heads[0] + 1]
    if all(len(t.split()) >= 4 and ":" not in t for t in body):
        choices: dict[str, dict[str, list[tuple[str, ...]]]] = {}
        for t in (b.split() for b in body):
            choices.setdefault(t[0], {}).setdefault(t[1], []).append(tuple(t[2:]))
        for state in sorted(choices, key=int):
            canon = sorted(sorted(entries) for entries in choices[state].values())
            for c, entries in enumerate(canon):
                out += [" ".join((state, str(c)) + e) for e in entries]
        return "\n".join(out) + "\n"
    rows: dict[str, list[str]] = {}
    for b in body:
        rows.setdefault(b.split(" ", 1)[0], []).append(b)
    for state in sorted(rows, key=lambda s: int(s) if s.isdigit() else -1):
        out += sorted(rows[state])
    return "\n".join(out) + "\n"


_MATLAB_HEAD = re.compile(r"^(\w+) = sparse\((\d+),(\d+)\);$", re.M)
_MATLAB_ENTRY = re.compile(r"^(\w+)\((\d+),(\d+)\)=(.*);$")


def _matlab(text: str) -> str:
    """`S1 = sparse(n,n); S2 ...` then `S<c>(s,t)=v;` (one matrix per choice)."""
    heads = _MATLAB_HEAD.findall(text)
    if not heads or heads[0][1] != heads[0][2] or not heads[0][0].endswith("1"):
        return text
    prefix = heads[0][0][:-1]
    names = {f"{prefix}{c}" for c in range(1, len(heads) + 1)}
    choices: dict[int, dict[str, list[tuple[str, str]]]] = {}
    rest = []
    for line in text.splitlines():
        m = _MATLAB_ENTRY.match(line)
        if m and m.group(1) in names:
            s, t, v = int(m.group(2)), m.group(3), m.group(4)
            choices.setdefault(s, {}).setdefault(m.group(1), []).append((t, v))
        elif not _MATLAB_HEAD.match(line):
            rest.append(line)
    out = [f"{n} = sparse({a},{b});" for n, a, b in heads]
    for s in sorted(choices):
        for c, entries in enumerate(sorted(sorted(e) for e in choices[s].values())):
            out += [f"{prefix}{c + 1}({s},{t})={v};" for t, v in entries]
    return "\n".join(out + rest) + "\n"


_DOT_CHOICE = re.compile(r'^(\d+) -> n\d+_(\d+)  \[label="\d+(:?.*?)",(.*)$')
_DOT_POINT = re.compile(r"^n(\d+)_(\d+) \[ shape=point")
_DOT_ENTRY = re.compile(r"^n(\d+)_(\d+) -> (\d+) (.*)$")


def _dot(text: str) -> str:
    """An MDP's graph: the choice edges, points and entries of each state."""
    lines = text.splitlines()
    if not any(_DOT_CHOICE.match(ln) for ln in lines):
        return text
    out: list[str] = []
    state: list[tuple[str, list[str]]] = []
    current = ""

    def flush() -> None:
        for j, (tail, entries) in enumerate(sorted(state)):
            out.append(f'{current} -> n{current}_{j}  [label="{j}{tail}')
            out.append(f'n{current}_{j} [ shape=point,width=0.1,height=0.1,label="" ];')
            out.extend(f"n{current}_{j} -> {e}" for e in entries)
        state.clear()

    for ln in lines:
        m = _DOT_CHOICE.match(ln)
        if m:
            current = m.group(1)
            state.append((f'{m.group(3)}",{m.group(4)}', []))
        elif _DOT_POINT.match(ln):
            continue
        elif (e := _DOT_ENTRY.match(ln)) and state:
            state[-1][1].append(f"{e.group(3)} {e.group(4)}")
        else:
            flush()
            out.append(ln)
    flush()
    return "\n".join(out) + "\n"
