"""Where chunks run: in this thread, on a thread pool, or on a Dask cluster.

Every chunk has its own seed (``SeedSequence(seed, spawn_key=(*stream, chunk))``) and results are
merged in chunk order, so the numbers do not depend on the runner, the number of workers or the
order in which chunks finish. A runner only has to offer ``submit(fn, *args)`` returning a future
with ``result()`` and ``cancel()``; :func:`ordered_map` keeps a bounded window of chunks in flight,
so memory stays constant however long the run.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, Protocol

from ..errors import VarcheckError

__all__ = ["Runner", "SerialRunner", "ordered_map", "open_runner", "default_workers"]


class Runner(Protocol):
    workers: int

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any: ...


class SerialRunner:
    """Runs each chunk at once, in the calling thread."""

    workers = 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        fut.set_result(fn(*args))
        return fut


class _ThreadRunner:
    def __init__(self, workers: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="varcheck")

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class _DaskRunner:
    def __init__(self, client: Any, workers: int) -> None:
        self.client = client
        self.workers = workers

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)


def ordered_map(
    runner: Runner, fn: Callable[..., Any], arg_lists: Iterable[tuple[Any, ...]]
) -> Iterator[Any]:
    """Results of ``fn(*args)`` for each ``args``, in order, with a bounded window in flight.

    Closing the iterator early (``break``) cancels the chunks not yet started.
    """
    window = max(2, 2 * runner.workers)
    pending: deque[Any] = deque()
    args_iter = iter(arg_lists)
    try:
        for args in args_iter:
            pending.append(runner.submit(fn, *args))
            if len(pending) >= window:
                break
        while pending:
            result = pending.popleft().result()
            nxt = next(args_iter, None)
            if nxt is not None:
                pending.append(runner.submit(fn, *nxt))
            yield result
    finally:
        for fut in pending:
            fut.cancel()


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def valid_workers(workers: int | None) -> int:
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 256:
        raise VarcheckError(f"workers must be a whole number in 1..256, got {workers!r}")
    return workers


@contextlib.contextmanager
def open_runner(workers: int | None = None, scheduler: str | None = None) -> Iterator[Runner]:
    """A runner for ``workers`` threads, or for a Dask cluster.

    Parameters
    ----------
    workers : int, optional
        Threads in this process (default: all cores). With ``scheduler="local"``, the number of
        worker processes of the local Dask cluster.
    scheduler : str, optional
        ``"local"`` for a Dask LocalCluster, or the address of a running Dask scheduler
        (``tcp://host:8786``). Needs the optional extra ``varcheck[dask]``.
    """
    n = valid_workers(workers)
    if scheduler is None:
        if n == 1:
            yield SerialRunner()
            return
        runner = _ThreadRunner(n)
        try:
            yield runner
        finally:
            runner.close()
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise VarcheckError(
            "--scheduler needs Dask's distributed scheduler, which is not installed; install it "
            "with pip install 'varcheck[dask]'"
        ) from None
    if scheduler == "local":
        # the scheduler serves HTTP even without a dashboard, on port 8787 unless told: a free
        # loopback port lets two runs share a machine (a busy CI runner) and exposes nothing;
        # giving an address would switch the dashboard on, so it is switched off again
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            scheduler_kwargs={"dashboard": False},
        )
        client = Client(cluster)
    else:
        cluster = None
        try:
            client = Client(scheduler, timeout=10)
        except (OSError, TimeoutError, ValueError) as exc:
            raise VarcheckError(
                f"--scheduler {scheduler!r}: cannot reach a Dask scheduler there ({exc}); "
                "give 'local' or an address such as tcp://host:8786"
            ) from None
    try:
        total = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        yield _DaskRunner(client, max(1, total))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
