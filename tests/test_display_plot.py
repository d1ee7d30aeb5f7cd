"""``result.plot()`` (#18): a result draws the figure its command's ``--plot`` draws, to a file or
in memory, shown inline by a notebook; a command without a figure says so in one line."""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import varcheck  # noqa: E402
from varcheck.output.display import PNG_MAGIC, FigureImage  # noqa: E402

KERNEL = "examples/attention_kernels.py:scale_forgotten"
PROBE = {"queries": 16, "keys": 16, "samples": 20, "seed": 1}
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."]
SENTENCES = [f"{a} {b} {c} ." for a in WORDS[:6] for b in WORDS[6:9] for c in WORDS[:2]]


def _tiny_bert(folder):  # noqa: ANN001, ANN202
    """A random 2-layer BERT (2 heads of 4), saved as safetensors with a word-piece vocabulary."""
    from bert_weights import random_bert_weights
    from safetensors.numpy import save_file

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    weights = random_bert_weights(
        np.random.default_rng(5), d=8, inter=16, layers=2, vocab=len(vocab), positions=16
    )
    save_file({k: v.astype(np.float32) for k, v in weights.items()}, folder / "model.safetensors")
    config = {
        "model_type": "bert",
        "hidden_size": 8,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 16,
        "max_position_embeddings": 16,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return folder


def _audit(tmp_path_factory):  # noqa: ANN001, ANN202
    folder = _tiny_bert(tmp_path_factory.mktemp("bert"))
    return varcheck.audit(folder, sentences=SENTENCES, max_length=8)


def _decoder_audit(tmp_path_factory):  # noqa: ANN001, ANN202
    from llama_files import tiny_llama

    path = tiny_llama(tmp_path_factory.mktemp("llama") / "tiny.gguf")
    return varcheck.audit_decoder(path, sentences=SENTENCES, max_length=8)


def _needs(*modules: str):  # noqa: ANN202
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed")


#: every result type whose command has --plot, built small
FIGURES = {
    "explain": lambda _: varcheck.explain(seed=1),
    "softmax": lambda _: varcheck.softmax_study("4,16", seed=1),
    "derive": lambda _: varcheck.derive(dk=8, precision=0.05, seed=1),
    "sweep": lambda _: varcheck.sweep("2..16", precision=0.05, seed=1),
    "project": lambda _: varcheck.project(dx=8, dk=4, blocks=400, seed=2),
    "train": lambda _: varcheck.train(varcheck.TrainConfig(steps=20, every=10), seed=0),
    "probe": lambda _: varcheck.probe_sweep(KERNEL, "8,32", **PROBE),
    "audit": _audit,
    "audit (decoder)": _decoder_audit,
}
MARKS = {
    "audit": [_needs("safetensors", "tokenizers")],
    "audit (decoder)": [_needs("gguf", "tokenizers")],
}


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=MARKS.get(name, [])) for name in FIGURES],
)
def drawn(request, tmp_path_factory):  # noqa: ANN001, ANN201
    return FIGURES[request.param](tmp_path_factory)


def test_plot_writes_the_png_and_draws_the_same_in_memory(drawn, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "x.png"
    written = drawn.plot(path)
    assert isinstance(written, FigureImage)
    assert written.path == str(path) and path.read_bytes() == written.data
    assert written.data.startswith(PNG_MAGIC)
    shown = drawn.plot()
    assert shown.path is None and shown._repr_png_().startswith(PNG_MAGIC)
    assert shown.data == written.data  # the same picture, byte for byte
    assert re.fullmatch(r"<FigureImage PNG \d+×\d+ in memory>", repr(shown)), repr(shown)
    assert repr(written) == repr(shown).replace("in memory", f"at {str(path)!r}")


@pytest.mark.parametrize(
    ("api", "argv"),
    [
        (lambda: varcheck.explain(seed=1), ("explain", "--seed", "1")),
        (
            lambda: varcheck.softmax_study("4,16", seed=1),
            ("softmax", "--dk", "4,16", "--seed", "1"),
        ),
    ],
    ids=["explain", "softmax"],
)
def test_plot_is_the_figure_the_command_draws(api, argv, run_cli, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "cli.png"
    assert run_cli(*argv, "--plot", str(path)).exit_code == 0
    assert api().plot().data == path.read_bytes()


def _beta_report(tmp_path):  # noqa: ANN001, ANN202
    from varcheck.paper.beta import beta_report

    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "w.npz", w_q=rng.normal(0, 0.1, (2, 8, 4)), w_k=rng.normal(0, 0.1, (2, 8, 4))
    )
    return beta_report(tmp_path / "w.npz")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda _: varcheck.verify(16, claim="dk", precision=0.05, seed=1), "assert"),
        (lambda _: varcheck.check("examples/claims.toml", precision=0.05, seed=1), "check"),
        (_beta_report, "beta"),
        (lambda _: varcheck.probe(KERNEL, 16, **PROBE), "one d_k's probe"),
    ],
)
def test_a_command_without_a_figure_says_so(make, message: str, tmp_path) -> None:  # noqa: ANN001
    result = make(tmp_path)
    for path in (None, tmp_path / "x.png"):
        with pytest.raises(TypeError) as info:
            result.plot(path)
        assert str(info.value).startswith(f"{message} draws no figure")
        assert "\n" not in str(info.value)
    assert not (tmp_path / "x.png").exists()


@pytest.fixture(scope="module")
def derived():  # noqa: ANN201
    return varcheck.derive(dk=4, precision=0.05, seed=1)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("no/such/folder/x.png", "path 'no/such/folder/x.png': the folder"),
        ("x.nope", "path 'x.nope': cannot write a .nope figure; accepted: a file ending in"),
        (".", "path '.' is a folder; give a file name"),
    ],
)
def test_the_path_is_checked_as_plot_checks_it(derived, name, fragment, monkeypatch, tmp_path):  # noqa: ANN001, ANN201
    monkeypatch.chdir(tmp_path)
    with pytest.raises(varcheck.VarcheckError) as info:
        derived.plot(name)
    assert str(info.value).startswith(fragment)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("ext", "magic"), [("svg", b"<?xml"), ("pdf", b"%PDF"), ("jpg", b"\xff\xd8")]
)
def test_another_format_is_written_but_not_shown_as_png(derived, ext, magic, tmp_path) -> None:  # noqa: ANN001
    """Every format --plot accepts is written (JPEG, SVG and others refuse PNG's metadata)."""
    other = derived.plot(tmp_path / f"x.{ext}")
    assert other.data.startswith(magic) and other._repr_png_() is None
    assert repr(other).startswith(f"<FigureImage {ext.upper()} at ")


@pytest.mark.parametrize("path", [None, "x.png"])
def test_without_matplotlib_the_message_of_plot(derived, path, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(varcheck.VarcheckError, match=r"pip install 'varcheck\[plot\]'"):
        derived.plot(path)


def test_every_result_type_draws_what_its_command_draws() -> None:
    """Every result type has presenters; those of the commands with --plot name a figure."""
    import importlib
    import pkgutil

    from varcheck.output.display import Displayable
    from varcheck.output.presenters import PRESENTERS

    for module in pkgutil.walk_packages(varcheck.__path__, "varcheck."):
        if module.name != "varcheck.__main__":
            importlib.import_module(module.name)
    found, queue = set(), [Displayable]
    while queue:
        for cls in queue.pop().__subclasses__():
            found.add(cls)
            queue.append(cls)
    names = {f"{cls.__module__}.{cls.__qualname__}": cls.__name__ for cls in found}
    assert set(names) == set(PRESENTERS)
    drawing = {names[key] for key, entry in PRESENTERS.items() if entry.figure is not None}
    expected = {
        "SweepResult",
        "ExplainResult",
        "SoftmaxResult",
        "DeriveResult",
        "ProjectionResult",
        "TrainResult",
        "AuditResult",
        "DecoderAuditResult",
        "ProbeSweepResult",
        "CheckpointAudit",
        "TrendResult",
    }
    assert drawing == expected
    assert set(names.values()) - expected == {
        "VerifyResult",
        "CheckResult",
        "BetaReport",
        "ProbeResult",
        "PlanResult",
    }


def test_plot_keeps_the_sessions_backend_and_figures(derived) -> None:  # noqa: ANN001
    """A notebook's pyplot is not switched to Agg (that would close the user's figures and stop
    their later ones showing inline); the figure is the same as the command line's."""
    import matplotlib
    import matplotlib.pyplot as plt

    agg = derived.plot().data
    before = matplotlib.get_backend()
    plt.switch_backend("svg")  # stands in for a notebook's inline backend
    try:
        mine = plt.figure()
        open_before = plt.get_fignums()
        assert derived.plot().data == agg
        assert matplotlib.get_backend() == "svg" and plt.fignum_exists(mine.number)
        assert plt.get_fignums() == open_before  # the drawn figure is closed
    finally:
        plt.close("all")
        plt.switch_backend(before)
