"""Validation of the options every command shares, in one place.

Each public function checks its arguments once, here, and gets back clean values: the seed, the
sampling effort (confidence, precision or a fixed budget, a time cap), the entry laws and their
correlation, a tolerance. Messages name the value and what is accepted. The module imports no
numpy at the top, so the command line can use it at no start-up cost.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import VarcheckError
from .messages import duration_text, shown

if TYPE_CHECKING:
    from .distributions import Distribution
    from .user_code import UserSampler

__all__ = [
    "MAX_RUN_SECONDS",
    "MIN_ALPHA",
    "MAX_SAMPLES",
    "MIN_SAMPLES",
    "MIN_TOLERANCE",
    "feasible_effort",
    "confidence_from",
    "entry_laws",
    "resolve_seed",
    "sampling_effort",
    "valid_confidence",
    "valid_count",
    "valid_positive",
    "valid_rho",
    "valid_tolerance",
    "user_sampler",
]

#: Fewest products a fixed budget may ask for: enough for MIN_BLOCKS (200) blocks, below which
#: the interval's own standard error is too noisy (93-94% coverage at 100-300 products).
MIN_SAMPLES = 1000


#: Confidence levels stay this far from 0 and 1: nearer, the level is below the resolution of
#: the quantiles and p-values (and of float arithmetic), and no test means anything.
MIN_ALPHA = 1e-9
#: Most products a fixed budget may ask for (even with a time cap: the count is reported).
MAX_SAMPLES = 10**15
#: Smallest relative tolerance of an equivalence test: settling a narrower margin needs a
#: precision no run reaches in a day (see feasible_effort).
MIN_TOLERANCE = 1e-6
#: The longest run a precision or a sample count may ask for without a ``max_seconds`` cap.
MAX_RUN_SECONDS = 86_400.0
#: Optimistic costs (a fast machine, all its cores): a run refused would take longer anywhere.
#: Seconds per product with a fixed budget (measured: 3e-8 at d_k=16 on one core, 2e-7 at 512).
_SECONDS_PER_PRODUCT = 2e-9
#: Seconds to reach relative precision p is about this / p^2 at 95% (measured: 1.4e-6 for
#: normal entries in shared blocks, the cheapest case; heavier tails need far more).
_SECONDS_AT_UNIT_PRECISION = 1e-7


def _real(value: object) -> TypeGuard[float]:
    """A real number (any numeric type, numpy's included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def resolve_seed(seed: int | None) -> int:
    """The seed to use: the one given, or a fresh one drawn from the OS (to be reported)."""
    if seed is None:
        import secrets

        return secrets.randbelow(2**32)
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise VarcheckError(f"seed must be a whole number >= 0, got {seed!r}")
    return seed


def valid_confidence(confidence: float) -> float:
    """A confidence level in (0, 1), at least :data:`MIN_ALPHA` from either end, as a float."""
    if not (_real(confidence) and 0.0 < confidence < 1.0):
        raise VarcheckError(f"confidence must be in (0, 1), got {shown(confidence)}")
    if not MIN_ALPHA <= confidence <= 1.0 - MIN_ALPHA:
        raise VarcheckError(
            f"confidence must be in [{MIN_ALPHA:g}, 1 - {MIN_ALPHA:g}] (nearer 0 or 1 no test "
            f"is meaningful in floating point), got {shown(confidence)}"
        )
    return float(confidence)


def feasible_effort(
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    dks: tuple[int, ...] = (1,),
) -> None:
    """Refuse, before any work, a precision or a sample count no machine reaches in a day.

    The estimate is optimistic, summed over the tests (one per value in ``dks``; a product
    costs more at a larger d_k); a ``max_seconds`` cap bounds the run whatever it asks for, so
    with one nothing is refused.
    """
    if max_seconds is not None:
        return
    tests = len(dks)
    if samples is not None:
        name, value = "samples", f"{samples:.3g}"
        products = float(samples) * tests
        seconds = float(samples) * _SECONDS_PER_PRODUCT * sum(1.0 + dk / 64.0 for dk in dks)
    else:
        from .estimation import normal_quantile  # numpy: not at the command line's start

        name, value = "precision", shown(precision)
        z = normal_quantile(confidence)
        # _SECONDS_AT_UNIT_PRECISION is measured at 95%
        ratio = min(z / normal_quantile(0.95) / precision, 1e150)  # type: ignore[operator]  # 1e-320: no overflow
        seconds = _SECONDS_AT_UNIT_PRECISION * ratio**2 * tests
        products = 2.0 * (z / precision) ** 2 * tests if ratio < 1e150 else math.inf  # type: ignore[operator]
    if seconds > MAX_RUN_SECONDS:
        many = f"about {products:.2g}" if math.isfinite(products) else "more than 1e300"
        where = "per d_k" if tests == 1 else f"over {tests} tests"
        raise VarcheckError(
            f"{name} {value} needs {many} products {where}: at least "
            f"{duration_text(seconds)} even on a fast machine, above the limit of "
            f"{duration_text(MAX_RUN_SECONDS)} for a run without max_seconds; ask for less, or cap "
            f"the time with max_seconds (--max-seconds)"
        )


def valid_count(
    name: str, value: object, least: int, most: int | None = None, *, whole_floats: bool = False
) -> int:
    """``value`` as a whole number in ``least..most`` (no upper bound when ``most`` is None).

    With ``whole_floats`` a float holding a whole number (``1e6``) is accepted as that number.
    """
    bound = f">= {least}" if most is None else f"in {least}..{most}"
    if whole_floats and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if (
        not isinstance(value, numbers.Integral)
        or isinstance(value, bool)
        or int(value) < least
        or (most is not None and int(value) > most)
    ):
        raise VarcheckError(f"{name} must be a whole number {bound}, got {shown(value)}")
    return int(value)


def valid_positive(name: str, value: object) -> float:
    """``value`` as a finite float > 0."""
    if not (_real(value) and math.isfinite(value) and value > 0):
        raise VarcheckError(f"{name} must be a finite number > 0, got {shown(value)}")
    return float(value)


def sampling_effort(
    confidence: float,
    precision: float | None,
    fixed: int | float | None,
    max_seconds: float | None,
    *,
    name: str = "samples",
    least: int = MIN_SAMPLES,
    most: int | None = None,
    whole_floats: bool = True,
    feasible: bool = True,
) -> tuple[float, float | None, int | None, float | None]:
    """Validate the sampling effort: a confidence, and a precision or a fixed budget ``fixed``.

    Returns ``(confidence, precision, fixed, max_seconds)`` cleaned; ``precision`` is None when
    a fixed budget is given. ``name``, ``least``, ``most`` and ``whole_floats`` describe the
    budget (``samples`` products by default; ``project`` counts ``blocks``). A budget of
    products is checked by :func:`feasible_effort` unless ``feasible`` is false (a claim file's
    defaults, which the command line may still cap).
    """
    confidence = valid_confidence(confidence)
    if most is None and name == "samples":
        most = MAX_SAMPLES
    if fixed is not None:
        fixed = valid_count(name, fixed, least, most, whole_floats=whole_floats)
        precision = None
    elif not (_real(precision) and math.isfinite(precision) and 0 < precision < 1):
        raise VarcheckError(f"precision must be in (0, 1), got {shown(precision)}")
    else:
        precision = float(precision)
    if max_seconds is not None and not (
        _real(max_seconds) and math.isfinite(max_seconds) and max_seconds > 0
    ):
        raise VarcheckError(f"max_seconds must be > 0, got {shown(max_seconds)}")
    if max_seconds is not None and not isinstance(max_seconds, int | float):
        max_seconds = float(max_seconds)  # a numpy number, as a plain one for the result
    if name == "samples" and feasible:
        feasible_effort(confidence, precision, fixed, max_seconds)
    return confidence, precision, fixed, max_seconds


def entry_laws(
    dist: str | Distribution | None,
    q_dist: str | Distribution | None,
    k_dist: str | Distribution | None,
) -> tuple[Distribution, Distribution]:
    """The laws of q and k: ``dist`` (normal when not given), each overridden when given."""
    from .distributions import parse_distribution

    base = parse_distribution(dist) if dist is not None else parse_distribution("normal")
    q = parse_distribution(q_dist) if q_dist is not None else base
    k = parse_distribution(k_dist) if k_dist is not None else base
    return q, k


def valid_rho(rho: float, q: Distribution, k: Distribution) -> float:
    """``rho`` as a float in [-1, 1]; a non-zero correlation needs normal q and k."""
    if not (_real(rho) and -1.0 <= rho <= 1.0):
        raise VarcheckError(f"rho must be in [-1, 1], got {shown(rho)}")
    if rho != 0.0 and not (q.is_normal and k.is_normal):
        raise VarcheckError(
            f"rho={rho!r} needs normal entries for q and k (got q ~ {q.spec}, k ~ {k.spec})"
        )
    return float(rho)


def valid_tolerance(tolerance: float | None) -> float | None:
    """A relative tolerance in [:data:`MIN_TOLERANCE`, 1), or None."""
    if tolerance is None:
        return None
    if not (_real(tolerance) and 0.0 < tolerance < 1.0):
        raise VarcheckError(f"tolerance must be in (0, 1), got {shown(tolerance)}")
    if tolerance < MIN_TOLERANCE:
        raise VarcheckError(
            f"tolerance must be >= {MIN_TOLERANCE:g} (a narrower margin needs an interval "
            f"narrower still: over 1e13 products), got {shown(tolerance)}"
        )
    return float(tolerance)


def confidence_from(confidence: float | None, alpha: float | None) -> float:
    """The confidence level from ``confidence`` or ``alpha`` (they must agree), 0.95 by default."""
    if alpha is None:
        return 0.95 if confidence is None else confidence
    if not (_real(alpha) and 0.0 < alpha < 1.0):
        raise VarcheckError(f"alpha must be in (0, 1), got {shown(alpha)}")
    if confidence is not None and not math.isclose(confidence, 1.0 - alpha):
        raise VarcheckError(
            f"confidence={confidence!r} and alpha={alpha!r} disagree; give one of them"
        )
    return 1.0 - alpha


def user_sampler(
    sampler: Any,
    laws: tuple[Any, Any, Any, float],
    scheduler: str | None,
) -> UserSampler | None:
    """The user's sampler (``None`` without one); refuses options it makes meaningless.

    ``laws`` is ``(dist, q_dist, k_dist, rho)``: they describe varcheck's own sampler, so with a
    user's sampler they would be silently ignored.
    """
    if sampler is None:
        return None
    from .user_code import as_sampler

    user = as_sampler(sampler)
    names = ("dist", "q_dist", "k_dist")
    given = [n for n, v in zip(names, laws[:3], strict=True) if v is not None]
    given += ["rho"] if laws[3] else []
    if given:
        raise VarcheckError(
            f"{', '.join(given)} {'describe' if len(given) > 1 else 'describes'} varcheck's own "
            f"q and k; with sampler {user.target} the values come from it: leave "
            f"{'them' if len(given) > 1 else 'it'} out"
        )
    if scheduler is not None:
        raise VarcheckError(
            f"sampler {user.target} runs in this process: a Dask scheduler is not supported "
            "with a sampler (use workers=N for threads)"
        )
    return user
