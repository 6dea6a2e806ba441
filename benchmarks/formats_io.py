"""Writing and reading a model as DRN and UMB: jaxmc against Storm.

    python benchmarks/formats_io.py MODEL CONSTS [OUT_DIR]

Builds MODEL with jaxmc, writes it as `m.drn` and `m.umb` and reads each
back (wall time of each step, file sizes); where stormpy is installed,
Storm reads jaxmc's files and writes its own (`export_to_drn`,
`export_to_umb`), so that both tools' times are on the same machine.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import jaxmc
from jaxmc.explore.drn import export_drn, import_drn
from jaxmc.explore.umb import export_umb, import_umb


def timed(f):
    start = time.perf_counter()
    result = f()
    return time.perf_counter() - start, result


def main(argv):
    model_path, consts = argv[0], argv[1]
    out = Path(argv[2]) if len(argv) > 2 else Path(tempfile.mkdtemp())
    explicit = jaxmc.build(jaxmc.load_model(model_path, consts or None))
    print(f"{model_path} {consts}: {explicit.num_states} states, "
          f"{explicit.num_transitions} transitions, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for kind, write, read in (("DRN", export_drn, import_drn),
                              ("UMB", export_umb, import_umb)):  # fmt: skip
        path = out / f"m.{kind.lower()}"
        tw, _ = timed(lambda: write(explicit, path))
        tr, back = timed(lambda: read(path))
        assert back.num_transitions == explicit.num_transitions
        size = path.stat().st_size / 1e6
        print(f"jaxmc {kind}: write {tw:.2f} s, read {tr:.2f} s, {size:.1f} MB")
    try:
        import stormpy
        import stormpy.io as storm_io
    except ImportError:
        return
    for kind, read, write in (
        ("DRN", stormpy.build_model_from_drn, storm_io.export_to_drn),
        ("UMB", stormpy.build_model_from_umb, storm_io.export_to_umb),
    ):
        tr, model = timed(lambda: read(str(out / f"m.{kind.lower()}")))
        tw, _ = timed(lambda: write(model, str(out / f"storm.{kind.lower()}")))
        print(f"Storm {kind}: read {tr:.2f} s, write {tw:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
