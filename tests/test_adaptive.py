"""Adaptive β: σ-based and exact logit variances, per-head β, the weights file, `varcheck beta`."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from varcheck.core.logit_variance import (
    SIGMA_W_KIND,
    beta_exact,
    beta_for,
    beta_paper,
    exact_logit_variance,
    head_prediction,
    paper_logit_variance,
    weight_sigma,
)
from varcheck.errors import VarcheckError
from varcheck.paper.beta import beta_report, head_betas, load_weights


def test_head_prediction_is_the_four_numbers_of_one_head() -> None:
    """The σ_W and both predictions beta and the audits report, from one call."""
    rng = np.random.default_rng(7)
    w_q, w_k = rng.normal(0.1, 0.2, (12, 4)), rng.normal(0, 0.3, (12, 4))
    sq, sk, vp, ve = head_prediction(w_q, w_k, 0.5)
    assert (sq, sk) == (weight_sigma(w_q), weight_sigma(w_k))
    assert vp == paper_logit_variance(0.5, sq, sk, 12, 4)
    assert ve == exact_logit_variance(w_q, w_k, 0.5)
    # the audits hold W as (d_k, d_x) and pass its transpose: the same numbers, bit for bit
    assert head_prediction(w_q.T.copy().T, w_k.T.copy().T, 0.5) == (sq, sk, vp, ve)


@pytest.mark.parametrize(("dx", "dk"), [(1, 1), (8, 3), (64, 16)])
def test_exact_variance_is_the_frobenius_norm_of_wq_wkT(dx: int, dk: int) -> None:
    rng = np.random.default_rng(dx * 100 + dk)
    w_q, w_k = rng.standard_normal((dx, dk)), rng.standard_normal((dx, dk))
    direct = float(np.sum((w_q @ w_k.T) ** 2))
    assert exact_logit_variance(w_q, w_k, 1.0) == pytest.approx(direct, rel=1e-12)
    assert exact_logit_variance(w_q, w_k, 2.0) == pytest.approx(16 * direct, rel=1e-12)
    assert beta_exact(w_q, w_k, 2.0) == pytest.approx(1 / (4 * math.sqrt(direct)), rel=1e-12)


def test_paper_variance_and_lecun_init_give_one_over_sqrt_dk() -> None:
    # d_x σ_X² σ_W² = 1 for each factor, so the relaxed formula reduces to d_k
    assert paper_logit_variance(1.0, 1 / 8, 1 / 8, 64, 16) == pytest.approx(16.0)
    assert beta_paper(1.0, 1 / 8, 1 / 8, 64, 16) == pytest.approx(0.25)
    assert paper_logit_variance(2.0, 0.1, 0.3, 10, 4) == pytest.approx(
        (10 * 4 * 0.01) * (10 * 4 * 0.09) * 4
    )


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_beta_for_non_positive_or_non_finite_is_nan(bad: float) -> None:
    assert math.isnan(beta_for(bad))


def test_weight_sigma_is_the_entries_root_mean_square() -> None:
    """Guards against σ_W being the mean-removed standard deviation (issue #22, item 1): for
    entries with a mean the two differ, and only the RMS bounds exact/σ-based by d_k."""
    w = np.array([[1.0, -1.0], [3.0, -3.0]])  # mean 0: RMS = sd = √5
    assert weight_sigma(w) == pytest.approx(math.sqrt(5.0), rel=1e-15)
    shifted = np.array([[0.3, 0.4], [0.3, 0.4]])  # mean 0.35, sd 0.05, RMS √0.125
    assert weight_sigma(shifted) == pytest.approx(math.sqrt(0.125), rel=1e-15)
    assert SIGMA_W_KIND == "rms"


def _heads(kind: str, rng: np.random.Generator, dx: int, dk: int) -> tuple[np.ndarray, ...]:
    """Weights built to make exact/σ-based large: shared directions, a common mean, low rank."""
    if kind == "random":
        return rng.standard_normal((dx, dk)), rng.standard_normal((dx, dk))
    if kind == "aligned":
        w = rng.standard_normal((dx, dk))
        return w, w
    if kind == "rank-one":  # the extreme: W_q = u vᵀ, W_k = u' vᵀ share their row space
        v = rng.standard_normal(dk)
        return np.outer(rng.standard_normal(dx), v), np.outer(rng.standard_normal(dx), 3 * v)
    if kind == "mean":  # the head: mean 0.1, spread 0.01
        return 0.1 + 0.01 * rng.standard_normal((dx, dk)), 0.1 + 0.01 * rng.standard_normal(
            (dx, dk)
        )
    if kind == "mean-aligned":
        w = 0.1 + 0.01 * rng.standard_normal((dx, dk))
        return w, w
    if kind == "rank-two":
        u, v = rng.standard_normal((dx, 2)), rng.standard_normal((2, dk))
        return u @ v, u @ v + 0.01 * rng.standard_normal((dx, dk))
    raise AssertionError(kind)


KINDS = ("random", "aligned", "rank-one", "mean", "mean-aligned", "rank-two")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("dx", "dk"), [(16, 16), (64, 16), (8, 32), (32, 1)])
def test_exact_is_at_most_dk_times_sigma_based(kind: str, dx: int, dk: int) -> None:
    """Guards against a σ_W for which the documented bound exact ≤ d_k · σ-based fails (issue
    #22, item 1). Proof (docs/paper.md): ‖W_q W_kᵀ‖_F ≤ ‖W_q‖_F ‖W_k‖_F = d_x d_k σ_Wq σ_Wk
    with σ_W the RMS, so σ_X⁴‖W_q W_kᵀ‖_F² ≤ d_k (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k; equality
    for rank one with a common row space. The bound is exact arithmetic, so the slack is
    rounding only (1e-12)."""
    rng = np.random.default_rng([dx, dk, KINDS.index(kind)])
    for _ in range(20):
        w_q, w_k = _heads(kind, rng, dx, dk)
        (head,) = head_betas(w_q, w_k, sigma_x=0.7)
        assert head.exact_over_paper <= dk * (1 + 1e-12), (kind, head)
        if kind == "rank-one":
            assert head.exact_over_paper == pytest.approx(dk, rel=1e-12)


def test_the_mean_removed_sd_would_break_the_bound() -> None:
    """Guards against going back to np.std: on the issue's head (mean 0.1, spread 0.01,
    d_k = 16) the σ-based value from the standard deviation is ~10⁵ times too small, while the
    RMS keeps exact/σ-based ≤ d_k."""
    dx, dk = 32, 16
    rng = np.random.default_rng(22)
    w_q, w_k = _heads("mean", rng, dx, dk)
    exact = exact_logit_variance(w_q, w_k, 1.0)
    by_sd = exact / paper_logit_variance(1.0, float(np.std(w_q)), float(np.std(w_k)), dx, dk)
    (head,) = head_betas(w_q, w_k)
    assert by_sd > 1e4 * dk
    assert head.exact_over_paper <= dk
    assert head.sigma_wq == pytest.approx(math.sqrt(np.mean(w_q**2)), rel=1e-14)


def test_head_betas_two_and_three_dimensional() -> None:
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 32, 8)) / math.sqrt(32)
    heads = head_betas(w, w[::-1], sigma_x=1.5)
    assert [h.head for h in heads] == [0, 1, 2]
    one = head_betas(w[0], w[2], sigma_x=1.5)
    assert len(one) == 1 and one[0] == heads[0]
    for h in heads:
        assert h.beta_default == pytest.approx(1 / math.sqrt(8))
        assert h.beta_paper == pytest.approx(1 / math.sqrt(h.var_paper))
        assert h.beta_exact == pytest.approx(1 / math.sqrt(h.var_exact))
    # head 1 pairs w[1] with itself: aligned, so the exact variance exceeds the σ-based one;
    # E‖W Wᵀ‖_F² / (d_x² d_k σ⁴) = 1 + (d_k + κ_w − 2)/d_x = 1.28 for normal entries
    # (κ_w = 3; see varcheck.paper.projection.aligned_factor)
    assert heads[1].exact_over_paper > 1.1
    assert abs(heads[0].exact_over_paper - 1) < 0.4


@pytest.mark.parametrize(
    ("w_q", "w_k", "fragment"),
    [
        (np.zeros((2, 3, 4, 5)), np.zeros((2, 3, 4, 5)), "must have shape"),
        (np.zeros((3, 4)), np.zeros((3, 5)), "one shape"),
        (np.full((3, 4), np.nan), np.zeros((3, 4)), "NaN or infinite"),
        (np.array([["a"]]), np.array([["a"]]), "real numbers"),
    ],
)
def test_head_betas_refuses_bad_arrays(w_q, w_k, fragment: str) -> None:
    with pytest.raises(VarcheckError, match=fragment):
        head_betas(w_q, w_k)


@pytest.mark.parametrize(
    ("sigma_x", "message"),
    [
        (0.0, "sigma_x must be a finite number > 0, got 0.0"),
        (-1, "sigma_x must be a finite number > 0, got -1"),
        (math.nan, "sigma_x must be a finite number > 0, got nan"),
        (False, "sigma_x must be a finite number > 0, got False"),
        ("1", "sigma_x must be a finite number > 0, got '1'"),
    ],
)
def test_head_betas_refuses_sigma_x_word_for_word(sigma_x, message: str) -> None:
    w = np.ones((3, 4))
    with pytest.raises(VarcheckError, match=f"^{re.escape(message)}$"):
        head_betas(w, w, sigma_x)


def test_head_betas_refuses_weights_whose_variance_overflows() -> None:
    # 1e200² overflows float64: a one-line error, not inf or a RuntimeWarning
    w = np.full((3, 4), 1e200)
    with pytest.raises(VarcheckError, match="overflows"):
        head_betas(w, w)


@pytest.fixture
def weights_file(tmp_path):
    """A small example weights file: 4 heads, the last aligned (W_k = W_q)."""
    rng = np.random.default_rng(20)
    w_q = rng.normal(0.0, 0.1, (4, 64, 16))
    w_k = rng.normal(0.0, 0.1, (4, 64, 16))
    w_k[3] = w_q[3]
    path = tmp_path / "heads.npz"
    np.savez(path, w_q=w_q, w_k=w_k, sigma_x=np.float64(0.5))
    return path


def test_load_weights_and_sigma_precedence(weights_file) -> None:
    w = load_weights(weights_file)
    assert w.w_q.shape == (4, 64, 16) and w.sigma_x == 0.5
    assert beta_report(weights_file, seed=1).sigma_x_source == "file"
    rep = beta_report(weights_file, sigma_x=2.0, seed=1)
    assert rep.sigma_x == 2.0 and rep.sigma_x_source == "option"


@pytest.mark.parametrize(
    ("arrays", "fragment"),
    [
        ({"w_q": np.zeros((3, 4))}, "no array 'w_k'"),
        ({"wq": np.zeros((3, 4)), "wk": np.zeros((3, 4))}, "no array 'w_q'"),
        ({"w_q": np.ones((3, 4)), "w_k": np.ones((3, 5))}, "one shape"),
        ({"w_q": np.ones(3), "w_k": np.ones(3)}, "must have shape"),
        ({"w_q": np.ones((3, 4)), "w_k": np.ones((3, 4)), "sigma_x": np.ones(2)}, "sigma_x"),
        ({"w_q": np.ones((3, 4)), "w_k": np.ones((3, 4)), "sigma_x": -1.0}, "sigma_x"),
        ({"w_q": np.ones((3, 4)), "w_k": np.full((3, 4), np.inf)}, "NaN or infinite"),
    ],
)
def test_load_weights_errors(tmp_path, arrays, fragment: str) -> None:
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    with pytest.raises(VarcheckError, match=fragment):
        load_weights(path)


def test_load_weights_unreadable_files(tmp_path) -> None:
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    with pytest.raises(VarcheckError, match="not a readable .npz"):
        load_weights(junk)
    single = tmp_path / "one.npy"
    np.save(single, np.zeros((3, 4)))
    with pytest.raises(VarcheckError, match="single array"):
        load_weights(single)
    with pytest.raises(VarcheckError, match="does not exist"):
        load_weights(tmp_path / "missing.npz")
    with pytest.raises(VarcheckError, match="directory"):
        load_weights(tmp_path)


# --- the command -------------------------------------------------------------------------------


def test_beta_cli_json(run_cli, weights_file) -> None:
    res = run_cli("beta", str(weights_file), "--seed", "9", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "beta" and "seed" not in doc and doc["version"]  # draws nothing
    assert doc["sigma_x"] == 0.5 and doc["sigma_x_source"] == "file"
    rows = doc["rows"]
    assert [r["head"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["beta_default"] == pytest.approx(0.25)
        assert r["beta_exact"] == pytest.approx(1 / math.sqrt(r["var_exact"]))
    assert rows[3]["exact_over_paper"] > 1.1  # the aligned head
    assert doc["sigma_w_kind"] == "rms"
    assert (doc["outcome"], doc["exit_code"]) == ("done", 0)  # beta tests nothing (#18)
    w_q = np.load(weights_file)["w_q"]
    for r, w in zip(rows, w_q, strict=True):
        assert r["sigma_wq"] == pytest.approx(math.sqrt(np.mean(w**2)), rel=1e-14)
    again = run_cli("beta", str(weights_file), "--seed", "9", "--format", "json")
    assert again.output == res.output


def test_beta_cli_table_csv_markdown(run_cli, weights_file) -> None:
    res = run_cli("beta", str(weights_file), "--seed", "9")
    assert res.exit_code == 0, res.output
    assert "seed 9" not in res.output and "β paper" in res.output
    assert "σ_Wq (RMS)" in res.output and "σ_Wk (RMS)" in res.output
    csv_out = run_cli("beta", str(weights_file), "--seed", "9", "--format", "csv-meta").output
    assert csv_out.startswith("# command=beta") and "seed=" not in csv_out.splitlines()[0]
    md = run_cli("beta", str(weights_file), "--seed", "9", "--format", "markdown").output
    assert "| head |" in md


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "does not exist"), ("garbage", "not a readable .npz")],
)
def test_beta_cli_errors_are_one_line_exit_2(run_cli, tmp_path, content, fragment) -> None:
    path = tmp_path / "w.npz"
    if content is not None:
        path.write_text(content)
    res = run_cli("beta", str(path))
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_beta_help_documents_the_arrays(run_cli) -> None:
    res = run_cli("beta", "--help")
    assert res.exit_code == 0
    assert "w_q" in res.output and "(heads, d_x, d_k)" in res.output and "sigma_x" in res.output
