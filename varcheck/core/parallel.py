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
from .messages import cut, shown

__all__ = [
    "HANDSHAKE_SECONDS",
    "THREADS_PER_CORE",
    "Runner",
    "SerialRunner",
    "default_workers",
    "open_runner",
    "ordered_map",
    "probe_scheduler",
]

#: Threads beyond this many per usable core only add memory (each holds its chunks, about
#: 10 MB in shared blocks): more workers than that run as that many, with the same results.
THREADS_PER_CORE = 4
#: Seconds a scheduler has to accept the connection, and then to greet.
HANDSHAKE_SECONDS = 10.0
#: Largest greeting a Dask scheduler sends (its handshake is about 60 bytes).
_GREETING_LIMIT = 1 << 16


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

    def close(self, *, cancel: bool = False) -> None:
        """Wait for the running chunks; with ``cancel`` (an interrupt), stop slow draws first."""
        if not cancel:
            self._pool.shutdown(wait=True, cancel_futures=True)
            return
        from .distributions import cancel_draws, resume_draws

        cancel_draws()
        try:
            self._pool.shutdown(wait=True, cancel_futures=True)
        finally:
            resume_draws()


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

    Closing the iterator early (``break``) cancels the chunks not yet started. A
    :class:`SerialRunner` computes a chunk as it is submitted: none is computed ahead, so that
    an interrupt does not lose a finished chunk held back for its turn.
    """
    window = 1 if isinstance(runner, SerialRunner) else max(2, 2 * runner.workers)
    pending: deque[Any] = deque()
    args_iter = iter(arg_lists)
    try:
        for args in args_iter:
            pending.append(runner.submit(fn, *args))
            if len(pending) >= window:
                break
        while pending:
            yield pending.popleft().result()
            nxt = next(args_iter, None)
            if nxt is not None:
                pending.append(runner.submit(fn, *nxt))
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
        Threads in this process (default: all cores; at most :data:`THREADS_PER_CORE` per
        core, which changes nothing but memory and speed). With ``scheduler="local"``, the
        number of worker processes of the local Dask cluster.
    scheduler : str, optional
        ``"local"`` for a Dask LocalCluster, or the address of a running Dask scheduler
        (``tcp://host:8786``). Needs the optional extra ``varcheck[dask]``. A scheduler must be
        trusted: Dask moves work and results as pickles, which run code when loaded. A TCP
        address is first checked by :func:`probe_scheduler`.
    """
    n = valid_workers(workers)
    if scheduler is None:
        if n == 1:
            yield SerialRunner()
            return
        runner = _ThreadRunner(min(n, THREADS_PER_CORE * default_workers()))
        try:
            yield runner
        except BaseException:
            # Ctrl-C, SIGTERM or an error: the chunks running in threads are not waited for to
            # the end (a slow law's chunk can take minutes); their results are not wanted
            runner.close(cancel=True)
            raise
        runner.close()
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise VarcheckError(
            "--scheduler needs Dask's distributed scheduler, which is not installed; install it "
            "with pip install 'dask[distributed]' (varcheck's dask extra)"
        ) from None
    if scheduler == "local":
        # the scheduler serves HTTP even without a dashboard, on port 8787 unless told: a free
        # loopback port lets two runs share a machine (a busy CI runner) and exposes nothing;
        # giving an address would switch the dashboard on, so it is switched off again
        # a process per core at most: each holds a Python with numpy (over 100 MB), and the
        # results do not depend on the count
        cluster = LocalCluster(
            n_workers=min(n, default_workers()),
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            scheduler_kwargs={"dashboard": False},
        )
        client = Client(cluster)
    else:
        cluster = None
        probe_scheduler(scheduler)
        try:
            client = Client(scheduler, timeout=HANDSHAKE_SECONDS)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:  # TypeError: tls:// bare
            raise VarcheckError(
                f"--scheduler {shown(scheduler)}: cannot reach a Dask scheduler there "
                f"({cut(str(exc))}); give 'local' or an address such as tcp://host:8786"
            ) from None
    try:
        total = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        yield _DaskRunner(client, max(1, total))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _host_port(scheduler: str) -> tuple[str, int] | None:
    """(host, port) of a ``tcp://host:port`` or ``host:port`` address; None for other schemes."""
    scheme, sep, rest = scheduler.partition("://")
    if not sep:
        scheme, rest = "tcp", scheduler
    if scheme != "tcp":
        return None  # tls://, ucx://, ...: their own handshakes, left to Dask's timeout
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise VarcheckError(
            f"--scheduler {shown(scheduler)}: not an address such as tcp://host:8786 or 'local'"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def _recv_exactly(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = sock.recv(size - len(data))
        if not piece:
            break
        data += piece
    return data


def probe_scheduler(scheduler: str, timeout: float | None = None) -> None:
    """Check that a Dask scheduler answers at ``scheduler``, before Dask's client is trusted.

    A Dask scheduler greets a new connection at once with a short handshake (a frame length,
    then a small message naming its compression and pickle protocol). A silent listener would
    otherwise hang the client, and a server of another kind would have its first bytes read as
    a length (a MemoryError of exabytes). Only plain TCP addresses are probed.

    Raises
    ------
    VarcheckError
        Nothing listens there, nothing answers within ``timeout`` (default
        :data:`HANDSHAKE_SECONDS`), or the answer is not a Dask scheduler's.
    """
    import socket

    address = _host_port(scheduler)
    if address is None:
        return
    timeout = HANDSHAKE_SECONDS if timeout is None else timeout
    where = f"--scheduler {shown(scheduler)}"
    try:
        sock = socket.create_connection(address, timeout=timeout)
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise VarcheckError(
            f"{where}: cannot reach a Dask scheduler there ({cut(reason)}); give 'local' or "
            "an address such as tcp://host:8786"
        ) from None
    with sock:
        try:
            sock.settimeout(timeout)
            head = _recv_exactly(sock, 8)
            size = int.from_bytes(head, "little") if len(head) == 8 else -1
            body = _recv_exactly(sock, size) if 0 < size <= _GREETING_LIMIT else b""
        except TimeoutError:
            raise VarcheckError(
                f"{where}: connected, but nothing answered within {timeout:g} s; a Dask "
                "scheduler greets at once: is this the scheduler's address and port?"
            ) from None
        except OSError as exc:
            raise VarcheckError(f"{where}: the connection failed ({exc.strerror})") from None
    if len(body) != size or b"pickle-protocol" not in body:
        raise VarcheckError(
            f"{where}: something answered, but not as a Dask scheduler does; check the address "
            "and port (the scheduler's, usually 8786, not the dashboard's)"
        )
