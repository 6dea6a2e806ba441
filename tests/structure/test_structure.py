"""The package's shape, checked on every CI run: module sizes, imports that
read straight down the pipeline, no cycles, no reaching into another
package's private modules. The import graph is read from the source
(`tests/structure/imports.py`); nothing here imports jaxmc."""

from __future__ import annotations

import dataclasses

from structure.imports import PACKAGE, cycles, imports, modules, package_of


#: Hard limit on a module's lines (the aim is ~500, one concept each).
MAX_LINES = 600

#: The stages, highest first: a package may import those after it, never
#: those before it. `cli` talks to the public API; `diff` (the traced
#: execution of properties) sits between the API and `props`.
LAYERS = (
    "cli",
    "",  # jaxmc/__init__, api, model, options: the public API
    "diff",
    "props",
    "automata",
    "numerics",
    "solvers",
    "kernels",
    "layout",
    "explore",
    "semantics",
    "lang",
)

#: Shared modules every package may import (settings, errors, options, index-array
#: set operations, the device mesh).
SHARED_PRIVATE = {
    "jaxmc._config",
    "jaxmc.errors",
    "jaxmc.options",
    "jaxmc._arrays",  # sort-based set operations on index arrays
    "jaxmc._mesh",  # the device mesh `devices=` names
}


def _top_package(module: str) -> str:
    if module == "jaxmc.__main__":  # `python -m jaxmc` is the command line
        return "cli"
    pkg = package_of(module)
    # top-level modules (api, errors, _config, __main__) form the API layer
    return "" if module.count(".") <= 1 and not _is_package(module) else pkg


def _is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file()


def test_modules_are_small():
    long = {
        name: n
        for name, path in modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_cycles():
    # an import inside a function closes a cycle as surely as one at the top
    edges = [dataclasses.replace(e, top_level=True) for e in imports()]
    found = cycles(edges)
    assert not found, f"import cycles: {found}"


def test_no_private_imports_across_packages():
    bad = []
    for e in imports():
        target_pkg, source_pkg = _top_package(e.target), _top_package(e.source)
        last = e.target.rsplit(".", 1)[-1]
        if (
            last.startswith("_")
            and last != "__init__"
            and target_pkg != source_pkg
            and e.target not in SHARED_PRIVATE
        ):
            bad.append(f"{e.source}:{e.line} imports {e.target}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_layers_read_straight_down():
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for e in imports():
        src, dst = _top_package(e.source), _top_package(e.target)
        if src in rank and dst in rank and rank[dst] < rank[src]:
            if e.target in SHARED_PRIVATE:
                continue
            bad.append(f"{e.source}:{e.line} imports {e.target} (a higher stage)")
    assert not bad, "\n".join(sorted(set(bad)))
