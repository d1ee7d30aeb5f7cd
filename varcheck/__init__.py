"""varcheck: Monte-Carlo verification of the variance claims behind scaled dot-product attention.

The Python API is what the command line uses:

>>> import varcheck
>>> res = varcheck.sweep("2..8", seed=1, precision=0.05)
>>> [row.verdict for row in res.rows]
['consistent', 'consistent', 'consistent']
"""

from __future__ import annotations

from ._version import __version__
from .api import SweepResult, SweepRow, sweep
from .claims import Claim, parse_claim
from .distributions import Distribution, parse_distribution
from .errors import VarcheckError
from .estimation import ConfidenceInterval, VarianceEstimate, estimate_variance
from .ranges import parse_dk
from .theory import DotProductTheory, dot_product_theory
from .verdicts import GrowthFit, holm_adjust

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
    "dot_product_theory",
    "estimate_variance",
    "holm_adjust",
    "parse_claim",
    "parse_distribution",
    "parse_dk",
    "sweep",
]
