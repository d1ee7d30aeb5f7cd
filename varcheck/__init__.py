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
from typing import TYPE_CHECKING, Any

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
    "audit": "audit",
    "AuditResult": "audit.encoder",
    "audit_decoder": "audit.decoder",
    "DecoderAuditResult": "audit.decoder",
    "beta_paper": "core.logit_variance",
    "beta_exact": "core.logit_variance",
    "probe": "kernels.probe",
    "probe_sweep": "kernels.probe",
    "ProbeResult": "kernels.probe",
    "ProbeSweepResult": "kernels.probe",
    "ArgExpression": "core.probe.target",
    "module_kernel": "kernels.modules",
    "plan": "checks.plan",
    "PlanResult": "checks.plan_result",
    "ModuleKernel": "kernels.modules",
}

__all__ = ["__version__", *_LAZY]

# `varcheck.audit` is left out: the package is the function (varcheck/audit/__init__.py)
if TYPE_CHECKING:  # the names below, as type checkers see them (a test keeps the two lists equal)
    from .audit.decoder import (
        DecoderAuditResult as DecoderAuditResult,
    )
    from .audit.decoder import (
        audit_decoder as audit_decoder,
    )
    from .audit.encoder import AuditResult as AuditResult
    from .checks.claim_file import CheckResult as CheckResult
    from .checks.claim_file import check as check
    from .checks.claims import Claim as Claim
    from .checks.claims import parse_claim as parse_claim
    from .checks.plan import plan as plan
    from .checks.plan_result import PlanResult as PlanResult
    from .checks.sweep import SweepResult as SweepResult
    from .checks.sweep import SweepRow as SweepRow
    from .checks.sweep import sweep as sweep
    from .checks.verify import VerifyResult as VerifyResult
    from .checks.verify import verify as verify
    from .core.distributions import (
        Distribution as Distribution,
    )
    from .core.distributions import (
        parse_distribution as parse_distribution,
    )
    from .core.estimation import (
        ConfidenceInterval as ConfidenceInterval,
    )
    from .core.estimation import (
        VarianceEstimate as VarianceEstimate,
    )
    from .core.estimation import (
        estimate_variance as estimate_variance,
    )
    from .core.logit_variance import beta_exact as beta_exact
    from .core.logit_variance import beta_paper as beta_paper
    from .core.probe.target import ArgExpression as ArgExpression
    from .core.ranges import parse_dk as parse_dk
    from .core.theory import (
        DotProductTheory as DotProductTheory,
    )
    from .core.theory import (
        dot_product_theory as dot_product_theory,
    )
    from .core.verdicts import GrowthFit as GrowthFit
    from .core.verdicts import holm_adjust as holm_adjust
    from .errors import VarcheckError as VarcheckError
    from .kernels.modules import ModuleKernel as ModuleKernel
    from .kernels.modules import module_kernel as module_kernel
    from .kernels.probe import (
        ProbeResult as ProbeResult,
    )
    from .kernels.probe import (
        ProbeSweepResult as ProbeSweepResult,
    )
    from .kernels.probe import (
        probe as probe,
    )
    from .kernels.probe import (
        probe_sweep as probe_sweep,
    )
    from .paper.projection import ProjectionResult as ProjectionResult
    from .paper.projection import project as project
    from .paper.training import (
        TrainConfig as TrainConfig,
    )
    from .paper.training import (
        TrainResult as TrainResult,
    )
    from .paper.training import (
        train as train,
    )
    from .teaching.derive import DeriveResult as DeriveResult
    from .teaching.derive import derive as derive
    from .teaching.explain import ExplainResult as ExplainResult
    from .teaching.explain import explain as explain
    from .teaching.softmax import SoftmaxResult as SoftmaxResult
    from .teaching.softmax import softmax_study as softmax_study


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        # varcheck.audit is both the audit family and its (callable) public function
        value = module if _LAZY[name] == name else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'varcheck' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
