"""Small samplers for the tests of a user's code (tests/test_user_code.py,
tests/test_cli_sampler.py): good ones with known variances, and bad ones that varcheck must
refuse with one line.

Every good sampler draws only from the generator it is given (so results are reproducible).
"""

from __future__ import annotations

import numpy as np

#: not a function: ``--sampler toy_samplers.py:NOT_CALLABLE`` is refused
NOT_CALLABLE = 3


def normal(rng: np.random.Generator, dk: int, scale: float = 1.0) -> np.ndarray:
    """``4 × dk`` i.i.d. normal values of standard deviation ``scale``: variance ``scale²``."""
    return scale * rng.standard_normal((4, dk))


def dot(rng: np.random.Generator, dk: int) -> np.ndarray:
    """One q·k of unit-normal entries per row, 8 rows: variance ``dk``."""
    return np.einsum("ij,ij->i", rng.standard_normal((8, dk)), rng.standard_normal((8, dk)))


def flexible(rng: np.random.Generator, dk: int, **options: float) -> np.ndarray:
    """Takes any keyword: ``scale`` (default 1) scales unit-normal values."""
    return options.get("scale", 1.0) * rng.standard_normal(dk)


def no_dk(rng: np.random.Generator) -> np.ndarray:
    """Wrong signature: no ``dk``."""
    return rng.standard_normal(3)


def needs_heads(rng: np.random.Generator, dk: int, heads: int) -> np.ndarray:
    """Wrong unless ``heads`` is bound."""
    return rng.standard_normal((heads, dk))


def raises(rng: np.random.Generator, dk: int) -> np.ndarray:
    """The user's code fails (a two-line message: only the first is shown)."""
    raise ValueError(f"shapes (3,{dk}) and (4,{dk}) not aligned\nsecond line of the message")


def fails_later(rng: np.random.Generator, dk: int) -> np.ndarray:
    """Fails on roughly one call in fifty, after the pilot call (whose first draw is small)."""
    if rng.random() > 0.98:
        raise RuntimeError("CUDA out of memory")
    return rng.standard_normal(dk)


def returns_none(rng: np.random.Generator, dk: int) -> None:
    """Forgot the ``return``."""
    rng.standard_normal(dk)


def returns_string(rng: np.random.Generator, dk: int) -> str:
    return "logits"


def returns_empty(rng: np.random.Generator, dk: int) -> np.ndarray:
    return np.zeros((0, dk))


def returns_complex(rng: np.random.Generator, dk: int) -> np.ndarray:
    return rng.standard_normal(dk) * (1 + 1j)


def returns_nan(rng: np.random.Generator, dk: int) -> np.ndarray:
    out = rng.standard_normal(dk)
    out[-1] = np.nan
    return out


def returns_inf(rng: np.random.Generator, dk: int) -> np.ndarray:
    return np.full(dk, np.inf)


def returns_objects(rng: np.random.Generator, dk: int) -> list[object]:
    return [object() for _ in range(dk)]


def returns_ragged(rng: np.random.Generator, dk: int) -> list[list[float]]:
    """Rows of different lengths: numpy cannot make one array of them."""
    return [[1.0, 2.0], [3.0]]


def changing_size(rng: np.random.Generator, dk: int) -> np.ndarray:
    """A batch whose size depends on the draw: not the same number of values every call."""
    return rng.standard_normal(int(rng.integers(2, 6)))


def exits(rng: np.random.Generator, dk: int) -> np.ndarray:
    raise SystemExit("stop")


def closes(rng: np.random.Generator, dk: int) -> np.ndarray:
    """Raises ``GeneratorExit``, which derives from ``BaseException`` only."""
    raise GeneratorExit("closed")


def returns_huge_view(rng: np.random.Generator, dk: int) -> np.ndarray:
    """A view of one number declaring 10^12 values (8 bytes held, 8 TB if copied)."""
    return np.broadcast_to(rng.standard_normal(), (10**12,))


def nested_lists(rng: np.random.Generator, dk: int) -> list[list[float]]:
    """The values as a list of lists (``dk`` rows of 3 unit normals)."""
    return rng.standard_normal((dk, 3)).tolist()


def integers(rng: np.random.Generator, dk: int) -> np.ndarray:
    """``dk`` Rademacher signs ±1 as integers, 4 per row: variance 1."""
    return 2 * rng.integers(0, 2, size=(4, dk)) - 1


def scalar(rng: np.random.Generator, dk: int) -> float:
    """One q·k per call, as a plain float: variance ``dk``."""
    return float(rng.standard_normal(dk) @ rng.standard_normal(dk))


class Tensor:
    """A stand-in for a CPU tensor of a framework varcheck does not import: only ``__array__``."""

    def __init__(self, values: np.ndarray) -> None:
        self._values = values

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self._values if dtype is None else self._values.astype(dtype)


def tensor(rng: np.random.Generator, dk: int) -> Tensor:
    """Unit-normal values wrapped in :class:`Tensor`: variance 1."""
    return Tensor(rng.standard_normal((2, dk)))


class Layer:
    """A sampler as a static method: ``toy_samplers.py:Layer.sample``."""

    @staticmethod
    def sample(rng: np.random.Generator, dk: int) -> np.ndarray:
        return rng.standard_normal(dk)


def ignores_rng(rng: np.random.Generator, dk: int) -> np.ndarray:
    """Wrong: draws from its own fixed-seed generator, so every call returns the same values
    (the calls are not independent runs)."""
    return np.random.default_rng(0).standard_normal((4, dk))


def choice(rng: np.random.Generator, dk: int, act: str = "relu", sizes: tuple = (2,)) -> np.ndarray:
    """Takes a string and a sequence, to test how arguments are quoted and shown: unit normal
    values of shape ``(*sizes, dk)`` (``act`` only has to be ``"relu"`` or ``"gelu"``)."""
    if act not in ("relu", "gelu"):
        raise ValueError(f"unknown activation {act!r}")
    return rng.standard_normal((*sizes, dk))


def batch_logits(rng: np.random.Generator, dk: int) -> np.ndarray:
    """The 64 × 64 logits of one batch, Q = X W_q, K = Y W_k with unit-normal tokens X, Y
    (64 × 16) and weights of variance 1/16 (16 × dk) drawn per call: variance dk, every logit
    of a row sharing its query and all of them the weights. 4,096 values a call, so a run is
    split into several chunks (the unit of seeding and of parallel work)."""
    x = rng.standard_normal((128, 16))
    w_q, w_k = rng.standard_normal((2, 16, dk)) / 4.0
    return (x[:64] @ w_q) @ (x[64:] @ w_k).T
