"""Results that read well in Python and in a notebook.

Every result dataclass that mixes in :class:`Displayable` (declared with ``repr=False``, so that
the dataclass does not write its own ``__repr__``) gets

* ``to_dict()``: exactly the document ``--format json`` prints, as plain Python values (the
  JSON text read back, so NaN and infinities are ``None`` there as in the file);
* a one-line ``repr``: the command, d_k, claim and estimate where the result has one, outcome,
  exit code, seed and row count;
* ``_repr_html_()``: the terminal's table, with its colours, as HTML for Jupyter and friends.

A result names its family's renderer through :meth:`Displayable._renderer`; the family's
render module is imported only when one of these is called.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from .formats import json_document, to_json

__all__ = ["Displayable", "HTML_WIDTH"]

#: Columns of the table drawn for a notebook: wide enough that no command drops a column (derive's
#: full table is 139), since a notebook scrolls sideways where a terminal cannot.
HTML_WIDTH = 160

_PRE = (
    '<pre style="font-family: Menlo, Consolas, \'DejaVu Sans Mono\', monospace; '
    'line-height: 1.25; font-size: 12px; color: {foreground}; background: {background}; '
    'padding: 0.5em; white-space: pre; overflow-x: auto">{code}</pre>'
)


class Displayable:
    """Mixin: ``to_dict``, a short ``repr`` and a notebook table for a result dataclass."""

    def _renderer(self) -> tuple[Callable[[Any, str, Any], None], Callable[[Any], Any]]:
        """The family's ``render(result, format, console)`` and its JSON ``data(result)``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """What ``--format json`` prints, as a dict of plain Python values."""
        _, data = self._renderer()
        return json.loads(to_json(json_document(self, data)))

    def __repr__(self) -> str:
        doc = self.to_dict()
        parts = [str(doc["command"])] if "command" in doc else []
        for key in ("dk", "claim", "estimate", "outcome", "exit_code", "seed"):
            value = doc.get(key)
            if isinstance(value, float):
                parts.append(f"{key}={value:.6g}")
            elif isinstance(value, (int, str)) and not isinstance(value, bool):
                parts.append(f"{key}={value!r}")
        rows = next((doc[k] for k in ("rows", "claims", "heads", "steps") if k in doc), None)
        if isinstance(rows, list):
            parts.append(f"{len(rows)} rows")
        return f"<{type(self).__name__} " + " ".join(parts) + ">"

    def _repr_html_(self) -> str:
        from rich.console import Console

        render, _ = self._renderer()
        console = Console(
            record=True,
            width=HTML_WIDTH,
            file=io.StringIO(),
            force_terminal=True,
            color_system="truecolor",
        )
        render(self, "table", console)
        return console.export_html(inline_styles=True, code_format=_PRE)
