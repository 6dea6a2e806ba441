"""Run by `test_device_sharded.py` in a subprocess with simulated CPU
devices (`XLA_FLAGS=--xla_force_host_platform_device_count=4`): the
partitioned explorer (`jaxmc.explore.device.explore_sharded`) over 1, 2 and
4 devices against the single-device explorer, field by field
(`assert_same_model`), one JSON line per case. A mismatch raises (the
subprocess fails); a shared model that is absent prints a `skipped` line."""

from __future__ import annotations

import json
import sys
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import corpus  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from test_device_explorer import FEATURES, _checked, assert_same_model  # noqa: E402

import jaxmc  # noqa: E402
from jaxmc.explore import build  # noqa: E402
from jaxmc.explore.builder import Builder  # noqa: E402
from jaxmc.explore.compile import Compiled  # noqa: E402
from jaxmc.explore.device import explore_sharded  # noqa: E402
from jaxmc.explore.device.sharded_step import PCaps  # noqa: E402


#: Capacities small enough that every one of them overflows and grows.
TINY = PCaps(batch=2, choices=2, entries=4, states=8, contribs=16,
             all_choices=8, xchg=2, levels=2)  # fmt: skip


def case(name, checked, counts, start=None, host=False):
    ref = build(checked, explorer="device")
    if host:
        assert_same_model(build(checked, explorer="host"), ref)
    comp = Compiled(checked, None)
    b = Builder(comp, checked.model_type, None, "fix", None, 1 << 17, 0.0, True)
    for nd in counts:
        model, _, st = explore_sharded(
            comp, checked.model_type, b.initial(), nd, start=start, max_batch=16
        )
        assert_same_model(ref, model)
        rec = {
            "name": name, "devices": nd, "states": int(model.num_states),
            "init": int(model.initial_states.size),
            "levels": st.levels, "rounds": st.rounds, "caps": list(st.caps),
            "new": int(st.new.sum()), "sent": st.sent.sum(axis=0).tolist(),
        }  # fmt: skip
        print(json.dumps(rec), flush=True)


def shared(rel: str, consts: str):
    path = corpus.SHARED_MODELS / rel
    if not path.exists():
        print(json.dumps({"name": rel, "skipped": True}), flush=True)
        return None
    return _checked(path.read_text(), consts, str(path))


def main() -> None:
    assert len(jax.devices()) >= 4, jax.devices()
    for kind in ("dtmc", "ctmc", "mdp"):
        counts = {"dtmc": (4,), "ctmc": (4,), "mdp": (1, 2, 4)}[kind]
        case(f"features-{kind}", _checked(FEATURES.format(kind=kind)), counts,
             host=kind == "mdp")  # fmt: skip
    case("growth-mdp", _checked(FEATURES.format(kind="mdp")), (2,), start=TINY)
    for rel, consts in (
        ("prism-examples/dtmcs/brp/brp.pm", "N=16,MAX=2"),
        ("prism-examples/ctmcs/polling/poll3.sm", ""),
        ("prism-examples/mdps/consensus/coin2.nm", "K=2"),
    ):
        checked = shared(rel, consts)
        if checked is not None:
            case(rel, checked, (4,))
    # The public entry point, with a mesh and with a list of devices.
    text = FEATURES.format(kind="dtmc")
    ref = jaxmc.build(jaxmc.load_model_string(text), explorer="device")
    for devices in (jax.sharding.Mesh(np.array(jax.devices()[:4]), ("x",)),
                    jax.devices()[1:3]):  # fmt: skip
        got = jaxmc.build(jaxmc.load_model_string(text), explorer="device",
                          devices=devices)  # fmt: skip
        assert_same_model(ref, got)
        print(json.dumps({"name": "api", "devices": len(list(np.ravel(
            getattr(devices, "devices", devices))))}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
