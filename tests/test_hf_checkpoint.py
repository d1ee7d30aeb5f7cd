"""Auditing Hugging Face checkpoint directories of every family, and refusing malformed ones."""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from hf_checkpoints import CONFIGS, random_tensors, sentences, write_checkpoint  # noqa: E402

from varcheck.audit import hf_forward  # noqa: E402
from varcheck.audit.bert import TokenBatch  # noqa: E402
from varcheck.audit.checkpoint import MAX_INDEX_BYTES, open_checkpoint  # noqa: E402
from varcheck.audit.families import model_spec  # noqa: E402
from varcheck.audit.hf_audit import audit_hf, encode  # noqa: E402
from varcheck.errors import VarcheckError  # noqa: E402

TEXT = sentences(40)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {family: write_checkpoint(root / family, family) for family in CONFIGS}


@pytest.fixture(scope="module")
def audits(folders: dict[str, Path]) -> dict:
    return {family: audit_hf(path, sentences=TEXT) for family, path in folders.items()}


@pytest.mark.parametrize("family", list(CONFIGS))
def test_every_family_is_audited_head_by_head(audits: dict, family: str) -> None:
    """Every layer and head has finite figures inside their ranges, intervals around them."""
    result = audits[family]
    spec = model_spec(CONFIGS[family][0])
    assert [(h.layer, h.head) for h in result.heads] == [
        (layer, head) for layer in range(spec.layers) for head in range(spec.heads)
    ]
    assert result.sequences == len(TEXT) and not result.interrupted
    for h in result.heads:
        assert h.q999 <= h.max_logit and h.mean_max <= h.max_logit
        assert 0 <= h.sink <= 1 and h.entropy >= 0
        for est, ci in (
            (h.scaled_var, h.scaled_var_ci),
            (h.mean_max, h.mean_max_ci),
            (h.entropy, h.entropy_ci),
            (h.sink, h.sink_ci),
        ):
            assert ci.low <= est <= ci.high
    assert result.sequence_max.shape == (len(result.heads), len(TEXT))


def test_first_token_is_what_the_family_tokenizer_puts_there(audits: dict) -> None:
    assert audits["bert"].first_tokens == ("'[CLS]'",)
    assert audits["roberta"].first_tokens == ("'<s>'",)
    assert audits["gemma2"].first_tokens == ("'<bos>'",)
    assert len(audits["gpt2"].first_tokens) > 1  # no BOS: a text token


def test_declared_scale_per_family() -> None:
    """1/√d_head with an explicit head_dim, query_pre_attn_scalar for Gemma 2, GPT-2's
    division by the layer's number."""
    assert model_spec(CONFIGS["qwen3"][0]).scales == pytest.approx((12**-0.5,) * 2)
    gemma2 = model_spec(CONFIGS["gemma2"][0])
    assert gemma2.scales == pytest.approx((12**-0.5,) * 2) and gemma2.softcap == 5.0
    assert gemma2.windows == (4, None)  # no layer_types: even layers slide
    gpt2 = dict(CONFIGS["gpt2"][0], scale_attn_by_inverse_layer_idx=True)
    assert model_spec(gpt2).scales == pytest.approx((8**-0.5, 8**-0.5 / 2))
    assert model_spec(dict(CONFIGS["mistral"][0])).windows == (4, 4)


@pytest.mark.parametrize("family", ["mistral", "bert"])
def test_figures_match_a_direct_computation(folders: dict, audits: dict, family: str) -> None:
    """Max logit, pairs, sink and entropy of one head recomputed from the forward pass on one
    padded batch, with the window and causality applied by hand."""
    ckpt = open_checkpoint(folders[family])
    ids = encode(ckpt, TEXT, 128)
    batch = TokenBatch.from_ids(ids)
    atts, _ = hf_forward.run(
        ckpt, np.where(batch.mask, batch.ids, ckpt.spec.pad_token_id), batch.mask
    )
    att, head = atts[1], 2
    n = batch.ids.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    causal = family != "bert"
    allowed = ((j <= i) & (j > i - 4)) if causal else np.ones((n, n), bool)
    vis = allowed[None] & batch.mask[:, :, None] & batch.mask[:, None, :]
    logits = att.logits[:, head]
    row = next(h for h in audits[family].heads if (h.layer, h.head) == (1, head))
    assert row.pairs == vis.sum()
    assert row.max_logit == pytest.approx(logits[vis].max(), rel=1e-6)
    assert row.scaled_var == pytest.approx(logits[vis].astype(float).var(), rel=1e-6)
    probs = att.probs[:, head]
    queries = batch.mask & (np.arange(n) >= (1 if causal else 0))
    sees = queries & vis[:, :, 0]
    assert row.sink == pytest.approx(probs[..., 0][sees].mean(), rel=1e-6)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.nansum(np.where(probs > 0, probs * np.log(probs), 0), axis=-1)
    assert row.entropy == pytest.approx(ent[queries].mean(), rel=1e-5)


def test_layers_and_heads_select_a_subset(folders: dict) -> None:
    result = audit_hf(folders["llama"], sentences=TEXT, layers=[1], heads=[0, 3])
    assert [(h.layer, h.head) for h in result.heads] == [(1, 0), (1, 3)]
    with pytest.raises(VarcheckError, match="layer 2 is out of range"):
        audit_hf(folders["llama"], sentences=TEXT, layers=[2])
    with pytest.raises(VarcheckError, match="heads '9': head 9 is out of range"):
        audit_hf(folders["llama"], sentences=TEXT, heads="9")


def test_fewer_sequences_than_the_least_give_no_interval(folders: dict) -> None:
    result = audit_hf(folders["qwen2"], sentences=TEXT[:10])
    assert all(math.isnan(h.sink_ci.low) and math.isnan(h.scaled_var_ci.high) for h in result.heads)


def test_time_plan_refuses_before_any_work(folders: dict) -> None:
    with pytest.raises(VarcheckError, match="--max-seconds"):
        audit_hf(folders["llama"], sentences=TEXT, max_seconds=1e-9)


def test_sharded_checkpoint_reads_as_one_file(folders: dict, tmp_path: Path) -> None:
    """The same tensors split over two shards with an index give the same figures."""
    from safetensors.numpy import load_file, save_file

    source = folders["llama"]
    tensors = load_file(str(source / "model.safetensors"))
    names = sorted(tensors)
    halves = {"a.safetensors": names[::2], "b.safetensors": names[1::2]}
    folder, blobs = tmp_path / "sharded", tmp_path / "blobs"
    folder.mkdir()
    blobs.mkdir()
    for file, keys in halves.items():  # linked to blobs, as in the Hugging Face cache
        save_file({k: tensors[k] for k in keys}, str(blobs / file))
        (folder / file).symlink_to(blobs / file)
    weight_map = {k: f for f, keys in halves.items() for k in keys}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    for extra in ("config.json", "tokenizer.json"):
        (folder / extra).write_bytes((source / extra).read_bytes())
    one = audit_hf(source, sentences=TEXT[:12])
    two = audit_hf(folder, sentences=TEXT[:12])
    assert [h.max_logit for h in one.heads] == [h.max_logit for h in two.heads]


# --- malformed inputs: one line, before any large allocation --------------------------------------


def _damaged(root: Path, how: str) -> Path:
    config, prefix, _ = CONFIGS["llama"]
    config = dict(config)
    tensors = random_tensors(config, prefix)
    folder = root / how
    if how == "heads":
        config["num_key_value_heads"] = 3
    elif how == "architecture":
        config["model_type"] = "mixtral"
    elif how == "quantised":
        config["quantization_config"] = {"quant_method": "gptq"}
    elif how == "huge-config":
        config.update(hidden_size=65536, num_hidden_layers=1024, intermediate_size=1 << 20)
    elif how == "missing":
        del tensors["model.layers.1.self_attn.k_proj.weight"]
    elif how == "shape":
        tensors["model.layers.0.self_attn.q_proj.weight"] = np.zeros((32, 30), np.float32)
    elif how == "integer":
        tensors["model.layers.0.mlp.up_proj.weight"] = np.zeros((48, 32), np.int8)
    write_checkpoint(folder, "llama", tensors=tensors, config=config)
    if how == "truncated":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[:200])
    elif how == "outside":
        (folder / "model.safetensors").rename(root / "elsewhere.safetensors")
        index = {"weight_map": {k: "../elsewhere.safetensors" for k in tensors}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    elif how == "pickle-only":
        (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    elif how == "huge-header":
        data = bytearray((folder / "model.safetensors").read_bytes())
        data[:8] = (1 << 40).to_bytes(8, "little")
        (folder / "model.safetensors").write_bytes(bytes(data))
    return folder


MALFORMED = {
    "heads": "do not share 3 key-value heads",
    "architecture": "model_type 'mixtral' is not read; accepted: bert, roberta, gpt2",
    "quantised": "quantised",
    "huge-config": "config.json implies ('*', 65536)",
    "missing": "missing tensor 'model.layers.1.self_attn.k_proj.weight'",
    "shape": "has shape (32, 30); config.json implies (32, 32)",
    "integer": "is I8; accepted: F32",
    "truncated": "header declares",
    "outside": "lies outside the model directory",
    "pickle-only": "pytorch_model.bin is a pickle",
    "huge-header": "header declares",
}


@pytest.mark.parametrize("how", list(MALFORMED))
def test_malformed_checkpoint_is_one_line_before_allocation(tmp_path: Path, how: str) -> None:
    folder = _damaged(tmp_path, how)
    tracemalloc.start()
    try:
        with pytest.raises(VarcheckError) as err:
            open_checkpoint(folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert "\n" not in message and MALFORMED[how] in message
    # what is read: config, index, headers; reading a small file reserves its size limit first
    assert peak < MAX_INDEX_BYTES + (4 << 20)


def test_interrupt_keeps_the_finished_layers(folders: dict, monkeypatch) -> None:  # noqa: ANN001
    """Ctrl-C (KeyboardInterrupt) during layer 1: layer 0's heads are returned, marked."""
    real = hf_forward.block

    def block(spec, w, layer, h, mask):  # noqa: ANN001, ANN202
        if layer == 1:
            raise KeyboardInterrupt
        return real(spec, w, layer, h, mask)

    monkeypatch.setattr(hf_forward, "block", block)
    result = audit_hf(folders["qwen3"], sentences=TEXT)
    assert result.interrupted and result.exit_code == 130
    assert {h.layer for h in result.heads} == {0}
    assert result.sequence_max.shape == (4, len(TEXT))


def test_beta_unit_gives_unit_variance(audits: dict) -> None:
    for h in audits["gemma2"].heads:
        assert (h.beta_unit / h.scale) ** 2 * h.scaled_var == pytest.approx(1.0)
        assert h.beta_unit_ci.low <= h.beta_unit <= h.beta_unit_ci.high
