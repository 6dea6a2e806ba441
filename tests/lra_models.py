"""PRISM MDPs shared by the long-run average tests (tests/props,
tests/cli), with their values worked out by hand."""

# Components {0, 3} and {1, 2}; from 0 a choice between them. By hand:
# Smax "one" = 1/2 (alternate 1, 2), Smin = 0 (stay in {0, 3});
# R max = (2 + 1) / 2 (state reward 2 at 1, action e's 1), R min = (0 + 0.5) / 2.
HAND_MDP = """mdp
module m
  s : [0..3] init 0;
  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [b] s=0 -> (s'=3);
  [c] s=1 -> (s'=2);
  [d] s=2 -> 0.3:(s'=1) + 0.7:(s'=2);
  [e] s=2 -> (s'=1);
  [f] s=3 -> (s'=3);
  [g] s=3 -> (s'=0);
endmodule
label "one" = s=1;
rewards "r"
  s=1 : 2;
  s=3 : 0.5;
  [e] true : 1;
  [f] true : 0.2;
endrewards
"""
