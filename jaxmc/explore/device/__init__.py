"""State-space exploration on the device: the checked program compiled into
jitted, batched functions over packed states (`program`), a level loop that
expands the queue and deduplicates successors with a find-or-put table
(`step`, `table`), and the rows merged on the device (`finish`).

`explore` gives the same `ExplicitModel` as the host builder, bit for bit
(`jaxmc.explore.build(..., explorer="device")`: states in BFS order, rows,
values, MDP choices and actions, labels, rewards, provenance), plus the
transition arrays on the device (`DeviceArrays`). Guards, probabilities,
assignments and transition rewards are the host lowering's generated code
run on jax.numpy (`lowering`), the model's constants passed to the
compiled code as arguments, so that it is compiled once per program and
size bucket (`Program.signature`); labels and state rewards are evaluated
by the host's `assemble`.

`explore_sharded` partitions the exploration over several devices
(`sharded`, `sharded_step`, `sharded_order`): each device owns the states
its hash selects and holds their table shard; successors are exchanged
all-to-all per step, level by level; the result, renumbered in global BFS
order on the host, is `explore`'s model, bit for bit.

Not supported (`UnsupportedError`; `explorer="auto"` then uses the host
builder): a DTMC built without probability checks (`prob_checks=False`),
a product of the modules' update counts beyond the provenance code, a
variable range over 32 bits. Left to the host builder at run time (it
raises the located error or gives the model): evaluation errors,
out-of-range assignments, probabilities off one, `max_states` exceeded,
deadlocks under `deadlocks="error"`, an entry merging more than 129
contributions. Values are bit-identical to the host's except where an
expression uses a transcendental function (`log`, real `pow`), whose XLA
and libm implementations may differ in the last bit.
"""

from .explorer import NeedsHost as NeedsHost, explore as explore
from .finish import DeviceArrays as DeviceArrays
from .sharded import ShardedStats as ShardedStats, explore_sharded as explore_sharded
