"""The tail index of a continuous scipy law read off its density (``scipy_tail_index``).

E|X|^p is finite exactly for p below the tail index: a density ~ |x|^-(a+1) in a tail, or a
survival function P(|X| > x) ~ x^-a, gives index a, because ∫^∞ x^p x^-(a+1) dx converges exactly
for p < a. Each row below says how its index follows from the family's density (scipy's
parametrisation). The density method is called with ``table=False``, as for a family outside
varcheck's table, so these rows test the method, not the table.

Tolerance: the method reads an index from a plateau of the log-log slope flat to 1e-4 over two
decades (the slope of a density c x^-(a+1) (1 + O(x^-b)) levels off at -(a+1) geometrically), so
its error is about 1e-4; it must be within ``TAIL_TOL`` = 1e-3, which is also where it rounds an
index to a whole number p and calls E|X|^p infinite. The decisions varcheck takes from the index,
whether E|X|^p is finite for p = 2 (variance), 3, 4 (an interval exists), 6 (no slow-convergence
caution), 8 and 12 (the projection's estimators), are checked exactly, at 0.01 on both sides of
each boundary and at the boundary itself, where the moment is infinite.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from varcheck.core.distributions import _TAIL_TABLE, TAIL_TOL, scipy_tail_index

#: The orders whose finiteness varcheck acts on (see the module docstring).
DECISIONS = (1, 2, 3, 4, 6, 8, 12)

# (family, shapes, index): how the index follows from the density or survival function
HEAVY = [
    # density ∝ (1 + x²/df)^-((df+1)/2) ~ |x|^-(df+1), both sides
    pytest.param("t", {"df": 3.5}, 3.5, id="t"),
    pytest.param("t", {"df": 0.7}, 0.7, id="t-no-mean"),
    # density 1/(π (1 + x²)) ~ x^-2, both sides
    pytest.param("cauchy", {}, 1.0, id="cauchy"),
    # density b x^-(b+1) on x >= 1
    pytest.param("pareto", {"b": 2.5}, 2.5, id="pareto"),
    # P(X > x) = (1 + x)^-c
    pytest.param("lomax", {"c": 4.5}, 4.5, id="lomax"),
    # Fréchet: P(X > x) = 1 - exp(-x^-c) ~ x^-c
    pytest.param("invweibull", {"c": 3.2}, 3.2, id="invweibull"),
    # Burr III: P(X > x) = 1 - (1 + x^-c)^-d ~ d x^-c
    pytest.param("burr", {"c": 5.5, "d": 2.0}, 5.5, id="burr"),
    # Burr XII: P(X > x) = (1 + x^c)^-d ~ x^-(c d)
    pytest.param("burr12", {"c": 2.0, "d": 3.25}, 6.5, id="burr12"),
    # log-logistic: P(X > x) = 1 / (1 + x^c)
    pytest.param("fisk", {"c": 3.0}, 3.0, id="fisk"),
    # density ∝ x^-3/2 exp(-1/(2x)) on x > 0; levy_l is its mirror image on x < 0
    pytest.param("levy", {}, 0.5, id="levy"),
    pytest.param("levy_l", {}, 0.5, id="levy_l-left-tail"),
    # density ∝ x^-(a+1) exp(-1/x)
    pytest.param("invgamma", {"a": 6.5}, 6.5, id="invgamma"),
    # density ∝ x^(a-1) (1 + x)^-(a+b) ~ x^-(b+1)
    pytest.param("betaprime", {"a": 2.0, "b": 5.0}, 5.0, id="betaprime"),
    # density k x^(k-1) / (1 + x^s)^(1 + k/s) ~ x^-(s+1)
    pytest.param("mielke", {"k": 2.0, "s": 3.5}, 3.5, id="mielke"),
    # P(X > x) = (1 + c x)^(-1/c) for c > 0
    pytest.param("genpareto", {"c": 0.2}, 5.0, id="genpareto"),
    # density ∝ x^(dfn/2 - 1) (1 + dfn x / dfd)^-((dfn+dfd)/2) ~ x^-(dfd/2 + 1)
    pytest.param("f", {"dfn": 4.0, "dfd": 13.0}, 6.5, id="f"),
    # GEV with c < 0: P(X > x) ~ (-c x)^(1/c), index 1/|c|
    pytest.param("genextreme", {"c": -0.3}, 1 / 0.3, id="genextreme"),
    # X = G^(1/c), G ~ gamma(a), c < 0: E[X^p] = Γ(a + p/c) / Γ(a) finite for p < a |c|
    pytest.param("gengamma", {"a": 2.0, "c": -2.5}, 5.0, id="gengamma"),
    # log-Laplace: density c/2 x^-(c+1) for x > 1
    pytest.param("loglaplace", {"c": 3.5}, 3.5, id="loglaplace"),
    # density a (a + x^a)^-((a+1)/a) ~ a x^-(a+1)
    pytest.param("kappa3", {"a": 2.5}, 2.5, id="kappa3"),
    # noncentral t: the t's power tail on both sides, df = 7
    pytest.param("nct", {"df": 7.0, "nc": 1.0}, 7.0, id="nct"),
    # scipy's noncentral t density raises an overflow on the whole grid: read point by point
    pytest.param("nct", {"df": 1.9281, "nc": 0.06}, 1.9281, id="nct-read-point-by-point"),
    # density ∝ 1 / ((x² - ρ²)² + ρ²) ~ x^-4 on x > 0
    pytest.param("rel_breitwigner", {"rho": 36.5}, 3.0, id="rel_breitwigner"),
    # Gaussian core, left tail ∝ (B - x)^-m: index m - 1; the right tail is normal
    pytest.param("crystalball", {"beta": 2.0, "m": 4.5}, 3.5, id="crystalball-left-heavy"),
    # density ∝ x^-2 φ(a - 1/x) on x > 0
    pytest.param("alpha", {"a": 3.5}, 1.0, id="alpha"),
    # Landau: right tail ~ x^-2, left tail double-exponential
    pytest.param("landau", {}, 1.0, id="landau-right-heavy"),
    # kappa4 with k < 0 (no table entry): P(X > x) ~ (|k| x)^(1/k), index -1/k
    pytest.param("kappa4", {"h": 0.1, "k": -0.2}, 5.0, id="kappa4"),
    pytest.param("kappa4", {"h": -0.5, "k": -0.15}, 1 / 0.15, id="kappa4-h<0"),
]

# tails lighter than any power (every moment finite), on unbounded support
LIGHT = [
    pytest.param("norm", {}, id="norm"),
    pytest.param("gamma", {"a": 2.0}, id="gamma"),
    pytest.param("expon", {}, id="expon"),
    # lognormal: density ∝ exp(-(ln x)²/(2 s²)) / x falls faster than any power although
    # its log-log slope steepens only linearly in ln x; E[X^p] = exp(p² s²/2)
    pytest.param("lognorm", {"s": 0.5}, id="lognorm"),
    pytest.param("lognorm", {"s": 2.0}, id="lognorm-s2"),
    # stretched exponential exp(-x^c), c < 1
    pytest.param("weibull_min", {"c": 0.5}, id="weibull_min"),
    pytest.param("gumbel_r", {}, id="gumbel_r"),
    pytest.param("gumbel_l", {}, id="gumbel_l"),
    pytest.param("logistic", {}, id="logistic"),
    pytest.param("laplace", {}, id="laplace"),
    pytest.param("genpareto", {"c": 0.0}, id="genpareto-c0-exponential"),
    pytest.param("genextreme", {"c": 0.0}, id="genextreme-c0-gumbel"),
    # density ∝ exp(-(a + b asinh x)²/2) / sqrt(1 + x²): lognormal-like on both sides
    pytest.param("johnsonsu", {"a": 0.0, "b": 0.5}, id="johnsonsu"),
    # density ∝ x^(b-1) exp(x^b - e^(x^b)): double-exponential; scipy's density is 0 from x ≈ 2
    pytest.param("exponpow", {"b": 16.0}, id="exponpow-vanishing"),
    # pearson3 with skew -2 is a reflected gamma: scipy's density is 0 above x = 1
    pytest.param("pearson3", {"skew": -2.0}, id="pearson3-vanishing"),
    pytest.param("norminvgauss", {"a": 1.25, "b": 0.5}, id="norminvgauss"),
]

# bounded support: every moment finite
BOUNDED = [
    pytest.param("beta", {"a": 2.0, "b": 3.0}, id="beta"),
    pytest.param("uniform", {}, id="uniform"),
    pytest.param("triang", {"c": 0.3}, id="triang"),
    pytest.param("genpareto", {"c": -0.2}, id="genpareto-c<0"),
    pytest.param("truncpareto", {"b": 2.0, "c": 5.0}, id="truncpareto"),
    # bounded above at 1/c, Gumbel-like below
    pytest.param("genextreme", {"c": 0.2}, id="genextreme-c>0"),
    # bounded below at 0, Weibull tail exp(-|x|^c) above the reflection
    pytest.param("weibull_max", {"c": 2.9}, id="weibull_max"),
]


def _decisions(index: float) -> tuple[bool, ...]:
    return tuple(index > order for order in DECISIONS)


@pytest.mark.parametrize(("family", "shapes", "index"), HEAVY)
def test_density_gives_the_tail_index(family: str, shapes: dict[str, float], index: float) -> None:
    """The index read off the density is the one the density's formula gives, within TAIL_TOL,
    and every moment decision drawn from it is right.

    Guards against a misread slope (-(a+1) taken as -a: every index one too large, the variance
    of a t with 2.5 df called finite... or one too small), a tail missed on one side (levy_l,
    crystalball and landau are heavy on one side only), and a heavy tail called light.
    """
    found = scipy_tail_index(family, shapes, table=False)
    assert found is not None
    assert abs(found - index) <= TAIL_TOL, found
    assert _decisions(found) == _decisions(index)
    if family in _TAIL_TABLE:  # the fast path agrees exactly
        assert scipy_tail_index(family, shapes) == pytest.approx(index, rel=1e-12)


@pytest.mark.parametrize(("family", "shapes"), LIGHT + BOUNDED)
def test_light_and_bounded_laws_have_every_moment(family: str, shapes: dict[str, float]) -> None:
    """Bounded laws and tails lighter than any power have an infinite index.

    Guards against a lognormal (whose log-log slope steepens only slowly) or a density that
    scipy sets to 0 past some point (exponpow, pearson3) read as a power tail.
    """
    assert scipy_tail_index(family, shapes, table=False) == math.inf


# families whose index is a free parameter: shapes for a given index
BY_INDEX = [
    pytest.param("t", lambda a: {"df": a}, id="t"),
    pytest.param("pareto", lambda a: {"b": a}, id="pareto"),
    pytest.param("lomax", lambda a: {"c": a}, id="lomax"),
    pytest.param("invweibull", lambda a: {"c": a}, id="invweibull"),
    pytest.param("invgamma", lambda a: {"a": a}, id="invgamma"),
    pytest.param("f", lambda a: {"dfn": 3.0, "dfd": 2 * a}, id="f"),
    pytest.param("burr12", lambda a: {"c": 2.0, "d": a / 2}, id="burr12"),
    pytest.param("genpareto", lambda a: {"c": 1 / a}, id="genpareto"),
    pytest.param("mielke", lambda a: {"k": 2.0, "s": a}, id="mielke"),
    pytest.param("betaprime", lambda a: {"a": 2.0, "b": a}, id="betaprime"),
    pytest.param("fisk", lambda a: {"c": a}, id="fisk"),
]


@pytest.mark.parametrize("offset", [-0.01, 0.0, 0.01])
@pytest.mark.parametrize("order", [2, 4, 6, 8])
@pytest.mark.parametrize(("family", "shapes_for"), BY_INDEX)
def test_moment_decisions_at_each_boundary(
    family: str,
    shapes_for: Callable[[float], dict[str, float]],
    order: int,
    offset: float,
) -> None:
    """At index p ± 0.01 the p-th moment is finite exactly above p; at index p it is infinite.

    E|X|^p diverges at index p (∫^∞ x^p x^-(p+1) dx = ∫^∞ dx/x), so t with 4 df has an
    infinite fourth moment: the density method must round an index that close to p onto p,
    never above it. Guards against a tolerance that lets 4 + 1e-9 through as "finite", and
    against one so wide that 4.01 is called infinite.
    """
    index = order + offset
    found = scipy_tail_index(family, shapes_for(index), table=False)
    assert found is not None
    assert (found > order) == (offset > 0), found
    assert _decisions(found) == _decisions(index)
    if offset == 0.0:
        assert found == order  # rounded onto the boundary exactly
        assert math.ceil(found) - 1 == order - 1


# the fast path is checked against the density for each family in the table, at indices
# around the orders varcheck acts on; these families' densities cannot be read far out:
UNREADABLE = {
    "jf_skew_t": "its density formula cancels (1 - x/sqrt(a + b + x²)) beyond |x| ~ 1e4",
    "vonmises": "scipy gives it a periodic density on the whole line (its draws lie in [-π, π])",
    "tukeylambda": "its density is a numerical inversion of the quantile function, noisy far out",
    "levy_stable": "its density is a numerical integral: slow, and imprecise far out",
    "studentized_range": "its density is a numerical integral: slow, and imprecise far out",
}
TABLE_SHAPES = {
    "t": [{"df": 2.5}],
    "nct": [{"df": 5.5, "nc": 2.0}],
    "pareto": [{"b": 4.5}],
    "lomax": [{"c": 2.5}],
    "invgamma": [{"a": 3.5}],
    "betaprime": [{"a": 1.5, "b": 7.0}],
    "f": [{"dfn": 5.0, "dfd": 9.0}],
    "ncf": [{"dfn": 3.0, "dfd": 9.0, "nc": 5.0}],
    "fisk": [{"c": 6.5}],
    "burr": [{"c": 2.5, "d": 0.5}],
    "burr12": [{"c": 0.3, "d": 10.0}, {"c": 10.0, "d": 0.45}],
    "invweibull": [{"c": 10.5}],
    "loglaplace": [{"c": 1.5}],
    "mielke": [{"k": 10.4, "s": 4.6}],
    "kappa3": [{"a": 1.0}],
    "dpareto_lognorm": [{"u": 3.0, "s": 1.2, "a": 4.5, "b": 2.0}],
    "crystalball": [{"beta": 2.0, "m": 7.5}],
    "cauchy": [{}],
    "halfcauchy": [{}],
    "foldcauchy": [{"c": 4.7}],
    "skewcauchy": [{"a": 0.5}],
    "alpha": [{"a": 3.6}],
    "landau": [{}],
    "levy": [{}],
    "levy_l": [{}],
    "rel_breitwigner": [{"rho": 3.0}],
    "genpareto": [{"c": 0.3}, {"c": -0.3}, {"c": 0.0}],
    "genextreme": [{"c": -0.15}, {"c": 0.15}],
    "gengamma": [{"a": 4.4, "c": -3.1}, {"a": 4.4, "c": 3.1}],
    # light or bounded for every shape
    "norm": [{}],
    "halfnorm": [{}],
    "skewnorm": [{"a": 4.0}],
    "truncnorm": [{"a": -1.0, "b": 2.0}],
    "uniform": [{}],
    "triang": [{"c": 0.2}],
    "beta": [{"a": 0.5, "b": 0.5}],
    "expon": [{}],
    "gamma": [{"a": 0.2}, {"a": 50.0}],
    "erlang": [{"a": 3.0}],
    "chi": [{"df": 3.0}],
    "chi2": [{"df": 55.0}],
    "rayleigh": [{}],
    "maxwell": [{}],
    "weibull_min": [{"c": 0.2}, {"c": 3.0}],
    "weibull_max": [{"c": 0.5}],
    "gumbel_r": [{}],
    "gumbel_l": [{}],
    "logistic": [{}],
    "laplace": [{}],
    "lognorm": [{"s": 0.25}, {"s": 3.0}],
}


def test_every_table_family_is_checked_against_its_density() -> None:
    """Each table entry is either compared with the density below or said to be unreadable."""
    assert set(_TAIL_TABLE) == set(TABLE_SHAPES) | set(UNREADABLE)


@pytest.mark.parametrize(
    ("family", "shapes"),
    [pytest.param(f, s, id=f"{f}-{i}") for f, ss in TABLE_SHAPES.items() for i, s in enumerate(ss)],
)
def test_table_agrees_with_the_density(family: str, shapes: dict[str, float]) -> None:
    """The table's formula and the law's own density give the same index (within TAIL_TOL).

    Guards against a wrong formula in the table (a tail index of c where it is c·d, dfd where
    it is dfd/2, a sign of c the wrong way round), which the density would contradict.
    """
    exact = scipy_tail_index(family, shapes)
    found = scipy_tail_index(family, shapes, table=False)
    assert found is not None
    assert found == exact or abs(found - exact) <= TAIL_TOL, (found, exact)
