"""``varcheck train``: a seeded numpy attention experiment, fixed β against adaptive β."""

from __future__ import annotations

from typing import Any

import click

from . import exit_codes_help
from .options import (
    confidence_option,
    int_option,
    output_options,
    positive_option,
    seed_option,
)
from .run import run
from .types import INIT, SCHEMES, FiniteFloat

#: train tests nothing: it exits 0 unless stopped
EXIT_CODES = exit_codes_help(
    0,
    2,
    meanings={
        0: "0 done (train tests nothing)",
        2: "2 bad usage or a run above the memory or time limit",
        130: "130 interrupted by Ctrl-C and 143 by SIGTERM (the steps recorded so far are "
        "printed, marked interrupted)",
    },
)


@click.command(
    "train",
    epilog="""\b
Examples:
  varcheck train                          # ~1 s: three runs of 600 steps
  varcheck train --seed 1 --plot train.png
  varcheck train --beta fixed,paper --steps 1000 --lr 0.02 --format json
  varcheck train --dk 32 --memory 16 --every 50


Runs that would need more than 2 GiB of memory or about 10 minutes are refused before any
work, with the estimate.

"""
    + EXIT_CODES,
)
@int_option("--steps", 1, 100_000, 600, "Adam steps per run.")
@click.option(
    "--lr",
    type=FiniteFloat(0.0, 1.0 + 1e-12, what="a number in (0, 1]"),
    default=0.01,
    show_default=True,
    help="Adam learning rate.",
)
@click.option(
    "--beta",
    "schemes",
    type=SCHEMES,
    default="fixed,paper,exact",
    show_default=True,
    help="β schemes to run: fixed (1/√d_k), paper (σ-based with the weights' RMS, updated "
    "every step), exact (from ‖W_q W_kᵀ‖_F, updated every step).",
)
@int_option("--dx", 2, 4096, 32, "Input (embedding) width.")
@int_option("--dk", 1, 4096, 16, "Query/key width.")
@int_option("--dv", 1, 4096, 16, "Value width.")
@int_option("--memory", 2, 1024, 8, "Key-value items per sequence.")
@int_option("--keys", 2, 1_000_000, 64, "Distinct keys (>= --memory).")
@int_option("--values", 2, 1024, 8, "Value classes (chance accuracy 1/values).")
@int_option("--batch", 1, 100_000, 64, "Sequences per step.")
@int_option(
    "--eval-size",
    16,
    1_000_000,
    2048,
    "Fresh sequences measured at every recorded step (the same for every scheme); the "
    "measured variance's interval treats them as independent blocks.",
)
@int_option("--every", 1, 100_000, None, "Record every N steps [default: steps/20].")
@click.option(
    "--init",
    type=INIT,
    default="lecun",
    show_default=True,
    help="Init of W_q, W_k: lecun (σ²=1/d_x: β = 1/√d_k is right at step 0), xavier, "
    "kaiming or normal:SD.",
)
@positive_option(
    "--max-seconds",
    "Stop at the first step past this wall time, recording it (the output then says it was "
    "time-limited: where it stops depends on the machine).",
)
@confidence_option(text="Confidence level of the measured variance's interval.")
@seed_option()
@output_options("σ_W, logit variance with its interval, entropy and accuracy over steps")
def command(
    steps: int,
    lr: float,
    schemes: tuple[str, ...],
    dx: int,
    dk: int,
    dv: int,
    memory: int,
    keys: int,
    values: int,
    batch: int,
    eval_size: int,
    every: int | None,
    init: str,
    max_seconds: float | None,
    confidence: float,
    seed: int | None,
    output: dict[str, Any],
) -> int:
    """Train one attention head on a key-value lookup with fixed and adaptive β.

    Each sequence holds --memory tokens x = e(key) + g(value); the query token carries one of
    those keys and the head must return its value. The same data and initial weights are
    trained once per β scheme (Adam, hand-written gradients, numpy only). Every --every steps
    the run records σ_Wq and σ_Wk (the entries' RMS, as in beta and project), the paper's
    (σ-based) and the exact predicted variance of the logits β·q·k, the measured variance with
    its interval over --eval-size fresh sequences, the attention entropy, the weight on the
    matching item, loss and accuracy.
    """
    from ..paper.training import TrainConfig, train

    def compute() -> Any:
        config = TrainConfig(
            steps=steps,
            lr=lr,
            dx=dx,
            dk=dk,
            dv=dv,
            memory=memory,
            keys=keys,
            values=values,
            batch=batch,
            eval_size=eval_size,
            every=every if every is not None else max(1, steps // 20),
            init=init,
            confidence=confidence,
            max_seconds=max_seconds,
        )
        return train(config, schemes=schemes, seed=seed)

    return run(compute, **output).exit_code
