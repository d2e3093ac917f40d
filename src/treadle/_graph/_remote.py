"""Executor pools: the port through which invocations run on other processes.

A handler chosen for a pool (``@executor(pool=...)``, or a workflow-wide
``WorkflowBuilder(pool=...)``) does not run in the process that owns the
run. The engine packs each attempt into a :class:`RemoteJob` (the handler as
code, every value as bytes of the workflow's serializer), hands it to the
pool, and unpacks what comes back into the attempt's context, where it
commits at the barrier like the work of any local handler.

The port is this small on purpose: a pool only moves a job to a worker,
calls it there, and moves its bytes back, so Dask (``treadle.dask``) is one
implementation and Ray or a process pool can be others. It sits below the
engine, with the executors that name it, so the engine never imports a
cluster library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable


class RemoteJob(Protocol):
    """One attempt of one invocation, packed to travel to a worker.

    Pickled by the pool's transport as code: the handler function and the
    classes it names. Every value (the message, the state it reads, what it
    sends, writes, outputs and reports) is inside as bytes the workflow's
    serializer made, and comes back the same way.
    """

    @property
    def key(self) -> str:
        """Unique per attempt: names the task on the cluster and routes its events."""
        ...

    @property
    def executor_id(self) -> str:
        """The executor whose handler it runs, for errors and the cluster's dashboard."""
        ...

    def __call__(self, emit: Callable[[bytes], None]) -> bytes:
        """Run the handler on the worker; return what it did, as bytes.

        ``emit`` sends one event's bytes back to the run while the handler
        still runs (progress, custom events); whatever it misses is in the
        returned bytes too, so a pool may deliver events late, or not at all.
        """
        ...


class RemotePool(Protocol):
    """Where an executor's invocations run: a cluster, or any pool of processes.

    Implementations: ``treadle.dask.DaskPool``.
    """

    async def run(self, job: RemoteJob, on_event: Callable[[bytes], None]) -> bytes:
        """Run ``job`` on a worker and return its bytes.

        ``on_event`` receives the bytes the job emits, on the event loop
        that awaits this call, until the call returns; none after.
        Cancelling the call gives the job up (it may still run to its end
        on the worker; its result is dropped).

        Raises:
            PoolError: the pool could not run the job (``WorkerLostError``:
                the worker running it died or left).
        """
        ...
