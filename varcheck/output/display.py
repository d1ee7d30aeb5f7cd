"""Results that read well in Python and in a notebook.

Every result dataclass that mixes in :class:`Displayable` (declared with ``repr=False``, so that
the dataclass does not write its own ``__repr__``) gets

* ``to_dict()``: exactly the document ``--format json`` prints, as plain Python values (the
  JSON text read back, so NaN and infinities are ``None`` there as in the file);
* a one-line ``repr``: the command, d_k, claim and estimate where the result has one, outcome,
  exit code, seed and row count;
* ``str()`` (and ``print(result)``): the terminal's table as plain text, at the terminal's width
  (100 columns where there is no terminal);
* ``_repr_html_()``: the terminal's table, with its colours, as HTML for Jupyter and friends;
* ``plot(path=None)``: the figure the command's ``--plot PATH`` draws, as a :class:`FigureImage`
  that Jupyter shows inline (written to ``path`` when one is given).

A result's renderer and figure are looked up in :mod:`varcheck.output.presenters` (the table the
command line uses too); the family's render or figure module is imported only when one of these
is called, so that a result class imports no presenter and this module no family.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .formats import json_document, to_json
from .presenters import figure_of, presenter_of

__all__ = ["Displayable", "FigureImage", "HTML_WIDTH"]

#: The first bytes of every PNG file.
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: Columns of the table drawn for a notebook: wide enough that no command drops a column (derive's
#: full table is 139), since a notebook scrolls sideways where a terminal cannot.
HTML_WIDTH = 160

_PRE = (
    "<pre style=\"font-family: Menlo, Consolas, 'DejaVu Sans Mono', monospace; "
    "line-height: 1.25; font-size: 12px; color: {foreground}; background: {background}; "
    'padding: 0.5em; white-space: pre; overflow-x: auto">{code}</pre>'
)


@dataclass(frozen=True, repr=False)
class FigureImage:
    """A result's figure, as :meth:`Displayable.plot` returns it; a notebook shows it inline.

    Attributes
    ----------
    data : bytes
        The file's bytes (a PNG unless a path with another extension was given).
    path : str or None
        Where the figure was written; ``None`` when it was drawn in memory only.
    """

    data: bytes
    path: str | None = None

    def _repr_png_(self) -> bytes | None:
        return self.data if self.data.startswith(PNG_MAGIC) else None

    def __repr__(self) -> str:
        # the size in pixels, not in bytes: the bytes change with matplotlib's version
        if self.data.startswith(PNG_MAGIC):
            width, height = (int.from_bytes(self.data[i : i + 4], "big") for i in (16, 20))
            kind = f"PNG {width}×{height}"
        else:
            kind = os.path.splitext(self.path or "")[1].lstrip(".").upper() or "figure"
        where = "in memory" if self.path is None else f"at {self.path!r}"
        return f"<FigureImage {kind} {where}>"


class Displayable:
    """Mixin: ``to_dict``, a short ``repr``, a notebook table and a figure for a result."""

    def plot(self, path: str | os.PathLike[str] | None = None) -> FigureImage:
        """Draw the figure the command's ``--plot PATH`` draws.

        Parameters
        ----------
        path : str or path-like, optional
            Write the figure there (PNG, or the format its extension names), after the checks
            ``--plot`` makes; without it nothing is kept on disk.

        Returns
        -------
        FigureImage
            The figure's bytes (``.data``) and ``.path``; a notebook shows it inline.

        Notes
        -----
        matplotlib keeps the session's backend (a notebook's inline one, and its open figures):
        the command line switches to Agg, this does not.

        Raises
        ------
        TypeError
            When the command draws no figure (``assert``, ``check``, ``beta``).
        VarcheckError
            When matplotlib is missing (``pip install 'varcheck[plot]'``) or the path cannot be
            written.
        """
        figure = figure_of(self)
        if isinstance(figure, str):
            command = self.to_dict().get("command", type(self).__name__)
            raise TypeError(figure or f"{command} draws no figure")
        from .figures import ensure_plot_path, in_session

        with in_session():
            if path is None:
                with tempfile.TemporaryDirectory(prefix="varcheck-") as folder:
                    file = os.path.join(folder, "figure.png")
                    figure(self, file)
                    return FigureImage(Path(file).read_bytes())
            file = ensure_plot_path(os.fspath(path), option="path")
            figure(self, file)
            return FigureImage(Path(file).read_bytes(), file)

    def to_dict(self) -> dict[str, Any]:
        """What ``--format json`` prints, as a dict of plain Python values."""
        _, data = presenter_of(self)
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

    def __str__(self) -> str:
        import shutil

        from rich.console import Console

        render, _ = presenter_of(self)
        width = shutil.get_terminal_size((100, 24)).columns
        out = io.StringIO()
        render(self, "table", Console(file=out, width=width, color_system=None, soft_wrap=False))
        return out.getvalue().rstrip("\n")

    def _repr_html_(self) -> str:
        from rich.console import Console

        render, _ = presenter_of(self)
        console = Console(
            record=True,
            width=HTML_WIDTH,
            file=io.StringIO(),
            force_terminal=True,
            color_system="truecolor",
        )
        render(self, "table", console)
        return console.export_html(inline_styles=True, code_format=_PRE)
