"""Importing the audit family under an old name leaves the module's own spec in place, so that
its relative imports (lazy ones included) still resolve inside ``varcheck.audit``."""

from __future__ import annotations

import importlib
import warnings


def test_an_old_import_path_keeps_the_modules_own_spec() -> None:
    module = importlib.import_module("varcheck.audit.encoder")
    old = importlib.import_module("varcheck.encoder.heads")
    assert old is module
    assert module.__spec__.name == "varcheck.audit.encoder"
    assert module.__spec__.parent == module.__package__ == "varcheck.audit"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from .metrics import LayerAccumulator", vars(module).copy())  # a lazy import
