"""Probe results in Python and notebooks: ``to_dict()`` is the ``--format json`` document (a
sweep's; one d_k's is that document's row with the run's keys), a one-line ``repr`` and the
terminal's table as HTML."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

import varcheck
from varcheck.core.estimation import MIN_BLOCKS

KERNEL = "examples/attention_kernels.py:scale_forgotten"
#: small, at the fewest calls a valid interval rests on
FAST = {"queries": 16, "keys": 16, "samples": MIN_BLOCKS, "seed": 1}
ARGV = ("--queries", "16", "--keys", "16", "--samples", str(MIN_BLOCKS), "--seed", "1")


@pytest.fixture(scope="module")
def one():  # noqa: ANN201
    return varcheck.probe(KERNEL, 16, **FAST)


@pytest.fixture(scope="module")
def sweep():  # noqa: ANN201
    return varcheck.probe_sweep(KERNEL, "8,32", **FAST)


def test_a_sweeps_to_dict_is_what_the_json_format_prints(sweep, run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", KERNEL, "--dk", "8,32", *ARGV, "--format", "json")
    assert sweep.to_dict() == json.loads(res.stdout)
    assert sweep.to_dict()["exit_code"] == res.exit_code == 1


def test_one_dk_is_the_row_of_the_commands_document(one, run_cli) -> None:  # noqa: ANN001
    doc = json.loads(run_cli("probe", KERNEL, "--dk", "16", *ARGV, "--format", "json").stdout)
    mine = one.to_dict()
    assert {k: v for k, v in mine.items() if k in doc["rows"][0]} == doc["rows"][0]
    for key in ("command", "version", "seed", "confidence", "outcome", "exit_code"):
        assert mine[key] == doc[key], key


@pytest.mark.parametrize("which", ["one", "sweep"])
def test_repr_is_one_short_line(which: str, request) -> None:  # noqa: ANN001
    result = request.getfixturevalue(which)
    text = repr(result)
    assert "\n" not in text and len(text) < 120
    assert text.startswith(f"<{type(result).__name__} probe") and "seed=1" in text
    assert "outcome='fail'" in text and "exit_code=1" in text


@pytest.mark.parametrize("which", ["one", "sweep"])
def test_repr_html_draws_the_table(which: str, request) -> None:  # noqa: ANN001
    html = request.getfixturevalue(which)._repr_html_()
    assert html.startswith("<pre") and html.rstrip().endswith("</pre>")
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "scale_forgotten" in text and re.search(r"seed 1\b", text), text[-300:]


def test_the_text_formats_of_one_dk_are_those_of_the_command(one) -> None:  # noqa: ANN001
    from io import StringIO

    from rich.console import Console

    from varcheck.kernels.render import render_probe_row

    for fmt in ("csv", "markdown"):
        console = Console(file=StringIO(), width=80)
        render_probe_row(one, fmt, console)
        out = console.file.getvalue()
        assert "scale_forgotten" in out and "16" in out


def test_a_tables_scale_and_interval_have_the_same_digits(run_cli) -> None:  # noqa: ANN001
    """1/√4096 = 0.015625 was shown to five digits beside a four-digit interval, [0.01562,
    0.01562], as if outside it: every number of a row now has the same significant digits, so
    the estimate shown lies inside its interval shown."""
    res = run_cli("probe", "examples/attention_kernels.py:attention", "--dk", "1024,4096", *ARGV)
    assert res.exit_code == 0, res.stdout
    rows = re.findall(r"^\s*(\d+)\s+(\S+)\s+\[(\S+), (\S+)\]", res.stdout, re.M)
    assert [r[0] for r in rows] == ["1024", "4096"], res.stdout
    for _, scale, low, high in rows:
        assert float(low) <= float(scale) <= float(high), (scale, low, high)
        assert len({len(x.lstrip("0.")) for x in (scale, low, high)}) == 1, (scale, low, high)
    assert "0.01562   [0.01562, 0.01562]" in res.stdout


def test_the_exponent_is_b_not_p(sweep, run_cli, monkeypatch) -> None:  # noqa: ANN001
    """The d_k exponent is called b, as the sweep's growth law calls it, beside p-values: in the
    table, the figure's title and JSON (``exponent.slope``, as the sweep's ``fit.slope``)."""
    res = run_cli("probe", KERNEL, "--dk", "8,32", *ARGV)
    assert "s ∝ d_k^b: b = " in res.stdout and "d_k^p" not in res.stdout, res.stdout
    exponent = sweep.to_dict()["exponent"]
    assert "p" not in exponent and exponent["slope"] == sweep.exponent.slope
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from varcheck.kernels import figures

    titles = []

    def keep_title(fig, path) -> None:  # noqa: ANN001
        titles.append(fig.axes[0].get_title())
        plt.close(fig)  # as save_figure does: no figure left open for later tests

    monkeypatch.setattr(figures, "save_figure", keep_title)
    figures.plot_probe(sweep, "unused.png")
    assert "s ∝ d_k^b, b = " in titles[0] and "d_k^p" not in titles[0], titles


READINGS = [
    (None, "reading: one-hot values: the output is the weight matrix"),
    ("4", "reading: d_v=4 < 16 keys: 4 calls per matrix"),
]


@pytest.mark.parametrize("dv,reading", READINGS)
def test_the_reading_is_shown_beside_the_numbers(run_cli, dv, reading: str) -> None:  # noqa: ANN001
    """How the weights were read (one-hot values, or solved from several calls when d_v < m)
    was in JSON only: the paragraph of one d_k and the table of several show it in one line."""
    extra = () if dv is None else ("--dv", dv)
    for dks in ("16", "8,32"):
        res = run_cli("probe", KERNEL, "--dk", dks, *ARGV, *extra)
        lines = [ln for ln in res.stdout.splitlines() if "reading:" in ln]
        assert len(lines) == 1 and lines[0].startswith(f"  {reading}"), res.stdout
