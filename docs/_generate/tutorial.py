"""Run the cells of docs/tutorial.md, as a notebook would, and write their outputs into the page.

The page holds its own code: every ``python`` block is a cell. The cells run in order in one
namespace, in a fresh folder (so a figure a cell saves lands there, and the ``tutorial_*.png``
ones are then copied to docs/figures). A cell's output is what it printed, then the value of
its last line when that line is an expression, as Jupyter shows them: a result object through
the text of its ``_repr_html_`` (the table a notebook draws), any other value pretty-printed.
The output goes in a ``text`` block between markers right after the cell

    <!-- generated:out-N -->
    ...
    <!-- /generated:out-N -->

(numbered from 1, written when missing, renumbered when cells move). Every call in the page
passes a seed, so the page is rebuilt byte for byte. Usage::

    python docs/_generate/tutorial.py           # rerun the cells, rewrite the page and figures
    python docs/_generate/tutorial.py --check   # exit 1 if the page's outputs are stale
"""

from __future__ import annotations

import os

# BLAS on one thread, as the command line runs it (see varcheck/cli/__init__.py); before numpy.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import ast  # noqa: E402
import contextlib  # noqa: E402
import html  # noqa: E402
import io  # noqa: E402
import pprint  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
FIGURES = ROOT / "docs" / "figures"
FIGURE_GLOB = "tutorial_*.png"
sys.path.insert(0, str(ROOT))

#: A cell: a fenced ``python`` block (group 1 its source).
CELL = re.compile(r"^```python\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
#: A generated output block, with the blank line before it.
OUTPUT = re.compile(
    r"\n*<!-- generated:out-(\d+) -->\n.*?<!-- /generated:out-\1 -->\n", re.MULTILINE | re.DOTALL
)
#: The width IPython's pretty printer wraps plain values at.
PRETTY_WIDTH = 79


def cells(page: str) -> list[str]:
    """The source of every cell of the page, in order."""
    return [match[1] for match in CELL.finditer(OUTPUT.sub("\n", page))]


def shown(value: Any) -> str:
    """What a notebook shows for a cell's last value: a result's HTML table as its text."""
    if value is None:
        return ""
    if hasattr(value, "_repr_html_"):
        text = html.unescape(re.sub(r"<[^>]+>", "", value._repr_html_()))
    else:
        text = pprint.pformat(value, width=PRETTY_WIDTH, sort_dicts=False)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def run_cell(source: str, namespace: dict[str, Any], name: str) -> str:
    """Run one cell in ``namespace``: its printed text, then its last expression's value."""
    tree = ast.parse(source, filename=name)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(tree, name, "exec"), namespace)  # noqa: S102 - the page's own cells
        value = None
        if last is not None:
            value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)  # noqa: S307
    parts = [printed.getvalue().rstrip("\n"), shown(value)]
    return "\n".join(part for part in parts if part)


def run_cells(sources: list[str], folder: Path) -> list[str]:
    """Every cell's output, the cells run in order in one namespace with ``folder`` as the
    working directory."""
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    before = Path.cwd()
    os.chdir(folder)
    try:
        return [
            run_cell(source, namespace, f"docs/tutorial.md, cell {number}")
            for number, source in enumerate(sources, start=1)
        ]
    finally:
        os.chdir(before)


def with_outputs(page: str, outputs: list[str]) -> str:
    """The page with each cell followed by its output block (old output blocks replaced)."""
    bare = OUTPUT.sub("\n", page)
    pieces, position = [], 0
    for number, (match, output) in enumerate(zip(CELL.finditer(bare), outputs, strict=True), 1):
        pieces.append(bare[position : match.end()])
        body = f"```text\n{output}\n```\n" if output else ""
        marker = f"generated:out-{number}"
        pieces.append(f"\n<!-- {marker} -->\n{body}<!-- /{marker} -->\n")
        position = match.end()
    pieces.append(bare[position:])
    return "".join(pieces)


def build(page: str, figures: Path | None) -> str:
    """The page with fresh outputs; figures the cells save are copied to ``figures`` if given."""
    with tempfile.TemporaryDirectory(prefix="varcheck-tutorial-") as tmp:
        outputs = run_cells(cells(page), Path(tmp))
        if figures is not None:
            for figure in sorted(Path(tmp).glob(FIGURE_GLOB)):
                shutil.copyfile(figure, figures / figure.name)
    return with_outputs(page, outputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a stale page")
    args = parser.parse_args(argv)
    old = PAGE.read_text(encoding="utf-8")
    new = build(old, None if args.check else FIGURES)
    if new == old:
        return 0
    if args.check:
        print("stale generated docs: tutorial.md", file=sys.stderr)
        return 1
    PAGE.write_text(new, encoding="utf-8")
    print("updated docs/tutorial.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
