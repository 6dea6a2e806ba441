"""LTL to automata, and their products with explicit models.

- `formula`: LTL in negation normal form (PRISM's X U F G W R, !, &, |, =>,
  <=>, step-bounded operators unfolded into X);
- `progression`: formula progression (`af`) on BDDs of temporal atoms;
- `automaton`: the deterministic automaton of progressions (a DFA of good
  prefixes for co-safe formulas) and the limit-deterministic Büchi automaton
  (LDBA) of Esparza, Křetínský and Sickert's Master Theorem ("One theorem to
  rule them all: a unified translation of LTL into ω-automata", LICS 2018);
- `from_ast`: a PRISM path formula → LTL over its maximal state subformulas;
- `product`: the product with an `ExplicitModel` and the probabilities
  (accepting maximal end components, then reachability with `numerics`) and
  co-safe rewards (reachability rewards of the DFA's accepting states).

The translation (`formula`, `progression`, `automaton`, `from_ast`) needs
nothing of the numerics; `product` does.
"""
