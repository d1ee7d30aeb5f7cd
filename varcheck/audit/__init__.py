"""The audit family: the attention logit scale of a trained checkpoint, head by head.

``command.py`` is the ``varcheck audit`` command's computation: it picks ``encoder.py``, which
audits a BERT-style encoder (and holds the head, layer and plan types the
decoder audit shares), ``decoder.py`` a Llama-style decoder; the forward passes (``bert.py``,
``llama.py``) and the file readers (``safetensors_file.py``, ``gguf_file.py``, the tokenizers)
are modules of their own, so that a new model family adds a reader and a forward pass beside
them. ``render.py`` and ``figures.py`` present the results (docs/audit.md, docs/architecture.md).

The package is also the public function: ``varcheck.audit(model, ...)`` calls
:func:`varcheck.audit.command.audit` (the encoder or the decoder audit, by model) whichever
of the two ``varcheck.audit`` names.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _AuditPackage(types.ModuleType):
    """The package, callable as :func:`varcheck.audit.command.audit`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .command import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _AuditPackage
