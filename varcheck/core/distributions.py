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
Cauchy variable) rather than turned into numbers.
"""

from __future__ import annotations

import difflib
import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import VarcheckError

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = ["Distribution", "parse_distribution", "NAMED_FAMILIES", "standard_normal_float32"]

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
        Largest whole p <= 8 with E|X|^p finite (``inf`` when all exist); used to warn when the
        estimator's own skewness does not exist (p < 6), which slows its convergence.
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
        dt = np.dtype(dtype)
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
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
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
    m, v, mu3, mu4 = _scipy_moments(spec, name, obj, shape_kwargs, rescaled="sd" in params)
    max_moment = _scipy_max_moment(name, shape_kwargs, v, mu4)
    canon_params = tuple(shape_kwargs.items())
    base = name + (
        ":" + ",".join(f"{kk}={_fmt(vv)}" for kk, vv in canon_params) if canon_params else ""
    )
    law = Distribution(
        spec=base,
        family=name,
        mean=m,
        var=v,
        mu3=mu3,
        mu4=mu4,
        params=canon_params,
        max_moment=max_moment,
    )
    if mean is None and sd is None:
        return law
    return _rescaled(spec, law, mean, sd)


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
        close = difflib.get_close_matches(short, names, n=1)
        hint = f" (did you mean 'scipy.{close[0]}'?)" if close else ""
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


def _scipy_moments(
    spec: str, name: str, obj: Any, shape_kwargs: dict[str, float], *, rescaled: bool
) -> tuple[float, float, float, float]:
    """Mean, variance, third and fourth central moments of a scipy law (inf where divergent)."""
    given = ", ".join(f"{k}={_fmt(v)}" for k, v in shape_kwargs.items())
    try:
        import warnings

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            frozen = obj(**shape_kwargs)
            low, high = frozen.support()
            m, v, s, k = (float(x) for x in frozen.stats(moments="mvsk"))
    except (ArithmeticError, ValueError, TypeError):
        raise VarcheckError(
            f"distribution {spec!r}: scipy cannot compute {name} with these parameters ({given})"
        ) from None
    if math.isnan(low) or math.isnan(high):
        raise VarcheckError(f"distribution {spec!r}: invalid parameters for {name} ({given})")
    # scipy reports nan where the defining integral diverges (and, for some heavy tails such as
    # invweibull with c < 2, a negative number); by the L^p definition the variance (and higher
    # moments) are then infinite, the mean undefined.
    v = v if math.isfinite(v) and v >= 0 else math.inf
    lo, hi = SD_RANGE
    if math.isfinite(v) and not lo * lo <= v <= hi * hi and not rescaled:
        raise VarcheckError(
            f"distribution {spec!r}: its sd {math.sqrt(v):.3g} is outside the accepted range "
            f"[{lo:g}, {hi:g}] (give sd= to rescale it)"
        )
    mu3 = s * v**1.5 if math.isfinite(s) and math.isfinite(v) else math.inf
    mu4 = (k + 3.0) * v * v if math.isfinite(k) and math.isfinite(v) else math.inf
    m = m if math.isfinite(m) else math.nan
    return m, v, mu3, mu4


def _rescaled(spec: str, law: Distribution, mean: float | None, sd: float | None) -> Distribution:
    """``law`` moved to ``mean`` and scaled to ``sd`` (either may be None: kept as it is)."""
    name, m, v = law.family, law.mean, law.var
    if sd is not None and not math.isfinite(v):
        raise VarcheckError(
            f"distribution {spec!r}: sd= is impossible, {name} with these parameters has "
            "infinite variance"
        )
    if math.isnan(m):
        raise VarcheckError(
            f"distribution {spec!r}: mean=/sd= are impossible, {name} with these parameters "
            "has no mean"
        )
    factor = 1.0 if sd is None else sd / math.sqrt(v)
    new_mean = m if mean is None else mean
    extra = ([f"mean={_fmt(mean)}"] if mean is not None else []) + (
        [f"sd={_fmt(sd)}"] if sd is not None else []
    )
    return Distribution(
        spec=law.spec + ("," if law.params else ":") + ",".join(extra),
        family=name,
        mean=new_mean,
        var=v * factor * factor,
        mu3=law.mu3 * factor**3 if math.isfinite(law.mu3) else math.inf,
        mu4=law.mu4 * factor**4 if math.isfinite(law.mu4) else math.inf,
        params=law.params
        + tuple((kk, vv) for kk, vv in (("mean", mean), ("sd", sd)) if vv is not None),
        loc=new_mean - factor * m,
        scale=factor,
        max_moment=law.max_moment,
    )


# scipy families whose p-th moment is finite exactly for p below one shape parameter. scipy's
# numerical moment() returns finite garbage for heavy tails, so it cannot be used to tell.
_SCIPY_TAIL_SHAPE = {
    "t": "df",
    "nct": "df",
    "pareto": "b",
    "lomax": "c",
    "invgamma": "a",
    "f": "dfd",
    "fisk": "c",
    "burr": "c",
    "invweibull": "c",
    "loglaplace": "c",
}


def _scipy_max_moment(name: str, shapes: dict[str, float], var: float, mu4: float) -> float:
    """Largest whole p <= 8 with a finite p-th moment (``inf``: assumed all, when mu4 is finite)."""
    short = name[len("scipy.") :]
    index = None
    if short in _SCIPY_TAIL_SHAPE:
        index = shapes[_SCIPY_TAIL_SHAPE[short]]
        if short == "f":
            index /= 2.0  # E[F^p] is finite for p < dfd / 2
    elif short == "burr12":
        index = shapes["c"] * shapes["d"]
    elif short in ("genpareto", "genextreme"):
        c = shapes["c"]
        heavy = c > 0 if short == "genpareto" else c < 0
        index = 1.0 / abs(c) if heavy else None
    if index is not None:
        return float(math.ceil(index) - 1)
    if not math.isfinite(var):
        return 1.0
    if not math.isfinite(mu4):
        return 3.0
    return math.inf
