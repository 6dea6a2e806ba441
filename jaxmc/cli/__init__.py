"""The `jaxmc` command line: argparse → the public API (`jaxmc.*`), with
PRISM's switches.

It reads arguments, calls `jaxmc.load_model` / `jaxmc.import_model` /
`jaxmc.build` / `jaxmc.parse_properties` / `jaxmc.check`, and prints what
they return. It turns every `JaxmcError` into its located message and exit
status 1 (usage errors exit 2, from argparse), so a user never sees a
traceback for a mistake in a model or a property.

Three forms:

    jaxmc MODEL [PROPS_FILE] [options]          check properties
    jaxmc sweep MODEL --prop P --param p=a:s:b  a property over a parameter grid
    jaxmc plot-matrix MODEL [options] -o F.png  draw the transition matrix

One concern per module: `command` (`main`: dispatch, device, errors),
`args` (parsers) and `switches` (PRISM's switches), `check` (checking
properties), `output` (what is printed), `progress` (exploration progress),
`props` (`--prop` texts and their locations), `sweep`, `plot` (`plot-matrix`)
and `crash` (the last-resort error handler).
"""

from .command import main as main
