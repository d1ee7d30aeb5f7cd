"""What an audit of a checkpoint (and of a run's checkpoints) returns: leaf data, no presenter.

Every figure is per query head at the scale the checkpoint declares. Intervals are given only
where a statistic has a population value and the sequences are independent units of it
(docs/audit.md): the scaled variance, the mean per-sequence maximum, the entropy and the sink
ratio. The maximum logit and the 99.9 % quantile carry none: the maximum grows with the number of
pairs looked at, and no interval for the quantile has been shown calibrated here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._version import __version__
from ..core.estimation import ConfidenceInterval
from ..core.untested import Untested
from ..output.display import Displayable

__all__ = ["HeadMetrics", "CheckpointAudit", "HeadGrowth", "LayerTrend", "TrendResult"]


@dataclass(frozen=True)
class HeadMetrics:
    """One query head's logits and attention on the audited text.

    Attributes
    ----------
    layer, head : int
    scale : float
        The declared scale of q·k (logits below are scale · q·k).
    softcap : float or None
        The soft-cap c applied after scaling (figures here are before it).
    window : int or None
        The layer's sliding window (pairs outside it are not counted).
    scaled_var, scaled_var_ci
        Variance of the scaled logits over mask-visible pairs of real tokens, pooled over
        sequences; Hall-corrected interval with sequences as units (NaN ends: too few).
    max_logit : float
        Largest scaled logit over every visible pair of the text (no interval).
    mean_max, mean_max_ci
        Mean over sequences of each sequence's largest scaled logit, with its interval.
    q999 : float
        99.9 % quantile of the pooled visible scaled logits (no interval).
    entropy, entropy_ci
        Mean entropy (nats) of the attention rows actually used; causal models leave out
        query 0, whose row has one key.
    sink, sink_ci
        Mean attention weight on token 0 over the queries that can see it (causal: from
        query 1 on).
    pairs : int
        Visible pairs pooled.
    """

    layer: int
    head: int
    scale: float
    softcap: float | None
    window: int | None
    scaled_var: float
    scaled_var_ci: ConfidenceInterval
    max_logit: float
    mean_max: float
    mean_max_ci: ConfidenceInterval
    q999: float
    entropy: float
    entropy_ci: ConfidenceInterval
    sink: float
    sink_ci: ConfidenceInterval
    pairs: int

    @property
    def beta_unit(self) -> float:
        """The multiplier of q·k that would give unit variance: scale / √scaled_var."""
        return self.scale / math.sqrt(self.scaled_var) if self.scaled_var > 0 else math.nan

    @property
    def beta_unit_ci(self) -> ConfidenceInterval:
        """:attr:`beta_unit`'s interval, from the scaled variance's (a monotone map)."""
        low, high = self.scaled_var_ci
        if not (low > 0 and high > 0):
            return ConfidenceInterval(math.nan, math.nan)
        return ConfidenceInterval(self.scale / math.sqrt(high), self.scale / math.sqrt(low))


@dataclass(frozen=True)
class CheckpointAudit(Untested, Displayable):
    """The audit of one checkpoint.

    Attributes
    ----------
    name : str
    family : str
    scale_rule : str
        How the declared scale is set ("1/√d_head", "query_pre_attn_scalar^-1/2 (144)", …).
    heads : tuple of HeadMetrics
        Audited heads, by layer then head.
    sequences, tokens : int
    confidence : float
    first_tokens : tuple of str
        The distinct texts of token 0 over the sequences (the sink's token).
    interrupted : bool
        Stopped by Ctrl-C or SIGTERM: ``heads`` holds the finished layers.
    sequence_max : ndarray ``(audited heads, sequences)``
        Each sequence's largest |scaled logit| per head, in the order of ``heads`` (what the
        trend across checkpoints pairs).
    version : str
        varcheck's version that computed it.
    """

    name: str
    family: str
    scale_rule: str
    heads: tuple[HeadMetrics, ...]
    sequences: int
    tokens: int
    confidence: float
    first_tokens: tuple[str, ...]
    interrupted: bool = False
    sequence_max: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    version: str = __version__


@dataclass(frozen=True)
class HeadGrowth:
    """How fast one head's largest logit grows per checkpoint step.

    Attributes
    ----------
    layer, head : int
    factor, factor_ci
        exp of the mean over sequences of the least-squares slope of log max |scaled logit|
        against the checkpoint's index: the factor by which the head's logits grow from one
        checkpoint to the next; interval over sequences (NaN ends: too few).
    max_logits : tuple of float
        The head's largest scaled logit at each checkpoint.
    """

    layer: int
    head: int
    factor: float
    factor_ci: ConfidenceInterval
    max_logits: tuple[float, ...]


@dataclass(frozen=True)
class LayerTrend:
    """One layer across checkpoints: its heads' mean scaled variance and largest logit."""

    layer: int
    scaled_var: tuple[float, ...]
    max_logit: tuple[float, ...]


@dataclass(frozen=True)
class TrendResult(Untested, Displayable):
    """The audit of a run's checkpoints on the same text and positions.

    Attributes
    ----------
    checkpoints : tuple of CheckpointAudit
    layers : tuple of LayerTrend
    growth : tuple of HeadGrowth
        Every audited head, fastest-growing first.
    fastest : tuple of HeadGrowth
        The heads whose growth is largest (at most five), those whose interval lies above 1
        first.
    """

    checkpoints: tuple[CheckpointAudit, ...]
    layers: tuple[LayerTrend, ...]
    growth: tuple[HeadGrowth, ...]
    fastest: tuple[HeadGrowth, ...]

    @property
    def version(self) -> str:
        """varcheck's version that computed the audits."""
        return self.checkpoints[0].version

    @property
    def interrupted(self) -> bool:
        """Whether a checkpoint's audit was stopped (the trend covers the finished ones)."""
        return any(a.interrupted for a in self.checkpoints)
