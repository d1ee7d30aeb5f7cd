"""What every family shares to show a result: the one format switch, numbers, intervals, styles.

Each family renders its own results (``checks/render.py``, ``teaching/render.py``, ...) through
:func:`write`, so table, JSON, CSV and Markdown are chosen in one place.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from . import text as shown_text

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "FORMATS",
    "print_next_step",
    "MARGINAL_NOTE",
    "Column",
    "VERDICT_STYLE",
    "confidence_label",
    "detectable_cell",
    "detectable_fields",
    "detectable_text",
    "fmt",
    "fmt_p",
    "fit_columns",
    "fit_rows",
    "natural_width",
    "print_dropped",
    "json_document",
    "json_header",
    "dropped_note",
    "interval",
    "plain_table",
    "json_clean",
    "percent_up",
    "probability_down",
    "records_to_csv",
    "records_to_markdown",
    "styled",
    "to_json",
    "renderer",
    "write",
]

FORMATS = ("table", "json", "csv", "csv-meta", "markdown")

#: The result a renderer writes (each command's own dataclass).
R = TypeVar("R")

VERDICT_STYLE = {
    "consistent": "green",
    "rejected": "bold red",
    "unreliable": "bold yellow",
    "infinite": "bold magenta",
    "pass": "green",
    "fail": "bold red",
    "inconclusive": "yellow",
    "interrupted": "bold yellow",
}


def fmt(x: float | None, digits: int = 4) -> str:
    """A number to ``digits`` significant digits; ``∞`` and ``—`` for infinite and missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e6:
        # rounded first, so 0.99996 and 1.00001 both read 1.000 (the decimals follow the
        # rounded value, not the raw one)
        rounded = float(f"{x:.{digits - 1}e}")
        decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(rounded)))))
        return f"{rounded:.{decimals}f}"
    return f"{x:.{digits - 1}e}"


def fmt_p(p: float) -> str:
    if math.isnan(p):
        return "—"
    if p < 1e-4:
        return "<1e-4"
    return f"{p:.4f}"


def percent_up(x: float) -> str:
    """A relative error as a percentage rounded *up* to two significant digits, and at least
    0.01% (never smaller than the figure it stands for)."""
    if not math.isfinite(x):
        return "∞"
    pct = 100.0 * x
    if pct <= 0:
        return "0%"
    if pct < 0.01:  # an exact kernel's: a bound, not a string of zeros
        return "0.01%"
    step = 10.0 ** (math.floor(math.log10(pct)) - 1)
    up = math.ceil(pct / step - 1e-9) * step
    return f"{up:.{max(0, 1 - int(math.floor(math.log10(up))))}f}%"


#: the keys every consistency test's JSON, CSV, Markdown and JUnit carry for what it could have
#: caught (:func:`detectable_fields`), in order
DETECTABLE_KEYS = (
    "detectable_error",
    "detectable_error_above",
    "detectable_error_below",
    "detectable_power",
    "detectable_alpha",
    "detectable_family",
    "detectable_approximate",
    "power_at_claim",
)


def detectable_fields(det: Any) -> dict[str, Any]:
    """A :class:`~varcheck.core.power.Detectable` (or ``None``, where a run has no valid test)
    as the keys of :data:`DETECTABLE_KEYS`: relative errors as fractions of the claim."""
    if det is None:
        return dict.fromkeys(DETECTABLE_KEYS)
    return dict(
        zip(
            DETECTABLE_KEYS,
            (
                det.error,
                det.above,
                det.below,
                det.power,
                round(det.alpha, 12),
                det.family,
                det.approximate,
                det.power_at_claim,
            ),
            strict=True,
        )
    )


def probability_down(p: float) -> str:
    """A probability to three decimals rounded *down* (``0.997``, ``0``): a chance of passing is
    never shown larger than it is."""
    return f"{math.floor(p * 1000) / 1000:g}"


def detectable_cell(det: Any) -> str:
    """A table cell for what a test could have caught: ``±1.5%``, the larger side (a deviation
    that large is caught either way), ``≈`` in front where the figure is approximate, ``—``
    without a valid test."""
    if det is None:
        return "—"
    return ("≈" if det.approximate else "") + "±" + percent_up(det.error)


def detectable_text(det: Any, what: str = "an error") -> str:
    """The sentence a pass line carries: ``would have caught an error of ≥ 1.5% (either way)
    with 90% power``, its level in a family, and ``approximate`` where the figure is."""
    above, below = percent_up(det.above), percent_up(det.below)
    size = f"≥ {above} either way" if above == below else f"≥ +{above} / −{below}"
    text = f"would have caught {what} of {size} with {det.power:.0%} power"
    if det.family > 1:
        text += f" (at α/{det.family} = {det.alpha:.3g}, this test's share of the family)"
    if det.approximate:
        text += " (approximate for this run's blocks: see docs/power.md)"
    return text


def json_clean(obj: Any) -> Any:
    """Replace non-finite floats by ``None`` (JSON has no inf/nan), recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    return obj


def to_json(obj: Any) -> str:
    """Deterministic JSON: floats are written with repr (they round-trip exactly)."""
    return json.dumps(json_clean(obj), indent=2, allow_nan=False) + "\n"


def records_to_csv(
    records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], *, comment: bool = False
) -> str:
    """Plain CSV: the header line first, then one line per record, as ``csv.DictReader`` and
    ``pandas.read_csv`` read them with their defaults.

    With ``comment`` (``--format csv-meta``) a leading ``#`` line carries the run's metadata
    (command, seed, version...); JSON carries the same keys. Strings are shown as text
    (:func:`~varcheck.output.text.visible`): a newline or a terminal escape in a name cannot
    break a line or reach the terminal."""
    buf = io.StringIO()
    if comment:
        buf.write("# " + " ".join(f"{k}={_meta_value(v)}" for k, v in meta.items()) + "\n")
    if records:
        writer = csv.DictWriter(buf, fieldnames=list(records[0]), lineterminator="\n")
        writer.writeheader()
        for rec in records:
            writer.writerow({k: _csv_value(v) for k, v in rec.items()})
    return buf.getvalue()


def _meta_value(v: Any) -> str:
    return "null" if v is None else shown_text.visible(v).replace(" ", "_")


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    if isinstance(v, str):
        return shown_text.visible(v)
    return "" if v is None else v


def records_to_markdown(
    records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], title: str
) -> str:
    """A Markdown table of ``records`` under a line of ``title`` and ``meta``.

    ``title`` and every string are shown as text (:func:`~varcheck.output.text.markdown`):
    what a file or a user wrote cannot become a link, an image, HTML or a broken table."""
    head = f"**{shown_text.markdown(title)}** — "
    lines = [
        head + ", ".join(f"{k}: {shown_text.code_span(_meta_value(v))}" for k, v in meta.items()),
        "",
    ]
    if records:
        keys = list(records[0])
        lines.append("| " + " | ".join(keys) + " |")
        lines.append("|" + "|".join("---:" if _numeric(records, k) else "---" for k in keys) + "|")
        for rec in records:
            lines.append("| " + " | ".join(_md_value(rec[k]) for k in keys) + " |")
    return "\n".join(lines) + "\n"


def _numeric(records: Sequence[Mapping[str, Any]], key: str) -> bool:
    return all(isinstance(r[key], int | float) or r[key] is None for r in records)


def _md_value(v: Any) -> str:
    if isinstance(v, float):
        return fmt(v, 6)
    return "—" if v is None else shown_text.markdown(v)


#: The footnote under every table that marks rows with † (``marginal_only`` in core.verdicts).
MARGINAL_NOTE = (
    "† this row's own interval excludes the claim, but over all rows that happens by "
    "chance more often than 1 − confidence; the Holm-adjusted p-value is not small "
    "enough to reject."
)


def confidence_label(confidence: float) -> str:
    """A confidence level as a percentage: ``95%``, ``97.5%`` (up to four significant digits)."""
    pct = confidence * 100
    return f"{pct:.0f}%" if pct == round(pct) else f"{pct:.4g}%"


def styled(word: str, styles: Mapping[str, str] = VERDICT_STYLE) -> str:
    """``word`` in rich markup with its style from ``styles`` (unstyled when it has none)."""
    style = styles.get(word, "")
    return f"[{style}]{word}[/]" if style else word


def interval(low: float, high: float, digits: int = 4, sep: str = ", ") -> str:
    """``[low, high]`` to ``digits`` significant digits; empty when either end is NaN."""
    if math.isnan(low) or math.isnan(high):
        return ""
    return f"[{fmt(low, digits)}{sep}{fmt(high, digits)}]"


def plain_table(
    title: str,
    caption: str | None,
    columns: Sequence[tuple[str, str]],
    *,
    padding: tuple[int, int] | tuple[int, int, int, int] = (0, 1),
    show_edge: bool = True,
    fold: bool = False,
) -> Any:
    """A rich table with only a rule under its header and a left-aligned caption.

    ``columns`` are ``(name, justify)`` pairs; cells never wrap unless ``fold`` (then a long
    cell folds onto the next line instead of being cut).
    """
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        padding=padding,
        pad_edge=False,
        show_edge=show_edge,
    )
    for name, justify in columns:
        if fold:
            table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
        else:
            table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    return table


class Column(NamedTuple):
    """A table column: its header, its alignment and its priority on a narrow terminal
    (0: never left out; otherwise columns go lowest priority first, see :func:`fit_columns`)."""

    name: str
    justify: str = "right"
    priority: int = 0


def _measure(console: Console, renderable: Any) -> Any:
    """``renderable``'s (narrowest, natural) width when the console puts no limit on it."""
    wide = console.options.update(width=1 << 16, max_width=1 << 16)
    return console.measure(renderable, options=wide)


def natural_width(console: Console, renderable: Any) -> int:
    """Columns ``renderable`` takes when nothing in it is wrapped or cut."""
    return int(_measure(console, renderable).maximum)


def fit_columns(
    console: Console,
    build: Callable[[list[int]], Any],
    priorities: Sequence[int],
    *,
    wrap_headers: bool = False,
    width: int | None = None,
) -> tuple[Any, list[int]]:
    """The table ``build(kept column indices)`` within the console's width, and the indices of
    the columns left out to fit it.

    Columns of priority 0 (d_k and other ids, estimates with their intervals, verdict words) are
    always kept; the others go lowest priority first until the table fits, so no kept cell is
    cut (a table that does not fit even then is printed as it is). With ``wrap_headers`` a
    header may wrap at its spaces: every column is at least as wide as its widest cell, the
    table fits when it does at those widths, and a table too narrow for whole headers gets
    each column exactly at its narrowest (a folded number misleads, a wrapped header does not).
    ``width`` fits the table to fewer columns than the console's (a command whose text is laid
    out at 80 columns whatever the terminal).
    """
    limit = console.width if width is None else min(width, console.width)
    keep = list(range(len(priorities)))
    while True:
        table = build(keep)
        if wrap_headers:
            for col in table.columns:
                col.min_width = max((_cell_width(c) for c in col.cells), default=1)
        droppable = [i for i in keep if priorities[i] > 0]
        size = _measure(console, table)
        needed = size.minimum if wrap_headers else size.maximum
        if needed <= limit or not droppable:
            break
        keep.remove(min(droppable, key=lambda i: priorities[i]))
    if wrap_headers and size.maximum > limit:
        for col in table.columns:
            words = (_cell_width(w, markup=False) for w in str(col.header).split())
            col.width = max([col.min_width, *words])
    return table, [i for i in range(len(priorities)) if i not in keep]


def _cell_width(cell: Any, markup: bool = True) -> int:
    from rich.text import Text

    return (Text.from_markup(str(cell)) if markup else Text(str(cell))).cell_len


def fit_rows(
    console: Console,
    title: str,
    caption: str | None,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    wrap_headers: bool = False,
    width: int | None = None,
    **style: Any,
) -> tuple[Any, list[str]]:
    """A :func:`plain_table` (``style``: its keywords) of the cells ``rows``, fitted to the
    console by :func:`fit_columns`, and the names of the columns left out."""

    def build(keep: list[int]) -> Any:
        chosen = [(columns[i].name, columns[i].justify) for i in keep]
        table = plain_table(title, caption, chosen, **style)
        for row in rows:
            table.add_row(*(row[i] for i in keep))
        return table

    priorities = [c.priority for c in columns]
    table, dropped = fit_columns(console, build, priorities, wrap_headers=wrap_headers, width=width)
    return table, [columns[i].name for i in dropped]


def dropped_note(names: Sequence[str], width: int) -> str:
    """The line under a table that had to leave columns out, or ``""`` (each name once)."""
    if not names:
        return ""
    return (
        f"not shown at {width} columns: {', '.join(dict.fromkeys(names))} (--format json, or a "
        "wider terminal, shows them)"
    )


def print_dropped(console: Console, names: Sequence[str]) -> None:
    """Print :func:`dropped_note` (dimmed, as it is: names are not markup), if any column was
    left out."""
    note = dropped_note(names, console.width)
    if note:
        console.print(note, style="dim", markup=False, highlight=False)


def print_next_step(console: Console, step: Any, label: str = "") -> None:
    """Print a next step's (at most two) lines: the cause wrapped to the console with a hanging
    indent, the command cut with shell continuations
    (:func:`~varcheck.core.next_step.command_lines`) so that it still pastes; ``label`` (text)
    names what the step is for. Nothing for ``None``."""
    import textwrap

    from ..core.next_step import command_lines

    if step is None:
        return
    cause, *command = step.lines
    if label:
        cause = cause.replace("next:", f"next ({shown_text.visible(label)}):", 1)
    wrapped = textwrap.wrap(
        cause,
        console.width,
        subsequent_indent="      ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    for part in wrapped or [cause]:
        console.print(part, markup=False, highlight=False)
    for line in command:
        for part in command_lines(line, console.width):
            console.print(part, markup=False, highlight=False, soft_wrap=True)


def json_header(command: str, result: Any, **before_seed: Any) -> dict[str, Any]:
    """The first keys of every command's JSON document: ``command``, ``version``, any
    ``before_seed`` keys, then ``seed`` where the result has one (a run that draws nothing has
    none).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> json_header("check", SimpleNamespace(version="1", seed=7), file="claims.toml")
    {'command': 'check', 'version': '1', 'file': 'claims.toml', 'seed': 7}
    """
    head = {"command": command, "version": result.version, **before_seed}
    if hasattr(result, "seed"):
        head["seed"] = result.seed
    return head


def json_document(result: Any, data: Callable[[Any], Any]) -> Any:
    """``data(result)`` with the run's ``outcome`` and ``exit_code`` among its top-level keys,
    where the result has them, so that every command's JSON says both in one place: the
    ``outcome`` where the document already says it (a claim's outcome is part of its record),
    else after the document's own keys, and ``exit_code`` last."""
    doc = data(result)
    if not isinstance(doc, dict):
        return doc
    doc = dict(doc)
    outcome = getattr(result, "outcome", None)
    if "outcome" not in doc and isinstance(outcome, str):
        doc["outcome"] = outcome
    code = getattr(result, "exit_code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        doc["exit_code"] = doc.pop("exit_code", code)  # last, even where the document says it
    return doc


def write(
    fmt_name: str,
    console: Console,
    result: R,
    *,
    table: Callable[[R, Console], None],
    data: Callable[[R], Any],
    records: Callable[[R], Sequence[Mapping[str, Any]]] | None = None,
    meta: Callable[[R], Mapping[str, Any]] | None = None,
    title: Callable[[R], str] | None = None,
    markdown: Callable[[R], str] | None = None,
) -> None:
    """Write ``result`` in one of :data:`FORMATS`: the one place a format is chosen.

    Each form is a function of ``result``. ``table`` prints it through rich. JSON is
    ``to_json(data(result))``; CSV is its ``records`` under a comment line of ``meta``; Markdown
    is ``markdown(result)``, or else the records as one table headed by ``title`` and ``meta``.
    The text forms are written as they are (no markup, no wrapping), so pipes and files get
    exactly the bytes produced. A result without rows (one claim) passes no ``records`` and
    prints its table form for CSV and Markdown.
    """
    if fmt_name not in FORMATS:
        raise ValueError(f"unknown format {fmt_name!r}; accepted: {', '.join(FORMATS)}")
    if fmt_name == "json":
        text = to_json(json_document(result, data))
    elif fmt_name in ("csv", "csv-meta") and records and meta:
        text = records_to_csv(records(result), meta(result), comment=fmt_name == "csv-meta")
    elif fmt_name == "markdown" and markdown:
        text = markdown(result)
    elif fmt_name == "markdown" and records and meta and title:
        text = records_to_markdown(records(result), meta(result), title(result))
    else:
        table(result, console)
        return
    console.file.write(text)


def renderer(
    table: Callable[[R, Console], None],
    data: Callable[[R], Any],
    records: Callable[[R], Sequence[Mapping[str, Any]]] | None = None,
    meta: Callable[[R], Mapping[str, Any]] | None = None,
    **text: Callable[[R], str],
) -> Callable[[R, str, Console], None]:
    """A command's ``render(result, fmt_name, console)``: :func:`write` with these forms of its
    result (the same arguments; ``text``: ``title`` or ``markdown``), so a family names its
    forms once and writes no switch."""
    forms: dict[str, Any] = {"table": table, "data": data, "records": records, "meta": meta}
    forms.update(text)

    def render(result: R, fmt_name: str, console: Console) -> None:
        write(fmt_name, console, result, **forms)

    render.__doc__ = (
        f"Write a result in one of {', '.join(FORMATS)} (the table form: ``{table.__name__}``)."
    )
    return render
