"""Text that comes from files and users, shown as text: never as markup, never as control codes.

A claim's name, a model's ``general.name``, a path or a description can hold anything a stranger
put there: rich markup (``[red]``, ``[/]``), terminal escapes (clear the screen, write the
clipboard with OSC 52, a hyperlink), a newline that breaks a CSV header, a byte XML forbids,
bidi overrides that reorder what a reader sees. Every renderer passes such strings through one
of these functions, chosen by where they go; numbers and varcheck's own words need none.

* :func:`visible` — the one rule: each control character (C0, DEL, C1), line or paragraph
  separator, bidi control, byte-order mark and lone surrogate (an undecodable byte of a file
  name) becomes its Python escape (``\\x1b``, ``\\n``, ``\\u202e``), so it is seen, not acted on;
* :func:`markup` — :func:`visible`, then rich's markup escaped (a table cell, a title);
* :func:`markdown` — :func:`visible`, then the characters Markdown reads as syntax
  backslash-escaped (a cell of a Markdown table, a title);
* :func:`code_span` — a Markdown code span that holds any text (the metadata line);
* :func:`xml` — :func:`visible`, keeping the newlines and tabs of a multi-line JUnit body.

JSON needs none of them: its writer escapes every control and non-ASCII character already, and
the values stay exactly what the file held.
"""

from __future__ import annotations

import re

__all__ = ["visible", "markup", "markdown", "code_span", "xml"]

#: controls, separators, bidi and other invisible format characters, BOM, lone surrogates
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
    "\ufff9-\ufffb\ufffe\uffff]"
)
#: ASCII characters Markdown (CommonMark, and GitHub's tables, strikethrough and math) reads as
#: syntax inside a line, escaped wherever they stand; each may be backslash-escaped
_SYNTAX = re.compile(r"[\\`\[\]<>|&$]")
#: runs of emphasis characters, escaped only where they could open or close emphasis
_EMPHASIS = re.compile(r"\*+|_+|~+")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, *, keep: str = "") -> str:
    """``str(text)`` with every control or invisible character written as its escape.

    Parameters
    ----------
    text : object
        What to show (a name, a path, a description); converted with ``str``.
    keep : str
        Characters left as they are (``"\\n\\t"`` for a multi-line body).

    Examples
    --------
    >>> visible("a\\x1b[2Jb\\nc")
    'a\\\\x1b[2Jb\\\\nc'
    >>> visible("line one\\nline two", keep="\\n")
    'line one\\nline two'
    """
    text = str(text)
    if keep:
        return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
    return _UNSAFE.sub(_escape, text)


def markup(text: object) -> str:
    """:func:`visible` text made safe inside rich markup (``[red]`` is shown, not applied).

    Examples
    --------
    >>> markup("[red]x[/blue]")
    '\\\\[red]x\\\\[/blue]'
    """
    from rich.markup import escape

    return escape(visible(text))


def markdown(text: object) -> str:
    """:func:`visible` text with Markdown's inline syntax backslash-escaped.

    Examples
    --------
    >>> markdown("a | b <img> *c*")
    'a \\\\| b \\\\<img\\\\> \\\\*c\\\\*'
    """
    shown = _SYNTAX.sub(lambda m: "\\" + m.group(), visible(text))
    return _EMPHASIS.sub(lambda m: _emphasis(m, shown), shown)


def _emphasis(match: re.Match[str], text: str) -> str:
    """A run of ``*``, ``_`` or ``~`` escaped unless it cannot delimit emphasis: between two
    spaces (or the ends), or, for ``_``, between two letters or digits (CommonMark's rule)."""
    run = match.group()
    before = text[match.start() - 1 : match.start()]
    after = text[match.end() : match.end() + 1]
    if (not before.strip()) and (not after.strip()):
        return run
    if run[0] == "_" and before.isalnum() and after.isalnum():
        return run
    return "".join("\\" + char for char in run)


def code_span(text: object) -> str:
    """A Markdown code span showing :func:`visible` text exactly, backticks included.

    Examples
    --------
    >>> code_span("a`b")
    '`` a`b ``'
    """
    shown = visible(text)
    runs = [len(run) for run in re.findall("`+", shown)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if runs or shown.startswith(" ") and shown.endswith(" ") and shown.strip() else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def xml(text: object, *, multiline: bool = False) -> str:
    """:func:`visible` text that XML 1.0 accepts: with ``multiline``, newlines and tabs kept (a
    JUnit body); an attribute keeps none (its writer would turn them into spaces anyway)."""
    return visible(text, keep="\n\t" if multiline else "")
