"""Why ``np.var(A @ B)`` is rarely the d_k it "should" be: the exact law of that experiment.

The experiment: A is ``N × D`` and B is ``D × M``, both with i.i.d. entries, and
``S = np.var(A @ B, ddof=ddof)`` is computed over the ``n = N M`` entries of the product.

One entry C_ij = sum_l A_il B_lj has variance ``v = D Var(AB)`` (D for unit entries), but S is
not an unbiased estimate of v: the entries are centred on their own mean, and entries that share a
row of A (or a column of B) are correlated when the entries have non-zero means. Writing
``c_row = D Var(A) E[B]^2`` and ``c_col = D E[A]^2 Var(B)`` for the covariance of two entries
sharing a row or a column, the sum of squared deviations SS has

    E[SS] = (n - 1) v - (M - 1) c_row - (N - 1) c_col,    E[S] = E[SS] / (n - ddof).

The spread of S needs fourth moments of the entries. With u = Aᵀ1, w = B1, G = AᵀA, H = BBᵀ,

    SS = sum_{l,l'} G_ll' H_ll' - (u·w)^2 / n,

so E[SS^2] is a sum over index patterns of products of raw moments of A's and B's entries. Each
pattern of the D-side indices (a set partition) is counted with a falling factorial, and inside it
the A-side (row indices) and B-side (column indices) expectations factor. :func:`exact_moments`
does that enumeration in exact rational arithmetic (the float moments are converted exactly), so
``Var(S) = (E[SS^2] - E[SS]^2) / (n - ddof)^2`` carries no cancellation error even for the
1111 × 111 × 1111 case.

Quantiles, percentiles and p-values have no closed form: they come from simulating the experiment
(with their own Monte-Carlo error), or, for shapes too large to simulate thousands of times, from a
gamma law with the exact mean and standard deviation (labelled as such). A gamma rather than a
normal: S is a non-negative quadratic form, right-skewed when it has few effective degrees of
freedom, and such shapes have a large N·D·M, so either D is large (entries close to normal, S
close to a scaled chi-square, which is a gamma) or N·M is (S close to normal, which a gamma with a
large shape parameter also is).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .._version import __version__
from ..core.distributions import Distribution, parse_distribution
from ..core.estimation import normal_quantile
from ..core.messages import shown, size_text
from ..core.options import entry_laws, resolve_seed, valid_confidence, valid_count
from ..core.theory import dot_product_theory
from ..core.verdicts import CONSISTENT, REJECTED, UNRELIABLE, exit_code, outcome_of, verdict_of
from ..errors import VarcheckError
from ..output.display import Displayable
from .limits import approx, overflowing_laws, refuse

__all__ = [
    "Shape",
    "parse_shape",
    "VarMoments",
    "exact_moments",
    "QuantileEstimate",
    "Reading",
    "ShapeRow",
    "ExplainResult",
    "explain",
    "simulate_np_var",
    "SEED_SHAPE",
    "SEED_OBSERVED",
    "GROWING_SHAPES",
]

#: The seed thread's experiment: two 2 × 2 matrices, ``np.var`` of the product was 1.6.
SEED_SHAPE = (2, 2, 2)
SEED_OBSERVED = 1.6
#: The thread's large experiment (1111 × 111 times 111 × 1111).
LARGE_SEED_SHAPE = (1111, 111, 1111)
GROWING_SHAPES: tuple[tuple[int, int, int], ...] = (
    (2, 2, 2),
    (4, 4, 4),
    (8, 8, 8),
    (16, 16, 16),
    (64, 64, 64),
    (256, 256, 256),
    LARGE_SEED_SHAPE,
)
QUANTILE_LEVELS = (0.025, 0.25, 0.5, 0.75, 0.975)
#: Cost units (about a nanosecond each: one multiply-add; drawing an entry counts
#: ``DRAW_COST``) spent simulating one shape by default, about half a second.
SIMULATION_BUDGET = 6e8
DRAW_COST = 15
#: Fewer replicates than this give quantile intervals too wide to be useful.
MIN_REPLICATES = 2000
#: By default, MIN_REPLICATES are simulated even past the budget up to this cost (a few
#: seconds); beyond it the gamma approximation is used.
MAX_DEFAULT_COST = 3e9
#: An explicit ``replicates`` may cost at most this (a few minutes) ...
MAX_EXPLICIT_COST = 2e11
#: Cost units of one replicate beyond :func:`replicate_cost` (numpy's overhead per experiment),
#: counted when an explicit ``replicates`` is checked against MAX_EXPLICIT_COST.
REPLICATE_OVERHEAD = 500
#: ... one replicate may hold at most this many float64 values (A, B and A @ B; 400 MB) ...
MAX_REPLICATE_ELEMENTS = 50_000_000
#: ... and the simulated values at most about 763 MiB (see :func:`replicates_bytes`).
MAX_REPLICATES = 50_000_000
#: np.var over at most this many entries counts as taken over few entries: its own law is then
#: far from normal, skewed like a chi-square with (entries - 1) degrees of freedom.
FEW_ENTRIES = 100
#: Over few entries, an entry kurtosis above this (a normal variable has 3) counts as heavy
#: tails: one large entry then often dominates np.var's squared deviations.
HEAVY_KURTOSIS = 3.3
#: A reading counts as skewed to the right when its median lies more than this many standard
#: deviations below its mean.
SKEW_SD = 0.05
_CHUNK_ELEMENTS = 1 << 21
#: An interrupted simulation with fewer experiments than this falls back on the gamma law.
MIN_INTERRUPTED_REPLICATES = 20
#: A reading's verdict when no value was observed: there is nothing to judge.
NO_OBSERVATION = "none"
_MAX_SIDE = 100_000


class Shape(tuple):
    """``(N, D, M)``: A is N × D, B is D × M."""

    __slots__ = ()

    def __new__(cls, n: int, d: int, m: int) -> Shape:
        return super().__new__(cls, (n, d, m))

    @property
    def n(self) -> int:
        return self[0]

    @property
    def d(self) -> int:
        return self[1]

    @property
    def m(self) -> int:
        return self[2]

    @property
    def entries(self) -> int:
        """Number of entries of the product, N M."""
        return self[0] * self[2]

    def __str__(self) -> str:
        return f"{self[0]}x{self[1]}x{self[2]}"


def parse_shape(spec: str | Sequence[int]) -> Shape:
    """Parse ``"NxDxM"`` (or a 3-sequence) into a :class:`Shape`.

    Examples
    --------
    >>> parse_shape("1111x111x1111")
    (1111, 111, 1111)
    """
    accepted = "accepted: NxDxM with whole numbers >= 1, e.g. 2x2x2 or 1111x111x1111"
    if isinstance(spec, str):
        parts = spec.lower().replace("×", "x").split("x")
        if len(parts) != 3:
            raise VarcheckError(f"shape {spec!r} is not NxDxM; {accepted}")
        try:
            values = [int(p.strip()) for p in parts]
        except ValueError:
            raise VarcheckError(
                f"shape {spec!r} has a part that is not a whole number; {accepted}"
            ) from None
    else:
        values = list(spec)
        if len(values) != 3 or not all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values
        ):
            raise VarcheckError(f"shape {spec!r} is not three whole numbers; {accepted}")
    if any(v < 1 or v > _MAX_SIDE for v in values):
        raise VarcheckError(f"shape {spec!r}: every side must be in 1..{_MAX_SIDE}; {accepted}")
    return Shape(*(int(v) for v in values))


# --- exact moments -----------------------------------------------------------------------------


def _set_partitions(n: int) -> Iterator[list[int]]:
    """Every set partition of ``range(n)`` as a block label per element (restricted growth)."""

    def rec(prefix: list[int], top: int) -> Iterator[list[int]]:
        if len(prefix) == n:
            yield list(prefix)
            return
        for label in range(top + 1):
            prefix.append(label)
            yield from rec(prefix, max(top, label + 1))
            prefix.pop()

    if n == 0:
        yield []
        return
    yield from rec([], 0)


def _falling(x: int, k: int) -> int:
    out = 1
    for i in range(k):
        out *= x - i
    return out


def _side_expectation(
    free: Sequence[int], fixed: Sequence[int], size: int, moments: Sequence[Fraction]
) -> Fraction:
    """E[prod_f X_{free_f, fixed_f}] summed over the free indices in 1..size.

    ``free[f]`` names the summation variable of factor f, ``fixed[f]`` the block of the shared
    (D-side) index it was given. Equal (free, fixed) pairs are the same entry, whose power gives a
    raw moment; distinct entries are independent.
    """
    n_free = max(free) + 1
    total = Fraction(0)
    for part in _set_partitions(n_free):
        count = _falling(size, max(part) + 1)
        if count == 0:
            continue
        mult: dict[tuple[int, int], int] = {}
        for f, c in zip(free, fixed, strict=True):
            key = (part[f], c)
            mult[key] = mult.get(key, 0) + 1
        term = Fraction(count)
        for power in mult.values():
            term *= moments[power]
        total += term
    return total


def _pattern_sum(
    a_free: Sequence[int],
    b_free: Sequence[int],
    shape: Shape,
    ma: Sequence[Fraction],
    mb: Sequence[Fraction],
) -> Fraction:
    """Sum over the D-side indices l_1..l_k (one per factor) of E_A[...] E_B[...]."""
    total = Fraction(0)
    for part in _set_partitions(len(a_free)):
        count = _falling(shape.d, max(part) + 1)
        if count == 0:
            continue
        ea = _side_expectation(a_free, part, shape.n, ma)
        eb = _side_expectation(b_free, part, shape.m, mb)
        total += count * ea * eb
    return total


@dataclass(frozen=True)
class VarMoments:
    """Exact mean and standard deviation of ``np.var(A @ B, ddof)``.

    Attributes
    ----------
    shape : Shape
    ddof : int
    entry_var : float
        Variance of one entry of A @ B, ``D Var(AB)``.
    row_cov, col_cov : float
        Covariance of two entries sharing a row of A / a column of B (zero for zero-mean entries).
    expected : float
        E[np.var(A @ B, ddof)] (``inf`` if the entries have no finite variance).
    sd : float
        Its standard deviation (``inf`` if the entries have no finite fourth moment).
    """

    shape: Shape
    ddof: int
    entry_var: float
    row_cov: float
    col_cov: float
    expected: float
    sd: float

    @property
    def bias_factor(self) -> float:
        """expected / entry_var: what np.var recovers of one entry's variance on average."""
        return self.expected / self.entry_var if self.entry_var else math.nan


def _raw(dist: Distribution) -> list[float]:
    return [1.0] + [dist.raw_moment(j) for j in (1, 2, 3, 4)]


def exact_moments(
    shape: Shape | str | Sequence[int],
    ddof: int = 0,
    a_dist: Distribution | str = "normal",
    b_dist: Distribution | str | None = None,
) -> VarMoments:
    """Exact E and sd of ``np.var(A @ B, ddof)`` for i.i.d. entries.

    Parameters
    ----------
    shape : Shape or str
        ``(N, D, M)`` or ``"NxDxM"``.
    ddof : int
        0 or 1, as in ``np.var``; needs ``N M > ddof``.
    a_dist, b_dist : Distribution or str
        Entry distributions of A and B (``b_dist`` defaults to ``a_dist``).

    Returns
    -------
    VarMoments

    Examples
    --------
    >>> mom = exact_moments("2x2x2")
    >>> mom.expected       # (n - 1) / n * D with n = 4 entries, D = 2
    1.5
    >>> round(mom.sd, 6)
    2.179449
    """
    shp = parse_shape(shape) if not isinstance(shape, Shape) else shape
    a, b = entry_laws(parse_distribution(a_dist), None, b_dist)  # b defaults to a
    ddof = _valid_ddof(ddof, shp)
    n = shp.entries
    th = dot_product_theory(shp.d, a, b)
    entry_var = th.var
    if not (math.isfinite(a.var) and math.isfinite(b.var)):
        return VarMoments(shp, ddof, math.inf, math.nan, math.nan, math.inf, math.inf)
    row_cov = shp.d * a.var * b.mean**2
    col_cov = shp.d * a.mean**2 * b.var
    ra, rb = _raw(a), _raw(b)
    ma = [Fraction(x) for x in ra[:3]]
    mb = [Fraction(x) for x in rb[:3]]
    # SS = P1 - T^2 / n with P1 = sum G_ll' H_ll', T = u·w (see the module docstring)
    e_p1 = _pattern_sum([0, 0], [0, 0], shp, ma, mb)
    e_t2 = _pattern_sum([0, 1], [0, 1], shp, ma, mb)
    e_ss = e_p1 - e_t2 / n
    expected = float(e_ss / (n - ddof))
    if not all(math.isfinite(x) for x in ra + rb):
        return VarMoments(shp, ddof, entry_var, row_cov, col_cov, expected, math.inf)
    ma4 = [Fraction(x) for x in ra]
    mb4 = [Fraction(x) for x in rb]
    e_p1p1 = _pattern_sum([0, 0, 1, 1], [0, 0, 1, 1], shp, ma4, mb4)
    e_p1t2 = _pattern_sum([0, 0, 1, 2], [0, 0, 1, 2], shp, ma4, mb4)
    e_t4 = _pattern_sum([0, 1, 2, 3], [0, 1, 2, 3], shp, ma4, mb4)
    e_ss2 = e_p1p1 - 2 * e_p1t2 / n + e_t4 / (n * n)
    var_s = (e_ss2 - e_ss * e_ss) / (n - ddof) ** 2
    sd = math.sqrt(max(float(var_s), 0.0))
    return VarMoments(shp, ddof, entry_var, row_cov, col_cov, expected, sd)


def _valid_ddof(ddof: int, shape: Shape) -> int:
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise VarcheckError(f"ddof must be 0 or 1, got {ddof!r}")
    if shape.entries <= max(ddof, 1):
        raise VarcheckError(
            f"shape {shape}: the product has {shape.entries} entr"
            f"{'y' if shape.entries == 1 else 'ies'}; np.var needs at least 2 (N*M >= 2)"
        )
    return int(ddof)


# --- simulation --------------------------------------------------------------------------------


def simulate_np_var(
    shape: Shape | str | Sequence[int],
    replicates: int,
    *,
    ddof: int = 0,
    a_dist: Distribution | str = "normal",
    b_dist: Distribution | str | None = None,
    seed: int,
    stream: tuple[int, ...] = (),
) -> np.ndarray:
    """Run the experiment ``replicates`` times and return the ``np.var`` values.

    Chunk ``i`` uses ``SeedSequence(seed, spawn_key=(*stream, i))``.

    Examples
    --------
    >>> s = simulate_np_var("2x2x2", 1000, seed=1)
    >>> s.shape
    (1000,)
    """
    shp = parse_shape(shape) if not isinstance(shape, Shape) else shape
    a, b = entry_laws(parse_distribution(a_dist), None, b_dist)  # b defaults to a
    ddof = _valid_ddof(ddof, shp)
    replicates = valid_count("replicates", replicates, 1, MAX_REPLICATES)
    out, interrupted = _simulate(shp, replicates, ddof, a, b, seed, stream)
    if interrupted:
        raise KeyboardInterrupt
    return out


def _simulate(
    shp: Shape,
    replicates: int,
    ddof: int,
    a: Distribution,
    b: Distribution,
    seed: int,
    stream: tuple[int, ...] = (),
) -> tuple[np.ndarray, bool]:
    """The np.var values of ``replicates`` experiments, or on Ctrl-C those of the chunks that
    finished (and True)."""
    per = shp.n * shp.d + shp.d * shp.m + shp.entries
    chunk = max(1, _CHUNK_ELEMENTS // per)
    out = np.empty(replicates)
    done = 0
    try:
        for i, start in enumerate(range(0, replicates, chunk)):
            r = min(chunk, replicates - start)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(*stream, i)))
            with np.errstate(all="ignore"):  # draws beyond the float range are refused below
                am = a.sample(rng, (r, shp.n, shp.d))
                bm = b.sample(rng, (r, shp.d, shp.m))
                c = np.matmul(am, bm).reshape(r, -1)
                out[start : start + r] = c.var(axis=1, ddof=ddof)
            if not np.isfinite(out[start : start + r]).all():
                raise overflowing_laws(a.spec, b.spec)
            done = start + r
    except KeyboardInterrupt:
        return out[:done], True
    return out, False


def replicate_cost(shape: Shape) -> int:
    """Cost units of one simulated experiment: the product, drawing A and B, and np.var."""
    draws = shape.n * shape.d + shape.d * shape.m
    return shape.n * shape.d * shape.m + DRAW_COST * draws + 4 * shape.entries


def affordable_replicates(shape: Shape, budget: float = SIMULATION_BUDGET) -> int:
    """Replicates that fit in ``budget`` cost units (see :func:`replicate_cost`)."""
    return int(budget // replicate_cost(shape))


def default_replicates(shape: Shape) -> int:
    """Replicates simulated when none are asked for; 0 means use the gamma approximation."""
    affordable = affordable_replicates(shape)
    if affordable >= MIN_REPLICATES:
        return min(100_000, affordable)
    fits = (
        MIN_REPLICATES * replicate_cost(shape) <= MAX_DEFAULT_COST
        and _replicate_elements(shape) <= MAX_REPLICATE_ELEMENTS
    )
    return MIN_REPLICATES if fits else 0


def _replicate_elements(shape: Shape) -> int:
    return shape.n * shape.d + shape.d * shape.m + shape.entries


def replicates_bytes(replicates: int | float) -> float:
    """Peak memory of ``replicates`` simulated values: the sorted values and one scaled copy,
    8 bytes each (the chunks themselves are small)."""
    return 16.0 * approx(replicates)


def _valid_replicates(replicates: int, shape: Shape) -> int:
    replicates = valid_count("replicates", replicates, 100)
    if _replicate_elements(shape) > MAX_REPLICATE_ELEMENTS:
        raise VarcheckError(
            f"replicates={shown(replicates)}: one experiment of shape {shape} needs "
            f"{size_text(_replicate_elements(shape) * 8)}, above the "
            f"{size_text(MAX_REPLICATE_ELEMENTS * 8)} limit; omit replicates to use the "
            "gamma approximation, or choose a smaller shape"
        )
    # numpy's per-call overhead dominates tiny shapes (about half a microsecond a replicate)
    cost = replicate_cost(shape) + REPLICATE_OVERHEAD
    most = min(int(MAX_EXPLICIT_COST // cost), MAX_REPLICATES)
    if replicates > most:
        accepted = (
            f"100..{most}, or omit it to use the default"
            if most >= 100
            else "omit it to use the gamma approximation"
        )
        raise refuse(
            "replicates",
            replicates,
            units=approx(replicates) * cost,
            max_units=MAX_EXPLICIT_COST,
            nbytes=replicates_bytes(replicates),
            max_bytes=replicates_bytes(MAX_REPLICATES),
            accepted=f"{accepted} (shape {shape})",
        )
    return replicates


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantileEstimate:
    """One quantile of np.var with its Monte-Carlo interval.

    Attributes
    ----------
    level : float
        Probability level, e.g. 0.75.
    value : float
        Estimated quantile.
    low, high : float
        Distribution-free 95% interval from order statistics (``nan`` for the gamma
        approximation, which has no Monte-Carlo error but is only approximate).
    """

    level: float
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Reading:
    """The observed value judged against one reading of the experiment.

    Attributes
    ----------
    name : str
        ``raw`` (np.var of A @ B itself) or ``scaled`` (of A @ B / √D).
    theory_var : float
        Variance of one entry under this reading (D, or 1, for unit entries).
    expected, sd : float
        Exact mean and standard deviation of np.var under this reading.
    quantiles : tuple of QuantileEstimate
    observed : float or None
    percentile : float
        Share of outcomes below the observed value (ties count half), in percent.
    percentile_se : float
        Its Monte-Carlo standard error (``0`` for the gamma approximation).
    p_value : float
        Two-sided p-value, ``2 min(P(S <= obs), P(S >= obs))`` with Monte-Carlo counts as
        ``(k + 1) / (R + 1)``.
    verdict : str
        ``consistent``, ``rejected``, ``unreliable`` or ``none`` (nothing observed).
    """

    name: str
    theory_var: float
    expected: float
    sd: float
    quantiles: tuple[QuantileEstimate, ...]
    observed: float | None
    percentile: float
    percentile_se: float
    p_value: float
    verdict: str

    @property
    def central_range(self) -> tuple[float, float]:
        """The central 95% range of np.var (2.5% and 97.5% quantiles)."""
        by_level = {q.level: q.value for q in self.quantiles}
        low, high = QUANTILE_LEVELS[0], QUANTILE_LEVELS[-1]
        return by_level.get(low, math.nan), by_level.get(high, math.nan)

    @property
    def median(self) -> float:
        """The median of np.var under this reading (``nan`` when it was not estimated)."""
        return {q.level: q.value for q in self.quantiles}.get(0.5, math.nan)

    @property
    def skewed_right(self) -> bool:
        """True when the median lies more than :data:`SKEW_SD` standard deviations below the
        mean: the law of np.var has a long right tail."""
        return self.median < self.expected - SKEW_SD * self.sd


@dataclass(frozen=True)
class ShapeRow:
    """Exact moments of np.var for one shape of the growing-shapes table.

    Attributes
    ----------
    moments : VarMoments
    entry_kurtosis : float
        Kurtosis of one entry of A @ B (3 for a normal; ``3 + 6 / D`` for normal entries).
    """

    moments: VarMoments
    entry_kurtosis: float

    @property
    def shape(self) -> Shape:
        return self.moments.shape

    @property
    def relative_sd(self) -> float:
        m = self.moments
        return m.sd / m.expected if m.expected else math.nan


@dataclass(frozen=True, repr=False)
class ExplainResult(Displayable):
    """The result of :func:`explain`.

    Attributes
    ----------
    shape : Shape
    ddof : int
    a_dist, b_dist : Distribution
    moments : VarMoments
        Exact mean and sd for the raw reading.
    entry_kurtosis : float
        Kurtosis of one entry of the product.
    raw, scaled : Reading
        The observed value judged as np.var(A @ B) and as np.var(A @ B / √D).
    method : str
        ``monte-carlo`` or ``gamma-approximation`` (shape too large to simulate; a gamma law
        with the exact mean and sd).
    replicates : int
        Simulated experiments (0 for the gamma approximation).
    mc_mean, mc_mean_se, mc_sd : float
        The simulation's own mean (with standard error) and sd, a check of the exact values.
    growing : tuple of ShapeRow
        Exact mean and spread over growing shapes, up to the seed's 1111 × 111 × 1111.
    confidence : float
    seed : int
    samples : ndarray or None
        The simulated np.var values, sorted (raw reading), for figures; ``None`` for the
        gamma approximation.
    version : str
    interrupted : bool
        Ctrl-C (or SIGTERM) stopped the run: ``replicates`` counts the experiments simulated by
        then (fewer than 20: the gamma approximation is used) and ``growing`` may be short.
    planned_replicates : int
        The experiments the run set out to simulate (0: none, the gamma approximation).
    """

    shape: Shape
    ddof: int
    a_dist: Distribution
    b_dist: Distribution
    moments: VarMoments
    entry_kurtosis: float
    raw: Reading
    scaled: Reading
    method: str
    replicates: int
    mc_mean: float
    mc_mean_se: float
    mc_sd: float
    growing: tuple[ShapeRow, ...]
    confidence: float
    seed: int
    samples: np.ndarray | None = field(default=None, repr=False, compare=False)
    version: str = __version__
    interrupted: bool = False
    planned_replicates: int = 0

    @property
    def observed(self) -> float | None:
        return self.raw.observed

    @property
    def tail_regime(self) -> str:
        """What shapes np.var's spread through the entries' tails: ``infinite`` (the entries have
        no finite kurtosis), ``heavy`` (at most :data:`FEW_ENTRIES` entries with kurtosis above
        :data:`HEAVY_KURTOSIS`), ``few`` (few entries close to normal: np.var is skewed like a
        chi-square) or ``many`` (single large entries average out)."""
        kurt = self.entry_kurtosis
        if not math.isfinite(kurt):
            return "infinite"
        if self.shape.entries <= FEW_ENTRIES:
            return "heavy" if kurt > HEAVY_KURTOSIS else "few"
        return "many"

    def _verdicts(self) -> list[str]:
        """The verdict on the observed value under either reading (none without an observed
        value): what the exit code and the outcome are judged from."""
        verdict = _either_reading(self.raw.verdict, self.scaled.verdict)
        return [] if verdict == NO_OBSERVATION else [verdict]

    @property
    def exit_code(self) -> int:
        """0 consistent with a reading (or nothing observed), 1 rejected under both readings,
        4 no valid test (infinite moments and no simulation); 130 interrupted."""
        return exit_code(self._verdicts(), interrupted=self.interrupted)

    @property
    def outcome(self) -> str:
        """What the exit code says, in a word: ``consistent`` (with a reading, or nothing
        observed), ``rejected`` (under both readings), ``unreliable`` or ``interrupted``."""
        return outcome_of(self._verdicts(), interrupted=self.interrupted, best=CONSISTENT)


def _either_reading(raw: str, scaled: str) -> str:
    """The verdict on the observed value when either reading may explain it: consistent if one
    reading is, else unreliable if one has no valid test, else rejected if both reject it."""
    readings = (raw, scaled)
    if CONSISTENT in readings:
        return CONSISTENT
    if UNRELIABLE in readings:
        return UNRELIABLE
    return REJECTED if readings == (REJECTED, REJECTED) else NO_OBSERVATION


def _quantiles_mc(samples_sorted: np.ndarray, z: float) -> tuple[QuantileEstimate, ...]:
    r = samples_sorted.shape[0]
    out = []
    for p in QUANTILE_LEVELS:
        # the number of draws below the p-quantile is Binomial(R, p): order statistics at
        # R p -/+ z sqrt(R p (1 - p)) bracket it with about the stated coverage
        half = z * math.sqrt(r * p * (1 - p))
        lo = int(max(0, math.floor(r * p - half)))
        hi = int(min(r - 1, math.ceil(r * p + half)))
        value = float(np.quantile(samples_sorted, p))
        out.append(QuantileEstimate(p, value, float(samples_sorted[lo]), float(samples_sorted[hi])))
    return tuple(out)


def _reading_mc(
    name: str,
    theory_var: float,
    mom: VarMoments,
    factor: float,
    sims_sorted: np.ndarray,
    observed: float | None,
    alpha: float,
) -> Reading:
    s = sims_sorted if factor == 1.0 else sims_sorted * factor
    r = s.shape[0]
    z = normal_quantile(0.95)
    quantiles = _quantiles_mc(s, z)
    if observed is None:
        pct = pct_se = p = math.nan
        verdict = NO_OBSERVATION
    else:
        below = int(np.searchsorted(s, observed, side="left"))
        at_or_below = int(np.searchsorted(s, observed, side="right"))
        ties = at_or_below - below
        frac = (below + 0.5 * ties) / r
        pct = 100.0 * frac
        pct_se = 100.0 * math.sqrt(max(frac * (1 - frac), 1.0 / r) / r)
        k_le, k_ge = at_or_below, r - below
        p = min(1.0, 2.0 * min((k_le + 1) / (r + 1), (k_ge + 1) / (r + 1)))
        verdict = verdict_of(p, alpha)
    return Reading(
        name=name,
        theory_var=theory_var,
        expected=mom.expected * factor,
        sd=mom.sd * factor,
        quantiles=quantiles,
        observed=observed,
        percentile=pct,
        percentile_se=pct_se,
        p_value=p,
        verdict=verdict,
    )


def _reading_gamma(
    name: str,
    theory_var: float,
    mom: VarMoments,
    factor: float,
    observed: float | None,
    alpha: float,
) -> Reading:
    """Quantiles and p-value from the gamma law with the exact mean and sd (no simulation)."""
    mean, sd = mom.expected * factor, mom.sd * factor
    valid = math.isfinite(mean) and math.isfinite(sd) and sd > 0 and mean > 0
    if valid:
        from scipy import stats

        # shape k and scale theta with k theta = mean and k theta^2 = sd^2
        law = stats.gamma(a=(mean / sd) ** 2, scale=sd * sd / mean)
        values = [float(law.ppf(p)) for p in QUANTILE_LEVELS]
    else:
        values = [math.nan] * len(QUANTILE_LEVELS)
    quantiles = tuple(
        QuantileEstimate(p, v, math.nan, math.nan)
        for p, v in zip(QUANTILE_LEVELS, values, strict=True)
    )
    if observed is None:
        pct = p = math.nan
        verdict = NO_OBSERVATION
    elif not valid:
        pct = p = math.nan
        verdict = UNRELIABLE
    else:
        cdf, sf = float(law.cdf(observed)), float(law.sf(observed))
        pct = 100.0 * cdf
        p = min(1.0, 2.0 * min(cdf, sf))
        verdict = verdict_of(p, alpha)
    return Reading(name, theory_var, mean, sd, quantiles, observed, pct, 0.0, p, verdict)


def _valid_observed(observed: float | None) -> float | None:
    if observed is None:
        return None
    if isinstance(observed, bool) or not isinstance(observed, int | float):
        raise VarcheckError(f"observed must be a number >= 0, got {observed!r}")
    if not (math.isfinite(observed) and observed >= 0):
        raise VarcheckError(f"observed must be a finite number >= 0 (a variance), got {observed!r}")
    return float(observed)


class _Settings(NamedTuple):
    """The checked arguments of :func:`explain` (``replicates`` None: the default for the shape)."""

    shape: Shape
    ddof: int
    a: Distribution
    b: Distribution
    observed: float | None
    confidence: float
    replicates: int | None
    seed: int


class _Readings(NamedTuple):
    """Both readings and the simulation behind them (named as :class:`ExplainResult`'s fields)."""

    raw: Reading
    scaled: Reading
    method: str
    replicates: int
    mc_mean: float
    mc_mean_se: float
    mc_sd: float
    samples: np.ndarray | None
    interrupted: bool = False
    planned_replicates: int = 0


def _explain_iv(
    shape: Shape | str | Sequence[int],
    observed: float | None,
    ddof: int,
    dist: Distribution | str,
    a_dist: Distribution | str | None,
    b_dist: Distribution | str | None,
    replicates: int | None,
    confidence: float,
    seed: int | None,
) -> _Settings:
    """Validate :func:`explain`'s arguments once, in the order of its signature."""
    shp = parse_shape(shape) if not isinstance(shape, Shape) else shape
    # dist is parsed first: None is refused, not read as normal
    a, b = entry_laws(parse_distribution(dist), a_dist, b_dist)
    ddof = _valid_ddof(ddof, shp)
    observed = _valid_observed(observed)
    confidence = valid_confidence(confidence)
    if replicates is not None:
        replicates = _valid_replicates(replicates, shp)
    return _Settings(shp, ddof, a, b, observed, confidence, replicates, resolve_seed(seed))


def _readings(
    cfg: _Settings, mom: VarMoments, raw_theory: float, scaled_theory: float
) -> _Readings:
    """The observed value judged under both readings, from a simulation of the experiment, or
    from the gamma law with the exact mean and sd when the shape is too large to simulate."""
    shp, observed, alpha = cfg.shape, cfg.observed, 1.0 - cfg.confidence
    # the scaled reading divides A @ B by sqrt(D), so np.var is divided by D
    factor = 1.0 / shp.d
    planned = default_replicates(shp) if cfg.replicates is None else cfg.replicates
    sims, interrupted = (
        _simulate(shp, planned, cfg.ddof, cfg.a, cfg.b, cfg.seed) if planned else (None, False)
    )
    if sims is None or sims.shape[0] < MIN_INTERRUPTED_REPLICATES:
        # no simulation (shape too large), or Ctrl-C came before enough experiments were done
        return _Readings(
            _reading_gamma("raw", raw_theory, mom, 1.0, observed, alpha),
            _reading_gamma("scaled", scaled_theory, mom, factor, observed, alpha),
            "gamma-approximation",
            0,
            math.nan,
            math.nan,
            math.nan,
            None,
            interrupted,
            planned,
        )
    sims.sort()
    replicates = sims.shape[0]
    mc_sd = float(sims.std(ddof=1))
    return _Readings(
        _reading_mc("raw", raw_theory, mom, 1.0, sims, observed, alpha),
        _reading_mc("scaled", scaled_theory, mom, factor, sims, observed, alpha),
        "monte-carlo",
        replicates,
        float(sims.mean()),
        mc_sd / math.sqrt(replicates),
        mc_sd,
        sims,
        interrupted,
        planned,
    )


def _growing_rows(
    growing: Sequence[Sequence[int]] | None, ddof: int, a: Distribution, b: Distribution
) -> tuple[tuple[ShapeRow, ...], bool]:
    """Exact moments over the growing shapes (those with more entries than ``ddof``), and
    whether Ctrl-C cut the list short."""
    shapes = [parse_shape(g) for g in growing or ()]
    rows = []
    try:
        for gs in shapes:
            if gs.entries <= ddof:
                continue
            gm = exact_moments(gs, ddof, a, b)
            rows.append(ShapeRow(gm, dot_product_theory(gs.d, a, b).kurtosis))
    except KeyboardInterrupt:
        return tuple(rows), True
    return tuple(rows), False


def explain(
    shape: Shape | str | Sequence[int] = SEED_SHAPE,
    observed: float | None = SEED_OBSERVED,
    *,
    ddof: int = 0,
    dist: Distribution | str = "normal",
    a_dist: Distribution | str | None = None,
    b_dist: Distribution | str | None = None,
    replicates: int | None = None,
    confidence: float = 0.95,
    growing: Sequence[Sequence[int]] | None = GROWING_SHAPES,
    seed: int | None = None,
) -> ExplainResult:
    """Explain an observed ``np.var(A @ B)``: its exact law, and how surprising the value is.

    Parameters
    ----------
    shape : str or sequence of int
        ``"NxDxM"``: A is N × D, B is D × M (default the seed's 2 × 2 by 2 × 2).
    observed : float or None
        The value of ``np.var`` that was seen (default the seed's 1.6); ``None`` to describe the
        law only.
    ddof : int
        0 (numpy's default) or 1.
    dist, a_dist, b_dist : str or Distribution
        Entry distribution of both matrices, or of A / B separately.
    replicates : int, optional
        Simulated experiments for quantiles and p-values (default: up to 100 000, fewer for
        large shapes; shapes that cannot afford 2000 in a few seconds use a gamma law with the
        exact mean and sd).
    confidence : float
        A reading is rejected when its two-sided p-value is below ``1 - confidence``.
    growing : sequence of shapes or None
        Shapes of the table showing how the spread shrinks (exact values only).
    seed : int, optional
        Root seed (drawn and reported when omitted).

    Returns
    -------
    ExplainResult

    Examples
    --------
    >>> res = explain(seed=1)
    >>> res.moments.expected, res.raw.verdict, res.scaled.verdict
    (1.5, 'consistent', 'consistent')
    >>> explain(observed=40.0, seed=1, growing=None).raw.verdict
    'rejected'
    """
    cfg = _explain_iv(shape, observed, ddof, dist, a_dist, b_dist, replicates, confidence, seed)
    mom = exact_moments(cfg.shape, cfg.ddof, cfg.a, cfg.b)
    th = dot_product_theory(cfg.shape.d, cfg.a, cfg.b)
    readings = _readings(cfg, mom, th.var, th.scaled_var)
    rows, cut = _growing_rows(growing, cfg.ddof, cfg.a, cfg.b)
    return ExplainResult(
        shape=cfg.shape,
        ddof=cfg.ddof,
        a_dist=cfg.a,
        b_dist=cfg.b,
        moments=mom,
        entry_kurtosis=th.kurtosis,
        growing=rows,
        confidence=cfg.confidence,
        seed=cfg.seed,
        **{**readings._asdict(), "interrupted": readings.interrupted or cut},
    )
