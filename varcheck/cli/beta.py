"""``varcheck beta WEIGHTS.npz``: per-head β from W_q and W_k by the paper's and the exact rule."""

from __future__ import annotations

from typing import Any

import click

from ..paper.beta import WEIGHTS_FORMAT
from . import exit_codes_help
from .options import output_options, positive_option
from .run import run

#: beta tests nothing and draws nothing (its --seed, kept for scripts, is ignored)
EXIT_CODES = exit_codes_help(
    0,
    2,
    meanings={
        0: "0 done (beta tests nothing and draws nothing)",
        2: "2 bad usage, or a weights file that is unreadable, malformed, not a regular file or "
        "too large",
        130: "130 interrupted by Ctrl-C and 143 by SIGTERM",
    },
)


@click.command(
    "beta",
    epilog="\b\n"
    + WEIGHTS_FORMAT
    + """

\b
Examples:
  python -c "import numpy as np; r = np.random.default_rng(0); s = (4, 64, 8);
    np.savez('w.npz', w_q=r.normal(0, .1, s), w_k=r.normal(0, .1, s))"
  varcheck beta w.npz
  varcheck beta w.npz --sigma-x 0.5 --format json

"""
    + EXIT_CODES,
)
@click.argument("weights", type=click.Path(dir_okay=True))
@positive_option(
    "--sigma-x",
    "Standard deviation of the input entries (overrides the file's sigma_x; default 1).",
)
@click.option("--seed", type=int, default=None, hidden=True, help="Ignored: beta draws nothing.")
@output_options()
def command(weights: str, sigma_x: float | None, seed: int | None, output: dict[str, Any]) -> int:
    """Recommend β per head from projection weights W_q, W_k.

    For each head: the paper's β = 1/√[(d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k] with σ_W the
    root mean square of the matrix's entries (as in project and train), the exact
    β = 1/(σ_X² ‖W_q W_kᵀ‖_F) (unit-variance logits for different tokens with i.i.d.
    zero-mean inputs of sd σ_X), and 1/√d_k for comparison. The two agree when W_q and W_k
    look like independent random matrices; they part when the head's query and key
    directions are aligned, and the exact variance is then up to d_k times the σ-based one
    (never more).
    """
    from ..paper.beta import beta_report

    run(lambda: beta_report(weights, sigma_x=sigma_x), **output)
    return 0
