"""A sampler file that imports a module next to it (as a user's ``attention.py`` imports
its ``layers.py``): varcheck puts this file's folder on ``sys.path`` while loading it."""

from __future__ import annotations

import numpy as np
from toy_samplers import normal


def doubled(rng: np.random.Generator, dk: int) -> np.ndarray:
    """Unit-normal values times 2: variance 4."""
    return normal(rng, dk, scale=2.0)
