"""What the documentation checks share (tests/session_results.py): a call its arguments
determine is computed once, any other call every time."""

from __future__ import annotations

import pytest
from session_results import shared

from varcheck.audit import llama


def test_a_seeded_call_is_computed_once_and_an_unseeded_one_every_time() -> None:
    calls: list[object] = []

    def train(config: object = None, *, schemes: tuple[str, ...] = ("a",), seed=None):  # noqa: ANN001, ANN202
        calls.append(seed)
        return object()

    once = shared(train)
    first = once(seed=5, schemes=("stand-in",))
    assert once(None, schemes=("stand-in",), seed=5) is first  # the same call, spelt otherwise
    assert once(seed=6, schemes=("stand-in",)) is not first
    once(schemes=("stand-in",))
    once(schemes=("stand-in",))
    assert calls == [5, 6, None, None]


def test_an_audit_is_shared_only_on_the_bundled_text_and_the_files_own_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decoder generator bounds quantisation by auditing with noise added to every layer:
    that run must neither take nor leave the shared result."""
    calls: list[str] = []

    def audit_decoder(model, *, text_file=None, sentences=None, progress=None):  # noqa: ANN001, ANN202
        calls.append(str(model))
        return object()

    once = shared(audit_decoder)
    plain = once("SmolLM2-135M", sentences=None, progress=print)
    assert once("smollm2-135m", sentences=None) is plain
    assert once("smollm2-135m", sentences=["A line."]) is not plain
    monkeypatch.setattr(llama.LlamaModel, "layer", lambda self, index: None)
    assert once("smollm2-135m", sentences=None) is not plain
    assert len(calls) == 3
