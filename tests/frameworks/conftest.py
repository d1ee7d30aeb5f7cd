"""The framework reference suite: varcheck against attention and models nobody here wrote.

It runs in its own environment with CPU torch, transformers and timm (``make test-frameworks``;
docs/testing.md); ``make test`` leaves this folder out (tests/conftest.py), and without torch
every module here is skipped. Kernels wrap the frameworks' own functions and modules: numpy
arrays in, the framework's tensor out (varcheck reads it, bfloat16 included).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]

#: varcheck's names of torch's floating formats
DTYPES = ("float64", "float32", "float16", "bfloat16")


def tensors(*arrays: np.ndarray, dtype: str = "float64") -> list[Any]:
    """numpy arrays as CPU torch tensors of ``dtype``."""
    import torch

    return [torch.from_numpy(np.ascontiguousarray(a)).to(getattr(torch, dtype)) for a in arrays]


class HFModule:
    """What transformers' attention functions read off the module that calls them."""

    def __init__(self, head_dim: int, groups: int = 1, is_causal: bool = True) -> None:
        self.head_dim = head_dim
        self.num_key_value_groups = groups
        self.is_causal = is_causal
        self.training = False


def causal_additive(n: int, m: int, dtype: Any, bottom_right: bool = False) -> Any:
    """An additive causal mask (1, 1, n, m) as transformers' models build it (0 or the
    format's lowest number)."""
    import torch

    shift = m - n if bottom_right else 0
    future = torch.ones(n, m, dtype=torch.bool).triu(diagonal=1 + shift)
    return torch.zeros(n, m, dtype=dtype).masked_fill(future, torch.finfo(dtype).min)[None, None]


@functools.cache
def timm_attention() -> type:
    """timm's ``Attention``; loaded from its source file when timm's package cannot be imported
    (its ``__init__`` imports torchvision, whose PyPI build does not load beside the CPU torch
    of this suite: the attention module itself needs only torch)."""
    try:
        from timm.layers import Attention

        return Attention
    except Exception:  # noqa: BLE001 - no torchvision, or one whose operators do not load
        pass
    spec = importlib.util.find_spec("timm")
    if spec is None or spec.origin is None:
        pytest.skip("timm is not installed")
    root = Path(spec.origin).parent
    for name, path in (("timm", root), ("timm.layers", root / "layers")):
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules[name] = package
    return importlib.import_module("timm.layers.attention").Attention
