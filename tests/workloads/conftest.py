"""Small fabrics shared by the workload tests (built once per session)."""

import pytest

from topologies import build


@pytest.fixture(scope="session")
def dgx64():
    return build("dgx", 64, {"gpu": "a100"})


@pytest.fixture(scope="session")
def nvl144():
    return build("nvl-72", 144, {"gpu": "gpu_b200"})


@pytest.fixture(scope="session")
def khop64():
    return build("khop-ring", 64, {"k": 2})
