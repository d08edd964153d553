"""Fat-tree / leaf-spine: host and switch counts of the full Clos (Al-Fares et al., SIGCOMM 2008)."""

import pytest

from topologies import build


@pytest.mark.parametrize("k", [4, 8, 16])
def test_three_tier_full_tree(k):
    c = build("fat-tree", None, {"k": k, "tiers": "3"}).counts()
    assert c["hosts"] == k ** 3 // 4 and c["packet_switches"] == 5 * k ** 2 // 4


@pytest.mark.parametrize("k", [4, 8, 64])
def test_two_tier_leaf_spine(k):
    c = build("fat-tree", None, {"k": k, "tiers": "2"}).counts()
    assert c["hosts"] == k ** 2 // 2 and c["packet_switches"] == 3 * k // 2
