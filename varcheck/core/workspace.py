"""Arrays that a thread reuses from one chunk of work to the next (a chunk of shared blocks, a
chunk of a vectorised sampler's runs), instead of fresh ones whose first writes fault pages."""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["Workspace"]


class Workspace:
    """Arrays that each thread reuses from one chunk to the next, carved from 16 MB arenas.

    A fresh array costs a page fault per 4 kB the first time it is written: about 4 µs each on
    the benchmark machine, as long as the arithmetic done in the array. numpy asks the kernel
    for huge pages from 4 MB on, so one large arena faults about five times less per MB than
    separate arrays. Pickling (a Dask task) gives an empty workspace on the other side.
    """

    _ARENA_BYTES = 1 << 24

    def __init__(self) -> None:
        self._local = threading.local()

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return (Workspace, ())

    def get(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The thread's array called ``name``, of this shape and dtype (contents undefined)."""
        state = self._local.__dict__
        regions = state.setdefault("regions", {})
        nbytes = math.prod(shape) * dtype.itemsize
        region = regions.get(name)
        if region is None or region.size < nbytes:
            region = regions[name] = self._carve(state, nbytes)
        return region[:nbytes].view(dtype).reshape(shape)

    def _carve(self, state: dict, nbytes: int) -> np.ndarray:
        size = -(-max(nbytes, 1) // 64) * 64  # 64-byte aligned regions
        arena, used = state.get("arena"), state.get("used", 0)
        if arena is None or used + size > arena.size:
            arena = state["arena"] = np.empty(max(self._ARENA_BYTES, size), np.uint8)
            used = 0
        state["used"] = used + size
        return arena[used : used + size]
