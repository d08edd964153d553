"""What a simulation returns: times per flow and collective, bytes and utilisation per link."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabric.model import ActiveLinks


@dataclass(frozen=True)
class LinkLoads:
    """Bytes carried by every active link in each direction.

    Attributes
    ----------
    links : ActiveLinks
        The active links (index ``j`` here is index ``j`` there).
    bytes_fwd, bytes_rev : ndarray
        Bytes sent ``src -> dst`` and ``dst -> src``.
    makespan_s : float
        The time the utilisation is measured over, seconds.
    names : ndarray of str
        Device names (for reports).
    """

    links: ActiveLinks
    bytes_fwd: np.ndarray
    bytes_rev: np.ndarray
    makespan_s: float
    names: np.ndarray

    @property
    def utilisation_fwd(self) -> np.ndarray:
        """bytes / (capacity x makespan), ``src -> dst``."""
        return self._util(self.bytes_fwd)

    @property
    def utilisation_rev(self) -> np.ndarray:
        return self._util(self.bytes_rev)

    @property
    def utilisation(self) -> np.ndarray:
        """Busier direction of every link."""
        return np.maximum(self.utilisation_fwd, self.utilisation_rev)

    def _util(self, b: np.ndarray) -> np.ndarray:
        if self.makespan_s <= 0:
            return np.zeros_like(b)
        return b / (self.links.capacity * self.makespan_s)

    def physical_bytes(self, n_links: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes per *physical* link id (``Fabric.links``), forward and reverse.

        A circuit's bytes are counted on both of its OCS-port fibres (its
        forward direction runs from the first fibre's far end).
        """
        fwd = np.zeros(n_links)
        rev = np.zeros(n_links)
        o = self.links.origin
        phys = o >= 0
        np.add.at(fwd, o[phys], self.bytes_fwd[phys])
        np.add.at(rev, o[phys], self.bytes_rev[phys])
        circ = np.flatnonzero(~phys)
        if circ.size:
            k = circ - int(np.count_nonzero(phys))  # circuits follow the physical links in ActiveLinks
            for col in (0, 1):
                ids = self.links.circuit_links[k, col]
                np.add.at(fwd, ids, self.bytes_fwd[circ])
                np.add.at(rev, ids, self.bytes_rev[circ])
        return fwd, rev

    def records(self, only_used: bool = True, top: int | None = None) -> list[dict]:
        """One dict per active link: ends, capacity, bytes and utilisation per direction.

        Sorted by utilisation (busier direction), highest first; ``top`` keeps
        the first ``top``.
        """
        util = self.utilisation
        idx = np.flatnonzero((self.bytes_fwd + self.bytes_rev) > 0) if only_used else np.arange(util.size)
        idx = idx[np.argsort(-util[idx], kind="stable")]
        if top is not None:
            idx = idx[:top]
        L = self.links
        uf, ur = self.utilisation_fwd, self.utilisation_rev
        out = []
        for j in idx.tolist():
            o = int(L.origin[j])
            rec = {"link": o if o >= 0 else None, "src": str(self.names[L.src[j]]), "dst": str(self.names[L.dst[j]]),
                   "capacity_Bps": float(L.capacity[j]),
                   "bytes_fwd": float(self.bytes_fwd[j]), "bytes_rev": float(self.bytes_rev[j]),
                   "utilisation_fwd": float(uf[j]), "utilisation_rev": float(ur[j]),
                   "utilisation": float(util[j])}
            if o < 0:
                k = j - int(np.count_nonzero(L.origin >= 0))
                rec["circuit_links"] = [int(x) for x in L.circuit_links[k]]
            out.append(rec)
        return out

    def bottlenecks(self, k: int = 5) -> list[dict]:
        """The ``k`` busiest links (by utilisation of the busier direction)."""
        return self.records(only_used=True, top=k)


@dataclass(frozen=True)
class SimResult:
    """Times of every flow and the load on every link.

    Attributes
    ----------
    release_s, tx_end_s, finish_s : ndarray
        Per flow, seconds: transfer start, last byte sent, finish (= last
        byte + path latency).
    makespan_s : float
        Latest finish (time 0 is the simulation origin).
    method : str
        ``dag`` (contention-free pass) or ``event`` (event loop).
    events : int
        Event-loop iterations.
    loads : LinkLoads
    flow_ids : list, optional
        Ids of the flows when they came from :class:`~fabric.sim.flows.Flow` objects.
    """

    release_s: np.ndarray
    tx_end_s: np.ndarray
    finish_s: np.ndarray
    makespan_s: float
    method: str
    events: int
    loads: LinkLoads
    flow_ids: list | None = None

    @property
    def n_flows(self) -> int:
        return int(self.finish_s.shape[0])

    def bottlenecks(self, k: int = 5) -> list[dict]:
        return self.loads.bottlenecks(k)


@dataclass(frozen=True)
class CollectiveResult:
    """Completion time and bandwidths of one collective.

    Attributes
    ----------
    name, algorithm : str
    n_ranks : int
    size_bytes : float
        Per-rank buffer ``S``.
    start_s, finish_s : float
    time_s : float
        ``finish_s - start_s``.
    algbw_Bps : float
        ``S / time_s``, bytes/s.
    busbw_Bps : float
        ``algbw x`` :func:`~fabric.sim.collectives.bus_factor`, bytes/s.
    n_flows : int
        Flows simulated (for a multi-channel ring: the flows its steps stand for).
    protocol : str
        NCCL protocol that ran (``none``: the ideal flow model).
    channels : int
        Parallel rings (channels) of a ring algorithm.
    """

    name: str
    algorithm: str
    n_ranks: int
    size_bytes: float
    start_s: float
    finish_s: float
    time_s: float
    algbw_Bps: float
    busbw_Bps: float
    n_flows: int
    protocol: str = "none"
    channels: int = 1

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CollectivesResult:
    """Several collectives run at once.

    Attributes
    ----------
    collectives : list of CollectiveResult
    sim : SimResult
    """

    collectives: list = field(default_factory=list)
    sim: SimResult | None = None

    @property
    def makespan_s(self) -> float:
        return self.sim.makespan_s if self.sim is not None else 0.0

    @property
    def time_s(self) -> float:
        """Latest finish minus earliest start over the collectives."""
        if not self.collectives:
            return 0.0
        return max(c.finish_s for c in self.collectives) - min(c.start_s for c in self.collectives)
