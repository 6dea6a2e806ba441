// Herman's self-stabilising protocol (Herman, IPL 1990) for a ring of N=5
// processes, written for jaxmc's examples.
//
// Process i holds a bit xi and has a token when xi = x(i-1) (its left
// neighbour's bit). All processes move synchronously: a process with a token
// sets its bit at random (passing the token on or keeping it), one without
// copies its left neighbour. With an odd N there is always an odd number of
// tokens; the ring is stable when exactly one is left, and it gets there
// with probability 1 from every configuration.

dtmc

// the bias of each process's coin (PRISM's herman examples have it too)
const double p = 0.5;

formula t1 = x1=x5;
formula t2 = x2=x1;
formula t3 = x3=x2;
formula t4 = x4=x3;
formula t5 = x5=x4;
formula tokens = (t1?1:0) + (t2?1:0) + (t3?1:0) + (t4?1:0) + (t5?1:0);

module p1
	x1 : [0..1];
	[step]  t1 -> p : (x1'=0) + 1-p : (x1'=1);
	[step] !t1 -> (x1'=x5);
endmodule

module p2 = p1 [ x1=x2, x5=x1 ] endmodule
module p3 = p1 [ x1=x3, x5=x2 ] endmodule
module p4 = p1 [ x1=x4, x5=x3 ] endmodule
module p5 = p1 [ x1=x5, x5=x4 ] endmodule

// every configuration is an initial state
init true endinit

label "stable" = tokens=1;

rewards "steps"
	[step] true : 1;
endrewards
