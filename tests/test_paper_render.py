"""project, beta and train tables on 80- and 100-column terminals, and their figures (#18).

Each table is rendered with rich at the width: no line is longer, every identifier, estimate
with its interval and verdict word is printed whole, and a column left out is named in a note.
Each figure is written and carries its title (settings, confidence, seed) and its legends.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import varcheck.paper.figures as figures_module
from varcheck.output.formats import Column, fmt
from varcheck.paper.beta import beta_report
from varcheck.paper.figures import PALETTE, plot_project, plot_train
from varcheck.paper.projection import project
from varcheck.paper.render import (
    print_fitted,
    project_cells,
    render_beta,
    render_project,
    render_train,
    train_step_cells,
)
from varcheck.paper.training import TrainConfig, train

WIDTHS = (80, 100)


@pytest.fixture(scope="module")
def projected():
    return project(seed=2, dx=64, dk=64, init="kaiming", precision=0.1)


@pytest.fixture(scope="module")
def trained():
    return train(TrainConfig(steps=40, every=20, eval_size=64), seed=1)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("beta") / "w.npz"
    rng = np.random.default_rng(5)
    w_q = rng.normal(0, 0.1, (3, 64, 16))
    np.savez(path, w_q=w_q, w_k=rng.normal(0, 0.1, (3, 64, 16)))
    return path


def _table(render, result, width: int) -> str:  # noqa: ANN001
    buf = io.StringIO()
    render(result, "table", Console(file=buf, width=width, no_color=True, soft_wrap=False))
    return buf.getvalue()


def _fits(text: str, width: int) -> None:
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, long[:3]


@pytest.mark.parametrize("width", WIDTHS)
def test_project_table_fits(projected, width: int) -> None:
    text = _table(render_project, projected, width)
    _fits(text, width)
    for row in projected.rows:
        cells = project_cells(row, verdict=str, alpha=projected.alpha)
        pattern = r"\s+".join(re.escape(c) for c in (cells.weights, cells.case, cells.prediction))
        line = next(ln for ln in text.splitlines() if re.match(pattern + r"\s", ln))
        assert cells.estimate in line and re.search(rf"\b{cells.verdict}\b", line), line
    if width == 80:
        assert "not shown at 80 columns: ratio, p (Holm)" in text and "--format json" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_train_table_fits(trained, width: int) -> None:
    text = _table(render_train, trained, width)
    _fits(text, width)
    for run in trained.runs:
        for step in run.steps:
            cells = train_step_cells(step)
            line = next(ln for ln in text.splitlines() if ln.split()[:2] == [cells[0], cells[1]])
            assert cells[6] in line  # the measured variance with its interval
    assert ("not shown at 80 columns" in text) == (width == 80)


@pytest.mark.parametrize("width", WIDTHS)
def test_beta_table_fits(weights: Path, width: int) -> None:
    report = beta_report(weights)
    text = _table(render_beta, report, width)
    _fits(text, width)
    for h in report.heads:
        line = next(ln for ln in text.splitlines() if ln.split()[:1] == [str(h.head)])
        assert fmt(h.beta_paper) in line and fmt(h.beta_exact) in line
    assert "not shown" not in text or "--format json" in text


def test_columns_go_in_their_order_and_the_kept_never_go() -> None:
    columns = [Column("id"), Column("a", priority=2), Column("b", priority=1), Column("v")]
    rows = [["x" * 10, "y" * 10, "z" * 10, "w" * 10]]

    def dropped(width: int) -> list[str]:
        console = Console(file=io.StringIO(), width=width, no_color=True)
        return print_fitted(console, "", None, columns, rows)

    assert dropped(100) == []
    assert dropped(35) == ["b"]
    assert dropped(5) == ["a", "b"]  # too narrow: identifiers stay anyway


def test_a_header_wraps_before_its_column_goes() -> None:
    columns = [Column("id"), Column("a long header", priority=1)]
    out = io.StringIO()
    console = Console(file=out, width=18, no_color=True)
    assert print_fitted(console, "", None, columns, [["x" * 6, "y" * 6]]) == []
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 18 for line in lines) and any("yyyyyy" in line for line in lines)


def test_numbers_round_before_their_decimals_are_chosen() -> None:
    assert fmt(0.99996, 3) == fmt(1.00001, 3) == fmt(1.0, 3) == "1.00"
    assert fmt(9.9996, 4) == "10.00" and fmt(0.0099996, 3) == "0.0100"
    assert fmt(float("nan")) == "—"


# --- figures ----------------------------------------------------------------------------------


@pytest.fixture
def captured(monkeypatch):
    """The figures the plot functions save, kept open for inspection (and also written)."""
    figs = []
    real = figures_module.save_figure

    def save(fig, path):  # noqa: ANN001, ANN202
        figs.append(fig)
        fig.savefig(path)

    monkeypatch.setattr(figures_module, "save_figure", save)
    yield figs
    import matplotlib.pyplot as plt

    for fig in figs:
        plt.close(fig)
    del real


def _legend_texts(ax) -> list[str]:  # noqa: ANN001
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


def test_project_figure(projected, tmp_path: Path, captured) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "project.png"
    plot_project(projected, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = captured[0].axes
    title = captured[0]._suptitle.get_text()
    for word in ("d_x = 64", "init kaiming", "x ~ normal", "95% intervals", "; seed 2"):
        assert word in title, title
    legend = _legend_texts(ax)
    assert "rejected" in legend and "hollow: finding" in legend
    assert any(t.startswith("consistent") for t in legend)
    # readable ticks: more than the powers of ten, written as plain numbers
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(labels) >= 3 and "1" in labels and not any("10^" in t for t in labels)
    colours = {c.lower() for c in PALETTE.values()}
    for line in ax.get_lines():
        colour = line.get_color()
        assert not isinstance(colour, str) or colour.lower() in colours | {"black"}, colour


def test_train_figure(trained, tmp_path: Path, captured) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "train.png"
    plot_train(trained, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = captured[0]
    suptitle = fig._suptitle.get_text()
    for word in ("init lecun", "95% intervals", "; seed 1", "d_k = 16"):
        assert word in suptitle, suptitle
    axes = fig.axes
    assert all(ax.get_title() for ax in axes)  # every panel titled
    assert all(len(ax.get_ylabel()) < 25 for ax in axes)  # no label running into its neighbour
    legends = [text for ax in axes for text in _legend_texts(ax)]
    for word in ("fixed β = 1/√d_k", "target: 1", "chance: 1/values", "uniform attention: log M"):
        assert word in legends, legends


# --- in Python and notebooks ------------------------------------------------------------------


@pytest.fixture(params=["project", "train", "beta"])
def displayed(request, weights: Path):
    """(result from the API, the command line printing the same result)."""
    if request.param == "project":
        args = ("--dx", "8", "--dk", "4", "--precision", "0.1", "--seed", "1")
        return project(8, 4, precision=0.1, seed=1), ("project", *args)
    if request.param == "train":
        cfg = TrainConfig(steps=4, every=2, eval_size=32)
        args = ("--steps", "4", "--every", "2", "--eval-size", "32", "--seed", "1")
        return train(cfg, seed=1), ("train", *args)
    return beta_report(weights), ("beta", str(weights))


def test_to_dict_repr_and_notebook_table(displayed, run_cli) -> None:
    result, argv = displayed
    printed = json.loads(run_cli(*argv, "--format", "json").output)
    assert result.to_dict() == printed and printed["exit_code"] == 0
    text = repr(result)
    assert "\n" not in text and len(text) < 120 and text.startswith(f"<{type(result).__name__}")
    html = result._repr_html_()
    assert html.startswith("<pre") and html.rstrip().endswith("</pre>")
