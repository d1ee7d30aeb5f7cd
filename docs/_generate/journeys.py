"""Regenerate the transcripts of docs/journeys.md: three newcomers' sessions, command by command.

Each transcript is what ``varcheck`` prints on an 80-column terminal for the command written
above it (run in-process, at a fixed seed), so the page shows exactly what a user sees, next
steps included. Prose stays hand-written; generated parts sit between markers

    <!-- generated:NAME -->
    ...
    <!-- /generated:NAME -->

and are replaced in place. Usage::

    python docs/_generate/journeys.py           # rewrite the page
    python docs/_generate/journeys.py --check   # exit 1 if the page's transcripts are stale
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

# BLAS on one thread, as the command line runs it (see varcheck/cli/__init__.py): numpy is first
# imported below, by the commands
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "journeys.md"
WIDTH = 80
sys.path.insert(0, str(ROOT))

#: (block name, the commands of that step, in order)
JOURNEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "researcher-rejected",
        ("varcheck sweep --dk 16,64 --dist normal:mean=0.5 --claim dk --precision 0.05 --seed 1",),
    ),
    ("researcher-derive", ("varcheck derive --dk 16 --dist normal:mean=0.5 --seed 1",)),
    (
        "researcher-theory",
        ("varcheck sweep --dk 16,64 --dist normal:mean=0.5 --precision 0.05 --seed 1",),
    ),
    ("engineer-failing", ("varcheck check examples/attention-wrong.toml",)),
    (
        "engineer-one-claim",
        (
            "varcheck assert --dk 8 --sampler examples/attention.py:logits_unscaled "
            "--claim 1 --tolerance 0.02 --seed 2024",
        ),
    ),
    (
        "engineer-unsettled",
        ("varcheck assert --dk 64 --claim 1 --scaled --tolerance 0.02 --precision 0.05 --seed 1",),
    ),
    ("teacher-unreliable", ("varcheck sweep --dk 4,16 --dist t:df=3 --seed 1",)),
    (
        "teacher-too-few",
        ("varcheck assert --dk 8 --dist laplace --claim theory --samples 1000 --seed 1",),
    ),
)


@contextlib.contextmanager
def _terminal() -> Iterator[io.StringIO]:
    """stdout as an 80-column terminal without colour, captured."""
    from rich.console import Console

    import varcheck.cli.run as run_module

    out = io.StringIO()
    saved = run_module.stdout_console
    run_module.stdout_console = lambda: Console(  # type: ignore[assignment]
        file=out, width=WIDTH, color_system=None, soft_wrap=False
    )
    try:
        yield out
    finally:
        run_module.stdout_console = saved  # type: ignore[assignment]


def transcript(command: str) -> str:
    """``$ COMMAND`` and what it prints (stdout), with its exit status when not 0."""
    import click
    from click.testing import CliRunner

    from varcheck.cli import main

    # through main, the real entry point, so that the exit status is the command's
    entry = click.Command("varcheck", callback=lambda: main(shlex.split(command)[1:]))
    with _terminal() as out:
        result = CliRunner().invoke(entry, [], catch_exceptions=False)
    text = out.getvalue() + result.stdout
    status = "" if result.exit_code == 0 else f"  # exit {result.exit_code}"
    lines = [line.rstrip() for line in text.rstrip().splitlines()]
    return f"```text\n$ {command}{status}\n" + "\n".join(lines) + "\n```\n"


def build() -> dict[str, str]:
    """Every generated block: {name: markdown}."""
    os.chdir(ROOT)  # the commands name files relative to the repository
    os.environ.pop("VARCHECK_SEED", None)
    return {name: "".join(transcript(c) for c in commands) for name, commands in JOURNEYS}


def _replace(text: str, name: str, body: str) -> str:
    pattern = re.compile(
        rf"(<!-- generated:{re.escape(name)} -->\n).*?(<!-- /generated:{re.escape(name)} -->)",
        re.DOTALL,
    )
    if not pattern.search(text):
        raise SystemExit(f"docs/journeys.md: no markers for generated block {name!r}")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a stale page")
    args = parser.parse_args(argv)
    old = PAGE.read_text(encoding="utf-8")
    new = old
    for name, body in build().items():
        new = _replace(new, name, body)
    if new == old:
        return 0
    if args.check:
        print("stale generated docs: journeys.md", file=sys.stderr)
        return 1
    PAGE.write_text(new, encoding="utf-8")
    print("updated docs/journeys.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
