"""The audit family's old import paths, kept so that code written against them still imports.

The family lives in :mod:`varcheck.audit` (``varcheck.encoder.heads`` is now
``varcheck.audit.encoder``; every other module kept its name). New code imports from there.
"""

from __future__ import annotations

import importlib
import sys

#: old module name -> its name in varcheck.audit
MOVED = {
    "bert": "bert",
    "decoder": "decoder",
    "figures": "figures",
    "gguf_file": "gguf_file",
    "heads": "encoder",
    "llama": "llama",
    "llama_tokenizer": "llama_tokenizer",
    "render": "render",
    "safetensors_file": "safetensors_file",
    "tokenizing": "tokenizing",
}


def __getattr__(name: str) -> object:
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"varcheck.audit.{MOVED[name]}")
    sys.modules[f"{__name__}.{name}"] = module
    return module


class _Alias:
    """Finds ``varcheck.encoder.X`` as the module ``varcheck.audit.MOVED[X]``."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> object:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, _Alias)

    #: the modules' own specs, which the import system replaces by the alias's
    own_specs: dict[str, object] = {}

    @staticmethod
    def create_module(spec: object) -> object:
        module = importlib.import_module(f"varcheck.audit.{MOVED[spec.name.rpartition('.')[2]]}")
        _Alias.own_specs[spec.name] = module.__spec__
        return module

    @staticmethod
    def exec_module(module: object) -> None:
        """The module was imported under its new name already: its own spec is put back (with
        the alias's, its relative imports would resolve against ``varcheck.encoder``)."""
        module.__spec__ = _Alias.own_specs.pop(module.__spec__.name, module.__spec__)


sys.meta_path.append(_Alias)
