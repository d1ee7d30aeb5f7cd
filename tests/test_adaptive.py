"""Adaptive β: σ-based and exact logit variances, per-head β, the weights file, `varcheck beta`."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from varcheck.core.logit_variance import (
    beta_exact,
    beta_for,
    beta_paper,
    exact_logit_variance,
    paper_logit_variance,
    weight_sigma,
)
from varcheck.errors import VarcheckError
from varcheck.paper.beta import beta_report, head_betas, load_weights


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


def test_weight_sigma_is_the_entry_standard_deviation() -> None:
    w = np.array([[1.0, -1.0], [3.0, -3.0]])
    assert weight_sigma(w) == pytest.approx(math.sqrt(5.0))


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
    # E‖W Wᵀ‖_F² / (d_x² d_k σ⁴) = 1 + (d_k + 1)/d_x = 1.28 (see varcheck.paper.projection)
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
    assert doc["command"] == "beta" and doc["seed"] == 9 and doc["version"]
    assert doc["sigma_x"] == 0.5 and doc["sigma_x_source"] == "file"
    rows = doc["rows"]
    assert [r["head"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["beta_default"] == pytest.approx(0.25)
        assert r["beta_exact"] == pytest.approx(1 / math.sqrt(r["var_exact"]))
    assert rows[3]["exact_over_paper"] > 1.1  # the aligned head
    again = run_cli("beta", str(weights_file), "--seed", "9", "--format", "json")
    assert again.output == res.output


def test_beta_cli_table_csv_markdown(run_cli, weights_file) -> None:
    res = run_cli("beta", str(weights_file), "--seed", "9")
    assert res.exit_code == 0, res.output
    assert "seed 9" in res.output and "β paper" in res.output
    csv_out = run_cli("beta", str(weights_file), "--seed", "9", "--format", "csv").output
    assert csv_out.startswith("# command=beta") and "seed=9" in csv_out.splitlines()[0]
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
