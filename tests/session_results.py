"""Results of costly, deterministic computations, computed once per test process.

The documentation checks ask for some results more than once: ``docs/_generate/decoder.py
--check`` audits SmolLM2 on the built-in text, and so does docs/audit.md's ``varcheck audit
smollm2-135m``; ``docs/_generate/paper.py --check`` trains the default experiment on seed 1,
and so does docs/paper.md's ``varcheck train --seed 1``. :func:`share_results` replaces those
functions, for one test, by versions that compute each distinct call once per process and give
every later caller the same result (results are frozen dataclasses, so no caller can change
what another sees). Each command still runs its own parsing, checks and rendering.

Only a call whose result its arguments determine is shared: a seeded training run or
projection, and an audit of a bundled checkpoint (``smollm2-135m``, ``all-MiniLM-L6-v2``) on
the built-in text with the model's own weights (``docs/_generate/decoder.py`` adds rounding
noise to the decoder's layers to bound the effect of quantisation: that run is never shared).
An interrupted result is not kept. Whichever test asks first computes the result, so each test
passes alone and in any order; under ``pytest -n 2`` each worker keeps its own results.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from varcheck.audit import llama

#: (function, its arguments) -> result, for the whole test process
_RESULTS: dict[tuple[str, str], object] = {}
#: ``LlamaModel.layer`` as varcheck defines it, taken when the tests are collected
_ORIGINAL_LAYER = llama.LlamaModel.layer


def _bundled_text(arguments: dict[str, Any]) -> bool:
    return arguments.get("text_file") is None and arguments.get("sentences") is None


Arguments = dict[str, Any]


def _decoder_rule(arguments: Arguments) -> Arguments | None:
    """SmolLM2 (its name in any case) on the built-in text, with the file's own layers."""
    bundled = str(arguments["model"]).lower() == "smollm2-135m" and _bundled_text(arguments)
    unmodified = llama.LlamaModel.layer is _ORIGINAL_LAYER
    return {**arguments, "model": "smollm2-135m"} if bundled and unmodified else None


def _encoder_rule(arguments: Arguments) -> Arguments | None:
    bundled = str(arguments["model"]) == "all-MiniLM-L6-v2" and _bundled_text(arguments)
    return arguments if bundled else None


def _seeded_rule(arguments: Arguments) -> Arguments | None:
    return arguments if arguments.get("seed") is not None else None


#: the functions that can be shared, by name -> the arguments naming a call that can be shared
#: (None for a call that cannot)
RULES: dict[str, Callable[[Arguments], Arguments | None]] = {
    "audit_decoder": _decoder_rule,
    "audit_encoder": _encoder_rule,
    "train": _seeded_rule,
    "project": _seeded_rule,
}


def shared(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (one of :data:`RULES`) computing each call its rule names once per
    process (``progress`` is not part of a call: it only reports). A module-scoped fixture
    computing the same result as the documentation checks (SmolLM2's default audit, the
    default training run on seed 1) can take it from here:
    ``shared(train)(TrainConfig(every=30), seed=1)``."""
    name = function.__name__
    rule, signature = RULES[name], inspect.signature(function)

    @functools.wraps(function)
    def computed_once(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        call = rule({k: v for k, v in bound.arguments.items() if k != "progress"})
        if call is None:
            return function(*args, **kwargs)
        key = (name, repr(sorted(call.items())))
        if key not in _RESULTS:
            result = function(*args, **kwargs)
            if getattr(result, "interrupted", False):
                return result
            _RESULTS[key] = result
        return _RESULTS[key]

    return computed_once


def share_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the costly computations of varcheck's commands and of the pages' generators
    shared for the rest of the test (``monkeypatch`` puts the functions back)."""
    from varcheck.audit import command, decoder, encoder
    from varcheck.paper import projection, training

    audit_decoder, audit_encoder = shared(decoder.audit_decoder), shared(encoder.audit_encoder)
    for module in (decoder, command):
        monkeypatch.setattr(module, "audit_decoder", audit_decoder)
    for module in (encoder, command):
        monkeypatch.setattr(module, "audit_encoder", audit_encoder)
    monkeypatch.setattr(training, "train", shared(training.train))
    monkeypatch.setattr(projection, "project", shared(projection.project))
