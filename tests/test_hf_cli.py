"""``varcheck audit`` on Hugging Face directories and on a run's checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from hf_checkpoints import CONFIGS, random_tensors, sentences, write_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hfcli")
    for name in ("a", "b"):
        write_checkpoint(root / name, "gemma2")
    (root / "text.txt").write_text("\n".join(sentences(40)) + "\n")
    return root


def test_directory_is_audited_in_every_format(run_cli, run_dir: Path) -> None:  # noqa: ANN001
    args = ("audit", str(run_dir / "a"), "--text", str(run_dir / "text.txt"), "--layers", "1")
    doc = json.loads(run_cli(*args, "--format", "json").output)
    assert doc["family"] == "gemma2" and doc["exit_code"] == 0
    assert doc["declared_scale"].startswith("query_pre_attn_scalar")
    assert [(h["layer"], h["head"]) for h in doc["heads"]] == [(1, h) for h in range(4)]
    csv = run_cli(*args, "--format", "csv-meta").output.splitlines()
    assert csv[1].startswith("layer,head,scale,softcap,window,scaled_var") and len(csv) == 6
    assert "| layer |" in run_cli(*args, "--format", "markdown").output
    table = run_cli(*args).output
    assert "declared scale: query_pre_attn_scalar^-1/2 (12)" in table and "'<bos>'" in table


def test_several_checkpoints_give_the_trend(run_cli, run_dir: Path) -> None:  # noqa: ANN001
    out = run_cli(
        "audit",
        str(run_dir / "a"),
        str(run_dir / "b"),
        "--text",
        str(run_dir / "text.txt"),
        "--format",
        "json",
    )
    doc = json.loads(out.output)
    assert out.exit_code == 0 and len(doc["fastest"]) == 5
    assert all(h["growth"] == pytest.approx(1.0) for h in doc["heads"])  # the same weights


@pytest.mark.parametrize("change", ["model_type", "heads"])
def test_malformed_directory_exits_2_in_one_line(run_cli, tmp_path: Path, change: str) -> None:  # noqa: ANN001
    good, prefix, _ = CONFIGS["llama"]
    config = dict(
        good,
        **({"model_type": "mixtral"} if change == "model_type" else {"num_key_value_heads": 3}),
    )
    tensors = random_tensors(good, prefix)
    folder = write_checkpoint(tmp_path / "bad", "llama", config=config, tensors=tensors)
    out = run_cli("audit", str(folder))
    assert out.exit_code == 2
    assert len(out.output.strip().splitlines()) == 1


def test_heads_on_the_encoder_audit_is_refused(run_cli, tmp_path: Path) -> None:  # noqa: ANN001
    """--heads does nothing for a BERT directory's audit: refused, not ignored."""
    folder = write_checkpoint(tmp_path / "bert", "bert")
    out = run_cli("audit", str(folder), "--heads", "0")
    assert out.exit_code == 2 and "--heads and --max-seconds apply to" in out.output


def test_the_tables_fit_80_columns(run_dir: Path) -> None:
    """A checkpoint's head table and a run's trend tables at 80 columns keep every row."""
    import io

    from rich.console import Console

    from varcheck.audit.hf_audit import audit_hf
    from varcheck.audit.hf_render import render_checkpoint, render_trend
    from varcheck.audit.trend import audit_run

    text = run_dir / "text.txt"
    one = audit_hf(run_dir / "a", text_file=text, layers="1")
    run = audit_run([run_dir / "a", run_dir / "b"], text_file=text)
    for render, result in ((render_checkpoint, one), (render_trend, run)):
        buf = io.StringIO()
        render(result, "table", Console(file=buf, width=80, color_system=None))
        lines = buf.getvalue().splitlines()
        assert lines and max(len(line) for line in lines) <= 80, buf.getvalue()
