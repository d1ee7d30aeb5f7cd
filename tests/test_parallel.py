"""Workers, Dask and bounded memory: same numbers however the work is split."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from varcheck import dot_product_theory, estimate_variance, parse_distribution, sweep
from varcheck.core.parallel import SerialRunner, open_runner, ordered_map
from varcheck.errors import VarcheckError


@pytest.mark.parametrize("dist", ["normal", "uniform:mean=1", "t:df=8"])
@pytest.mark.parametrize("dk", [2, 64, 512])
def test_estimate_identical_for_any_worker_count(dist: str, dk: int) -> None:
    q = parse_distribution(dist)
    th = dot_product_theory(dk, q, q)
    results = []
    for workers in (1, 2, 4):
        with open_runner(workers) as runner:
            est = estimate_variance(q, q, th, seed=11, stream=(dk,), precision=0.01, runner=runner)
        results.append(est)
    assert results[0] == results[1] == results[2]


def test_sweep_identical_for_any_worker_count() -> None:
    runs = [sweep("2..128", seed=4, precision=0.02, workers=w) for w in (1, 2, 4)]
    assert runs[0] == runs[1] == runs[2]


def test_ordered_map_keeps_order_and_bounds_the_window() -> None:
    submitted = []

    def task(i: int) -> int:
        submitted.append(i)
        return i * i

    with open_runner(2) as runner:
        it = ordered_map(runner, task, ((i,) for i in range(10_000)))
        first = [next(it) for _ in range(5)]
        it.close()
    assert first == [0, 1, 4, 9, 16]
    assert len(submitted) < 20  # never the whole task list at once
    assert list(ordered_map(SerialRunner(), task, [(3,), (4,)])) == [9, 16]


@pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="dask.distributed is not installed (pip install 'varcheck[dask]')",
)
@pytest.mark.skipif(
    bool(os.environ.get("MUTANT_UNDER_TEST")),
    reason="a Dask cluster's worker processes hang inside mutmut's forked test runs (make mutate)",
)
def test_dask_local_cluster_gives_the_same_numbers() -> None:
    local = sweep("2..32", seed=9, precision=0.03, workers=1)
    on_dask = sweep("2..32", seed=9, precision=0.03, workers=2, scheduler="local")
    assert on_dask == local


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for VmHWM")
@pytest.mark.parametrize(
    "args",
    [
        # 10^10 products, row by row; the 2 s cap drew 1.2e8 products on the shared 2-core
        # machine (4 s drew 2.1e8), whose values kept would take 960 MB: far past the bound
        # below either way (peak 66 MB and 70 MB)
        ("--dk", "64", "--samples", "1e10", "--max-seconds", "2"),
        # shared blocks 1024 wide in float64, a precision that would take hours; 11 rows share
        # a cap of 11 x 0.2 s (the first row drew 1e9 products; peak 112 MB, 108 MB at 0.35 s)
        ("--dk", "2..1024", "--precision", "0.00002", "--max-seconds", "0.2"),
    ],
    ids=["samples", "shared"],
)
def test_long_streaming_run_has_bounded_memory(args: tuple[str, ...]) -> None:
    """A run far beyond its time cap: resident memory stays small, whatever was asked."""
    code = (
        "import sys\n"
        "from varcheck.cli import main\n"
        "try:\n"
        f"    main(['sweep', *{list(args)!r},\n"
        "          '--seed', '1', '--format', 'json', '--workers', '2'])\n"
        "except SystemExit:\n"
        "    pass\n"
        # VmHWM is this process's own peak; ru_maxrss would include the forking parent's
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "print(hwm.split()[1], file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    row = json.loads(proc.stdout)["rows"][0]
    peak_mb = int(proc.stderr.strip().splitlines()[-1]) / 1024  # VmHWM is in KiB
    assert row["stop_reason"] == "max-seconds" and row["samples"] > 10**6
    assert peak_mb < 300, f"peak resident memory {peak_mb:.0f} MB"


# --- a scheduler that is not one (#17) ----------------------------------------------------------


@pytest.fixture
def listener():
    """A local TCP server that accepts and then says ``greeting`` (nothing when None)."""
    import contextlib
    import socket
    import threading

    servers: list[socket.socket] = []
    conns: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(greeting: bytes | None) -> str:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conns.append(conn)  # kept open (silent) until the test ends
            if greeting is not None:
                with contextlib.suppress(OSError):  # the client may be gone already
                    conn.sendall(greeting)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    yield start
    for s in servers:  # an accept still waiting returns at once
        s.close()
    for thread in threads:  # so no connection is accepted after the teardown closed them
        thread.join(timeout=5)
    for c in conns:
        c.close()


def test_a_silent_listener_times_out(listener) -> None:
    """Guards against a hang: the client's timeout covered only the connection."""
    import time

    from varcheck.core.parallel import probe_scheduler

    start = time.perf_counter()
    with pytest.raises(VarcheckError, match="connected, but nothing answered within 0.5 s"):
        probe_scheduler(listener(None), timeout=0.5)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    "greeting",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"\xff" * 8 + b"x" * 100,
        b"\x05\x00\x00\x00\x00\x00\x00\x00abcde",
    ],
    ids=["ssh", "huge-length", "small-but-not-dask"],
)
def test_another_server_is_named_not_a_memory_error(listener, greeting: bytes) -> None:
    """Guards against a server's first bytes read as a length of exabytes (MemoryError)."""
    from varcheck.core.parallel import probe_scheduler

    with pytest.raises(VarcheckError, match="not as a Dask scheduler does"):
        probe_scheduler(listener(greeting), timeout=2)


def test_a_dask_greeting_passes(listener) -> None:
    """Guards against refusing a real scheduler's handshake (bytes of distributed 2026.8)."""
    from varcheck.core.parallel import probe_scheduler

    body = (
        b"\x01\x00\x00\x00\x00\x00\x00\x00*\x00\x00\x00\x00\x00\x00\x00\x83\xabcompression"
        b"\xc0\xa6python\x93\x03\x0b\x07\xafpickle-protocol\x05"
    )
    probe_scheduler(listener(len(body).to_bytes(8, "little") + body), timeout=2)


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("nonsense", "not an address such as tcp://host:8786"),
        ("tcp://host:0", "not an address"),
        ("tcp://127.0.0.1:1", "cannot reach a Dask scheduler there"),
    ],
)
def test_bad_addresses(address: str, fragment: str) -> None:
    from varcheck.core.parallel import probe_scheduler

    with pytest.raises(VarcheckError, match=fragment):
        probe_scheduler(address, timeout=2)


def test_other_schemes_are_left_to_dask() -> None:
    from varcheck.core.parallel import probe_scheduler

    assert probe_scheduler("tls://127.0.0.1:1", timeout=0.1) is None


def test_an_interrupt_cancels_slow_draws_in_threads() -> None:
    """Guards against Ctrl-C waiting for a slow law's chunk to finish in a worker thread."""
    import time

    import numpy as np
    import scipy.stats

    from varcheck.core.distributions import _deadline, _inverted_in_pieces

    law = scipy.stats.kappa3(a=2.0)

    def slow_chunk() -> None:
        for _ in range(10_000):  # minutes, unless cancelled
            _inverted_in_pieces(law, np.random.default_rng(1), (20_000,), np.dtype(float))

    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), open_runner(2) as runner:
        runner.submit(slow_chunk)
        time.sleep(0.2)
        raise KeyboardInterrupt
    assert time.perf_counter() - start < 5
    assert not _deadline.cancelled.is_set()  # later runs draw again


def test_threads_are_capped_per_core() -> None:
    """Guards against --workers 256 on a small machine: 2.5 GB of chunk buffers in shared blocks
    for no speed (the results do not depend on the count)."""
    from varcheck.core.parallel import THREADS_PER_CORE, default_workers

    cap = THREADS_PER_CORE * default_workers()
    with open_runner(256) as runner:
        assert runner.workers == min(256, cap)
    with open_runner(2) as runner:
        assert runner.workers == min(2, cap)
