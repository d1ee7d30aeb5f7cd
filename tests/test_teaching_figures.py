"""Each teaching figure is written and stands alone: a title with the law, the claim or observed
value, the confidence and the seed; a legend for every mark; what the error bars are; a cut
histogram tail stated."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import varcheck.teaching.figures as figures  # noqa: E402
from varcheck.teaching.derive import derive  # noqa: E402
from varcheck.teaching.explain import explain  # noqa: E402
from varcheck.teaching.softmax import softmax_study  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch, tmp_path: Path):
    """Draw through the real save_figure, keeping the title and legend texts of each figure."""
    seen: list[dict] = []
    save = figures.save_figure

    def keep(fig, path: str) -> None:
        seen.append(
            {
                # a long title is wrapped to the figure's width: read it as one line
                "title": " ".join(fig._suptitle.get_text().split()) if fig._suptitle else "",
                "legends": [
                    [t.get_text() for t in legend.get_texts()] + [legend.get_title().get_text()]
                    for legend in [ax.get_legend() for ax in fig.axes] + fig.legends
                    if legend is not None
                ],
                "axes": [ax for ax in fig.axes if ax.axison],
            }
        )
        save(fig, path)
        assert Path(path).read_bytes()[:8] == PNG

    monkeypatch.setattr(figures, "save_figure", keep)
    return seen, tmp_path


def test_explain_figure(drawn) -> None:
    seen, tmp = drawn
    figures.plot_explain(explain(replicates=20_000, seed=3), str(tmp / "e.png"))
    fig = seen[0]
    for part in ("entries ~ normal", "observed 1.6", "level 95%", "seed 3"):
        assert part in fig["title"]
    hist = " ".join(fig["legends"][0])
    assert "simulated experiments" in hist and "observed 1.6" in hist
    # the histogram stops at the 99.5% quantile: the figure says what it left out
    assert "not shown:" in hist and "values (0.5%) above" in hist
    assert len(fig["legends"]) == 1  # the spread panel's one line is named by its axis label


def test_explain_figure_without_simulation(drawn) -> None:
    seen, tmp = drawn
    figures.plot_explain(explain("1111x111x1111", 110.56, seed=2), str(tmp / "g.png"))
    legend = " ".join(seen[0]["legends"][0])
    assert "gamma approximation" in legend and "99.95% quantile" in legend


def test_softmax_figure_says_what_its_error_bars_are(drawn) -> None:
    seen, tmp = drawn
    result = softmax_study("2..16", keys=16, queries=960, q_dist="laplace", seed=4)
    figures.plot_softmax(result, str(tmp / "s.png"))
    fig = seen[0]
    assert "q ~ laplace, k ~ normal" in fig["title"] and "seed 4" in fig["title"]
    # one legend for the three panels, saying what the bars are (as the table does)
    (legend,) = fig["legends"]
    bars = "error bars: 95% intervals (±1.96 se between blocks)"
    assert {"q·k (unscaled)", "q·k / √d_k", bars} <= set(legend)


@pytest.mark.parametrize(
    ("law", "claim"),
    [
        ("normal", "(every textbook step holds)"),
        ("normal:mean=0.5", "(textbook steps 1 and 2 break; Var(q·k) = 12)"),
    ],
)
def test_derive_figure(drawn, law: str, claim: str) -> None:
    seen, tmp = drawn
    figures.plot_derive(derive(8, dist=law, samples=5000, seed=5), str(tmp / "d.png"))
    fig = seen[0]
    assert f"claim Var(q·k) = d_k = 8 {claim}" in fig["title"]
    assert f"q_i, k_i ~ {law}" in fig["title"] and "level 95%" in fig["title"]
    assert "seed 5" in fig["title"]
    (legend,) = fig["legends"]  # one for the four panels
    assert {"textbook value", "exact value", "Monte-Carlo, 95% interval"} <= set(legend)
    titles = [ax.get_title() for ax in fig["axes"]]
    # the table's words: the textbook's step holds or breaks, the exact value is consistent
    assert titles[1].startswith("2. Var(XY)\ntextbook: ") and "\nexact value: " in titles[1]


def test_derive_plot_on_the_command_line(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "derive.png"
    res = run_cli("derive", "--dk", "8", "--samples", "5000", "--seed", "1", "--plot", str(path))
    assert res.exit_code == 0, res.output
    assert path.read_bytes()[:8] == PNG
    bad = run_cli("derive", "--plot", str(tmp_path / "no" / "x.png"))
    assert bad.exit_code == 2 and "does not exist" in bad.output


def test_derive_figure_title_ends_with_seed_and_says_when_cut_short(drawn) -> None:
    from dataclasses import replace

    seen, tmp = drawn
    result = derive(8, seed=5, precision=0.2)
    figures.plot_derive(result, str(tmp / "d.png"))
    figures.plot_derive(replace(result, interrupted=True), str(tmp / "d2.png"))
    assert seen[0]["title"].endswith("; level 95%; seed 5")
    assert seen[1]["title"].endswith("; level 95%; seed 5 — interrupted, partial")
