"""The examples in the public API's docstrings run and give what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "varcheck",
    "varcheck.checks.verify",
    "varcheck.checks.claim_file",
    "varcheck.checks.claims",
    "varcheck.core.distributions",
    "varcheck.core.ranges",
    "varcheck.testing",
    "varcheck.core.theory",
    "varcheck.core.verdicts",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
