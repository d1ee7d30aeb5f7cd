"""The claim language evaluated against values worked out by hand.

tests/test_claims.py checks that claims parse and that unsafe input is refused. Here every
function and every variable a claim may use gets a value computed by hand (written in the test
as a literal, with its derivation), so that a function replaced by a neighbour (``log`` by
``log10``, ``exp`` by ``expm1``, ``min`` by ``max``), a moment variable wired to the wrong
moment (``sd`` for ``var``, ``q`` for ``k``, the raw fourth moment for the central one, the
excess kurtosis for the kurtosis) or a wrong operator precedence is caught.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from varcheck import (
    VarcheckError,
    dot_product_theory,
    parse_claim,
    parse_distribution,
    sweep,
    verify,
)
from varcheck.checks.claims import _FUNCS, CLAIM_NAMES, claim_context

# A context with pairwise different values, so that no two variables can stand in for each
# other unnoticed.
CTX = {
    "dk": 8.0,
    "rho": -0.4,
    "theory": 27.0,
    "mean_q": -1.5,
    "var_q": 2.25,
    "sd_q": 1.5,
    "mu4_q": 15.1875,
    "kurt_q": 3.0,
    "mean_k": 0.5,
    "var_k": 6.25,
    "sd_k": 2.5,
    "mu4_k": 70.3125,
    "kurt_k": 1.8,
}

# --- functions ----------------------------------------------------------------------------------

# (claim, value by hand); each argument is chosen so that the likely mix-ups give other values
FUNCTION_VALUES = [
    ("sqrt(dk)", 2.8284271247461903),  # 2·√2 (cbrt would give 2)
    ("sqrt(var_k)", 2.5),
    ("sqrt(0)", 0.0),
    ("exp(1)", 2.718281828459045),  # e (expm1 would give 1.718, exp2 2)
    ("exp(-dk/8)", 0.36787944117144233),  # 1/e
    ("exp(rho)", 0.6703200460356393),  # e^-0.4
    ("exp(0)", 1.0),
    ("log(dk)", 2.0794415416798357),  # ln 8 = 3 ln 2 (log10: 0.903, log2: 3, log1p: 2.197)
    ("log(theory)", 3.295836866004329),  # ln 27 = 3 ln 3
    ("log(1)", 0.0),
    ("log(exp(2))", 2.0),
    ("abs(mean_q)", 1.5),  # a negative argument (the identity would give -1.5)
    ("abs(rho)", 0.4),
    ("abs(dk)", 8.0),
    ("abs(-0.0)", 0.0),
    ("min(dk, theory)", 8.0),
    ("min(3, dk, -2, 5)", -2.0),  # more than two arguments, the smallest in the middle
    ("min(rho, mean_q)", -1.5),
    ("max(dk, theory)", 27.0),
    ("max(rho, mean_q, mean_k)", 0.5),
    ("max(-3, -dk)", -3.0),
]
FUNCTIONS = {"sqrt", "exp", "log", "abs", "min", "max"}


@pytest.mark.parametrize(("text", "value"), FUNCTION_VALUES, ids=[t for t, _ in FUNCTION_VALUES])
def test_function_values(text: str, value: float) -> None:
    """Guards against a claim function that computes something else (log10 for log, ...)."""
    assert parse_claim(text).evaluate(CTX) == pytest.approx(value, rel=1e-14, abs=1e-15)


def test_every_accepted_function_has_hand_values() -> None:
    """Guards against a function added to (or dropped from) the claim language without a value
    test here, and against the error message listing other functions than those accepted."""
    tested = {text.split("(")[0] for text, _ in FUNCTION_VALUES}
    assert set(_FUNCS) == FUNCTIONS == tested
    with pytest.raises(VarcheckError) as err:
        parse_claim("nosuchname")
    listed = str(err.value).rsplit(" and ", 1)[1]
    assert set(listed.split(", ")) == FUNCTIONS, str(err.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("sqrt(1, 2)", "sqrt() takes one positional argument"),
        ("log(8, 2)", "log() takes one positional argument"),  # not the two-argument math.log
        ("exp(1, 2)", "exp() takes one positional argument"),
        ("abs(1, 2)", "abs() takes one positional argument"),
        ("exp()", "exp() takes one positional argument"),
        ("min()", "min() takes two or more positional arguments"),
        ("sqrt(x=dk)", "sqrt() takes one positional argument"),
        ("max(dk, key=abs)", "max() takes two or more positional arguments"),
        ("max(*[1, 2])", "Starred is not allowed"),
    ],
)
def test_function_arity_is_checked_when_parsing(text: str, fragment: str) -> None:
    """Guards against a wrong number of arguments slipping through to evaluation."""
    with pytest.raises(VarcheckError) as err:
        parse_claim(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize("func", ["min", "max"])
def test_min_max_of_one_argument(func: str) -> None:
    """Guards against a claim that parses but can never be evaluated: ``max(dk)`` is refused
    when parsed, with a message about its arguments (it used to fail at evaluation with a Python
    error)."""
    with pytest.raises(VarcheckError, match=rf"{func}\(\) takes two or more positional"):
        parse_claim(f"{func}(dk)")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("sqrt(-1)", "cannot be evaluated"),
        ("log(0)", "cannot be evaluated"),
        ("log(-dk)", "cannot be evaluated"),
        ("exp(1000)", "cannot be evaluated"),  # overflow
        ("1/(dk-8)", "cannot be evaluated"),
        ("(-8)**(1/3)", "cannot be evaluated"),  # a complex power, not a real number
        ("0**-1", "cannot be evaluated"),
        ("1e308*10", "beyond the largest float"),
    ],
)
def test_no_real_value_is_an_error(text: str, fragment: str) -> None:
    """Guards against a claim without a finite real value turning into nan, inf or a complex
    number that is then compared with an estimate."""
    with pytest.raises(VarcheckError) as err:
        parse_claim(text).evaluate(CTX)
    assert fragment in str(err.value) and repr(text) in str(err.value)


# --- names that are not part of the language ----------------------------------------------------

UNKNOWN_NAMES = [
    "d_k",
    "d",
    "Dk",
    "DK",
    "Theory",
    "mean",
    "var",
    "sd",
    "mu4",
    "kurt",
    "q",
    "k",
    "mu3_q",
    "skew_q",
    "kurtosis_q",
    "sd_x",
    "var_q1",
    "e",
    "pi",
    "inf",
    "nan",
    "sqrt",  # a function's name used as a variable
]


@pytest.mark.parametrize("name", UNKNOWN_NAMES)
def test_unknown_variable_is_named_and_the_accepted_ones_listed(name: str) -> None:
    """Guards against an unknown name being read as 0, as a Python builtin, or refused without
    saying which name and what is accepted."""
    with pytest.raises(VarcheckError) as err:
        parse_claim(f"2 * {name} + 1")
    message = str(err.value)
    assert f"unknown name {name!r}" in message
    for accepted in CLAIM_NAMES:
        assert accepted in message


UNKNOWN_FUNCTIONS = [
    "log10",
    "log2",
    "ln",
    "log1p",
    "expm1",
    "exp2",
    "pow",
    "cbrt",
    "sin",
    "tanh",
    "floor",
    "round",
    "int",
    "float",
    "sum",
    "hypot",
    "eval",
    "getattr",
    "dk",  # a variable called like a function
]


@pytest.mark.parametrize("func", UNKNOWN_FUNCTIONS)
def test_unknown_function_is_refused(func: str) -> None:
    """Guards against a function outside the language being called (and so against log10 or
    pow sneaking in as an alias)."""
    with pytest.raises(VarcheckError) as err:
        parse_claim(f"{func}(8)")
    assert "sqrt, exp, log, abs, min, max" in str(err.value)
    with pytest.raises(VarcheckError):
        parse_claim(f"math.{func}(8)")


def test_unknown_function_is_named() -> None:
    """Guards against an error that does not say which function is unknown."""
    with pytest.raises(VarcheckError, match="'log10'"):
        parse_claim("log10(dk)")


# --- operator precedence ----------------------------------------------------------------------

PRECEDENCE = [
    ("2**3**2", 512.0),  # right-associative: 2**(3**2); (2**3)**2 would be 64
    ("-2**2", -4.0),  # ** binds tighter than unary minus: -(2**2)
    ("(-2)**2", 4.0),
    ("-rho**2", -0.16),  # -(0.4**2), not (+0.4)**2
    ("rho**2", 0.16),
    ("2**-1", 0.5),  # a unary minus in the exponent
    ("-dk**0.5", -2.8284271247461903),
    ("dk**2/4", 16.0),
    ("dk - 2 - 1", 5.0),  # left-associative; 8 - (2 - 1) would be 7
    ("dk / 4 / 2", 1.0),  # left-associative; 8 / (4 / 2) would be 4
    ("dk - 2*3", 2.0),
    ("1 + 2*3**2", 19.0),
    ("(1 + 2)*3", 9.0),
    ("2*-3", -6.0),
    ("- -dk", 8.0),
    ("+dk", 8.0),
    ("-abs(rho)", -0.4),
    ("1e-4*dk", 0.0008),
    ("2**64", 18446744073709551616.0),  # the largest exponent accepted
    ("dk**-2", 0.015625),
    ("dk*(1+rho**2)", 9.28),
]


@pytest.mark.parametrize(("text", "value"), PRECEDENCE, ids=[t for t, _ in PRECEDENCE])
def test_operator_precedence(text: str, value: float) -> None:
    """Guards against an evaluator that groups operators otherwise than Python arithmetic."""
    assert parse_claim(text).evaluate(CTX) == pytest.approx(value, rel=1e-14)


@pytest.mark.parametrize("text", ["2**65", "dk**-65", "9**9**9", "dk**(dk*dk+1)"])
def test_exponents_beyond_64_are_refused(text: str) -> None:
    """Guards against claims whose evaluation takes unbounded time or memory."""
    with pytest.raises(VarcheckError, match="out of range"):
        parse_claim(text).evaluate(CTX)


# --- moment variables, from the distributions ---------------------------------------------------

# Exact entry moments, by hand. X = mean + sd·Z with Z standardised (mean 0, variance 1), so
# var = sd², mu4 = E[(X - mean)^4] = kurt·sd^4 (the *central* fourth moment) and kurt = E[Z^4]
# (3 for a normal, not the excess kurtosis). E[Z^4]: normal 3; uniform on [-√3, √3]:
# (√3)^4 / 5 = 9/5; rademacher (±1): 1; laplace with variance 1 (scale b = 1/√2): 24 b^4 = 6;
# Student t standardised: 3 + 6/(df - 4). gamma(a=2) (scipy's own scale, not standardised):
# mean a = 2, variance a = 2, kurt 3 + 6/a = 6, so mu4 = 6·2² = 24.
#                                       mean   var    sd                  mu4      kurt
MOMENTS = {
    "normal:mean=0.5,sd=2": (0.5, 4.0, 2.0, 48.0, 3.0),  # 3·2^4
    "uniform:mean=1.5,sd=2.5": (1.5, 6.25, 2.5, 70.3125, 1.8),  # 1.8·2.5^4 = 1.8·39.0625
    "laplace:mean=-1,sd=0.5": (-1.0, 0.25, 0.5, 0.375, 6.0),  # 6·0.0625
    "rademacher:mean=0.75,sd=2": (0.75, 4.0, 2.0, 16.0, 1.0),  # 1·2^4
    "t:df=10,mean=0.3,sd=1.5": (0.3, 2.25, 1.5, 20.25, 4.0),  # 3 + 6/6 = 4; 4·5.0625
    "t:df=6,mean=-2,sd=3": (-2.0, 9.0, 3.0, 486.0, 6.0),  # 3 + 6/2 = 6; 6·81
    "normal:mean=1,sd=2": (1.0, 4.0, 2.0, 48.0, 3.0),
    "normal:mean=-0.5,sd=0.8": (-0.5, 0.64, 0.8, 1.2288, 3.0),  # 3·0.4096
    "scipy.gamma:a=2": (2.0, 2.0, 1.4142135623730951, 24.0, 6.0),
    "uniform": (0.0, 1.0, 1.0, 1.8, 1.8),
}

# (q, k, dk, rho, Var(q·k) by hand). For independent entries one term q_i k_i has variance
# (s_q² + m_q²)(s_k² + m_k²) - m_q² m_k²; for jointly normal ones with correlation rho,
# m_q² s_k² + m_k² s_q² + s_q² s_k² (1 + rho²) + 2 rho m_q m_k s_q s_k; Var(q·k) is d_k times it.
SETTINGS = {
    # 8 · [(4 + 0.25)(6.25 + 2.25) - 0.25·2.25] = 8 · (36.125 - 0.5625)
    "normal-uniform": ("normal:mean=0.5,sd=2", "uniform:mean=1.5,sd=2.5", 8, 0.0, 284.5),
    # 3 · [(0.25 + 1)(4 + 0.5625) - 1·0.5625] = 3 · (5.703125 - 0.5625)
    "laplace-rademacher": (
        "laplace:mean=-1,sd=0.5",
        "rademacher:mean=0.75,sd=2",
        3,
        0.0,
        15.421875,
    ),
    # 5 · [(2.25 + 0.09)(9 + 4) - 0.09·4] = 5 · (30.42 - 0.36)
    "t10-t6": ("t:df=10,mean=0.3,sd=1.5", "t:df=6,mean=-2,sd=3", 5, 0.0, 150.3),
    # 6 · [1·0.64 + 0.25·4 + 4·0.64·1.16 + 2(-0.4)(1)(-0.5)(2)(0.8)] = 6 · 5.2496
    "normal-rho": ("normal:mean=1,sd=2", "normal:mean=-0.5,sd=0.8", 6, -0.4, 31.4976),
    # 4 · [(2 + 4)(1 + 0) - 4·0]
    "gamma-uniform": ("scipy.gamma:a=2", "uniform", 4, 0.0, 24.0),
}


def _hand_values(setting: str) -> dict[str, float]:
    q, k, dk, rho, theory = SETTINGS[setting]
    values = {"dk": float(dk), "rho": rho, "theory": theory}
    for suffix, spec in (("q", q), ("k", k)):
        for moment, value in zip(("mean", "var", "sd", "mu4", "kurt"), MOMENTS[spec], strict=True):
            values[f"{moment}_{suffix}"] = value
    return values


CASES = [(s, name) for s in SETTINGS for name in CLAIM_NAMES]


def test_hand_values_cover_every_name_and_tell_every_pair_apart() -> None:
    """Guards against a variable without a hand value, and against a setting table in which two
    variables agree everywhere (a swap of the two would then go unnoticed)."""
    tables = [_hand_values(s) for s in SETTINGS]
    assert all(set(t) == set(CLAIM_NAMES) for t in tables)
    for a, b in itertools.combinations(CLAIM_NAMES, 2):
        assert any(t[a] != t[b] for t in tables), (a, b)


@pytest.mark.parametrize(("setting", "name"), CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_variable_values_from_the_distributions(setting: str, name: str) -> None:
    """Guards against a moment variable bound to another moment, the other vector, the raw
    instead of the central fourth moment, or the excess instead of the plain kurtosis."""
    q_spec, k_spec, dk, rho, _ = SETTINGS[setting]
    q, k = parse_distribution(q_spec), parse_distribution(k_spec)
    ctx = claim_context(dk, rho, dot_product_theory(dk, q, k, rho).var, q, k)
    expected = _hand_values(setting)[name]
    assert parse_claim(name).evaluate(ctx) == pytest.approx(expected, rel=1e-12, abs=1e-300)


E2E = [(s, name) for s in ("normal-uniform", "normal-rho") for name in CLAIM_NAMES]


@pytest.mark.parametrize(("setting", "name"), E2E, ids=[f"{s}-{n}" for s, n in E2E])
def test_variable_values_through_verify(setting: str, name: str) -> None:
    """Guards against the API handing the claim another setting's context (q and k exchanged,
    rho dropped, the scaled theory for the raw one). ``+ 10`` keeps every claim positive."""
    q, k, dk, rho, _ = SETTINGS[setting]
    res = verify(dk, claim=f"{name} + 10", q_dist=q, k_dist=k, rho=rho, samples=1000, seed=1)
    assert res.claim_value == pytest.approx(_hand_values(setting)[name] + 10, rel=1e-12)


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_scaled_claims_see_the_scaled_theory_and_the_same_moments(setting: str) -> None:
    """Guards against ``theory`` meaning Var(q·k) in a claim about Var(q·k/√d_k), and against
    ``dk`` or the moments changing with ``scaled``."""
    q, k, dk, rho, theory = SETTINGS[setting]
    hand = _hand_values(setting)
    res = verify(dk, claim="theory", q_dist=q, k_dist=k, rho=rho, scaled=True, samples=1000, seed=1)
    assert res.claim_value == pytest.approx(theory / dk, rel=1e-12)
    assert res.theory_value == pytest.approx(theory / dk, rel=1e-12)
    res = verify(
        dk, claim="dk*var_k + sd_q", q_dist=q, k_dist=k, rho=rho, scaled=True, samples=1000, seed=1
    )
    assert res.claim_value == pytest.approx(dk * hand["var_k"] + hand["sd_q"], rel=1e-12)


def test_each_sweep_row_uses_its_own_dk() -> None:
    """Guards against a sweep evaluating the claim once (for the first d_k) for every row."""
    q, k = "normal:mean=0.5,sd=2", "uniform:mean=1.5,sd=2.5"
    res = sweep("2,8,32", q_dist=q, k_dist=k, claim="dk*var_q + log(dk)", samples=1000, seed=1)
    # var_q = 4, ln 2 = 0.6931471805599453
    hand = {
        2: 8 + 0.6931471805599453,
        8: 32 + 3 * 0.6931471805599453,
        32: 128 + 5 * 0.6931471805599453,
    }
    assert {r.dk: r.claim_value for r in res.rows} == pytest.approx(hand, rel=1e-14)


def test_command_line_claim_value(run_cli) -> None:
    """Guards against the command line passing the claim, the distributions or rho to the API
    differently from a Python call."""
    q, k, dk, rho, theory = SETTINGS["normal-rho"]
    claim = "theory + sqrt(var_q)*mean_k - exp(rho) + log(dk)*kurt_k + max(mu4_q, mu4_k)"
    res = run_cli(
        "assert",
        "--dk",
        str(dk),
        "--q-dist",
        q,
        "--k-dist",
        k,
        "--rho",
        str(rho),
        "--claim",
        claim,
        "--samples",
        "1000",
        "--seed",
        "1",
        "--format",
        "json",
    )
    # 31.4976 + 2·(-0.5) - e^-0.4 + ln 6 · 3 + max(48, 1.2288) = 83.2, 2.6 times Var(q·k): far
    # outside any interval from 1000 products, so the claim fails
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    hand = 31.4976 - 1.0 - 0.6703200460356393 + 3 * 1.791759469228055 + 48.0
    assert doc["claim"] == claim and doc["claim_value"] == pytest.approx(hand, rel=1e-12)
    assert doc["theory_value"] == pytest.approx(theory, rel=1e-12)


# --- moments that do not exist ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name", "value"),
    [
        ("t:df=4", "var_q", 1.0),  # standardised: the variance exists
        ("t:df=4", "mu4_q", None),  # E[T^4] is infinite for df <= 4
        ("t:df=4", "kurt_q", None),
        ("t:df=3", "mean_q", 0.0),
        ("t:df=2", "mean_q", 0.0),
        ("t:df=2", "var_q", None),  # E[T^2] is infinite for df <= 2: the raw t is used
        ("t:df=2", "sd_q", None),
        ("t:df=1", "mean_q", None),  # Cauchy: no mean at all (nan)
        ("t:df=2", "mean_k", 0.0),  # k stays normal
        ("t:df=2", "kurt_k", 3.0),
    ],
)
def test_moments_that_do_not_exist_are_errors_not_numbers(
    spec: str, name: str, value: float | None
) -> None:
    """Guards against an infinite or undefined moment being used as a number in a claim."""
    q, k = parse_distribution(spec), parse_distribution("normal")
    ctx = claim_context(4, 0.0, dot_product_theory(4, q, k).var, q, k)
    if value is None:
        with pytest.raises(VarcheckError, match="not a finite number"):
            parse_claim(f"1 + {name}").evaluate(ctx)
    else:
        assert parse_claim(name).evaluate(ctx) == value


def test_a_claim_on_an_infinite_moment_is_refused_by_verify() -> None:
    """Guards against verify testing a claim whose value is infinite."""
    with pytest.raises(VarcheckError, match="kurt_q"):
        verify(4, claim="kurt_q", q_dist="t:df=4", samples=1000, seed=1)


@pytest.mark.parametrize("text", ["foo + dk", "dk + foo", "-foo", "2 * (dk - foo)"])
def test_errors_inside_operators_quote_the_whole_claim(text: str) -> None:
    """Guards against an error deep in an expression losing the claim it came from (the message
    would quote ``None`` instead of the claim the user wrote)."""
    with pytest.raises(VarcheckError, match=re.escape(f"claim {text!r}: unknown name 'foo'")):
        parse_claim(text)


def test_claims_up_to_500_characters_are_accepted() -> None:
    """Guards against an off-by-one in the documented length limit (500 characters)."""
    longest = "dk" + " + 0" * 124 + "  "  # 2 + 496 + 2 = 500 characters
    assert len(longest) == 500
    assert parse_claim(longest).evaluate(CTX) == 8.0
    with pytest.raises(VarcheckError, match="longer than 500 characters"):
        parse_claim(longest + " ")
