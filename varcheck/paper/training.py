"""The ``train`` experiment: one attention head learning a key-value lookup, fixed vs adaptive β.

Task. A sequence holds ``memory`` items, each one token x_i = e(key_i) + g(value_i), the sum of a
key embedding and a value embedding (random Gaussian vectors, fixed for the run, entries of
variance 1/2 each, so x has entries of variance about 1). The last token is the query
x_q = e(key*) + g(v') for a key* that appears exactly once in the memory and an unrelated value
v'. The model must output the value stored under key*. Chance accuracy is 1 / ``values``.

Model. One head: q = x_q W_q, k_i = x_i W_k, logits z_i = β q·k_i, weights a = softmax(z),
o = Σ a_i x_i W_v, class scores h = o W_o, cross-entropy loss. Gradients are written out by hand
(:func:`loss_and_grads`) and checked against finite differences in the tests; Adam updates all
four matrices.

β. ``fixed`` keeps β = 1/√d_k. ``paper`` re-measures σ_X (the batch's inputs), σ_Wq and σ_Wk
before every step and sets β = 1/√[(d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k]; ``exact`` sets
β = 1/(σ_X² ‖W_q W_kᵀ‖_F). In both adaptive schemes β is a constant during back-propagation
(it is updated between steps, as the paper proposes), so the gradient still pushes on the
weights' scale. σ_Wq and σ_Wk are the entries' root mean squares, as in ``beta`` and ``project``
(:func:`varcheck.core.logit_variance.weight_sigma`).

Measurement. At every recorded step the run draws ``eval_size`` fresh sequences (the same ones
for every scheme, none of them a training batch) and measures everything on them. Sequences are
independent; the ``memory`` logits of one sequence share its query and are not. So the variance
of the logits is estimated with the block estimator of :mod:`varcheck.core.estimation`, one
sequence per block, and comes with a ``confidence`` interval (Student t with Hall's skewness
correction, as in ``project`` and ``sweep``). The σ_X in the recorded β and predictions is
measured once per run, on ``eval_size`` sequences of its own.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._version import __version__
from ..core.estimation import BlockAccumulator, ConfidenceInterval, block_interval
from ..core.logit_variance import (
    SIGMA_W_KIND,
    beta_exact,
    beta_paper,
    exact_logit_variance,
    paper_logit_variance,
    weight_sigma,
)
from ..core.messages import shown
from ..core.options import resolve_seed, valid_confidence, valid_count, valid_positive
from ..core.untested import Untested
from ..errors import VarcheckError
from ..output.display import Displayable
from .limits import (
    DRAW_SECONDS,
    MAC_SECONDS,
    VARIANCE_RANGE,
    check_memory,
    check_time,
    check_variance,
    log10,
)
from .projection import init_sd

__all__ = [
    "BETA_SCHEMES",
    "TrainConfig",
    "TrainStep",
    "TrainRun",
    "TrainResult",
    "Params",
    "LookupBatch",
    "init_params",
    "make_task",
    "loss_and_grads",
    "logit_variance_interval",
    "check_feasible",
    "train",
]

BETA_SCHEMES = ("fixed", "paper", "exact")

#: Default number of fresh sequences measured at each recorded step.
EVAL_SIZE = 2048

# spawn keys of the independent random streams (data and init are shared by the three runs)
_STREAM_EMBED, _STREAM_INIT, _STREAM_BATCH, _STREAM_EVAL = 1, 2, 3, 4


@dataclass(frozen=True)
class TrainConfig:
    """Settings of the experiment (all validated by :func:`train`).

    Attributes
    ----------
    steps : int
        Adam steps per run.
    lr : float
        Adam learning rate.
    dx, dk, dv : int
        Input width and the head's key/query and value widths.
    memory : int
        Items per sequence (the query attends over these).
    keys, values : int
        Vocabulary sizes: distinct keys, value classes.
    batch : int
        Sequences per step.
    eval_size : int
        Fresh sequences drawn at every recorded step, on which every recorded quantity is
        measured (the independent blocks of the measured variance's interval).
    every : int
        Record every ``every`` steps (and the last step).
    init : str
        Initial weight scale: ``lecun`` (σ_W² = 1/d_x, so β = 1/√d_k gives unit-variance logits
        at step 0), ``xavier``, ``kaiming`` or ``normal:SD``.
    confidence : float
        Level of the measured variance's interval.
    max_seconds : float or None
        Wall-time cap: the run stops at the first step past it, which it records (the result
        is then ``time_limited`` and depends on the machine's speed).
    """

    steps: int = 600
    lr: float = 0.01
    dx: int = 32
    dk: int = 16
    dv: int = 16
    memory: int = 8
    keys: int = 64
    values: int = 8
    batch: int = 64
    eval_size: int = EVAL_SIZE
    every: int = 30
    init: str = "lecun"
    confidence: float = 0.95
    max_seconds: float | None = None


@dataclass(frozen=True)
class TrainStep:
    """Quantities measured at one recorded step (before that step's update).

    Attributes
    ----------
    step : int
        Number of updates done so far.
    beta : float
        The β in use.
    sigma_x : float
        Standard deviation of the input entries, measured once per run on ``eval_size``
        sequences of its own (the adaptive schemes' β at a recorded step uses it).
    sigma_wq, sigma_wk : float
        σ_W of W_q and W_k: the root mean square of their entries.
    predicted_var_paper : float
        β² (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k: the paper's prediction of Var(β q·k).
    predicted_var_exact : float
        β² σ_X⁴ ‖W_q W_kᵀ‖_F²: the exact variance for independent tokens with i.i.d. entries.
    measured_var : float
        Variance of one logit β q·k_i, estimated from the (query, item) pairs of the step's
        fresh evaluation sequences (unbiased; one sequence per independent block).
    measured_var_ci : ConfidenceInterval
        Its interval at the run's ``confidence``.
    entropy : float
        Mean attention entropy in nats (log ``memory`` is uniform attention).
    match_weight : float
        Mean attention weight on the item whose key matches the query.
    loss, accuracy : float
        Cross-entropy and accuracy on the evaluation sequences.
    """

    step: int
    beta: float
    sigma_x: float
    sigma_wq: float
    sigma_wk: float
    predicted_var_paper: float
    predicted_var_exact: float
    measured_var: float
    measured_var_ci: ConfidenceInterval
    entropy: float
    match_weight: float
    loss: float
    accuracy: float


@dataclass(frozen=True)
class TrainRun:
    """One training run under one β scheme."""

    scheme: str
    steps: tuple[TrainStep, ...]

    @property
    def final(self) -> TrainStep:
        return self.steps[-1]


@dataclass(frozen=True, repr=False)
class TrainResult(Untested, Displayable):
    """The result of :func:`train`: one run per β scheme from the same data and initial weights.

    Attributes
    ----------
    runs : tuple of TrainRun
    config : TrainConfig
    seed : int
    version : str
    sigma_w_kind : str
        Which σ of the weights σ_Wq, σ_Wk are (``rms``).
    interrupted : bool
        Stopped by Ctrl-C or SIGTERM: each run holds the steps recorded so far (the schemes
        train in lockstep, so they stop together); a scheme with none is left out.
    time_limited : bool
        Stopped by ``config.max_seconds`` before ``config.steps``; the last recorded step is
        where it stopped.
    """

    runs: tuple[TrainRun, ...]
    config: TrainConfig
    seed: int
    version: str = __version__
    sigma_w_kind: str = SIGMA_W_KIND
    interrupted: bool = False
    time_limited: bool = False

    def run(self, scheme: str) -> TrainRun:
        for r in self.runs:
            if r.scheme == scheme:
                return r
        raise KeyError(scheme)


@dataclass
class Params:
    """The head's weights (mutable: the optimiser updates them in place)."""

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"w_q": self.w_q, "w_k": self.w_k, "w_v": self.w_v, "w_o": self.w_o}

    def copy(self) -> Params:
        return Params(self.w_q.copy(), self.w_k.copy(), self.w_v.copy(), self.w_o.copy())


@dataclass(frozen=True)
class LookupBatch:
    """Inputs and targets: ``query`` (B, d_x), ``items`` (B, M, d_x), ``target`` (B,) value ids,
    ``match`` (B,) index of the item whose key equals the query's."""

    query: np.ndarray
    items: np.ndarray
    target: np.ndarray
    match: np.ndarray


@dataclass(frozen=True)
class _Task:
    key_emb: np.ndarray
    val_emb: np.ndarray
    config: TrainConfig = field(repr=False)

    def sample(self, rng: np.random.Generator, size: int) -> LookupBatch:
        cfg = self.config
        # distinct keys per sequence: the first `memory` of a random permutation of the keys
        keys = np.argsort(rng.random((size, cfg.keys)), axis=1)[:, : cfg.memory]
        vals = rng.integers(0, cfg.values, size=(size, cfg.memory))
        match = rng.integers(0, cfg.memory, size=size)
        decoy = rng.integers(0, cfg.values, size=size)
        rows = np.arange(size)
        items = self.key_emb[keys] + self.val_emb[vals]
        query = self.key_emb[keys[rows, match]] + self.val_emb[decoy]
        return LookupBatch(query=query, items=items, target=vals[rows, match], match=match)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def make_task(config: TrainConfig, seed: int) -> _Task:
    rng = _rng(seed, _STREAM_EMBED)
    half = math.sqrt(0.5)
    key_emb = rng.standard_normal((config.keys, config.dx)) * half
    val_emb = rng.standard_normal((config.values, config.dx)) * half
    return _Task(key_emb=key_emb, val_emb=val_emb, config=config)


def init_params(config: TrainConfig, seed: int) -> Params:
    rng = _rng(seed, _STREAM_INIT)
    sd = init_sd(config.init, config.dx, config.dk)
    w_q = rng.standard_normal((config.dx, config.dk)) * sd
    w_k = rng.standard_normal((config.dx, config.dk)) * sd
    w_v = rng.standard_normal((config.dx, config.dv)) * math.sqrt(1.0 / config.dx)
    w_o = rng.standard_normal((config.dv, config.values)) * math.sqrt(1.0 / config.dv)
    return Params(w_q, w_k, w_v, w_o)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class _Forward:
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    logits: np.ndarray
    attn: np.ndarray
    out: np.ndarray
    probs: np.ndarray
    loss: float


def _forward(p: Params, b: LookupBatch, beta: float) -> _Forward:
    q = b.query @ p.w_q
    k = b.items @ p.w_k
    v = b.items @ p.w_v
    logits = beta * np.einsum("bd,bmd->bm", q, k)
    attn = _softmax(logits)
    out = np.einsum("bm,bmd->bd", attn, v)
    probs = _softmax(out @ p.w_o)
    rows = np.arange(len(b.target))
    loss = float(-np.mean(np.log(probs[rows, b.target] + 1e-300)))
    return _Forward(q, k, v, logits, attn, out, probs, loss)


def loss_and_grads(p: Params, b: LookupBatch, beta: float) -> tuple[float, dict[str, np.ndarray]]:
    """Cross-entropy of the batch and its gradient with respect to each weight matrix.

    β is treated as a constant (the adaptive schemes set it between steps).
    """
    f = _forward(p, b, beta)
    n = len(b.target)
    d_scores = f.probs.copy()
    d_scores[np.arange(n), b.target] -= 1.0
    d_scores /= n
    g_o = f.out.T @ d_scores
    d_out = d_scores @ p.w_o.T
    # o = Σ a_m v_m: the value path and the attention path
    d_v = f.attn[:, :, None] * d_out[:, None, :]
    items = b.items.reshape(-1, b.items.shape[-1])  # (B·M, d_x): one matmul, not an einsum
    g_v = items.T @ d_v.reshape(-1, d_v.shape[-1])
    d_attn = np.einsum("bd,bmd->bm", d_out, f.v)
    # softmax Jacobian: dz = a ⊙ (da − <a, da>)
    d_logits = f.attn * (d_attn - np.sum(f.attn * d_attn, axis=1, keepdims=True))
    d_dot = beta * d_logits
    d_q = np.einsum("bm,bmd->bd", d_dot, f.k)
    d_k = d_dot[:, :, None] * f.q[:, None, :]
    g_q = b.query.T @ d_q
    g_k = items.T @ d_k.reshape(-1, d_k.shape[-1])
    return f.loss, {"w_q": g_q, "w_k": g_k, "w_v": g_v, "w_o": g_o}


def scheme_beta(scheme: str, p: Params, sigma_x: float, dk: int) -> float:
    """β for a scheme given the current weights and the measured input standard deviation."""
    if scheme == "fixed":
        return 1.0 / math.sqrt(dk)
    if scheme == "paper":
        dx = p.w_q.shape[0]
        return beta_paper(sigma_x, weight_sigma(p.w_q), weight_sigma(p.w_k), dx, dk)
    if scheme == "exact":
        return beta_exact(p.w_q, p.w_k, sigma_x)
    raise VarcheckError(f"beta scheme {scheme!r} is not accepted; use {', '.join(BETA_SCHEMES)}")


def logit_variance_interval(
    logits: np.ndarray, confidence: float = 0.95
) -> tuple[float, ConfidenceInterval]:
    """Variance of one logit and its interval, from a (sequences, items) array of logits.

    Rows are independent, the entries of a row are not (they share a query): each row is one
    block of :class:`varcheck.core.estimation.BlockAccumulator`, reduced to its mean and mean
    square, and the interval is the block estimator's (Student t on rows − 1 degrees of freedom
    with Hall's skewness correction).

    Examples
    --------
    >>> z = np.random.default_rng(0).standard_normal((4000, 8)) * 2.0
    >>> var, ci = logit_variance_interval(z)
    >>> bool(ci.low < 4.0 < ci.high), round(var, 1)
    (True, 4.0)
    """
    z = np.asarray(logits, dtype=float)
    acc = BlockAccumulator()
    acc.add(z.mean(axis=1), (z * z).mean(axis=1))
    est, se, _ = acc.variance_and_se()
    return est, block_interval(acc, est, se, confidence, "hall")


def _sigma_x(b: LookupBatch) -> float:
    """Standard deviation of every input entry of a batch (queries and items)."""
    n = b.query.size + b.items.size
    mean = (b.query.sum() + b.items.sum()) / n
    square = (np.einsum("ij,ij->", b.query, b.query) + np.einsum("ijk,ijk->", b.items, b.items)) / n
    return float(np.sqrt(max(square - mean * mean, 0.0)))


def _measure(
    step: int, p: Params, ev: LookupBatch, beta: float, sigma_x: float, confidence: float
) -> TrainStep:
    f = _forward(p, ev, beta)
    dx, dk = p.w_q.shape
    swq, swk = weight_sigma(p.w_q), weight_sigma(p.w_k)
    rows = np.arange(len(ev.target))
    ent = -np.sum(f.attn * np.log(np.maximum(f.attn, 1e-300)), axis=1)
    measured, ci = logit_variance_interval(f.logits, confidence)
    return TrainStep(
        step=step,
        beta=beta,
        sigma_x=sigma_x,
        sigma_wq=swq,
        sigma_wk=swk,
        predicted_var_paper=beta**2 * paper_logit_variance(sigma_x, swq, swk, dx, dk),
        predicted_var_exact=beta**2 * exact_logit_variance(p.w_q, p.w_k, sigma_x),
        measured_var=measured,
        measured_var_ci=ci,
        entropy=float(np.mean(ent)),
        match_weight=float(np.mean(f.attn[rows, ev.match])),
        loss=f.loss,
        accuracy=float(np.mean(np.argmax(f.probs, axis=1) == ev.target)),
    )


@dataclass
class _Learner:
    """One scheme's weights and Adam moments during :func:`train` (mutable)."""

    scheme: str
    p: Params
    m: dict[str, np.ndarray]
    s: dict[str, np.ndarray]
    recorded: list[TrainStep]

    @classmethod
    def start(cls, scheme: str, p0: Params) -> _Learner:
        p = p0.copy()
        zeros = {k: np.zeros_like(v) for k, v in p.arrays().items()}
        return cls(scheme, p, zeros, {k: v.copy() for k, v in zeros.items()}, [])

    def adam_step(self, b: LookupBatch, beta: float, t: int, lr: float) -> None:
        b1, b2, eps = 0.9, 0.999, 1e-8
        _, grads = loss_and_grads(self.p, b, beta)
        for name, w in self.p.arrays().items():
            g = grads[name]
            self.m[name] = b1 * self.m[name] + (1 - b1) * g
            self.s[name] = b2 * self.s[name] + (1 - b2) * g * g
            w -= lr * (self.m[name] / (1 - b1**t)) / (np.sqrt(self.s[name] / (1 - b2**t)) + eps)


def _run_all(
    schemes: tuple[str, ...], cfg: TrainConfig, seed: int, task: _Task, p0: Params, sigma_x: float
) -> tuple[tuple[TrainRun, ...], bool, bool]:
    """Train every scheme in lockstep from the same weights and batches.

    Each step draws one batch for all schemes and each recorded step one set of evaluation
    sequences, so on Ctrl-C (or SIGTERM) the runs stop at the same step; the second value says
    whether that happened (the rows recorded so far are kept), the third whether
    ``cfg.max_seconds`` stopped the runs (at a step they all recorded).
    """
    learners = [_Learner.start(sch, p0) for sch in schemes]
    batch_rng = _rng(seed, _STREAM_BATCH)
    start, late = time.perf_counter(), False
    try:
        for step in range(cfg.steps + 1):
            b = task.sample(batch_rng, cfg.batch)
            late = cfg.max_seconds is not None and time.perf_counter() - start > cfg.max_seconds
            if step % cfg.every == 0 or step == cfg.steps or late:
                # fresh sequences for each recorded step, the same for every scheme
                ev = task.sample(_rng(seed, _STREAM_EVAL, step), cfg.eval_size)
                for ln in learners:
                    beta_ev = scheme_beta(ln.scheme, ln.p, sigma_x, cfg.dk)
                    ln.recorded.append(_measure(step, ln.p, ev, beta_ev, sigma_x, cfg.confidence))
            if step == cfg.steps or late:
                break
            sx = _sigma_x(b)
            for ln in learners:
                ln.adam_step(b, scheme_beta(ln.scheme, ln.p, sx, cfg.dk), step + 1, cfg.lr)
    except KeyboardInterrupt:
        interrupted = True
    else:
        interrupted = False
    runs = tuple(TrainRun(ln.scheme, tuple(ln.recorded)) for ln in learners if ln.recorded)
    return runs, interrupted, late and not interrupted


def _valid_config(cfg: TrainConfig) -> TrainConfig:
    ints = {
        "steps": (cfg.steps, 1, 100_000),
        "dx": (cfg.dx, 2, 4096),
        "dk": (cfg.dk, 1, 4096),
        "dv": (cfg.dv, 1, 4096),
        "memory": (cfg.memory, 2, 1024),
        "values": (cfg.values, 2, 1024),
        "batch": (cfg.batch, 1, 100_000),
        "eval_size": (cfg.eval_size, 16, 1_000_000),
        "every": (cfg.every, 1, 100_000),
    }
    checked: dict[str, Any] = {
        name: valid_count(name, value, lo, hi) for name, (value, lo, hi) in ints.items()
    }
    cfg = dataclasses.replace(cfg, **checked)
    try:
        cfg = dataclasses.replace(cfg, keys=valid_count("keys", cfg.keys, cfg.memory))
    except VarcheckError:
        raise VarcheckError(
            f"keys must be a whole number >= memory ({cfg.memory}) so that the keys of a "
            f"sequence can be distinct, got {cfg.keys!r}"
        ) from None
    if not (isinstance(cfg.lr, int | float) and math.isfinite(cfg.lr) and 0 < cfg.lr <= 1):
        raise VarcheckError(f"lr must be in (0, 1], got {cfg.lr!r}")
    cfg = dataclasses.replace(cfg, confidence=valid_confidence(cfg.confidence))
    if cfg.max_seconds is not None:
        cfg = dataclasses.replace(cfg, max_seconds=valid_positive("max_seconds", cfg.max_seconds))
    init_sd(cfg.init, cfg.dx, cfg.dk)
    return cfg


def train(
    config: TrainConfig | None = None,
    *,
    schemes: tuple[str, ...] = BETA_SCHEMES,
    seed: int | None = None,
) -> TrainResult:
    """Train the lookup head once per β scheme from the same data and initial weights.

    Parameters
    ----------
    config : TrainConfig, optional
        Experiment settings (defaults: 600 steps, d_x = 32, d_k = 16, 8 items).
    schemes : tuple of str
        Any of ``fixed``, ``paper``, ``exact``.
    seed : int, optional
        Root seed (drawn and reported when omitted); embeddings, initial weights, batches and
        each recorded step's evaluation sequences come from separate ``SeedSequence`` streams
        of it.

    Returns
    -------
    TrainResult

    Examples
    --------
    >>> res = train(TrainConfig(steps=20, every=10), seed=0)
    >>> [s.step for s in res.run("fixed").steps]
    [0, 10, 20]
    """

    cfg = _valid_config(config if config is not None else TrainConfig())
    if not schemes or len(set(schemes)) != len(schemes):
        raise VarcheckError(f"schemes must list distinct names from {BETA_SCHEMES}, got {schemes}")
    for sch in schemes:
        if sch not in BETA_SCHEMES:
            raise VarcheckError(
                f"beta scheme {sch!r} is not accepted; use {', '.join(BETA_SCHEMES)}"
            )
    check_feasible(cfg, len(schemes))
    seed = resolve_seed(seed)
    try:
        task = make_task(cfg, seed)
        p0 = init_params(cfg, seed)
        # σ_X is a property of the data, not of a step: measured once, so that the recorded β
        # does not jitter with each step's evaluation sequences
        sigma_x = _sigma_x(task.sample(_rng(seed, _STREAM_EVAL), cfg.eval_size))
    except KeyboardInterrupt:
        return TrainResult(runs=(), config=cfg, seed=seed, interrupted=True)
    runs, interrupted, late = _run_all(schemes, cfg, seed, task, p0, sigma_x)
    return TrainResult(runs=runs, config=cfg, seed=seed, interrupted=interrupted, time_limited=late)


def _sample_elements(cfg: TrainConfig, size: int) -> float:
    """Array elements :meth:`_Task.sample` and one forward pass hold for ``size`` sequences:
    a random key order per sequence (values and their argsort), then the items and the head's
    q, k, v, logits and attention."""
    per_item = 3 * cfg.dx + 2 * cfg.dk + 2 * cfg.dv + 8
    return size * (2.0 * cfg.keys + cfg.memory * per_item + cfg.dk + cfg.values)


def _train_seconds(cfg: TrainConfig, n_schemes: int) -> float:
    """Rough time of a run (:mod:`varcheck.paper.limits`): sampling (the key orders dominate
    when keys are many), forward and backward passes, and a fixed cost per numpy step."""

    def sample(size: int) -> float:
        return size * cfg.keys * (1 + math.log2(cfg.keys)) * DRAW_SECONDS

    # multiply-adds of one sequence's forward pass (the backward pass costs about as much)
    macs = (cfg.memory + 1) * cfg.dx * (cfg.dk + cfg.dv) + cfg.dv * cfg.values
    records = cfg.steps // cfg.every + 2
    per_step = sample(cfg.batch) + n_schemes * (2 * cfg.batch * macs * MAC_SECONDS + 2e-4)
    per_record = sample(cfg.eval_size) + n_schemes * (cfg.eval_size * macs * MAC_SECONDS + 1e-3)
    seconds = (cfg.steps + 1) * per_step + records * per_record
    if cfg.max_seconds is not None:  # the run stops at the first step past it, and records it
        seconds = min(seconds, cfg.max_seconds + per_step + per_record)
    return seconds


def check_feasible(cfg: TrainConfig, n_schemes: int = len(BETA_SCHEMES)) -> None:
    """Refuse, before any work, a run whose memory or time is above the limits of
    :mod:`varcheck.paper.limits`, or whose initial logits leave float64's workable range."""
    big = max(cfg.batch, cfg.eval_size)
    elements = (cfg.keys + cfg.values) * cfg.dx + _sample_elements(cfg, big)
    elements += _sample_elements(cfg, min(cfg.batch, cfg.eval_size))
    check_memory(
        f"keys={cfg.keys}, dx={cfg.dx}, memory={cfg.memory}, batch={cfg.batch}, "
        f"eval_size={cfg.eval_size}",
        8.0 * elements,
        "fewer keys (each sequence orders all of them), a smaller eval_size, batch or dx",
    )
    check_time(
        f"steps={cfg.steps}, every={cfg.every}, batch={cfg.batch}, eval_size={cfg.eval_size}, "
        f"keys={cfg.keys}",
        _train_seconds(cfg, n_schemes),
        "fewer steps, fewer recorded steps (a larger every), a smaller batch, eval_size or "
        "keys, or max_seconds",
    )
    sd = init_sd(cfg.init, cfg.dx, cfg.dk)
    fixed = 2 * math.log10(cfg.dx) + math.log10(cfg.dk)  # inputs have variance about 1
    lo, hi = ((math.log10(v) - fixed) / 4 for v in VARIANCE_RANGE)
    check_variance(
        f"init {shown(cfg.init, 30)} (σ_W = {sd:.3g}) at dx={cfg.dx}, dk={cfg.dk}",
        fixed + 4 * log10(sd),
        f"normal:SD with SD between {10**lo:.2g} and {10**hi:.2g}, or xavier, kaiming, lecun",
    )
