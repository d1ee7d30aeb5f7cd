"""Every figure varcheck draws is readable when projected: at its default size no text is under
12 pt, no two texts (titles, axis labels, tick labels, legends, annotations) overlap, none is
cut off at the edge, and the saved picture fits a 1280 × 720 projector frame."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

import varcheck  # noqa: E402
from varcheck.output.figure_style import DPI, MAX_HEIGHT, MAX_WIDTH, TEXT_PT  # noqa: E402

KERNEL = "examples/attention_kernels.py:scale_forgotten"
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."]
SENTENCES = [f"{a} {b} {c} ." for a in WORDS[:6] for b in WORDS[6:9] for c in WORDS[:2]]


def _needs(*modules: str) -> pytest.MarkDecorator:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed")


def _encoder_audit(tmp: Any) -> Any:
    from test_display_plot import _tiny_bert

    return varcheck.audit(_tiny_bert(tmp), sentences=SENTENCES, max_length=8)


def _decoder_audit(tmp: Any) -> Any:
    from llama_files import tiny_llama

    return varcheck.audit_decoder(tiny_llama(tmp / "tiny.gguf"), sentences=SENTENCES, max_length=8)


def _checkpoint(tmp: Any) -> Any:
    from hf_checkpoints import sentences, write_checkpoint

    from varcheck.audit.hf_audit import audit_hf

    return audit_hf(write_checkpoint(tmp / "qwen2", "qwen2"), sentences=sentences(8))


def _trend(tmp: Any) -> Any:
    from hf_checkpoints import CONFIGS, random_tensors, sentences, write_checkpoint

    from varcheck.audit.trend import audit_run

    config, prefix, _ = CONFIGS["qwen2"]
    base = random_tensors(config, prefix)
    paths = []
    for step in range(3):
        tensors = {k: v * (1.1**step if "q_proj" in k else 1.0) for k, v in base.items()}
        paths.append(write_checkpoint(tmp / f"ckpt-{step}", "qwen2", tensors=tensors))
    return audit_run(paths, sentences=sentences(8))


#: every figure varcheck draws: (how its result is made, small; the figure function)
FIGURES: dict[str, tuple[Callable[[Any], Any], str]] = {
    "explain": (
        lambda _: varcheck.explain(seed=1, replicates=2000),
        "teaching.figures:plot_explain",
    ),
    "explain (large shape)": (
        lambda _: varcheck.explain("1111x111x1111", 110.56, seed=1, growing=None),
        "teaching.figures:plot_explain",
    ),
    "softmax": (
        lambda _: varcheck.softmax_study("4,16,64", keys=16, queries=960, seed=1),
        "teaching.figures:plot_softmax",
    ),
    "derive": (
        lambda _: varcheck.derive(8, dist="normal:mean=0.5", precision=0.1, seed=1),
        "teaching.figures:plot_derive",
    ),
    "sweep": (
        lambda _: varcheck.sweep("2..16", claim="dk", precision=0.1, seed=1),
        "checks.figures:plot_sweep",
    ),
    "sweep (theory panel)": (
        lambda _: varcheck.sweep("4,16", dist="normal:mean=0.5", claim="dk", precision=0.1, seed=1),
        "checks.figures:plot_sweep",
    ),
    "probe": (
        lambda _: varcheck.probe_sweep(KERNEL, "8,32", queries=16, keys=16, samples=20, seed=1),
        "kernels.figures:plot_probe",
    ),
    "project": (
        lambda _: varcheck.project(dx=8, dk=4, blocks=400, seed=2),
        "paper.figures:plot_project",
    ),
    "train": (
        lambda _: varcheck.train(varcheck.TrainConfig(steps=10, every=5), seed=0),
        "paper.figures:plot_train",
    ),
    "audit": (_encoder_audit, "audit.figures:plot_audit"),
    "audit (decoder)": (_decoder_audit, "audit.figures:plot_decoder_audit"),
    "audit (distance)": (_decoder_audit, "audit.figures:plot_distance"),
    "audit (checkpoint)": (_checkpoint, "audit.hf_figures:plot_checkpoint"),
    "audit (trend)": (_trend, "audit.hf_figures:plot_trend"),
}
MARKS = {
    "audit": [_needs("safetensors", "tokenizers")],
    "audit (decoder)": [_needs("gguf", "tokenizers")],
    "audit (distance)": [_needs("gguf", "tokenizers")],
    "audit (checkpoint)": [_needs("safetensors", "tokenizers")],
    "audit (trend)": [_needs("safetensors", "tokenizers")],
}


def _function(name: str) -> Callable[[Any, str], None]:
    module, function = name.split(":")
    return getattr(importlib.import_module(f"varcheck.{module}"), function)


class Drawn:
    """A figure as a figure function drew it (kept open), and the texts its drawing rendered."""

    def __init__(self, figure: Any, texts: list[Text], renderer: Any, png: bytes) -> None:
        self.figure, self.texts, self.renderer, self.png = figure, texts, renderer, png

    def boxes(self) -> list[tuple[Text, Any]]:
        return [(t, t.get_window_extent(self.renderer)) for t in self.texts]


#: results already made, by their maker (two figures draw the decoder audit)
_MADE: dict[Callable[[Any], Any], Any] = {}


def draw(make: Callable[[Any], Any], function: str, tmp: Any, monkeypatch: Any) -> Drawn:
    """Run the figure function with ``plt.close`` held off, recording every text its saving
    draws (visible, not empty); the figure stays open for inspection at its saved layout."""
    if make not in _MADE:
        _MADE[make] = make(tmp)
    drawn: list[Text] = []
    original = Text.draw

    def recording(self: Text, renderer: Any) -> None:
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        original(self, renderer)

    before = set(plt.get_fignums())
    with monkeypatch.context() as patch:
        patch.setattr(plt, "close", lambda *args: None)
        patch.setattr(Text, "draw", recording)
        _function(function)(_MADE[make], str(tmp / "figure.png"))
    (number,) = set(plt.get_fignums()) - before
    figure = plt.figure(number)
    # constrained layout draws twice while saving: each text once
    texts = list(dict.fromkeys(drawn))
    return Drawn(figure, texts, figure.canvas.get_renderer(), (tmp / "figure.png").read_bytes())


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=MARKS.get(name, [])) for name in FIGURES],
)
def drawn(request: Any, tmp_path_factory: Any) -> Any:
    make, function = FIGURES[request.param]
    mp = pytest.MonkeyPatch()
    try:
        yield draw(make, function, tmp_path_factory.mktemp("fig"), mp)
    finally:
        mp.undo()
        plt.close("all")


def test_no_text_is_smaller_than_the_projector_minimum(drawn: Drawn) -> None:
    small = [(t.get_text(), t.get_fontsize()) for t in drawn.texts if t.get_fontsize() < TEXT_PT]
    assert not small, small


def _overlap(a: Any, b: Any) -> float:
    """The overlapping area of two boxes, in square pixels."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0.0) * max(h, 0.0)


def test_no_two_texts_overlap(drawn: Drawn) -> None:
    # one square pixel of slack: boxes that only touch are apart
    clashes = [
        (a.get_text(), b.get_text())
        for (a, box_a), (b, box_b) in itertools.combinations(drawn.boxes(), 2)
        if _overlap(box_a, box_b) > 1.0
    ]
    assert not clashes, clashes


def test_every_text_lies_inside_the_figure(drawn: Drawn) -> None:
    frame = drawn.figure.bbox
    cut = [
        t.get_text()
        for t, box in drawn.boxes()
        if box.x0 < frame.x0 - 1
        or box.y0 < frame.y0 - 1
        or box.x1 > frame.x1 + 1
        or box.y1 > frame.y1 + 1
    ]
    assert not cut, cut


def test_saved_picture_fits_a_projector_frame(drawn: Drawn) -> None:
    # PNG: width and height are big-endian integers at bytes 16-24 of the IHDR chunk
    width = int.from_bytes(drawn.png[16:20], "big")
    height = int.from_bytes(drawn.png[20:24], "big")
    assert width <= MAX_WIDTH * DPI and height <= MAX_HEIGHT * DPI, (width, height)
    assert drawn.figure.dpi == DPI


def test_error_bars_are_said_to_be_95_percent_intervals(drawn: Drawn) -> None:
    """A figure with error bars or bands says what they are, in the one convention."""
    from matplotlib.collections import LineCollection, PolyCollection

    bars = [
        c
        for ax in drawn.figure.axes
        for c in ax.collections
        if isinstance(c, (LineCollection, PolyCollection)) and len(c.get_paths())
    ]
    if not bars:
        return
    said = " ".join(t.get_text() for t in drawn.texts)
    assert "95%" in said, said
    assert "1 se" not in said and "±1 " not in said, said


def test_explain_names_its_close_lines_in_the_legend_not_beside_them(monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """E[np.var] = 1.5, the observed 1.6 and the entry variance 2 are a few pixels apart: each is
    named in the legend, with its own line style, and no text is drawn among them."""
    make, function = FIGURES["explain"]
    shown = draw(make, function, tmp_path, monkeypatch)
    try:
        ax = shown.figure.axes[0]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        for start in ("E[np.var] = 1.5", "observed 1.6", "variance of one entry = 2"):
            assert any(label.startswith(start) for label in labels), labels
        styles = {(line.get_linestyle(), line.get_color()) for line in ax.get_lines()[-3:]}
        assert len(styles) == 3
        assert not ax.texts  # no label drawn beside a line
    finally:
        plt.close("all")


def test_no_figure_is_left_out() -> None:
    """Every figure function in the presenters' table is drawn above."""
    from varcheck.output.presenters import PRESENTERS

    drawn = {f.removeprefix("varcheck.") for _, f in FIGURES.values()}
    for presenter in PRESENTERS.values():
        if presenter.figure is not None:
            assert presenter.figure.removeprefix("varcheck.") in drawn, presenter.figure
