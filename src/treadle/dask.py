"""Executor pools on Dask (``pip install 'treadle[dask]'``).

Run the CPU-heavy executors of a workflow on a Dask cluster while the
barrier, the order of delivery, state and checkpoints stay with the run::

    from treadle.dask import DaskPool

    cluster = DaskPool()                      # a LocalCluster, started on first use
    # cluster = DaskPool("tcp://scheduler:8786")  # or a cluster of your own

    @executor(pool=cluster)
    def parse(doc: Doc, ctx: WorkflowContext[Parsed]) -> None:
        ctx.send_message(expensive_parse(doc))

Or give every plain ``def`` function executor of a workflow to the pool
with ``WorkflowBuilder(..., pool=cluster)``. See ``docs/cluster.md``.

Only this module imports ``distributed``: ``import treadle`` never does.
"""

from __future__ import annotations

from treadle._extras import importing_extra
from treadle._public import publish

with importing_extra("treadle.dask", "dask"):
    from treadle._pools._dask import DaskPool

__all__ = ["DaskPool"]

publish(__name__, globals(), __all__)
