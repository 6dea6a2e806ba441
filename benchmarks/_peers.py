"""What the benchmark scripts share about their surroundings: the machine
and versions a table was measured with, and Storm run as a peer.

Storm runs in a child process (`../shared/tools/storm_ref.py`, which prints
one JSON line), never in the benchmark's own process: a peer that hangs or
crashes must cost a timeout, not the whole run, and a child can be started
beside jaxmc (`storm_start`) and collected later (`storm_finish`).
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
#: `../shared/tools/storm_ref.py`, or the copy in `.bench/` that a device
#: run carries (`../shared` does not travel); `JAXMC_STORM_REF` overrides.
STORM_REF = Path(
    os.environ.get("JAXMC_STORM_REF")
    or next(
        (
            p
            for p in (
                ROOT.parent / "shared" / "tools" / "storm_ref.py",
                ROOT / ".bench" / "storm_ref.py",
            )
            if p.exists()
        ),
        ROOT.parent / "shared" / "tools" / "storm_ref.py",
    )
)

#: The fields of storm_ref.py's JSON answer that the tables use.
STORM_FIELDS = (
    "value",
    "states",
    "transitions",
    "build_s",
    "check_s",
    "storm",
    "stormpy",
    "peak_rss_mb",
)


def run_child(cmd: list[str], timeout: float, width: int = 80) -> dict:
    """Run a benchmark's child process and return the last JSON line it
    printed, or `{"error": ...}` (a timeout, a failure: its last stderr
    line, cut to `width`)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:.0f}s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        err = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": err[:width]}
    return json.loads(lines[-1])


def host_cpu() -> str:
    """The CPU's model name (`/proc/cpuinfo`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def environment() -> dict:
    """Date, CPU, JAX's first device and the versions (stormpy when installed)."""
    import jax

    import jaxmc

    d = jax.devices()[0]
    env = {
        "date": datetime.date.today().isoformat(),
        "cpu": host_cpu(),
        "cores": os.cpu_count(),
        "device": f"{getattr(d, 'device_kind', d.platform)} ({d.platform})",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxmc": jaxmc.__version__,
    }
    if importlib.util.find_spec("stormpy"):
        import stormpy

        env["stormpy"] = stormpy.__version__
    return env


def storm_available() -> bool:
    return STORM_REF.exists() and importlib.util.find_spec("stormpy") is not None


def storm_start(
    path: Path, consts: str, prop: str, solver: str
) -> tuple[subprocess.Popen, float]:
    """Start Storm on one model and property; returns (process, start time)."""
    cmd = [
        sys.executable,
        str(STORM_REF),
        str(path),
        "--prop",
        prop,
        "--solver",
        solver,
    ]
    if consts:
        cmd += ["--const", consts]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return proc, time.perf_counter()


def storm_finish(started: tuple[subprocess.Popen, float], timeout: float) -> dict:
    """Storm's answer (`STORM_FIELDS`), or `{"error": ...}` on failure or
    once `timeout` seconds have passed since the start (the child is killed)."""
    proc, t0 = started
    left = max(1.0, timeout - (time.perf_counter() - t0))
    try:
        out, err = proc.communicate(timeout=left)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"timeout after {timeout:.0f} s"}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (err.strip().splitlines() or ["no output"])[-1][:200]}
    d = json.loads(lines[-1])
    if not d.get("ok"):
        return {"error": str(d.get("error", "failed"))[:200]}
    return {k: d.get(k) for k in STORM_FIELDS}


def storm_run(path: Path, consts: str, prop: str, solver: str, timeout: float) -> dict:
    """Run Storm to the end (or the timeout) and return its answer."""
    return storm_finish(storm_start(path, consts, prop, solver), timeout)


def storm_version() -> str | None:
    """stormpy's version, without importing it."""
    from importlib import metadata

    try:
        return metadata.version("stormpy")
    except metadata.PackageNotFoundError:
        return None


def storm_input(path: Path) -> Path:
    """The model reprinted for Storm (`tests/storm_input.py`: model type
    first, constants in dependency order; Storm refuses some files PRISM
    reads), into the temp dir."""
    sys.path.insert(0, str(ROOT / "tests"))
    from storm_input import program_text

    out = Path(tempfile.gettempdir()) / "jaxmc-peers" / path.parent.name / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(program_text(path))
    os.replace(tmp, out)  # whole: another thread may be reading it
    return out


def load_cache(path: Path | None) -> dict:
    """A JSON cache of peer results (`{}` when absent)."""
    return json.loads(path.read_text()) if path and path.exists() else {}


def save_cache(entries: dict, path: Path) -> None:
    """`entries` merged into the file as it is now (runs may share it)."""
    merged = {**load_cache(path), **entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
