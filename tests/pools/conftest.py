"""A real Dask ``LocalCluster`` per test module: two worker processes, one thread each.

Starting one costs a second or two, so each module that needs a cluster
shares one among its tests; a test that kills a worker leaves it to the
nanny to restart, as a real cluster would.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import pytest

from treadle.dask import DaskPool

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def started_cluster() -> Iterator[DaskPool]:
    """A started ``DaskPool`` on a local cluster of two single-threaded worker processes."""
    with DaskPool(n_workers=2, threads_per_worker=1) as pool:
        pool.connect()
        yield pool


@pytest.fixture
def cluster(started_cluster: DaskPool) -> DaskPool:
    """The module's cluster with both workers up (a killed one is restarted by its nanny).

    Each worker imports the tests' app first: a fresh (or restarted) worker
    imports treadle on its first task, which on a loaded machine took longer
    than a test's one-second handler timeout.
    """
    client = started_cluster.connect()
    client.wait_for_workers(2, timeout=30)
    client.run(importlib.import_module, "pool_app")
    return started_cluster
