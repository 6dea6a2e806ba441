"""The import graph of the `jaxmc` package, read from the source with `ast`
(nothing is imported): which module imports which, at module level or
inside a function, for the structure checks in `test_structure.py`."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[2] / "jaxmc"


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted ("jaxmc.props.check")
    target: str  # imported module, dotted
    line: int
    top_level: bool  # at module level (not inside a function)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports() -> list[Import]:
    known = modules()
    out: list[Import] = []
    for name, path in known.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, top in _walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("jaxmc"):
                        out.append(
                            Import(name, _existing(alias.name, known), node.lineno, top)
                        )
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_pkg, node.module, node.level)
                if not base.startswith("jaxmc"):
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    target = full if full in known else _existing(base, known)
                    out.append(Import(name, target, node.lineno, top))
    return out


def _walk(tree: ast.Module):
    """(node, at module level) for every import, also under `if`/`try`."""
    stack = [(n, True) for n in tree.body]
    while stack:
        node, top = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, top
            continue
        inner = top and not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        )
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            continue  # typing-only imports are not imports at run time
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(name: str, is_pkg: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = name.split(".")
    if not is_pkg:
        parts = parts[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def _existing(name: str, known: dict[str, Path]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def package_of(module: str) -> str:
    """The stage a module belongs to: `jaxmc.props.check` -> `props`;
    top-level modules (`jaxmc.api`) are their own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module in the graph
    of module-level imports (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.top_level and e.source != e.target:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out
