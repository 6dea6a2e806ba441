"""The cost of a property's optimal scheduler (`jaxmc.check(...,
scheduler=True)`: the pick, the exact solve of the induced DTMC, any
repair) next to the check alone.

    python benchmarks/schedulers.py MODEL CONSTANTS PROP [PROP ...]
"""

import sys
import time

import jaxmc


def main(argv):
    path, consts, *props = argv
    m = jaxmc.load_model(path, consts)
    e = jaxmc.build(m)
    print("states", e.num_states, "choices", e.num_choices, "nnz", e.num_transitions)
    for p in props:
        t0 = time.perf_counter()
        r = jaxmc.check(m, p)
        t1 = time.perf_counter()
        s = jaxmc.check(m, p, scheduler=True).scheduler
        t2 = time.perf_counter()
        print(
            f"{p}: value {r.value:.9g} check {t1 - t0:.2f}s, with scheduler "
            f"{t2 - t1:.2f}s, repairs {s.repairs}, deviation {s.deviation:.2g}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
