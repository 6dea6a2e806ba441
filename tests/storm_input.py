"""Storm-readable text for PRISM models and properties that Storm's parser
refuses, produced by jaxmc's parser and printer.

Storm's PRISM parser is stricter than PRISM's in a few purely syntactic ways:

- the model-type keyword must come first (PRISM allows `const`/`formula`
  declarations before it);
- a constant's defining expression may only name constants declared above it
  (csma: `const int slot = 2*sigma;` before `const int sigma = 1;`);
- properties have no `=>` / `<=>` and no `label` declarations (a property
  file's labels, and references to named properties, must be written out).

`program_text` reprints a model with these fixed (declarations otherwise in
source order, nothing evaluated: Storm still folds the constants, builds the
state space and checks it by its own semantics, so it stays an independent
oracle). `property_text` writes a checked property (constants folded by
jaxmc, as PRISM folds them before checking) in the subset Storm reads.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from jaxmc.lang import ast, format_expr, format_program, parse_model
from jaxmc.semantics.rewrite import idents, map_expr


class NoStormEquivalent(Exception):
    """The property uses a construct Storm lacks and that has no sound
    translation into what Storm reads; the message says which."""


def program_text(path: str | Path) -> str:
    """The model at `path` reprinted for Storm: model type first (`mdp` when
    the file has none, as PRISM reads it), then constants and formulas in
    dependency order, then every other declaration in source order."""
    path = Path(path)
    program = parse_model(path.read_text(errors="replace"), file=str(path))
    constants = _dependency_order(program.constants, lambda c: c.value)
    formulas = _dependency_order(program.formulas, lambda f: f.expr)
    head = {id(n) for n in (*program.constants, *program.formulas)}
    rest = tuple(n for n in program.order if id(n) not in head)
    program = dataclasses.replace(
        program,
        model_type=program.model_type or ast.ModelType.MDP,
        order=(*constants, *formulas, *rest),
    )
    return format_program(program)


def _dependency_order(decls, body):
    """`decls` sorted so that each comes after the declarations its body
    names (stable: source order among independent ones)."""
    by_name = {d.name: d for d in decls}
    out, done = [], set()

    def visit(d, stack=()):
        if d.name in done or d.name in stack:
            return  # a cycle is an error for both tools; leave it to them
        e = body(d)
        if e is not None:
            for ident in idents(e):
                if ident.name in by_name:
                    visit(by_name[ident.name], (*stack, d.name))
        done.add(d.name)
        out.append(d)

    for d in decls:
        visit(d)
    return out


def property_text(expr: ast.Expr, pset) -> str:
    """`expr` (a checked property or state formula of `pset`, a jaxmc
    `CheckedProperties`) as Storm property text: properties-file labels and
    named-property references replaced by what they stand for, `a => b` by
    `!a | b`, `a <=> b` by `(a & b) | (!a & !b)`."""
    return format_expr(storm_expr(expr, pset))


def storm_expr(expr: ast.Expr, pset) -> ast.Expr:
    def f(n, stack=()):
        if isinstance(n, ast.LabelRef) and pset.label_kind(n.name) in (
            "properties",
            "property",
        ):
            if n.name in stack:
                raise NoStormEquivalent(f'"{n.name}" refers to itself')
            target = pset.resolve_label(n.name)
            return map_expr(target, lambda m: f(m, (*stack, n.name)))
        if isinstance(n, ast.Binary) and n.op is ast.BinaryOp.IMPLIES:
            left, right = (
                map_expr(x, lambda m: f(m, stack)) for x in (n.left, n.right)
            )
            return ast.Binary(ast.BinaryOp.OR, ast.Unary(ast.UnaryOp.NOT, left), right)
        if isinstance(n, ast.Binary) and n.op is ast.BinaryOp.IFF:
            left, right = (
                map_expr(x, lambda m: f(m, stack)) for x in (n.left, n.right)
            )
            both = ast.Binary(ast.BinaryOp.AND, left, right)
            neither = ast.Binary(
                ast.BinaryOp.AND,
                ast.Unary(ast.UnaryOp.NOT, left),
                ast.Unary(ast.UnaryOp.NOT, right),
            )
            return ast.Binary(ast.BinaryOp.OR, both, neither)
        if isinstance(n, ast.PathQuantifier):
            # E [ F a ] would be P>0 [ F a ], but A [ F a ] (every path) is not
            # P>=1 [ F a ] (almost every path): no general translation.
            raise NoStormEquivalent(
                f"CTL {n.quantifier.value} [ ... ]: Storm has no path quantifiers"
            )
        return None

    return map_expr(expr, f)
