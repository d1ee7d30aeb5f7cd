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
import sys
import types
from typing import Any

from ._version import __version__

# Every name loads on first use: `import varcheck` costs nothing, and the command line can set
# up the process (BLAS threads) before numpy is imported.
_LAZY = {
    "sweep": "checks.sweep",
    "verify": "checks.verify",
    "SweepResult": "checks.sweep",
    "SweepRow": "checks.sweep",
    "VerifyResult": "checks.verify",
    "check": "checks.claim_file",
    "CheckResult": "checks.claim_file",
    "Claim": "checks.claims",
    "parse_claim": "checks.claims",
    "Distribution": "core.distributions",
    "parse_distribution": "core.distributions",
    "VarcheckError": "errors",
    "ConfidenceInterval": "core.estimation",
    "VarianceEstimate": "core.estimation",
    "estimate_variance": "core.estimation",
    "parse_dk": "core.ranges",
    "DotProductTheory": "core.theory",
    "dot_product_theory": "core.theory",
    "GrowthFit": "core.verdicts",
    "holm_adjust": "core.verdicts",
    "explain": "teaching.explain",
    "ExplainResult": "teaching.explain",
    "softmax_study": "teaching.softmax",
    "SoftmaxResult": "teaching.softmax",
    "derive": "teaching.derive",
    "DeriveResult": "teaching.derive",
    "project": "paper.projection",
    "ProjectionResult": "paper.projection",
    "train": "paper.training",
    "TrainConfig": "paper.training",
    "TrainResult": "paper.training",
    "audit": "encoder.heads",
    "AuditResult": "encoder.heads",
    "audit_decoder": "encoder.decoder",
    "DecoderAuditResult": "encoder.decoder",
    "beta_paper": "core.logit_variance",
    "beta_exact": "core.logit_variance",
    "probe": "kernels.probe",
    "probe_sweep": "kernels.probe",
    "ProbeResult": "kernels.probe",
    "ProbeSweepResult": "kernels.probe",
    "ArgExpression": "core.probe.target",
    "module_kernel": "kernels.modules",
    "ModuleKernel": "kernels.modules",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'varcheck' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """``varcheck`` itself: a subpackage named like a public function (``varcheck/audit/``)
    does not replace the function when it is imported (``from varcheck.audit import x`` reads
    ``sys.modules``, not this attribute)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
