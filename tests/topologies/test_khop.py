"""k-hop ring (InfiniteHBD): candidate links by brute force over node pairs, transceivers per GPU."""

import numpy as np
import pytest

from fabric.model import LinkState
from topologies import build
from topologies.khop import candidate_count


def _pairs(n: int, k: int, closed: bool) -> int:
    """Node pairs at most k apart along the line (or the ring), counted one by one."""
    seen = set()
    for i in range(n):
        for d in range(1, k + 1):
            j = i + d
            if j >= n:
                if not closed:
                    continue
                j %= n
            if i != j:
                seen.add((i, j))
    return len(seen)


@pytest.mark.parametrize("k, g, trx, closed, gpus", [(1, 4, 2, False, 32), (2, 4, 2, False, 64), (3, 8, 4, False, 96),
                                                     (2, 4, 2, True, 48), (3, 4, 2, True, 16)])
def test_candidates_and_transceivers(k, g, trx, closed, gpus):
    f = build("khop-ring", gpus, {"k": k, "gpus_per_node": g, "trx_per_gpu": trx, "closed": closed})
    n = gpus // g
    lanes = trx // 2
    cand = int((f.links.state == LinkState.CANDIDATE).sum())
    assert cand == g * lanes * _pairs(n, k, closed) == candidate_count(n, k, g, lanes, closed)
    assert f.counts()["ocs_transceivers"] == trx * g * n
    assert f.hbd.k == k and f.hbd.tp_multiple_of == g and f.hbd.closed == closed


def test_default_configuration_lights_one_ring_over_all_nodes():
    f = build("khop-ring", 64, {"k": 2})
    lit = f.configuration.active_candidates
    node = f.group("node")
    hops = {(int(a), int(b)) for a, b in zip(node[f.links.src[lit]], node[f.links.dst[lit]])}
    assert hops == {(i, i + 1) for i in range(15)}
