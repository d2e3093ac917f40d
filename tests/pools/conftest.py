"""A real Dask ``LocalCluster`` per test module: two worker processes, one thread each.

Starting one costs a second or two, so each module that needs a cluster
shares one among its tests; a test that kills a worker leaves it to the
nanny to restart, as a real cluster would.
"""

from __future__ import annotations

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
    """The module's cluster with both workers up (a killed one is restarted by its nanny)."""
    started_cluster.connect().wait_for_workers(2, timeout=30)
    return started_cluster
