"""The sweep figure: written, titled with the law, claim, confidence and seed, verdicts marked."""

from __future__ import annotations

from pathlib import Path

import pytest

import varcheck
from varcheck.checks import figures

pytest.importorskip("matplotlib")


@pytest.fixture
def drawn(monkeypatch):
    """The figure ``plot_sweep`` draws, kept open instead of saved."""
    kept = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: kept.append(fig))
    return kept


def _texts(fig) -> tuple[str, list[str], list[str]]:
    legends = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    titles = [ax.get_title() for ax in fig.axes]
    return fig._suptitle.get_text(), titles, legends


def test_title_names_law_claim_confidence_and_seed(drawn) -> None:
    result = varcheck.sweep("16,64", dist="laplace:mean=0.3", claim="dk", confidence=0.9, seed=3)
    figures.plot_sweep(result, "unused.png")
    title, titles, legends = _texts(drawn[0])
    assert "laplace" in title and "claim: dk" in title and "90% intervals" in title
    assert "seed 3" in title
    assert "Var estimate over the claim (90% CI)" in titles
    assert "claim: dk, / d_k" in legends and "exact theory / d_k" in legends


@pytest.mark.parametrize(
    ("kwargs", "panels"),
    [
        ({"dist": "normal"}, 1),  # theory = claim = d_k: the scaled panel would repeat the ratio
        ({"dist": "laplace", "claim": "dk"}, 1),
        ({"dist": "normal:mean=0.5"}, 2),  # theory/d_k = 1.5: the scaled panel shows it
        ({"dist": "normal", "claim": "1.1*dk"}, 2),
        ({"dist": "normal", "rho": 0.3}, 2),
    ],
)
def test_the_scaled_panel_only_where_it_adds(drawn, kwargs, panels) -> None:
    figures.plot_sweep(varcheck.sweep("4,16", precision=0.05, seed=1, **kwargs), "unused.png")
    assert len(drawn[0].axes) == panels


def test_rejected_and_unreliable_rows_are_marked(drawn) -> None:
    wrong = varcheck.sweep("16,64", dist="normal:mean=0.5", claim="dk", precision=0.05, seed=1)
    figures.plot_sweep(wrong, "unused.png")
    assert "rejected (Holm)" in _texts(drawn[0])[2]
    heavy = varcheck.sweep("4,8", dist="t:df=3", precision=0.05, seed=1)
    figures.plot_sweep(heavy, "unused.png")
    assert "no valid interval (estimate only)" in _texts(drawn[1])[2]


def test_the_file_is_written(tmp_path: Path) -> None:
    path = tmp_path / "sweep.png"
    figures.plot_sweep(varcheck.sweep("2..8", precision=0.05, seed=1), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
