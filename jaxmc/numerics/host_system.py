"""What the certified DTMC/CTMC linear solves (`jaxmc.numerics.sound`)
derive from a model alone, made once per model and kept while it lives
(`host_system(model)`), so that a warm check (the same or another property
on a built model) does no O(transitions) host pass for it:

- the host structure of the system (`host`, `state_row`) and the entry
  probabilities (`transitions.probabilities`, for a CTMC the embedded
  DTMC's);
- the probabilities and each entry's state on the device (`device_values`:
  the masked system's values made there, with no O(transitions) host pass
  or transfer per check);
- the system's whole matrix on the host in canonical CSR form, its
  positive entries only (`csr`): the masked system's host matrix of a check
  (`masked(maybe)`, the rows outside `maybe` dropped) is sliced from it
  without a sort, and equals `methods.host_matrix` of the masked values;
- the rows the residual certificate reads (`rows`: the whole system's
  rows of `maybe`, which are the masked system's), for large systems on an
  accelerator the whole system on the device (`certificate.DeviceRows`);
- the strongly connected components of the whole graph (`scc`) and its back
  edges (an entry to a state numbered before its own), from which
  `auto(maybe, gate)`, the structural test of `methods.auto_linear`,
  decides most maybe-sets in O(states).

The components of the subgraph induced by `maybe` refine the whole graph's:
a maybe-state in a component of one state is in one of the subgraph too,
and a component of more than one state that lies inside `maybe` is one of
the subgraph too. So the number of maybe-states in cyclic components of the
subgraph is at least the size of the whole graph's cyclic components that
lie inside `maybe`: where that is already too many, the test is decided in
O(states). Elsewhere the subgraph is decomposed as before (Gauss-Seidel
needs its order), and the count and the order are remembered for that
maybe-set (`MEMO` of them per model, the set itself the key).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from ..explore.model import ExplicitModel
from ..solvers import scc_labels, topological_order
from . import certificate, methods
from .transitions import probabilities, row_of_entry, state_of_entry


#: How many maybe-sets' structural outcomes (`HostSystem.auto`) are kept
#: per model (the least recently used dropped first).
MEMO = 4

_SYSTEMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def host_system(model: ExplicitModel) -> HostSystem:
    """The model's `HostSystem`, made the first time (a DTMC or CTMC)."""
    got = _SYSTEMS.get(model)
    if got is None:
        got = _SYSTEMS[model] = HostSystem(model)
    return got


def _readonly(a) -> np.ndarray:
    a = np.asarray(a).view()
    a.flags.writeable = False
    return a


class HostSystem:
    """A DTMC's or CTMC's linear system's model-level host data (module
    docstring); each part made on first use. It holds a weak reference to
    the model only (it is kept in a weak dictionary keyed by it)."""

    def __init__(self, model: ExplicitModel):
        self._model = weakref.ref(model)
        self.n = model.num_states
        soc = _readonly(model.state_of_choice())
        rows = row_of_entry(model)
        self.host = (soc, rows, _readonly(model.col), _readonly(model.row_ptr))
        self.state_row = state_of_entry(model)
        self.probs = probabilities(model)
        self._csr = None
        self._scc = None
        self._back = None
        self._device_rows = None
        self._device_probs = None
        self._nonneg = None
        self._memo: OrderedDict = OrderedDict()
        self.built = {"csr": 0, "scc": 0, "back": 0}  # (how often: tests)

    @property
    def model(self) -> ExplicitModel:
        return self._model()

    def csr(self):
        """The whole system's canonical host matrix (positive entries)."""
        if self._csr is None:
            self.built["csr"] += 1
            self._csr = methods.host_matrix(
                self.n, self.probs, self.state_row, self.host[2]
            )
        return self._csr

    def masked(self, maybe) -> sp.csr_matrix:
        """`methods.host_matrix` of the values masked to the rows of
        `maybe` (the same matrix), without a sort."""
        A = self.csr()
        lens = np.diff(A.indptr)
        keep = np.repeat(maybe, lens)
        lens = np.where(maybe, lens, 0)
        indptr = np.concatenate([[0], np.cumsum(lens)]).astype(A.indptr.dtype)
        return sp.csr_matrix(
            (A.data[keep], A.indices[keep], indptr), shape=A.shape, copy=False
        )

    def rows(self, maybe):
        """The rows the certificate reads for `maybe` (`certificate`): the
        whole system on the device where `certificate.use_device` says so
        (made once), else the host matrix's rows of `maybe`, those of the
        masked system (sliced, no sort)."""
        A = self.csr()
        if certificate.use_device(A.nnz):
            if self._device_rows is None:
                self._device_rows = certificate.DeviceRows(A)
            return self._device_rows
        if self._nonneg is None:
            self._nonneg = A.data.size == 0 or bool(A.data.min() >= 0)
        idx = np.flatnonzero(maybe)
        return certificate.HostRows(A[idx], idx, nonneg=self._nonneg)

    def device_values(self, maybe):
        """The probabilities masked to the rows of `maybe` (the masked
        system's entry values, in the model's entry order) on the device:
        the probabilities and each entry's state are moved there once, and
        only `maybe` per check."""
        if self._device_probs is None:
            self._device_probs = (
                jnp.asarray(self.probs),
                jnp.asarray(self.state_row, jnp.int32),
            )
        return _masked_values(*self._device_probs, jnp.asarray(maybe))

    def scc(self):
        """`(count, labels, sizes)` of the whole graph's components."""
        if self._scc is None:
            self.built["scc"] += 1
            count, labels = scc_labels(self.csr())
            self._scc = (count, labels, np.bincount(labels, minlength=count))
        return self._scc

    def back_rows(self, maybe) -> int:
        """`methods.back_edge_rows` of the masked system, from the whole
        graph's back edges."""
        if self._back is None:
            self.built["back"] += 1
            A = self.csr()
            row = np.repeat(np.arange(self.n), np.diff(A.indptr))
            back = A.indices < row
            self._back = (row[back], A.indices[back])
        src, dst = self._back
        inside = maybe[src] & maybe[dst]
        rows = np.zeros(self.n, dtype=bool)
        rows[src[inside]] = True
        return int(np.count_nonzero(rows))

    def auto(self, maybe, gate: bool):
        """`methods.auto_linear`'s outcome for `maybe`: `(A, order)` (the
        masked host matrix and its topological order) where at most
        `TOPOLOGICAL_MAX_CYCLIC` of the maybe-states lie in cyclic
        components of the masked system's graph, else `(None, None)`; with
        `gate`, also `(None, None)` where more than `BACK_EDGE_MAX_ROWS` of
        them have a back edge. The same outcome as decomposing the masked
        system, which happens only where the whole graph's components leave
        it open (module docstring)."""
        k = int(np.count_nonzero(maybe))
        limit = methods.TOPOLOGICAL_MAX_CYCLIC * k
        count, labels, sizes = self.scc()
        inside = np.bincount(labels[maybe], minlength=count)
        lower = int(sizes[(inside == sizes) & (sizes > 1)].sum())
        if lower > limit:
            return None, None
        key = np.packbits(maybe).tobytes()
        memo = self._memo.pop(key, None) or {}
        self._memo[key] = memo  # (most recent last)
        while len(self._memo) > MEMO:
            self._memo.popitem(last=False)
        if gate:
            if "back" not in memo:
                memo["back"] = self.back_rows(maybe)
            if memo["back"] > methods.BACK_EDGE_MAX_ROWS * k:
                return None, None
        if "cyclic" not in memo:
            A = self.masked(maybe)
            scc = scc_labels(A)
            size = np.bincount(scc[1])
            memo["cyclic"] = int(np.count_nonzero(size[scc[1][maybe]] > 1))
            if memo["cyclic"] <= limit:
                memo["order"] = _readonly(topological_order(A, scc))
        if memo["cyclic"] > limit:
            return None, None
        A = self.masked(maybe)
        if "order" not in memo:
            memo["order"] = _readonly(topological_order(A))
        return A, memo["order"]


@jax.jit
def _masked_values(probs, state_row, maybe):
    return jnp.where(maybe[state_row], probs, 0.0)
