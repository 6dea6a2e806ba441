"""`DeviceModel`: a model's transition structure on the device, with the
layout and precision its solves run in, made once per (model, options) and
passed down to every solve as a value.

The layout is chosen once, when the device model is made: the layout the
options name, or for "auto" CSR on a CPU and `jaxmc.layout.layout_kind`'s
warp-segment layout on a GPU (see `jaxmc.numerics.matrices` for what each
layout is and which are rebuilt per solve). The device matrix itself is
built on the first solve that needs it (timed as the "layout" stage) and
kept; so are the states' lexicographic ranks (the diagonal layout's order).

With several devices (`SolveOptions.devices`) the device model holds their
mesh and its layout is `jaxmc.layout.Sharded`: the states split in BFS
order over the devices, each holding its rows in a local CSR
(`jaxmc.layout.partition`); every device solve then runs on that
partition (`jaxmc.kernels.sharded`). The automatic choices of host methods
(topological Gauss-Seidel, the topological MDP solves) are off, as for an
explicit layout; a solve that still runs on the host or on one device is
recorded like a refused layout.

A solve whose system the asked-for layout cannot hold (a compact layout with
too many distinct values, a diagonal layout on a matrix that is not a few
diagonals, or on an MDP's choices) runs on another layout; `note_layout`
records that as an `Attempt` with status `REFUSED` in the result, so it is
never silent.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from ..explore.model import ExplicitModel
from ..layout import Sharded, SparseModel, lex_order, make_mesh, row_layout_kind
from ..layout.partition import LOCAL
from ..options import OptionsError, SolveOptions, check_options
from ..solvers import Status
from .matrices import HOST_BUILT, on_gpu, sparse_model
from .result import Attempt, NumericResult
from .timing import stage


class DeviceModel:
    """The device side of `model` for one layout and precision.

    - `model`: the `ExplicitModel`.
    - `requested`: the layout the options name ("auto" or a layout).
    - `kind`: the concrete layout of the model's own matrix ("auto"
      resolved, on first use).
    - `precision`: "fp64" or "fp32".
    - `mesh`: the devices' `jax.sharding.Mesh` (several devices: `requested`
      and `kind` are then `Sharded(mesh, local)`, the devices' rows in
      `local`: the layout asked for, "csr", "ell" or "warp"; for "auto"
      CSR on a CPU and the warp-segment layout on a GPU, each device's
      inner rows multiplied by the single-device Pallas kernel), or None
      (one device).
    """

    def __init__(
        self, model: ExplicitModel, layout: str = "auto", precision="fp64", mesh=None
    ):
        SolveOptions(layout=layout, precision=precision)  # validates both
        if mesh is not None and layout not in ("auto", *LOCAL):
            raise OptionsError(
                f"layout {layout!r} is single-device; several devices hold "
                "their rows in CSR, ELL or the warp-segment layout",
                hint="leave `layout` at 'auto' (or 'csr', 'ell', 'warp') with "
                "`devices`",
            )
        self.model = model
        self.layout = layout
        self.mesh = mesh
        self.requested = layout
        if mesh is not None:
            local = layout if layout != "auto" else ("warp" if on_gpu() else "csr")
            self.requested = Sharded(mesh, local)
        self.precision = precision
        self._sparse: SparseModel | None = None
        self._lex: np.ndarray | None = None
        self._csr: DeviceModel | None = None

    @classmethod
    def of(cls, model: ExplicitModel, options: SolveOptions | None) -> DeviceModel:
        o = check_options(options)
        try:
            mesh = make_mesh(o.devices)
        except (ValueError, TypeError) as e:
            raise OptionsError(
                str(e), hint="devices=N with N at most len(jax.devices())"
            ) from None
        return cls(model, o.layout, o.precision, mesh)

    def derived(self, model: ExplicitModel) -> DeviceModel:
        """The device model of `model` (derived from this one's: embedded,
        uniformised, a quotient) with the same requested layout and
        precision."""
        if model is self.model:
            return self
        return DeviceModel(model, self.layout, self.precision, self.mesh)

    @functools.cached_property
    def kind(self) -> str:
        """The concrete layout ("auto" resolved, once: on a GPU it reads the
        matrix's row lengths)."""
        return self.requested if self.requested != "auto" else _auto_kind(self.model)

    def on_csr(self) -> DeviceModel:
        """The device model of the same model on CSR (for the systems kept
        off the device layout: small steady-state systems), made once."""
        if self.kind == "csr":
            return self
        if self._csr is None:
            self._csr = DeviceModel(self.model, "csr", self.precision)
        return self._csr

    def sparse(self) -> SparseModel:
        """The model's device matrix in `kind` (for the layouts built per
        solve, the CSR structure: `matrices.valued` builds them)."""
        if self._sparse is None:
            key = "csr" if self.kind in HOST_BUILT else self.kind
            m = self.model
            with stage("layout"):
                self._sparse = jax.block_until_ready(
                    sparse_model(
                        m.choice_ptr,
                        m.row_ptr,
                        m.col,
                        m.val,
                        nondeterministic=m.is_nondeterministic,
                        kind=key,
                    )
                )
        return self._sparse

    def lex_rank(self, states=None) -> np.ndarray:
        """Each state's place in PRISM's lexicographic state order (the
        order of the diagonal layout), or with `states` (indices) each one's
        place among them: a permutation of `0..len(states)-1`, in O(n) from
        the model's order (computed once)."""
        if self._lex is None:
            self._lex = np.asarray(lex_order(self.model.states), dtype=np.int64)
        order = self._lex
        if states is None:
            states = np.arange(len(order))
        states = np.asarray(states, dtype=np.int64)
        local = np.full(len(order), -1, dtype=np.int64)
        local[states] = np.arange(len(states))
        sub = local[order]
        sub = sub[sub >= 0]  # the states, in lexicographic order
        rank = np.empty(len(states), dtype=np.int64)
        rank[sub] = np.arange(len(states))
        return rank

    def dia_rank(self, states=None):
        """`lex_rank(states)` where the layout can end up as the diagonal
        layout ("dia", or "auto" on a GPU), else None (no O(n) pass on the
        CPU's default path)."""
        if self.requested == "dia" or (self.requested == "auto" and on_gpu()):
            return self.lex_rank(states)
        return None


def _auto_kind(model: ExplicitModel) -> str:
    if not on_gpu():
        return "csr"
    with stage("layout"):
        return row_layout_kind(model.row_ptr, "gpu")


def device_model_for(
    model: ExplicitModel,
    options: SolveOptions | None,
    device_model: DeviceModel | None = None,
) -> DeviceModel:
    """`device_model` (for `model`), or a new one for `model` and `options`:
    what a numerics function called without one (tests, direct use) runs on."""
    if device_model is None:
        return DeviceModel.of(model, options)
    return device_model.derived(model)


#: Layout names of solves that ran off the device or did no solve.
_NOT_LAYOUTS = ("host", "none", None)
#: The same for a device model over several devices: a host solve did not
#: run on them, so it is recorded.
_NOT_SHARDED = ("none", None)


def note_layout(res: NumericResult, dm: DeviceModel) -> NumericResult:
    """`res` with an `Attempt` (status `REFUSED`) added for a layout asked
    for by name that the solve could not run on (module docstring); the
    result unchanged otherwise ("auto" is a choice, not a request)."""
    ran = (res.extra or {}).get("layout")
    skip = _NOT_LAYOUTS if dm.mesh is None else _NOT_SHARDED
    if dm.requested == "auto" or ran in skip:
        return res
    used = [p for p in str(ran).split("+") if p not in skip]
    other = sorted({p for p in used if p != dm.requested})
    if not other:
        return res
    what = (
        f"layout {dm.requested} cannot hold this system"
        if dm.mesh is None
        else f"{res.method} does not run split over {dm.requested.size} devices"
    )
    refused = Attempt(
        method=res.method,
        status=Status.REFUSED,
        layout=dm.requested,
        note=f"{what}; ran on " + "/".join(other),
    )
    if any(a.status == Status.REFUSED for a in res.attempts):
        return res
    return dataclasses.replace(res, attempts=(refused, *res.attempts))
