"""varcheck: Monte-Carlo verification of the variance claims behind scaled dot-product attention.

The Python API is what the command line uses:

>>> import varcheck
>>> res = varcheck.sweep("2..8", seed=1, precision=0.05)
>>> [row.verdict for row in res.rows]
['consistent', 'consistent', 'consistent']
>>> varcheck.verify(64, claim="dk", seed=1).outcome
'pass'
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__
from .api import SweepResult, SweepRow, VerifyResult, sweep, verify
from .claims import Claim, parse_claim
from .distributions import Distribution, parse_distribution
from .errors import VarcheckError
from .estimation import ConfidenceInterval, VarianceEstimate, estimate_variance
from .ranges import parse_dk
from .theory import DotProductTheory, dot_product_theory
from .verdicts import GrowthFit, holm_adjust

# Heavier parts of the API load on first use, so `import varcheck` (and the CLI) stay fast.
_LAZY = {
    "explain": "explain",
    "ExplainResult": "explain",
    "softmax_study": "softmax",
    "SoftmaxResult": "softmax",
    "derive": "derive",
    "DeriveResult": "derive",
    "project": "projection",
    "ProjectionResult": "projection",
    "train": "training",
    "TrainConfig": "training",
    "TrainResult": "training",
    "audit": "audit",
    "AuditResult": "audit",
    "beta_paper": "adaptive",
    "beta_exact": "adaptive",
}

__all__ = [
    "__version__",
    "Claim",
    "ConfidenceInterval",
    "Distribution",
    "DotProductTheory",
    "GrowthFit",
    "SweepResult",
    "SweepRow",
    "VarcheckError",
    "VarianceEstimate",
    "VerifyResult",
    "dot_product_theory",
    "estimate_variance",
    "holm_adjust",
    "parse_claim",
    "parse_distribution",
    "parse_dk",
    "sweep",
    "verify",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'varcheck' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
