"""State-space exploration on the device: the checked program compiled into
jitted, batched functions over packed states (`program`), a level loop that
expands the queue and deduplicates successors with a find-or-put table
(`step`, `table`), and the rows merged on the device (`finish`).

`explore` gives the same `ExplicitModel` as the host builder
(`jaxmc.explore.build(..., explorer="device")`), plus the transition arrays
on the device (`DeviceArrays`).
"""

from .explorer import NeedsHost as NeedsHost, explore as explore
from .finish import DeviceArrays as DeviceArrays
