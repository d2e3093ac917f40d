"""An executor pool on a Dask cluster (``distributed``): ``treadle.dask.DaskPool``.

Each attempt of an invocation is one Dask task, submitted under the
attempt's own key (never cached, never merged with another), run on a
worker by :func:`_run_job`, and released as soon as its bytes are back, so
a worker that dies later does not make Dask compute it again. The events
the handler raises travel as Dask events (``Worker.log_event``) on a topic
of the pool's own, and are handed to the run's event loop while the task
runs.

Dask runs a task again by itself, on another worker, when the worker
running it dies, up to ``distributed.scheduler.allowed-failures`` times.
The ``LocalCluster`` this pool starts sets that to 0, so a lost worker
fails the attempt at once as a :class:`WorkerLostError`, and the
executor's retry policy decides what happens next, as for any failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import threading
import uuid
from typing import TYPE_CHECKING, Any, Self

import dask
import distributed
from distributed import KilledWorker

from treadle._exceptions import PoolError, WorkerLostError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from treadle._graph._remote import RemoteJob


class DaskPool:
    """Runs chosen executors' invocations on a Dask cluster.

    Give it to the executors that should run there (``@executor(pool=...)``)
    or to a whole workflow (``WorkflowBuilder(..., pool=...)``). The barrier,
    the order of delivery, state commits and checkpoints stay in the
    process that owns the run; only the handlers' work moves. Values cross
    as bytes of the workflow's serializer, never as pickles (see
    ``docs/cluster.md``).

    Nothing starts until the first invocation (or :meth:`connect`), so a
    module may build one at import time.

    Args:
        address: The scheduler of a running cluster (``"tcp://host:8786"``).
            ``None`` starts a ``LocalCluster`` of worker processes on this
            machine, closed by :meth:`close`.
        n_workers: Worker processes of that local cluster (default: Dask's,
            about one per core).
        threads_per_worker: Threads in each of its workers. One suits
            CPU-bound pure Python, which holds the GIL.
        connect_timeout: Seconds to wait for the scheduler at ``address``
            before giving up with a :class:`PoolError` that names it
            (Dask's own default is 30). Dask's client also gives a scheduler
            it lost that long to come back. A local cluster's start keeps
            Dask's timeouts.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        n_workers: int | None = None,
        threads_per_worker: int = 1,
        connect_timeout: float = 10.0,
    ) -> None:
        if address is not None and not isinstance(address, str):
            msg = f"address must be a scheduler address such as 'tcp://host:8786', got {address!r}"
            raise TypeError(msg)
        for name, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                msg = f"{name} must be a whole number, got {value!r}"
                raise TypeError(msg)
            if value is not None and value < 1:
                msg = f"{name} must be at least 1, got {value}"
                raise ValueError(msg)
        if address is not None and n_workers is not None:
            msg = "n_workers sizes the local cluster; a cluster at an address has its own"
            raise ValueError(msg)
        if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float):
            msg = f"connect_timeout must be a number of seconds, got {connect_timeout!r}"
            raise TypeError(msg)
        if not (connect_timeout > 0 and math.isfinite(connect_timeout)):
            msg = (
                f"connect_timeout must be a finite number of seconds above 0, got {connect_timeout}"
            )
            raise ValueError(msg)
        self._address = address
        self._n_workers = n_workers
        self._threads_per_worker = threads_per_worker
        self._connect_timeout = connect_timeout
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._client: distributed.Client | None = None
        self._cluster: distributed.LocalCluster | None = None
        # Connects that have ended, and why the last failed (see connect): under the lock.
        self._ended = 0
        self._failed: PoolError | None = None
        self._topic = f"treadle-{uuid.uuid4().hex}"
        # Attempt key -> where its events go. Written on the loops of the runs,
        # read on the client's thread: single dict operations, atomic under the GIL.
        self._listeners: dict[str, Callable[[bytes], None]] = {}

    def __repr__(self) -> str:
        where = self._address or "a local cluster"
        state = "connected" if self._client is not None else "not started"
        return f"<DaskPool on {where}, {state}>"

    # A handler shipped by value may name an executor, and with it this pool:
    # it travels as its settings, never with its client, and is not started there.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "address": self._address,
            "n_workers": self._n_workers,
            "threads_per_worker": self._threads_per_worker,
            "connect_timeout": self._connect_timeout,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._address = state["address"]
        self._n_workers = state["n_workers"]
        self._threads_per_worker = state["threads_per_worker"]
        self._connect_timeout = state["connect_timeout"]
        self._setup()

    # -- the cluster -------------------------------------------------------------------
    def connect(self) -> distributed.Client:
        """Start the local cluster, or reach the one at ``address``; return the client.

        Called on the first invocation; call it earlier to pay the start-up
        (a second or two for a local cluster) before the first run. It
        blocks: in async code, ``await asyncio.to_thread(pool.connect)``.

        Calls that wait for one that fails fail with it: the invocations of
        a fan-out would otherwise each wait ``connect_timeout`` in turn, and
        the run with them. A call made after a failure tries again.

        Raises:
            PoolError: the scheduler at ``address`` did not answer within
                ``connect_timeout`` (its cause says why: refused, no such
                host, timed out), or Dask cannot read the address.
        """
        ended = self._ended  # an int read: atomic under the GIL
        with self._lock:
            if self._client is None:
                failed = self._failed
                if failed is not None and self._ended != ended:  # it failed while we waited
                    raise PoolError(None, failed.reason) from failed.__cause__
                try:
                    self._client = self._start()
                    self._failed = None
                except PoolError as error:
                    self._failed = error
                    raise
                finally:
                    self._ended += 1
            return self._client

    def _start(self) -> distributed.Client:
        """Start the local cluster, or reach the one at ``address``: the client, listening."""
        if self._address is None:
            # A lost worker is the retry policy's to handle, not Dask's (see above).
            with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                cluster = distributed.LocalCluster(
                    n_workers=self._n_workers,
                    threads_per_worker=self._threads_per_worker,
                    processes=True,
                    # Any free port: None means 8787, and a second cluster
                    # on the machine would warn that it is taken.
                    dashboard_address=":0",
                )
            self._cluster = cluster
            client = distributed.Client(cluster, set_as_default=False)
        else:
            client = self._reach(self._address)
        client.subscribe_topic(self._topic, self._heard)
        return client

    def _reach(self, address: str) -> distributed.Client:
        """A client of the scheduler at ``address``, or a :class:`PoolError` naming it.

        Dask raises a bare ``OSError`` (``TimeoutError`` is one) that leaves
        out which pool, and only after ``connect_timeout``: ours, not Dask's 30 s;
        an address it cannot read (no port, an unknown scheme) a ``ValueError``
        at once.
        """
        try:
            return distributed.Client(address, timeout=self._connect_timeout, set_as_default=False)
        except OSError as error:
            reason = (
                f"could not reach the Dask scheduler at {address!r} within"
                f" {self._connect_timeout:g} s: {type(error).__name__}: {error}"
            )
            raise PoolError(None, reason) from error
        except ValueError as error:
            reason = f"{address!r} is not a scheduler address Dask can use: {error}"
            raise PoolError(None, reason) from error

    def close(self) -> None:
        """Disconnect, and stop the local cluster if this pool started it.

        Runs in flight lose their invocations (as to a lost worker). It
        blocks: in async code, ``await asyncio.to_thread(pool.close)``.
        """
        with self._lock:
            client, cluster = self._client, self._cluster
            self._client = self._cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- the port the engine calls ---------------------------------------------------------
    async def run(self, job: RemoteJob, on_event: Callable[[bytes], None]) -> bytes:
        """Run ``job`` as one Dask task and return its bytes (see ``RemotePool``).

        Raises:
            WorkerLostError: the worker running it died.
            PoolError: the cluster is unreachable, or could not run the task.
        """
        client = self._client
        if client is None:
            try:
                client = await asyncio.to_thread(self.connect)
            except PoolError as error:  # it names the scheduler: now the invocation too
                raise PoolError(job.executor_id, error.reason) from error.__cause__
            except Exception as error:
                where = self._address or "a local cluster"
                reason = f"cannot start or reach {where}: {type(error).__name__}: {error}"
                raise PoolError(job.executor_id, reason) from error
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[bytes] = loop.create_future()
        listening = True

        def deliver(data: bytes) -> None:  # on the run's loop
            if listening:
                on_event(data)

        def heard(data: bytes) -> None:  # on the client's thread
            with contextlib.suppress(RuntimeError):  # the run's loop has closed
                loop.call_soon_threadsafe(deliver, data)

        self._listeners[job.key] = heard
        try:
            try:
                future = client.submit(_run_job, job, self._topic, key=job.key, pure=False)
            except Exception as error:  # e.g. the handler names something that cannot pickle
                reason = f"Dask refused the task: {type(error).__name__}: {error}"
                raise PoolError(job.executor_id, reason) from error
            future.add_done_callback(functools.partial(_settle, loop, outcome, job.executor_id))
            try:
                return await outcome
            finally:
                future.release()  # done or given up: Dask forgets it, and never reruns it
        finally:
            listening = False
            self._listeners.pop(job.key, None)

    def _heard(self, event: tuple[float, dict[str, Any]]) -> None:
        """A Dask event on the pool's topic (on the client's thread): to its attempt."""
        _, message = event
        listener = self._listeners.get(message.get("key", ""))
        if listener is not None:
            listener(message["data"])


def _run_job(job: RemoteJob, topic: str) -> bytes:
    """The Dask task: run ``job`` on this worker, its events sent on ``topic``."""
    worker = distributed.get_worker()
    key = job.key

    def emit(data: bytes) -> None:
        worker.log_event(topic, {"key": key, "data": data})

    return job(emit)


def _settle(
    loop: asyncio.AbstractEventLoop,
    outcome: asyncio.Future[bytes],
    executor_id: str,
    future: distributed.Future[bytes],
) -> None:
    """Hand a finished task's bytes, or why it has none, to the run's loop.

    Called on Dask's callback thread. Whatever Dask raised becomes a
    :class:`PoolError` here: its own cancellation error derives from
    ``asyncio.CancelledError``, which must not reach the run as if the run
    itself were being cancelled.
    """
    result: bytes | None = None
    failure: PoolError | None = None
    try:
        result = future.result()
    except KilledWorker as error:
        failure = WorkerLostError(executor_id, f"the Dask worker running it died ({error})")
    except BaseException as error:  # noqa: BLE001 - anything Dask reports fails the attempt
        failure = PoolError(executor_id, f"Dask reported {type(error).__name__}: {error}")

    def resolve() -> None:
        if outcome.done():  # given up meanwhile
            return
        if failure is not None:
            outcome.set_exception(failure)
        else:
            outcome.set_result(result)  # type: ignore[arg-type] # bytes when nothing failed

    with contextlib.suppress(RuntimeError):  # the run's loop has closed
        loop.call_soon_threadsafe(resolve)
