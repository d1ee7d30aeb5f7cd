"""The audit family's old import paths, kept so that code written against them still imports.

The family lives in :mod:`varcheck.audit` (``varcheck.encoder.heads`` is now
``varcheck.audit.encoder``; every other module kept its name). New code imports from there.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

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
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED:
            return None
        import importlib.util

        # typeshed's LoaderProtocol asks for load_module, which a PEP 451 loader need not have
        return importlib.util.spec_from_loader(fullname, _Alias)  # type: ignore[arg-type]

    #: the modules' own specs, which the import system replaces by the alias's
    own_specs: dict[str, ModuleSpec | None] = {}

    @staticmethod
    def create_module(spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(f"varcheck.audit.{MOVED[spec.name.rpartition('.')[2]]}")
        _Alias.own_specs[spec.name] = module.__spec__
        return module

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        """The module was imported under its new name already: its own spec is put back (with
        the alias's, its relative imports would resolve against ``varcheck.encoder``)."""
        spec = module.__spec__
        if spec is not None:
            module.__spec__ = _Alias.own_specs.pop(spec.name, spec)


sys.meta_path.append(_Alias)
