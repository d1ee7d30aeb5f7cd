"""Kernels varcheck probe must refuse, each with one line (tests/test_probe_cli.py)."""

import numpy as np

NOT_CALLABLE = 3


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def good(q, k, v):
    return _softmax(q @ k.T / np.sqrt(q.shape[-1])) @ v


def two_args(q, k):
    return q


def raises(q, k, v):
    raise RuntimeError("kernel exploded")


def wrong_shape(q, k, v):
    return good(q, k, v)[:, :-1]


def transposed(q, k, v):
    return good(q, k, v).T[:, :3]


def nan(q, k, v):
    return good(q, k, v) * np.nan


def strings(q, k, v):
    return np.full(good(q, k, v).shape, "a")


def negative(q, k, v):
    return 2.0 * good(q, k, v) - _softmax(0.0 * (q @ k.T)) @ v


def unnormalised(q, k, v):
    return np.exp(q @ k.T / np.sqrt(q.shape[-1])) @ v


def squared_output(q, k, v):
    return good(q, k, v) ** 2


def linear_attention(q, k, v):
    phi = lambda x: np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # noqa: E731
    w = phi(q) @ phi(k).T
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def random_weights(q, k, v):
    rng = np.random.default_rng(abs(hash(q.tobytes())))
    return _softmax(rng.standard_normal((q.shape[0], k.shape[0]))) @ v


def dropout(q, k, v):
    """Not deterministic: a fresh dropout mask on every call."""
    w = _softmax(q @ k.T / np.sqrt(q.shape[-1]))
    keep = np.random.default_rng().random(w.shape) > 0.1
    return (w * keep / 0.9) @ v


def one_hot(q, k, v):
    """All the weight on the first key, whatever q and k."""
    w = np.zeros((q.shape[0], k.shape[0]))
    w[:, 0] = 1.0
    return w @ v


class Tensorish:
    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert cuda:0 device type tensor to numpy")


def gpu_tensor(q, k, v):
    return Tensorish()
