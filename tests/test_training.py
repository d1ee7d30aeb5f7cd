"""`varcheck train`: hand-written gradients, and fixed against adaptive β on the seeded run."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from varcheck.errors import VarcheckError
from varcheck.paper.training import (
    LookupBatch,
    TrainConfig,
    init_params,
    loss_and_grads,
    make_task,
    scheme_beta,
    train,
)


def test_lookup_batch_holds_the_matching_item() -> None:
    cfg = TrainConfig(dx=6, dk=4, dv=3, memory=5, keys=9, values=4)
    task = make_task(cfg, seed=2)
    b = task.sample(np.random.default_rng(3), 7)
    assert isinstance(b, LookupBatch)
    assert b.query.shape == (7, 6) and b.items.shape == (7, 5, 6)
    # the matching item and the query share the key embedding, so their difference is the
    # target's value embedding minus the query's decoy value embedding
    diff = b.items[np.arange(7), b.match] - b.query
    for d, target in zip(diff, b.target, strict=True):
        assert np.isclose(task.val_emb[target] - task.val_emb, d).all(axis=1).any()


@pytest.mark.parametrize("beta", [0.3, 1.7])
@pytest.mark.parametrize("name", ["w_q", "w_k", "w_v", "w_o"])
def test_gradients_match_central_differences(name: str, beta: float) -> None:
    cfg = TrainConfig(dx=6, dk=4, dv=3, memory=5, keys=9, values=4)
    task = make_task(cfg, seed=2)
    params = init_params(cfg, seed=2)
    # larger weights than at init so that the softmax is far from uniform
    for w in params.arrays().values():
        w *= 3.0
    batch = task.sample(np.random.default_rng(7), 11)
    _, grads = loss_and_grads(params, batch, beta)
    w = params.arrays()[name]
    rng = np.random.default_rng(3)
    # Central differences have truncation error O(h²)·f''' ≈ 1e-10 and rounding error
    # O(ε/h) ≈ 1e-10 at h = 1e-5, both far below the 1e-6 tolerance; a wrong term in the
    # hand-written gradient is an O(1) relative error.
    h = 1e-5
    for idx in [tuple(rng.integers(0, s) for s in w.shape) for _ in range(6)]:
        old = w[idx]
        w[idx] = old + h
        up, _ = loss_and_grads(params, batch, beta)
        w[idx] = old - h
        down, _ = loss_and_grads(params, batch, beta)
        w[idx] = old
        numeric = (up - down) / (2 * h)
        assert grads[name][idx] == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_scheme_betas_at_lecun_init_are_near_one_over_sqrt_dk() -> None:
    cfg = TrainConfig()
    params = init_params(cfg, seed=0)
    fixed = scheme_beta("fixed", params, 1.0, cfg.dk)
    assert fixed == 0.25
    # lecun: d_x σ_W² = 1 up to the sampling of 512 entries (relative sd of σ̂² ≈ √(2/512))
    assert scheme_beta("paper", params, 1.0, cfg.dk) == pytest.approx(fixed, rel=0.15)
    with pytest.raises(VarcheckError, match="beta scheme"):
        scheme_beta("cosine", params, 1.0, cfg.dk)


@pytest.fixture(scope="module")
def seeded_run():
    """The default experiment (600 steps, 3 schemes) on seed 1, as the docs show it."""
    return train(TrainConfig(every=30), seed=1)


def test_runs_share_data_and_initial_weights(seeded_run) -> None:
    starts = [run.steps[0] for run in seeded_run.runs]
    assert len({(s.sigma_wq, s.sigma_wk, s.sigma_x) for s in starts}) == 1
    assert [s.step for s in seeded_run.run("fixed").steps] == list(range(0, 601, 30))


def test_the_task_is_learned(seeded_run) -> None:
    for run in seeded_run.runs:
        assert run.steps[0].accuracy < 0.25  # chance is 1/8
        assert run.final.accuracy > 0.95, run.scheme
        assert run.final.entropy < math.log(8) - 0.3  # attention moved off uniform


def test_fixed_beta_drifts_while_adaptive_beta_stays_near_one(seeded_run) -> None:
    fixed, paper, exact = (seeded_run.run(s) for s in ("fixed", "paper", "exact"))
    # Fixed β: the weights grow (σ_W × 1.6) and the measured logit variance grows with them,
    # from about 1 to above 6, as the σ-based formula predicts (β fixed, σ_Wq σ_Wk up).
    assert fixed.final.sigma_wq > 1.4 * fixed.steps[0].sigma_wq
    assert fixed.steps[0].measured_var < 1.5
    assert fixed.final.measured_var > 6.0
    measured = [s.measured_var for s in fixed.steps]
    predicted = [s.predicted_var_paper for s in fixed.steps]
    assert np.corrcoef(np.log(measured), np.log(predicted))[0, 1] > 0.95
    # Adaptive β: the weights grow even more (β cancels their scale, so nothing stops the
    # gradient from inflating it) but the logit variance stays within a factor 2 of 1 at
    # every recorded step; the exact variant within 25 %.
    assert paper.final.sigma_wq > 2 * fixed.final.sigma_wq
    assert all(0.5 < s.measured_var < 2.0 for s in paper.steps)
    assert all(0.75 < s.measured_var < 1.25 for s in exact.steps)
    assert all(s.predicted_var_paper == pytest.approx(1.0) for s in paper.steps)
    assert all(s.predicted_var_exact == pytest.approx(1.0) for s in exact.steps)
    # the price: pinned logit variance caps how peaked attention gets
    assert paper.final.match_weight < fixed.final.match_weight - 0.2


def test_train_is_reproducible() -> None:
    cfg = TrainConfig(steps=20, every=10, eval_size=64)
    assert train(cfg, seed=5) == train(cfg, seed=5)
    assert train(cfg, seed=5) != train(cfg, seed=6)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        (TrainConfig(steps=0), "steps"),
        (TrainConfig(lr=0.0), "lr"),
        (TrainConfig(memory=8, keys=4), "keys"),
        (TrainConfig(init="glorot"), "init"),
    ],
)
def test_train_validates(config: TrainConfig, fragment: str) -> None:
    with pytest.raises(VarcheckError, match=fragment):
        train(config, seed=0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (TrainConfig(steps=0), "steps must be a whole number in 1..100000, got 0"),
        (TrainConfig(dx=1), "dx must be a whole number in 2..4096, got 1"),
        (TrainConfig(batch=True), "batch must be a whole number in 1..100000, got True"),
        (TrainConfig(every=2.0), "every must be a whole number in 1..100000, got 2.0"),
        (TrainConfig(eval_size=8), "eval_size must be a whole number in 16..1000000, got 8"),
        (
            TrainConfig(memory=8, keys=4),
            "keys must be a whole number >= memory (8) so that the keys of a sequence can be "
            "distinct, got 4",
        ),
        (TrainConfig(lr=2.0), "lr must be in (0, 1], got 2.0"),
    ],
)
def test_train_refusals_word_for_word(config: TrainConfig, message: str) -> None:
    with pytest.raises(VarcheckError, match=f"^{re.escape(message)}$"):
        train(config, seed=0)


def test_train_takes_numpy_whole_numbers_as_ints() -> None:
    cfg = TrainConfig(steps=np.int64(4), every=np.int64(2), eval_size=np.int64(32))
    res = train(cfg, schemes=("fixed",), seed=1)
    assert res == train(TrainConfig(steps=4, every=2, eval_size=32), schemes=("fixed",), seed=1)
    assert type(res.config.steps) is int


def test_train_refuses_unknown_schemes() -> None:
    with pytest.raises(VarcheckError, match="beta scheme"):
        train(TrainConfig(steps=2), schemes=("fixed", "cosine"), seed=0)


# --- the command -------------------------------------------------------------------------------

SMALL = ("train", "--steps", "40", "--every", "20", "--eval-size", "64", "--seed", "8")


def test_train_cli_json(run_cli) -> None:
    res = run_cli(*SMALL, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "train" and doc["seed"] == 8 and doc["version"]
    assert doc["schemes"] == "fixed,paper,exact"
    assert [(r["scheme"], r["step"]) for r in doc["rows"][:3]] == [
        ("fixed", 0),
        ("fixed", 20),
        ("fixed", 40),
    ]
    keys = {"sigma_wq", "sigma_wk", "predicted_var_paper", "measured_var", "entropy", "loss"}
    assert keys <= set(doc["rows"][0]) and len(doc["summary"]) == 3
    assert run_cli(*SMALL, "--format", "json").output == res.output


def test_train_cli_table_csv_plot(run_cli, tmp_path) -> None:
    path = tmp_path / "train.png"
    res = run_cli(*SMALL, "--beta", "fixed,exact", "--plot", str(path))
    assert res.exit_code == 0, res.output
    assert (
        "seed 8" in res.output and "fixed β" in res.output and "paper (σ-based)" not in res.output
    )
    assert path.stat().st_size > 1000
    csv_out = run_cli(*SMALL, "--format", "csv").output
    assert csv_out.startswith("# command=train") and "scheme,step" in csv_out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--beta", "fixed,cosine"), "not accepted"),
        (("--beta", "fixed,fixed"), "distinct"),
        (("--lr", "0"), "out of range"),
        (("--init", "glorot"), "not accepted"),
        (("--memory", "8", "--keys", "4"), "keys"),
        (("--plot", "/nonexistent-dir/t.png"), "does not exist"),
        (("--every", "0"), "--every"),
        (("--format", "yaml"), "--format"),
    ],
)
def test_train_cli_bad_usage(run_cli, args, fragment: str) -> None:
    res = run_cli("train", "--steps", "2", *args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert len(res.output.strip().splitlines()) == 1
