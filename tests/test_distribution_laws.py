"""Distribution laws: which moments exist, by each family's tail, and how specs become laws.

The tail tests are statements about the laws, not about varcheck's table of scipy families: a law
whose tail falls like x^-alpha has E|X|^p finite exactly for p < alpha (alpha is read off each
family's density below), so its ``max_moment`` is the largest whole number below alpha, its
variance, third and fourth moments are infinite from alpha <= 2, 3, 4 on, and what varcheck does
with it follows: no trustworthy interval when E[X^4] is infinite, a slow-convergence caution
when E[X^6] is, and in the projection the same-token estimator needs E[X^8]. Each tail test runs
twice (the ``tail_source`` fixture): with varcheck's table of scipy families, and with the table
emptied so that every scipy law's index is read off its density, as for a family outside the table
(tests/test_tail_index.py tests that reading directly).

The other tests pin how the raw t (df <= 2) and the scipy laws are built from a spec: the bounds
of every parameter check, the canonical spec, the affine map for mean=/sd=, and error messages
that name the offending spec and parameters.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from varcheck import VarcheckError, dot_product_theory, parse_distribution
from varcheck.core import distributions
from varcheck.core.distributions import scipy_tail_index
from varcheck.paper.projection import input_law


@pytest.fixture(params=["table", "density"])
def tail_source(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Tail indices from varcheck's table of scipy families, or all read off the densities."""
    if request.param == "density":
        monkeypatch.setattr(distributions, "_TAIL_TABLE", {})
    distributions._tail_index.cache_clear()
    yield request.param
    distributions._tail_index.cache_clear()


# (spec, alpha, largest whole p < alpha): E|X|^p < inf exactly for p < alpha.
HEAVY_TAILED = [
    # Student t, density ~ |x|^-(df+1)
    ("t:df=0.5", 0.5, 0),
    ("t:df=1", 1.0, 0),
    ("t:df=1.5", 1.5, 1),
    ("t:df=2", 2.0, 1),
    ("t:df=2.5", 2.5, 2),
    ("t:df=5", 5.0, 4),
    ("t:df=13", 13.0, 12),
    ("scipy.t:df=2.5", 2.5, 2),
    ("scipy.t:df=3", 3.0, 2),
    ("scipy.t:df=5", 5.0, 4),
    ("scipy.t:df=9", 9.0, 8),
    # noncentral t: the same power tail as t
    ("scipy.nct:df=7,nc=1", 7.0, 6),
    # pareto P(X > x) = x^-b; lomax P(X > x) = (1 + x)^-c
    ("scipy.pareto:b=0.8", 0.8, 0),
    ("scipy.pareto:b=3.5", 3.5, 3),
    ("scipy.lomax:c=2.5", 2.5, 2),
    ("scipy.lomax:c=4.5", 4.5, 4),
    # inverse gamma, density ~ x^-(a+1)
    ("scipy.invgamma:a=6.5", 6.5, 6),
    # F: density ~ x^-(dfd/2+1), so E[F^p] < inf exactly for p < dfd/2
    ("scipy.f:dfn=4,dfd=10", 5.0, 4),
    ("scipy.f:dfn=3,dfd=13", 6.5, 6),
    ("scipy.f:dfn=4,dfd=3", 1.5, 1),
    # log-logistic P(X > x) = 1/(1 + x^c)
    ("scipy.fisk:c=3", 3.0, 2),
    # Burr III P(X > x) = 1 - (1 + x^-c)^-d ~ d x^-c
    ("scipy.burr:c=5,d=2", 5.0, 4),
    # Frechet P(X > x) = 1 - exp(-x^-c) ~ x^-c
    ("scipy.invweibull:c=4.5", 4.5, 4),
    # log-Laplace, density c/2 x^-(c+1) for x > 1
    ("scipy.loglaplace:c=3.5", 3.5, 3),
    # Burr XII P(X > x) = (1 + x^c)^-d: tail index c*d
    ("scipy.burr12:c=2,d=3.25", 6.5, 6),
    ("scipy.burr12:c=2,d=1.25", 2.5, 2),
    # generalised Pareto, c > 0: P(X > x) = (1 + c x)^(-1/c), tail index 1/c
    ("scipy.genpareto:c=0.2", 5.0, 4),
    ("scipy.genpareto:c=0.3", 1 / 0.3, 3),  # 3.33: E[X^3] finite, E[X^4] not
    ("scipy.genpareto:c=0.6", 1 / 0.6, 1),
    # generalised extreme value, c < 0 (Frechet type): P(X > x) ~ (-c x)^(1/c), tail index 1/|c|
    ("scipy.genextreme:c=-0.2", 5.0, 4),
    ("scipy.genextreme:c=-0.3", 1 / 0.3, 3),
    # Mielke beta-kappa, density ~ x^-(s+1)
    ("scipy.mielke:k=2,s=1.5", 1.5, 1),
    ("scipy.mielke:k=2,s=3.5", 3.5, 3),
]

# Every moment finite: bounded, exponential or lighter tails (lognormal: all moments finite).
LIGHT_TAILED = [
    "normal",
    "laplace",
    "scipy.norm",
    "scipy.gamma:a=2",
    "scipy.beta:a=2,b=3",
    "scipy.lognorm:s=0.5",
    "scipy.genpareto:c=0",  # the exponential law
    "scipy.genpareto:c=-0.2",  # bounded above by 1/0.2
    "scipy.genextreme:c=0",  # Gumbel
    "scipy.genextreme:c=0.2",  # Weibull type: bounded above, Gumbel-like lower tail
]


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(("spec", "alpha", "largest"), HEAVY_TAILED)
def test_max_moment_is_the_largest_whole_order_below_the_tail_index(
    spec: str, alpha: float, largest: int
) -> None:
    """A law with E|X|^p < inf exactly for p < alpha reports the largest whole p below alpha.

    Guards against a wrong tail index for a family (F's dfd/2 taken as dfd, burr12's c*d as c/d,
    genpareto's and genextreme's signs of c swapped, the 1/|c| of a GEV tail mistaken), an
    off-by-one in turning the index into a whole order, or a family falling through to the
    generic rule (which would call e.g. genpareto c=0.2 light-tailed).
    """
    assert largest < alpha <= largest + 1  # the table itself: largest whole number below alpha
    assert parse_distribution(spec).max_moment == largest


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize("spec", LIGHT_TAILED)
def test_light_tailed_laws_have_every_moment(spec: str) -> None:
    """Bounded and exponential-tailed laws have every moment: ``max_moment`` is inf.

    Guards against reading a light-tailed member of a heavy-tailed family as heavy (genpareto
    c <= 0, genextreme c >= 0: a shape sign test the wrong way round or at the wrong boundary,
    which at c = 0 also divides by zero).
    """
    assert parse_distribution(spec).max_moment == math.inf


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(("spec", "alpha", "largest"), HEAVY_TAILED)
def test_infinite_moments_follow_the_tail_index(spec: str, alpha: float, largest: int) -> None:
    """var, mu3 and mu4 are inf exactly when alpha <= 2, 3, 4; the mean is nan when alpha <= 1.

    Guards against a diverging moment reported as nan (scipy's own answer for a divergent
    integral) or as a finite number instead of inf, and against an infinite mean (pareto with
    b <= 1: scipy says +inf) kept as a number instead of the documented nan.
    """
    d = parse_distribution(spec)
    for value, order in ((d.var, 2), (d.mu3, 3), (d.mu4, 4)):
        if alpha <= order:
            assert value == math.inf, (order, value)
        else:
            assert math.isfinite(value), (order, value)
    assert math.isnan(d.mean) == (alpha <= 1), d.mean


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(("spec", "alpha", "largest"), HEAVY_TAILED)
def test_status_and_caution_follow_the_tail_index(spec: str, alpha: float, largest: int) -> None:
    """What a sweep does with a law follows its tail index: rows are unreliable (no interval)
    when E[X^4] is infinite, cautioned when E[X^6] is, and plain when E[X^6] is finite.

    Guards against a tail index that is off by enough to cross one of these thresholds: a
    heavy-tailed law treated as light would lose its slow-convergence caution, and one treated
    as heavier would get a caution it does not need.
    """
    th = dot_product_theory(8, spec)
    if alpha <= 2:
        assert th.status == "infinite-variance"
    elif alpha <= 4:
        assert th.status == "infinite-fourth-moment"
    else:
        assert th.status == "finite"
    assert th.slow_convergence == (4 < alpha <= 6)


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(
    ("spec", "alpha"),
    [
        ("scipy.t:df=4", 4.0),
        ("scipy.t:df=4.5", 4.5),
        ("scipy.t:df=8", 8.0),
        ("scipy.t:df=9", 9.0),
        ("scipy.f:dfn=4,dfd=16,mean=0", 8.0),
        ("scipy.f:dfn=4,dfd=17,mean=0", 8.5),
        ("scipy.burr12:c=2,d=4,mean=0", 8.0),
        ("scipy.burr12:c=3,d=3,mean=0", 9.0),
        ("scipy.genpareto:c=0.125,mean=0", 8.0),
        ("scipy.genpareto:c=0.1,mean=0", 10.0),
        ("scipy.genextreme:c=-0.125,mean=0", 8.0),
        ("scipy.genextreme:c=-0.1,mean=0", 10.0),
    ],
)
def test_projection_estimability_follows_the_tail_index(spec: str, alpha: float) -> None:
    """The projection's estimators need E[x^4] (different tokens) and E[x^8] (one token).

    Guards against a tail index lost when mean=/sd= rescale a scipy law, and against an index
    just at 8 (E[x^8] infinite) rounded the wrong way, which would let the same-token rows
    claim an interval whose estimator has infinite variance.
    """
    law = input_law(spec)
    assert law.estimable_different == (alpha > 4)
    assert law.estimable_same == (alpha > 8)


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(
    ("spec", "largest"),
    [
        ("scipy.cauchy", 0),  # density ~ x^-2: no mean (the named t:df=1 says 0)
        ("scipy.levy", 0),  # density ~ x^-3/2
        ("scipy.mielke:k=2,s=2.5", 2),  # density ~ x^-(s+1)
        ("scipy.mielke:k=2,s=5", 4),  # E[X^6] infinite: its rows need the caution
        ("scipy.betaprime:a=2,b=5", 4),  # density ~ x^-(b+1)
        ("scipy.gengamma:a=5,c=-1", 4),  # this is invgamma(a=5), which gets 4 right
        ("scipy.dpareto_lognorm:u=3,s=1.2,a=4.5,b=2", 4),  # right tail ~ x^-(a+1)
        ("scipy.kappa3:a=5.5", 5),  # density a (a + x^a)^(-(a+1)/a) ~ x^-(a+1)
        ("scipy.rel_breitwigner:rho=36.5", 2),  # density ~ x^-4
        ("scipy.crystalball:beta=2,m=6", 4),  # left tail ~ |x|^-m: index m - 1
        ("scipy.landau", 0),  # right tail ~ x^-2; left tail double-exponential
    ],
)
def test_max_moment_of_heavy_tailed_laws_once_outside_the_table(spec: str, largest: int) -> None:
    """Heavy-tailed laws that varcheck once had no table entry for have their tail index.

    Guards against the old fallback guess (1 if scipy's variance is infinite, 3 if only its
    kurtosis is, else inf), which called a law with E[X^5] infinite (mielke s=5, betaprime b=5)
    light-tailed and so dropped the slow-convergence caution for it.
    """
    assert parse_distribution(spec).max_moment == largest


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(
    ("spec", "alpha"),
    [
        ("scipy.invweibull:c=2.5", 2.5),
        ("scipy.invweibull:c=3.2", 3.2),
        ("scipy.invweibull:c=4", 4.0),
        ("scipy.invweibull:c=3.2,sd=1", 3.2),
    ],
)
def test_frechet_laws_with_infinite_fourth_moment_are_not_estimable(
    spec: str, alpha: float
) -> None:
    """invweibull with c <= 4 has E[X^4] = inf: no interval for Var(q·k) can be trusted.

    Guards against scipy's finite (even negative: a kurtosis of -177 at c = 3.2) fourth moment
    for a heavy Frechet tail taken at its word, and against c = 4 (E[X^4] just infinite) let
    through.
    """
    d = parse_distribution(spec)
    assert d.mu4 == math.inf
    assert (d.mu3 == math.inf) == (alpha <= 3)
    assert dot_product_theory(8, spec).status == "infinite-fourth-moment"


@pytest.mark.usefixtures("tail_source")
@pytest.mark.parametrize(
    ("spec", "largest"),
    [
        ("scipy.mielke:k=2,s=5,loc=-3,scale=1000", 4),
        ("scipy.invweibull:c=3.2,loc=1,scale=0.01", 3),
        ("scipy.lognorm:s=1,loc=5,scale=0.1", math.inf),
        ("scipy.mielke:k=2,s=5,sd=1,mean=0", 4),
    ],
)
def test_loc_scale_and_rescaling_keep_the_tail_index(spec: str, largest: float) -> None:
    """An affine map never changes which moments exist: loc=, scale=, mean= and sd= keep
    the index of the shapes (mielke s = 5: 4; Fréchet c = 3.2: 3; lognormal: all).

    Guards against the density read at the law's loc/scale (a far tail misplaced by the shift)
    or the index lost when mean=/sd= rescale the law.
    """
    assert parse_distribution(spec).max_moment == largest


def test_heavy_tailed_law_outside_the_table_gets_its_caution() -> None:
    """kappa4 with k < 0 (no table entry) has P(X > x) ~ (|k| x)^(1/k): index -1/k = 5 for
    k = -0.2, so E[X^4] is finite and E[X^5] is not, and its rows carry the slow-convergence
    caution.

    Guards against a family outside the table falling back to a guess (scipy's kurtosis is
    finite here, so the old rule called every moment finite).
    """
    assert scipy_tail_index("scipy.kappa4", {"h": 0.1, "k": -0.2}) == 5.0
    d = parse_distribution("scipy.kappa4:h=0.1,k=-0.2")
    assert d.max_moment == 4
    assert math.isfinite(d.mu4)
    assert dot_product_theory(8, d).slow_convergence


def test_law_whose_density_does_not_tell_its_tail_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A law whose density gives no tail index is refused in one line, not given a guess.

    Without its table entry, scipy.vonmises (a periodic density on the whole line) is such a law.

    Guards against a silent fallback (the old guess from scipy's moments) for a law whose tails
    varcheck cannot read.
    """
    monkeypatch.setattr(distributions, "_TAIL_TABLE", {})
    distributions._tail_index.cache_clear()
    try:
        with pytest.raises(VarcheckError) as err:
            parse_distribution("scipy.vonmises:kappa=4")
    finally:
        distributions._tail_index.cache_clear()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("distribution 'scipy.vonmises:kappa=4': varcheck cannot tell")
    assert "how heavy its tails are" in message


@pytest.mark.parametrize(
    "spec", ["scipy.invweibull:c=1.5", "scipy.gengamma:a=1.3,c=-0.9", "scipy.invweibull:c=1.058"]
)
def test_heavy_tailed_law_with_divergent_variance_does_not_crash(spec: str) -> None:
    """A law whose variance diverges is parsed with var = inf, or refused with a VarcheckError.

    Guards against an internal error (exit 70) instead of a usable law or a one-line refusal.
    """
    try:
        d = parse_distribution(spec)
    except VarcheckError:
        return
    assert d.var == math.inf


@pytest.mark.parametrize(
    ("spec", "moments"),
    [
        ("scipy.norm:scale=1e80,sd=1", (0.0, 1.0, 0.0, 3.0)),
        ("scipy.norm:scale=1e-150,sd=2", (0.0, 4.0, 0.0, 48.0)),
        ("scipy.gamma:a=2,scale=1e100,sd=1,mean=0", (0.0, 1.0, math.sqrt(2), 6.0)),
        ("scipy.t:df=5,scale=1e200,sd=1", (0.0, 1.0, 0.0, 9.0)),
    ],
)
def test_rescaled_law_keeps_its_moments_at_any_raw_scale(
    spec: str, moments: tuple[float, float, float, float]
) -> None:
    """sd= gives the law's moments at the target scale however large or small the raw one:
    scipy.norm:scale=1e80,sd=1 is a standard normal (mu4 = 3); gamma(a=2) has skewness √2 and
    kurtosis 6; t with 5 df kurtosis 3 + 6/(5 - 4) = 9.

    Guards against mu4 = (k + 3) v² computed in the raw scale (v² overflows for a raw sd above
    ~1e77, read as a divergent moment), and against a raw variance that overflows (sd 1e200)
    read as an infinite one, which refused sd=.
    """
    d = parse_distribution(spec)
    assert (d.mean, d.var, d.mu3, d.mu4) == pytest.approx(moments, rel=1e-9, abs=1e-12)


# --- raw t (df <= 2) ------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["t:df=1,mean=0.5", "t:df=0.5,mean=0.5"])
def test_raw_t_without_a_mean_refuses_mean(spec: str) -> None:
    """t with df <= 1 has no mean (E|T| = inf), so mean= is refused, df = 1 included.

    Guards against the boundary moved to df < 1, which would let a Cauchy law take a mean.
    """
    with pytest.raises(VarcheckError, match=r"mean= is impossible for t with df=.* <= 1"):
        parse_distribution(spec)


def test_raw_t_with_a_mean_takes_mean() -> None:
    """t with 1 < df <= 2 has a mean but infinite variance: mean= shifts it.

    Guards against refusing mean= up to df = 2, ignoring the given mean (spec, mean, params or
    the sampler's shift), a mangled canonical spec, or moments other than inf.
    """
    d = parse_distribution("t:df=1.5,mean=0.5")
    assert d.spec == "t:df=1.5,mean=0.5"
    assert parse_distribution(d.spec) == d
    assert d.family == "t"
    assert d.mean == 0.5
    assert (d.var, d.mu3, d.mu4) == (math.inf, math.inf, math.inf)
    assert d.max_moment == 1  # E|T| < inf, E[T^2] = inf
    assert dict(d.params) == {"df": 1.5, "mean": 0.5}
    assert parse_distribution("t:df=1.5").spec == "t:df=1.5"


@pytest.mark.statistical
def test_raw_t_samples_are_centred_on_the_given_mean() -> None:
    """Draws of t:df=1.5,mean=5 fall below 5 half of the time.

    Guards against a mean recorded in the spec but not applied by the sampler. The t law is
    continuous and symmetric about its centre, so the count below 5 is exactly
    Binomial(n, 1/2); a binomial test at p > 0.001 fails a correct sampler once in a thousand
    seeds (the seed is fixed, the count pinned). Unshifted draws fall below 5 with
    probability 0.97.
    """
    n = 2000
    draws = parse_distribution("t:df=1.5,mean=5").sample(np.random.default_rng(20240611), (n,))
    below = int(np.count_nonzero(draws < 5.0))
    assert scipy.stats.binomtest(below, n, 0.5).pvalue > 1e-3, below
    assert below == 1021


# --- scipy laws: parameters, messages, affine map --------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "qqqqqq",
            "unknown distribution 'qqqqqq'; accepted: normal, uniform, rademacher, laplace, t, "
            "or scipy.NAME",
        ),
        (
            "scipy.qqqqqq",
            "unknown distribution 'scipy.qqqqqq'; scipy.NAME must name a continuous",
        ),
        (
            "scipy.gamma:a=2,b=1",
            "distribution 'scipy.gamma:a=2,b=1': unknown parameter 'b'; scipy.gamma accepts a, "
            "loc, scale, mean, sd",
        ),
        ("scipy.gamma:a=2,scale=0", "distribution 'scipy.gamma:a=2,scale=0': scale=0 must be > 0"),
        (
            "scipy.gamma:a=2,scale=-1",
            "distribution 'scipy.gamma:a=2,scale=-1': scale=-1 must be > 0",
        ),
        ("scipy.gamma:a=2,sd=-1", "distribution 'scipy.gamma:a=2,sd=-1': sd=-1 must be > 0"),
        # scipy's own moment formulas overflow for these shapes (an OverflowError inside scipy)
        (
            "scipy.crystalball:beta=2000,m=3000",
            "scipy cannot compute scipy.crystalball with these parameters (beta=2000, m=3000)",
        ),
    ],
)
def test_spec_errors_name_the_spec_and_the_rule(spec: str, message: str) -> None:
    """Each refusal names the spec and the broken rule; no hint when no name is close.

    Guards against a placeholder hint for unmatched names, a parameter check skipped (scipy then
    fails later with a message that names no parameter), scale = 0 let through (scipy calls it
    invalid, without saying which parameter), and a message that drops the spec or the list of
    parameters it was given.
    """
    with pytest.raises(VarcheckError) as err:
        parse_distribution(spec)
    assert message in str(err.value)
    assert "did you mean" not in str(err.value)


def test_scipy_scale_below_one_is_accepted() -> None:
    """Any scale > 0 is valid: gamma(a=2, scale=0.5) has mean a·scale = 1, var a·scale² = 0.5.

    Guards against the scale check's boundary moved from 0 to 1.
    """
    d = parse_distribution("scipy.gamma:a=2,scale=0.5")
    assert (d.mean, d.var) == pytest.approx((1.0, 0.5))


@pytest.mark.parametrize(
    ("spec", "var"), [("scipy.norm:scale=1e-6", 1e-12), ("scipy.norm:scale=1e6", 1e12)]
)
def test_scipy_sd_range_is_inclusive(spec: str, var: float) -> None:
    """sd in [1e-6, 1e6] is accepted, both ends included (as for the named families).

    Guards against the range check made strict at either end.
    """
    assert parse_distribution(spec).var == pytest.approx(var, rel=1e-12)


def test_sd_rescues_a_scipy_law_outside_the_sd_range() -> None:
    """A raw law with sd 1e-7 is refused, but with sd= it is rescaled into range.

    Guards against the range check ignoring sd=.
    """
    with pytest.raises(VarcheckError, match="give sd= to rescale it"):
        parse_distribution("scipy.norm:scale=1e-7")
    d = parse_distribution("scipy.norm:scale=1e-7,sd=1")
    assert (d.mean, d.var, d.mu4) == pytest.approx((0.0, 1.0, 3.0))


def test_scipy_affine_map_of_moments() -> None:
    """gamma(a=2) has mean 2, var 2, skewness √2, kurtosis 3 + 6/a = 6; sd=2 gives
    var 4, mu3 = √2·2³, mu4 = 6·2⁴ = 96 and keeps the mean; mean=1 moves only the mean
    (mu3 = √2·2^1.5 = 4, mu4 = 6·2² = 24).

    Guards against mu3 scaled by 1/factor³, 3·factor or factor⁴, mu3 dropped to inf, a missing
    mean= read as a given one (crash), params that list absent keys as None or drop given ones,
    and a canonical spec that lists an absent mean=.
    """
    d = parse_distribution("scipy.gamma:a=2,sd=2")
    assert d.spec == "scipy.gamma:a=2,sd=2"
    assert (d.mean, d.var, d.mu3, d.mu4) == pytest.approx((2.0, 4.0, 8 * math.sqrt(2), 96.0))
    assert dict(d.params) == {"a": 2.0, "sd": 2.0}
    d = parse_distribution("scipy.gamma:a=2,mean=1")
    assert d.spec == "scipy.gamma:a=2,mean=1"
    assert (d.mean, d.var, d.mu3, d.mu4) == pytest.approx((1.0, 2.0, math.sqrt(2) * 2**1.5, 24.0))
    assert dict(d.params) == {"a": 2.0, "mean": 1.0}


def test_scipy_law_without_shapes_takes_mean() -> None:
    """scipy.norm has no shape parameters: its spec with mean= reads scipy.norm:mean=1.

    Guards against a separator other than ':' after a bare scipy name.
    """
    d = parse_distribution("scipy.norm:mean=1")
    assert d.spec == "scipy.norm:mean=1"
    assert parse_distribution(d.spec) == d
    assert (d.mean, d.var) == (1.0, 1.0)


def test_law_without_a_mean_refuses_mean() -> None:
    """pareto with b = 0.8 has E[X] = inf: its mean is nan and mean= is refused.

    Guards against scipy's +inf mean kept as a number, which would let mean= shift a law that
    has no mean (its loc would become -inf).
    """
    assert math.isnan(parse_distribution("scipy.pareto:b=0.8").mean)
    with pytest.raises(VarcheckError, match="has no mean"):
        parse_distribution("scipy.pareto:b=0.8,mean=1")


@pytest.mark.parametrize("spec", ["scipy.t:df=5,sd=1", "scipy.t:df=5,mean=0.5"])
def test_rescaling_keeps_the_tail(spec: str) -> None:
    """t with 5 df has E|T|^4 < inf = E|T|^5 however it is shifted or scaled.

    Guards against mean=/sd= losing the tail index (an affine map never changes it).
    """
    assert parse_distribution(spec).max_moment == 4


@pytest.mark.parametrize(
    "spec", ["scipy.t:df=3,scale=1e-110,sd=1", "scipy.t:df=3,scale=1e103,sd=1e-6"]
)
def test_infinite_moments_survive_extreme_rescaling(spec: str) -> None:
    """t with 3 df has E|T|^3 = E[T^4] = inf; sd= from any raw scale keeps them inf.

    Guards against rescaling an infinite moment arithmetically: the factor sd/raw sd (here
    about 1e110 or 1e-110) cubed or to the fourth overflows (an error) or underflows to 0
    (inf·0 = nan).
    """
    d = parse_distribution(spec)
    assert (d.mu3, d.mu4) == (math.inf, math.inf)
    assert math.isfinite(d.var)


@pytest.mark.parametrize(
    "spec", ["scipy.genextreme:c=-1", "scipy.truncweibull_min:c=7.5,a=0.75,b=5.25"]
)
def test_parsing_ignores_the_callers_numpy_error_state(spec: str) -> None:
    """parse_distribution gives the same law under np.errstate(all="raise").

    Guards against scipy's harmless floating-point warnings (an overflow inside its moment
    formulas) raising in a caller that asked numpy to raise, which would refuse a valid law.
    """
    expected = parse_distribution(spec)
    with np.errstate(all="raise"):
        assert parse_distribution(spec) == expected
