"""Entry distributions: what to draw for the entries of q and k, and their exact moments.

A distribution is written as a spec ``NAME[:key=value,...]``:

- ``normal``, ``uniform``, ``rademacher``, ``laplace``: standardised (mean 0, sd 1) unless
  ``mean=`` / ``sd=`` are given;
- ``t:df=D``: Student's t, standardised to sd 1 when ``df > 2``; for ``df <= 2`` the variance is
  infinite, the raw t is used and ``sd=`` is refused;
- ``scipy.NAME:shape=...``: any continuous ``scipy.stats`` distribution with its own shape
  parameters (and ``loc``/``scale``); it keeps its own mean and sd unless ``mean=``/``sd=`` are
  given, which apply an affine map.

Moments that do not exist are kept as ``inf`` (the integral diverges, as for the variance of a
Cauchy variable) rather than turned into numbers. Which moments exist is decided by the law's tail
index (:func:`scipy_tail_index`): E|X|^p is finite exactly for p below it. For a scipy law it comes
from a table of families whose index is a formula in their shape parameters, and otherwise from
the law's own density far out in each tail.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import VarcheckError
from .messages import did_you_mean

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = [
    "DrawDeadline",
    "Distribution",
    "cancel_draws",
    "draw_deadline",
    "resume_draws",
    "parse_distribution",
    "scipy_tail_index",
    "NAMED_FAMILIES",
    "TAIL_TOL",
    "standard_normal_float32",
]

_SQRT3 = math.sqrt(3.0)
#: Pairs per piece of the Box-Muller transform: its scratch arrays (768 kB) stay in cache.
_BOX_MULLER_PIECE = 1 << 16
_box_muller_scratch = threading.local()

# name -> (accepted family parameters, one-line description)
NAMED_FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    "normal": ((), "Gaussian"),
    "uniform": ((), "uniform on a symmetric interval"),
    "rademacher": ((), "+-1 with equal probability"),
    "laplace": ((), "double exponential"),
    "t": (("df",), "Student's t with df degrees of freedom"),
}


@dataclass(frozen=True)
class Distribution:
    """One entry distribution with exact moments.

    Attributes
    ----------
    spec : str
        The canonical spec, e.g. ``"t:df=5"`` or ``"normal:mean=0.5,sd=2"``.
    family : str
        ``normal``, ``uniform``, ``rademacher``, ``laplace``, ``t`` or ``scipy.NAME``.
    mean : float
        E[X]; ``nan`` when undefined (no finite first moment).
    var : float
        Var X; ``inf`` when E[X^2] is infinite.
    mu3 : float
        Third central moment; ``inf`` when E|X|^3 is infinite.
    mu4 : float
        Fourth central moment; ``inf`` when E[X^4] is infinite.
    max_moment : float
        Largest whole p with E|X|^p finite (``inf`` when all exist): the largest whole number
        below the law's tail index (``df`` for Student's t; :func:`scipy_tail_index` for a
        scipy law), lowered to 1, 2 or 3 when scipy cannot compute a variance, skewness or
        kurtosis that the index says exists (so that it never promises a moment that ``var``,
        ``mu3`` or ``mu4`` do not hold). Used to warn when the estimator's own skewness does
        not exist (p < 6), which slows its convergence.
    """

    spec: str
    family: str
    mean: float
    var: float
    mu3: float
    mu4: float
    params: tuple[tuple[str, float], ...] = ()
    max_moment: float = math.inf
    # X = loc + scale * base, where base is the family's reference variable
    loc: float = field(default=0.0, repr=False)
    scale: float = field(default=1.0, repr=False)

    @property
    def sd(self) -> float:
        """Standard deviation (``inf`` when the variance is infinite)."""
        return math.sqrt(self.var)

    @property
    def kurtosis(self) -> float:
        """Kurtosis mu4 / var^2 (3 for a normal); ``inf`` when mu4 is infinite."""
        if not math.isfinite(self.mu4):
            return math.inf
        return self.mu4 / self.var / self.var

    @property
    def is_normal(self) -> bool:
        return self.family == "normal"

    def raw_moment(self, order: int) -> float:
        """E[X^order] for order 1..4 from the central moments (``inf`` if it does not exist)."""
        m, v, m3, m4 = self.mean, self.var, self.mu3, self.mu4
        if order == 1:
            return m
        # an infinite central moment makes the raw one infinite; testing it first keeps 0 * inf
        # (a zero mean times an infinite mu3) from turning E[X^4] into nan
        if order == 2:
            return v + m * m if math.isfinite(v) else math.inf
        if order == 3:
            return m3 + 3 * m * v + m**3 if math.isfinite(m3) else math.inf
        if order == 4:
            return m4 + 4 * m * m3 + 6 * m * m * v + m**4 if math.isfinite(m4) else math.inf
        raise ValueError(f"order must be 1..4, got {order}")

    def sample(
        self,
        rng: np.random.Generator,
        shape: tuple[int, ...],
        dtype: DTypeLike = np.float64,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Draw i.i.d. entries of the given shape (into ``out``, of that shape and dtype, if given).

        Writing into a reused array spares the page faults of a fresh one, which on some
        machines cost as much as the normal random numbers themselves. Normal entries in
        float32 come from :func:`standard_normal_float32` (Box-Muller), in float64 from numpy's
        ziggurat.
        """
        if out is not None and (out.shape != tuple(shape) or out.dtype != np.dtype(dtype)):
            raise ValueError(f"out is {out.dtype}{out.shape}, not {np.dtype(dtype)}{tuple(shape)}")
        if out is None:
            base = self._base(rng, shape, dtype)
        elif self.family == "normal":
            if out.dtype == np.float32:
                base = standard_normal_float32(rng, out)
            else:
                base = rng.standard_normal(dtype=out.dtype, out=out)
        else:
            out[...] = self._base(rng, shape, out.dtype)
            base = out
        if self.scale != 1.0:
            base *= self.scale
        if self.loc != 0.0:
            base += self.loc
        return base

    def standard_normal_parts(self) -> tuple[float, float]:
        """(loc, scale) with X = loc + scale * Z, Z standard normal (normal family only)."""
        if not self.is_normal:
            raise VarcheckError(f"{self.spec} is not a normal distribution")
        return self.loc, self.scale

    def _base(
        self, rng: np.random.Generator, shape: tuple[int, ...], dtype: DTypeLike
    ) -> np.ndarray:
        fam = self.family
        dt: np.dtype[Any] = np.dtype(dtype)
        if fam == "normal":
            if dt == np.float32:
                return standard_normal_float32(rng, np.empty(shape, dtype=dt))
            return rng.standard_normal(shape, dtype=dt)
        if fam == "uniform":
            out = rng.random(shape, dtype=dt)
            out *= 2 * _SQRT3
            out -= _SQRT3
            return out
        if fam == "rademacher":
            bits = rng.integers(0, 2, size=shape, dtype=np.int8)
            out = bits.astype(dt)
            out *= 2
            out -= 1
            return out
        if fam == "laplace":
            return rng.laplace(0.0, 1.0 / math.sqrt(2.0), size=shape).astype(dt, copy=False)
        if fam == "t":
            df = dict(self.params)["df"]
            return rng.standard_t(df, size=shape).astype(dt, copy=False)
        frozen = _scipy_frozen(fam[len("scipy.") :], self.params)
        if _by_inversion(frozen):
            return _inverted_in_pieces(frozen, rng, shape, dt)
        return np.asarray(frozen.rvs(size=shape, random_state=rng), dtype=dt)


def standard_normal_float32(rng: np.random.Generator, out: np.ndarray) -> np.ndarray:
    """Fill a float32 array with independent standard normal numbers (Box-Muller transform).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of uniform numbers.
    out : ndarray of float32
        Filled in place (any shape; a non-contiguous array is filled through a copy).

    Returns
    -------
    ndarray
        ``out``.

    Notes
    -----
    For independent uniforms u and v, r = sqrt(-2 ln(1 - u)) and θ = 2πv give two
    independent standard normal numbers r cos θ and r sin θ; the transform is exact, not an
    approximation. It is used because numpy's ziggurat, one number at a time, costs about twice
    as much as these few vectorised passes (``make bench`` measures both), and normal numbers
    are most of a sweep's cost. The radius comes from a 53-bit float64 uniform, so the largest
    possible |z| is sqrt(2 · 53 ln 2) ≈ 8.57, exceeded by a normal number with probability
    1e-17. r², the angle and the result are rounded to float32; rounding the angle before its
    cosine and sine leaves an absolute error of up to about 1e-6 in z (most numbers are
    within a float32 rounding of the exact transform), far below anything a variance
    estimate at the precisions that use float32 (1e-4 and coarser) can see. An odd element
    count takes its last number from numpy's ziggurat.
    """
    if out.dtype != np.float32:
        raise ValueError(f"out must be float32, got {out.dtype}")
    if not out.flags.c_contiguous:
        out[...] = standard_normal_float32(rng, np.empty(out.shape, dtype=np.float32))
        return out
    flat = out.reshape(-1)
    half = flat.size // 2
    scratch = getattr(_box_muller_scratch, "arrays", None)
    if scratch is None:
        scratch = _box_muller_scratch.arrays = (
            np.empty(_BOX_MULLER_PIECE),
            np.empty(_BOX_MULLER_PIECE, dtype=np.float32),
        )
    for start in range(0, half, _BOX_MULLER_PIECE):
        stop = min(half, start + _BOX_MULLER_PIECE)
        cos_part, sin_part = flat[start:stop], flat[half + start : half + stop]
        uniform, radius = scratch[0][: stop - start], scratch[1][: stop - start]
        # float64 uniforms come faster than float32 ones from numpy's generators
        rng.random(out=uniform)
        np.multiply(uniform, 2.0 * math.pi, out=cos_part, casting="same_kind")
        np.sin(cos_part, out=sin_part)
        np.cos(cos_part, out=cos_part)
        rng.random(out=uniform)
        np.subtract(1.0, uniform, out=uniform)  # in (0, 1]: the logarithm stays finite
        np.log(uniform, out=uniform)
        np.multiply(uniform, -2.0, out=radius, casting="same_kind")
        np.sqrt(radius, out=radius)
        np.multiply(cos_part, radius, out=cos_part)
        np.multiply(sin_part, radius, out=sin_part)
    if flat.size % 2:
        flat[-1] = rng.standard_normal(dtype=np.float32)
    return out


class DrawDeadline(RuntimeError):
    """A slow law's draw passed the deadline of :func:`draw_deadline` (or was cancelled)."""


class _Deadline:
    """When slow draws stop: a monotonic time (None: never), and a flag that stops them now."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.cancelled = threading.Event()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise DrawDeadline("the draw was cancelled")
        if self.at is not None and time.monotonic() > self.at:
            raise DrawDeadline("the draw passed its time cap")


_deadline = _Deadline()
#: Seconds a piece of a slow draw aims at: the time cap and Ctrl-C act within about this.
_PIECE_SECONDS = 0.05


@contextlib.contextmanager
def draw_deadline(seconds: float | None) -> Iterator[None]:
    """Within the block, a slow law's draw raises :class:`DrawDeadline` after ``seconds``.

    Laws drawn by numerical inversion (scipy laws without a sampler of their own, which can
    take seconds per thousand entries) are drawn in small pieces, the deadline checked between
    them, so that a time cap holds however slow the law. The pieces give the same numbers as
    one draw. Fast laws are drawn whole and never stopped. Nested blocks keep the earlier
    deadline; ``None`` sets none.
    """
    previous = _deadline.at
    if seconds is not None:
        at = time.monotonic() + seconds
        _deadline.at = at if previous is None else min(previous, at)
    try:
        yield
    finally:
        _deadline.at = previous


def cancel_draws() -> None:
    """Stop the slow draws still running (in worker threads) at their next piece."""
    _deadline.cancelled.set()


def resume_draws() -> None:
    """Undo :func:`cancel_draws` once the threads it stopped are done."""
    _deadline.cancelled.clear()


def _by_inversion(frozen: Any) -> bool:
    """Whether scipy draws this law as ppf(U): U uniform, element by element (so in pieces)."""
    from scipy.stats._distn_infrastructure import rv_generic

    return type(frozen.dist)._rvs is rv_generic._rvs


def _inverted_in_pieces(
    frozen: Any, rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype
) -> np.ndarray:
    """``frozen.rvs(size=shape)`` drawn in pieces of about :data:`_PIECE_SECONDS` each.

    scipy draws such a law as ``ppf(U)`` with ``U = rng.uniform(size=n)``: the uniforms come
    one after the other from the generator, so pieces give exactly the numbers of one draw.
    """
    out = np.empty(shape, dtype=dt)
    flat = out.reshape(-1)
    start, piece = 0, 1
    while start < flat.size:
        _deadline.check()
        stop = min(flat.size, start + piece)
        began = time.perf_counter()
        flat[start:stop] = frozen.rvs(size=stop - start, random_state=rng)
        spent = time.perf_counter() - began
        # aim the next piece at _PIECE_SECONDS (at most 8 times larger: a fast start is noisy)
        piece = int(min(8 * piece, max(1, piece * _PIECE_SECONDS / max(spent, 1e-9))))
        start = stop
    return out


def _scipy_frozen(name: str, params: tuple[tuple[str, float], ...]) -> Any:
    import scipy.stats

    kwargs = {k: v for k, v in params if k not in ("mean", "sd")}
    return getattr(scipy.stats, name)(**kwargs)


def _fmt(value: float) -> str:
    return repr(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def _parse_params(spec: str, body: str) -> dict[str, float]:
    params: dict[str, float] = {}
    if not body:
        raise VarcheckError(f"distribution {spec!r}: nothing after ':'; expected key=value pairs")
    for item in body.split(","):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise VarcheckError(
                f"distribution {spec!r}: {item!r} is not key=value (e.g. normal:mean=0.5,sd=2)"
            )
        if key in params:
            raise VarcheckError(f"distribution {spec!r}: parameter {key!r} given twice")
        try:
            value = float(raw)
        except ValueError:
            raise VarcheckError(f"distribution {spec!r}: {key}={raw!r} is not a number") from None
        if not math.isfinite(value):
            raise VarcheckError(f"distribution {spec!r}: {key}={raw} must be a finite number")
        params[key] = value
    return params


def _unknown_name(name: str) -> VarcheckError:
    choices = list(NAMED_FAMILIES)
    hint = did_you_mean(name, choices)
    return VarcheckError(
        f"unknown distribution {name!r}{hint}; accepted: {', '.join(choices)}, "
        "or scipy.NAME for a continuous scipy.stats distribution (e.g. scipy.gamma:a=2)"
    )


def parse_distribution(spec: str | Distribution) -> Distribution:
    """Parse a spec ``NAME[:key=value,...]`` into a :class:`Distribution`.

    Parameters
    ----------
    spec : str or Distribution
        E.g. ``"normal"``, ``"t:df=5"``, ``"normal:mean=0.5,sd=2"``, ``"scipy.gamma:a=2"``.

    Returns
    -------
    Distribution

    Raises
    ------
    VarcheckError
        Unknown name (with the nearest valid one suggested), unknown or repeated parameter,
        non-numeric or non-finite value, ``sd <= 0``, ``df <= 0``, or a ``sd=`` for a
        distribution whose variance is infinite.

    Examples
    --------
    >>> d = parse_distribution("t:df=6")
    >>> round(d.var, 12), round(d.kurtosis, 12)
    (1.0, 6.0)
    >>> parse_distribution("normal:mean=0.5").mean
    0.5
    """
    if isinstance(spec, Distribution):
        return spec
    try:
        dist = _parse(spec)
    except OverflowError:
        raise VarcheckError(
            f"distribution {spec!r}: its moments overflow; accepted: |mean| <= {MAX_ABS_MEAN:g} "
            f"and sd in [{SD_RANGE[0]:g}, {SD_RANGE[1]:g}]"
        ) from None
    _check_scale(spec, dist)
    return dist


#: Entry scales varcheck accepts: beyond them float64 moments overflow or cancel.
MAX_ABS_MEAN = 1e6
SD_RANGE = (1e-6, 1e6)


def _check_scale(spec: str, dist: Distribution) -> None:
    lo, hi = SD_RANGE
    if math.isfinite(dist.mean) and abs(dist.mean) > MAX_ABS_MEAN:
        raise VarcheckError(
            f"distribution {spec!r}: its mean {dist.mean:.3g} is outside the accepted range "
            f"|mean| <= {MAX_ABS_MEAN:g}"
        )
    if math.isfinite(dist.var) and not lo <= math.sqrt(dist.var) <= hi:
        raise VarcheckError(
            f"distribution {spec!r}: its sd {math.sqrt(dist.var):.3g} is outside the accepted "
            f"range [{lo:g}, {hi:g}]"
        )


def _parse(spec: str) -> Distribution:
    if not isinstance(spec, str) or not spec.strip():
        raise VarcheckError(
            f"distribution spec must be a non-empty string like 'normal', got {spec!r}"
        )
    text = spec.strip()
    name, sep, body = text.partition(":")
    name = name.strip()
    params = _parse_params(text, body) if sep else {}
    if name.startswith("scipy."):
        return _make_scipy(text, name, params)
    if name not in NAMED_FAMILIES:
        raise _unknown_name(name)
    return _make_named(text, name, params)


def _check_affine(spec: str, params: dict[str, float]) -> tuple[float | None, float | None]:
    mean = params.get("mean")
    sd = params.get("sd")
    if sd is not None and sd <= 0:
        raise VarcheckError(f"distribution {spec!r}: sd={_fmt(sd)} must be > 0")
    return mean, sd


def _make_named(spec: str, name: str, params: dict[str, float]) -> Distribution:
    accepted = NAMED_FAMILIES[name][0] + ("mean", "sd")
    unknown = [k for k in params if k not in accepted]
    if unknown:
        raise VarcheckError(
            f"distribution {spec!r}: unknown parameter {unknown[0]!r}; "
            f"{name} accepts {', '.join(accepted)}"
        )
    mean, sd = _check_affine(spec, params)
    fam_params: tuple[tuple[str, float], ...] = ()
    # moments of the standardised reference variable (mean 0, var 1): (mu3, mu4)
    if name == "normal":
        mu4 = 3.0
    elif name == "uniform":
        mu4 = 9.0 / 5.0
    elif name == "rademacher":
        mu4 = 1.0
    elif name == "laplace":
        mu4 = 6.0
    else:  # t
        if "df" not in params:
            raise VarcheckError(f"distribution {spec!r}: t needs df=, e.g. t:df=5 (df > 0)")
        df = params["df"]
        if df <= 0:
            raise VarcheckError(f"distribution {spec!r}: df={_fmt(df)} must be > 0")
        fam_params = (("df", df),)
        if df <= 2:
            return _raw_t(spec, df, mean, sd, fam_params)
        mu4 = 3.0 + 6.0 / (df - 4.0) if df > 4 else math.inf
        raw_sd = math.sqrt(df / (df - 2.0))
        target_sd = 1.0 if sd is None else sd
        target_mean = 0.0 if mean is None else mean
        mu3 = 0.0 if df > 3 else math.inf
        return _affine(
            name,
            fam_params,
            target_mean,
            target_sd,
            mu3,
            mu4,
            loc=target_mean,
            scale=target_sd / raw_sd,
            max_moment=_t_max_moment(df),
        )
    target_sd = 1.0 if sd is None else sd
    target_mean = 0.0 if mean is None else mean
    return _affine(
        name, fam_params, target_mean, target_sd, 0.0, mu4, loc=target_mean, scale=target_sd
    )


def _affine(
    family: str,
    fam_params: tuple[tuple[str, float], ...],
    mean: float,
    sd: float,
    std_mu3: float,
    std_mu4: float,
    *,
    loc: float,
    scale: float,
    max_moment: float = math.inf,
) -> Distribution:
    """A distribution with the given mean/sd whose standardised version has moments mu3, mu4."""
    all_params = fam_params + (("mean", mean), ("sd", sd))
    return Distribution(
        spec=_canonical(family, fam_params, mean, sd),
        family=family,
        mean=mean,
        var=sd * sd,
        mu3=std_mu3 * sd**3 if math.isfinite(std_mu3) else math.inf,
        mu4=std_mu4 * sd**4 if math.isfinite(std_mu4) else math.inf,
        params=all_params,
        loc=loc,
        scale=scale,
        max_moment=max_moment,
    )


def _t_max_moment(df: float) -> float:
    """E|T|^p is finite exactly for p < df."""
    return float(math.ceil(df) - 1)


def _canonical(
    family: str, fam_params: tuple[tuple[str, float], ...], mean: float, sd: float
) -> str:
    parts = [f"{k}={_fmt(v)}" for k, v in fam_params]
    if mean != 0.0:
        parts.append(f"mean={_fmt(mean)}")
    if sd != 1.0:
        parts.append(f"sd={_fmt(sd)}")
    return family + (":" + ",".join(parts) if parts else "")


def _raw_t(
    spec: str,
    df: float,
    mean: float | None,
    sd: float | None,
    fam_params: tuple[tuple[str, float], ...],
) -> Distribution:
    if sd is not None:
        raise VarcheckError(
            f"distribution {spec!r}: sd= is impossible for t with df={_fmt(df)} <= 2 "
            "(its variance is infinite); drop sd= to use the raw t"
        )
    if df <= 1 and mean is not None:
        raise VarcheckError(
            f"distribution {spec!r}: mean= is impossible for t with df={_fmt(df)} <= 1 "
            "(its mean is undefined)"
        )
    loc = 0.0 if mean is None else mean
    parts = [f"df={_fmt(df)}"] + ([f"mean={_fmt(loc)}"] if loc else [])
    return Distribution(
        spec="t:" + ",".join(parts),
        family="t",
        mean=loc if df > 1 else math.nan,
        var=math.inf,
        mu3=math.inf,
        mu4=math.inf,
        params=fam_params + (("mean", loc),),
        loc=loc,
        scale=1.0,
        max_moment=_t_max_moment(df),
    )


def _make_scipy(spec: str, name: str, params: dict[str, float]) -> Distribution:
    obj = _scipy_family(name)
    _check_scipy_params(spec, name, obj, params)
    mean, sd = _check_affine(spec, params)
    shape_kwargs = {k: v for k, v in params.items() if k not in ("mean", "sd")}
    shapes = {k: v for k, v in shape_kwargs.items() if k not in ("loc", "scale")}
    _check_scipy_support(spec, name, obj, shape_kwargs)
    alpha = scipy_tail_index(name, shapes)
    raw = _scipy_moments(spec, name, obj, shape_kwargs)
    if alpha is None:
        if sd is None and raw.var > 0:  # a law out of range is refused for that first
            _check_raw_sd(spec, raw._replace(sd=math.sqrt(raw.var)))
        given = ", ".join(f"{k}={_fmt(v)}" for k, v in shape_kwargs.items())
        raise VarcheckError(
            f"distribution {spec!r}: varcheck cannot tell from scipy's density of {name} "
            f"({given}) how heavy its tails are, so not which of its moments exist"
        )
    law = _usable_moments(raw, alpha, shape_kwargs.get("scale", 1.0), obj, shapes)
    if sd is None:
        _check_raw_sd(spec, law)
    canon_params = tuple(shape_kwargs.items())
    base = name + (
        ":" + ",".join(f"{kk}={_fmt(vv)}" for kk, vv in canon_params) if canon_params else ""
    )
    return _rescaled(spec, base, name, canon_params, law, mean, sd)


def _scipy_family(name: str) -> Any:
    """The scipy.stats continuous distribution ``scipy.NAME``, or an error naming the closest."""
    import scipy.stats

    short = name[len("scipy.") :]
    obj = getattr(scipy.stats, short, None)
    if not isinstance(obj, scipy.stats.rv_continuous):
        names = [
            n
            for n in dir(scipy.stats)
            if isinstance(getattr(scipy.stats, n), scipy.stats.rv_continuous)
        ]
        hint = did_you_mean(short, names, prefix="scipy.")
        raise VarcheckError(
            f"unknown distribution {name!r}{hint}; scipy.NAME must name a continuous "
            "scipy.stats distribution (e.g. scipy.gamma, scipy.lognorm, scipy.beta)"
        )
    return obj


def _check_scipy_params(spec: str, name: str, obj: Any, params: dict[str, float]) -> None:
    shapes = [s.strip() for s in obj.shapes.split(",")] if obj.shapes else []
    accepted = tuple(shapes) + ("loc", "scale", "mean", "sd")
    unknown = [k for k in params if k not in accepted]
    if unknown:
        raise VarcheckError(
            f"distribution {spec!r}: unknown parameter {unknown[0]!r}; {name} accepts "
            f"{', '.join(accepted)}"
        )
    missing = [s for s in shapes if s not in params]
    if missing:
        raise VarcheckError(
            f"distribution {spec!r}: {name} needs its shape parameter(s) {', '.join(missing)}"
        )
    if "scale" in params and params["scale"] <= 0:
        raise VarcheckError(f"distribution {spec!r}: scale={_fmt(params['scale'])} must be > 0")


class _Moments(NamedTuple):
    """A law's mean, variance, sd, skewness and kurtosis (``inf`` where they do not exist).

    ``sd`` is kept apart from ``var``: at a huge raw scale the variance overflows while the sd,
    all that ``sd=`` needs to rescale the law, does not.
    """

    mean: float
    var: float
    sd: float
    skew: float
    kurtosis: float
    max_moment: float = math.inf


def _scipy_moments(spec: str, name: str, obj: Any, shape_kwargs: dict[str, float]) -> _Moments:
    """scipy's own mean, variance, skewness and kurtosis (nan where it gives none).

    Taken at face value only for the moments the tail index says exist (:func:`_usable_moments`):
    for a heavy tail scipy's formulas give finite numbers past the index (invweibull with c = 3.2
    reports a kurtosis of -177).
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            m, v, s, k = (float(x) for x in obj(**shape_kwargs).stats(moments="mvsk"))
        except (ArithmeticError, ValueError, TypeError):
            raise _cannot_compute(spec, name, shape_kwargs) from None
    return _Moments(m, v, math.nan, s, k + 3.0)


def _check_scipy_support(spec: str, name: str, obj: Any, shape_kwargs: dict[str, float]) -> None:
    """Refuse parameters scipy calls invalid (its support is then nan)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            low, high = obj(**shape_kwargs).support()
        except (ArithmeticError, ValueError, TypeError):
            raise _cannot_compute(spec, name, shape_kwargs) from None
    if math.isnan(low) or math.isnan(high):
        given = ", ".join(f"{k}={_fmt(v)}" for k, v in shape_kwargs.items())
        raise VarcheckError(f"distribution {spec!r}: invalid parameters for {name} ({given})")


def _cannot_compute(spec: str, name: str, shape_kwargs: dict[str, float]) -> VarcheckError:
    given = ", ".join(f"{k}={_fmt(v)}" for k, v in shape_kwargs.items())
    return VarcheckError(
        f"distribution {spec!r}: scipy cannot compute {name} with these parameters ({given})"
    )


def _usable_moments(
    raw: _Moments, alpha: float, scale: float, obj: Any, shapes: dict[str, float]
) -> _Moments:
    """scipy's moments where the tail index ``alpha`` says they exist and scipy has a valid number.

    A moment past the index is ``inf`` (the mean ``nan``) whatever scipy says. One the index
    allows but scipy cannot give (nan, a negative variance, a kurtosis below 1 + skewness², which
    no law has) is ``inf`` too, and ``max_moment`` is lowered to match. A variance that overflows
    at a huge ``scale`` is recomputed from the unscaled law so that ``sd=`` can still rescale it.
    """
    max_moment = _max_moment(alpha)
    inf = math.inf
    mean = raw.mean if alpha > 1 and math.isfinite(raw.mean) else math.nan
    var = raw.var if alpha > 2 and math.isfinite(raw.var) and raw.var >= 0 else inf
    sd = math.sqrt(var)
    if alpha > 2 and raw.var == inf:
        sd = math.sqrt(_unscaled_var(obj, shapes)) * scale
    if not math.isfinite(sd):
        return _Moments(mean, inf, inf, inf, inf, min(max_moment, 1.0))
    skew = raw.skew if alpha > 3 and math.isfinite(raw.skew) else inf
    if not math.isfinite(skew):
        return _Moments(mean, var, sd, inf, inf, min(max_moment, 2.0))
    kurt = raw.kurtosis if alpha > 4 and math.isfinite(raw.kurtosis) else inf
    if not kurt >= (1.0 + skew * skew) * (1.0 - 1e-9):
        return _Moments(mean, var, sd, skew, inf, min(max_moment, 3.0))
    return _Moments(mean, var, sd, skew, kurt, max_moment)


def _unscaled_var(obj: Any, shapes: dict[str, float]) -> float:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        v = float(obj(**shapes).stats(moments="v"))
    return v if math.isfinite(v) and v >= 0 else math.inf


def _check_raw_sd(spec: str, law: _Moments) -> None:
    lo, hi = SD_RANGE
    if math.isfinite(law.sd) and not (lo * lo <= law.var <= hi * hi and lo <= law.sd <= hi):
        raise VarcheckError(
            f"distribution {spec!r}: its sd {law.sd:.3g} is outside the accepted range "
            f"[{lo:g}, {hi:g}] (give sd= to rescale it)"
        )


def _rescaled(
    spec: str,
    base: str,
    name: str,
    params: tuple[tuple[str, float], ...],
    law: _Moments,
    mean: float | None,
    sd: float | None,
) -> Distribution:
    """The law ``base`` moved to ``mean`` and scaled to ``sd`` (either may be None: kept)."""
    m, v = law.mean, law.var
    if sd is not None and not math.isfinite(law.sd):
        raise VarcheckError(
            f"distribution {spec!r}: sd= is impossible, {name} with these parameters has "
            "infinite variance"
        )
    if (mean is not None or sd is not None) and math.isnan(m):
        raise VarcheckError(
            f"distribution {spec!r}: mean=/sd= are impossible, {name} with these parameters "
            "has no mean"
        )
    factor = 1.0 if sd is None else sd / law.sd
    new_mean = m if mean is None else mean
    extra = ([f"mean={_fmt(mean)}"] if mean is not None else []) + (
        [f"sd={_fmt(sd)}"] if sd is not None else []
    )
    if sd is None:
        var, mu3, mu4 = v, law.skew * v**1.5, law.kurtosis * v * v
    else:
        # from the standardised moments at the target scale: scipy's raw mu4 would overflow for a
        # raw sd above ~1e77 however small the target sd
        var, mu3, mu4 = sd * sd, law.skew * sd**3, law.kurtosis * sd**4
    return Distribution(
        spec=base + ((("," if params else ":") + ",".join(extra)) if extra else ""),
        family=name,
        mean=new_mean,
        var=var,
        mu3=mu3 if math.isfinite(law.skew) else math.inf,
        mu4=mu4 if math.isfinite(law.kurtosis) else math.inf,
        params=params
        + tuple((kk, vv) for kk, vv in (("mean", mean), ("sd", sd)) if vv is not None),
        loc=new_mean - factor * m if extra else 0.0,
        scale=factor,
        max_moment=law.max_moment,
    )


# --- tail index ----------------------------------------------------------------------------------

#: A tail index read off a density within this distance of a whole number p is taken to be p, so
#: E|X|^p is called infinite. The density method finds indices to about 1e-4 (a plateau of
#: the log-log slope flat to 1e-4 over two decades), so 1e-3 leaves a tenfold margin; and a law
#: that close above p has E|X|^p of order 1/(index - p) >= 1000 times its scale's p-th power:
#: calling it infinite (no interval, or a caution) is the safe side of the boundary.
TAIL_TOL = 1e-3
#: Densities below exp(-700) (about 1e-304) are not read: scipy takes the logarithm of many of
#: its densities, which lose their digits as they become subnormal (below 2.2e-308).
_LOG_PDF_FLOOR = -700.0
#: A run of log-log slopes flat to within this over two decades is the tail's power law.
_PLATEAU_SPREAD = 1e-4
#: A tail still steepening past this index is taken as lighter than any power: no decision in
#: varcheck needs a moment above the 12th (the projection's Hall interval).
_ENOUGH_INDEX = 16.0
#: Time for reading one law's density point by point when scipy fails on the whole grid.
_TAIL_SECONDS = 0.5
_LN10 = math.log(10.0)


def _shape(name: str) -> Callable[[Mapping[str, float]], float]:
    return lambda s: s[name]


# scipy families whose tail index is a formula in their shapes, read off their densities: a
# density ~ |x|^-(a+1) in a tail gives index a (E|X|^p < inf exactly for p < a).
_TAIL_TABLE: dict[str, Callable[[Mapping[str, float]], float]] = {
    "t": _shape("df"),  # density ~ |x|^-(df+1)
    "nct": _shape("df"),
    "studentized_range": _shape("df"),
    "pareto": _shape("b"),  # P(X > x) = x^-b
    "lomax": _shape("c"),  # P(X > x) = (1 + x)^-c
    "invgamma": _shape("a"),  # density ~ x^-(a+1)
    "betaprime": _shape("b"),  # density ~ x^-(b+1)
    "f": lambda s: s["dfd"] / 2.0,  # density ~ x^-(dfd/2+1)
    "ncf": lambda s: s["dfd"] / 2.0,
    "fisk": _shape("c"),  # P(X > x) = 1 / (1 + x^c)
    "burr": _shape("c"),  # P(X > x) = 1 - (1 + x^-c)^-d ~ d x^-c
    "burr12": lambda s: s["c"] * s["d"],  # P(X > x) = (1 + x^c)^-d
    "invweibull": _shape("c"),  # P(X > x) = 1 - exp(-x^-c) ~ x^-c
    "loglaplace": _shape("c"),  # density c/2 x^-(c+1) for x > 1
    "mielke": _shape("s"),  # density ~ x^-(s+1)
    "kappa3": _shape("a"),  # density ~ x^-(a+1)
    "dpareto_lognorm": _shape("a"),  # right tail ~ x^-(a+1)
    "jf_skew_t": lambda s: 2.0 * min(s["a"], s["b"]),  # tails ~ |x|^-(2a+1), x^-(2b+1)
    "crystalball": lambda s: s["m"] - 1.0,  # left tail ~ |x|^-m
    "cauchy": lambda s: 1.0,
    "halfcauchy": lambda s: 1.0,
    "foldcauchy": lambda s: 1.0,
    "skewcauchy": lambda s: 1.0,
    "alpha": lambda s: 1.0,  # density ~ x^-2 phi(a - 1/x)
    "landau": lambda s: 1.0,  # right tail ~ x^-2
    "levy": lambda s: 0.5,  # density ~ x^-3/2
    "levy_l": lambda s: 0.5,
    "rel_breitwigner": lambda s: 3.0,  # density ~ x^-4
    "levy_stable": lambda s: s["alpha"] if s["alpha"] < 2 else math.inf,
    "genpareto": lambda s: 1.0 / s["c"] if s["c"] > 0 else math.inf,  # (1 + c x)^(-1/c)
    "genextreme": lambda s: -1.0 / s["c"] if s["c"] < 0 else math.inf,  # ~ (-c x)^(1/c)
    "gengamma": lambda s: -s["a"] * s["c"] if s["c"] < 0 else math.inf,  # X = G^(1/c)
    "tukeylambda": lambda s: -1.0 / s["lam"] if s["lam"] < 0 else math.inf,
    # scipy calls its support the real line but draws in [-pi, pi]: a periodic density
    "vonmises": lambda s: math.inf,
}
# common families with bounded support or tails lighter than any power for every shape (a
# density ~ exp(-x^c), c > 0, or lognormal): they skip the density, whose tail the grid of
# |x| <= 1e300 misses when a shape puts the law's mass that far out (gamma with a = 1e300)
_LIGHT_FAMILIES = (
    "norm halfnorm skewnorm truncnorm uniform triang beta expon gamma erlang chi chi2 rayleigh "
    "maxwell weibull_min weibull_max gumbel_r gumbel_l logistic laplace lognorm"
).split()
_TAIL_TABLE.update(dict.fromkeys(_LIGHT_FAMILIES, lambda s: math.inf))


def scipy_tail_index(
    name: str, shapes: Mapping[str, float] | None = None, *, table: bool = True
) -> float | None:
    """Tail index of a continuous scipy law: E|X|^p is finite exactly for p below it.

    Parameters
    ----------
    name : str
        ``scipy.NAME`` or ``NAME`` of a continuous ``scipy.stats`` distribution.
    shapes : mapping, optional
        Its shape parameters (``loc`` and ``scale`` do not change the index and are not given).
    table : bool
        Use the formula of a family whose index is known exactly (``t``: df, ``f``: dfd/2, ...);
        ``False`` reads every law off its density, as for a family outside the table.

    Returns
    -------
    float or None
        The index; ``inf`` for a bounded law or tails lighter than any power (normal, gamma,
        lognormal); ``None`` when the density does not tell. An index read off the density
        within :data:`TAIL_TOL` of a whole number is that number.

    Notes
    -----
    Each unbounded side x -> +-inf is read from the law's log-density on a grid of |x| from
    1e-2 to 1e300, one point per decade (refined to 97 points when fewer than 16 decades lie
    between the density's largest value and where it falls below e^-700). A density
    ~ |x|^-(a+1) has log-log slope -(a+1): where the slope is flat to 1e-4 over two decades
    the side's index is a (the heaviest such plateau counts). A slope still steepening at the
    end is a lighter tail than any power (inf) when its steepening does not slow down (normal,
    exponential, lognormal) or the local index passed 16; otherwise the local index is kept,
    a lower bound (a slope still flattening keeps its last local index too). A density that
    drops from its largest value to below 1e-304 within about a decade is light. The law's
    index is the smaller of its two sides'. The survival function is not used: scipy computes
    many as 1 - cdf, which is lost below 1e-16; nor is ``expect``, whose quadrature returns
    finite numbers for divergent moments.

    Examples
    --------
    >>> scipy_tail_index("scipy.t", {"df": 5})
    5.0
    >>> round(scipy_tail_index("scipy.t", {"df": 5}, table=False), 6)
    5.0
    >>> scipy_tail_index("scipy.gamma", {"a": 2})
    inf
    """
    short = name.removeprefix("scipy.")
    return _tail_index(short, tuple(sorted((shapes or {}).items())), table)


@functools.lru_cache(maxsize=512)
def _tail_index(short: str, shapes: tuple[tuple[str, float], ...], table: bool) -> float | None:
    params = dict(shapes)
    if table and short in _TAIL_TABLE:
        return float(_TAIL_TABLE[short](params))
    import scipy.stats

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        frozen = getattr(scipy.stats, short)(**params)
        low, high = (float(b) for b in frozen.support())
        deadline = time.monotonic() + _TAIL_SECONDS
        sides = [
            _side_tail_index(frozen, sign, deadline)
            for sign, end in ((1.0, high), (-1.0, low))
            if not math.isfinite(end)
        ]
    if any(index is None for index in sides):
        return None
    index = min((side for side in sides if side is not None), default=math.inf)
    nearest = round(index) if math.isfinite(index) else index
    return float(nearest) if abs(index - nearest) <= TAIL_TOL else float(index)


def _max_moment(alpha: float) -> float:
    """Largest whole p < alpha (0 at least), ``inf`` for an infinite index."""
    return math.inf if math.isinf(alpha) else float(max(math.ceil(alpha) - 1, 0))


def _side_tail_index(frozen: Any, sign: float, deadline: float) -> float | None:
    """Tail index of the side ``sign`` (+1: x -> inf, -1: x -> -inf) from the log-density."""
    decades = np.arange(-2.0, 301.0)
    log_pdf = _log_pdf(frozen, sign * 10.0**decades, deadline)
    start, stop = _tail_run(log_pdf)
    if 0 < stop - start < 16 and decades[start] < 300.0:
        decades = np.linspace(decades[start], min(decades[stop - 1] + 1.0, 300.0), 97)
        log_pdf = _log_pdf(frozen, sign * 10.0**decades, deadline)
        start, stop = _tail_run(log_pdf)
    if stop - start >= 8:
        index = _index_from_slopes(decades[start:stop] * _LN10, log_pdf[start:stop])
        if index is not None:
            return index
    # the density fell from its largest value to below e^-700 (or to 0) within a few steps of
    # at most 0.18 decades: a log-log slope below -200
    after = log_pdf[stop] if stop < log_pdf.size else math.nan
    if 0 < stop - start < 8 and (after == -math.inf or after <= _LOG_PDF_FLOOR):
        return math.inf
    return None


def _log_pdf(frozen: Any, x: np.ndarray, deadline: float) -> np.ndarray:
    """scipy's log-density at ``x``; point by point (nan where it fails) if the grid fails."""
    try:
        return np.asarray(frozen.logpdf(x), dtype=float)
    except Exception:  # scipy's special functions raise for some far arguments
        pass
    out = np.full(x.shape, np.nan)
    for i, xi in enumerate(x):
        if time.monotonic() > deadline:
            break
        try:
            out[i] = float(frozen.logpdf(xi))
        except Exception:
            continue
    return out


def _tail_run(log_pdf: np.ndarray) -> tuple[int, int]:
    """Indices [start, stop) from the density's largest value on while it stays readable."""
    readable = np.isfinite(log_pdf) & (log_pdf > _LOG_PDF_FLOOR)
    if not readable.any():
        return 0, 0
    start = int(np.argmax(np.where(readable, log_pdf, -np.inf)))
    lost = np.flatnonzero(~readable[start:])
    return start, start + (int(lost[0]) if lost.size else log_pdf.size - start)


def _index_from_slopes(log_x: np.ndarray, log_pdf: np.ndarray) -> float | None:
    """Tail index from the log-log slopes of a density on an even grid of log|x| (see
    :func:`scipy_tail_index`), or None when they neither level off nor keep steepening."""
    slopes = np.diff(log_pdf) / np.diff(log_x)
    step = (log_x[-1] - log_x[0]) / (log_x.size - 1)
    width = max(3, math.ceil(2 * _LN10 / step - 1e-9) + 1)  # slopes spanning two decades
    if slopes.size >= width:
        windows = np.lib.stride_tricks.sliding_window_view(slopes, width)
        flat = (np.ptp(windows, axis=1) <= _PLATEAU_SPREAD) & (windows.max(axis=1) < -1.0)
        if flat.any():
            # the heaviest plateau: the largest (least negative) slope
            return -float(np.max(np.median(windows[flat], axis=1))) - 1.0
    last = slopes[-1]
    if not last < -1.0:
        return None
    mid = slopes.size // 2
    change = np.diff(slopes[mid:])
    if np.all(change <= 0):  # still steepening
        early = (slopes[mid] - slopes[0]) / (log_x[mid] - log_x[0])
        late = (slopes[-1] - slopes[mid]) / (log_x[-1] - log_x[mid])
        if late <= 0.5 * early or -last - 1.0 > _ENOUGH_INDEX:
            return math.inf
        return -last - 1.0
    if np.all(change >= 0):  # flattening: the far end is the heaviest seen
        return -last - 1.0
    return None
