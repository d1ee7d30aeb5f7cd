"""Summarise a finished `mutmut run` (``make mutate``) into docs/testing.md.

Reads mutmut's per-file results under ``mutants/``, matches every surviving mutant against the
list of mutants argued equivalent (``docs/mutation-equivalent.tsv``: function, removed line, added
line, reason), and rewrites the block between the two ``mutation-report`` markers in
docs/testing.md with a table per module and the mutants still unexplained.

A survivor is matched by its function and the text of the lines it changes, not by mutmut's
number, so the list survives edits elsewhere in a file. The score counts timeouts as killed (the
mutant made its tests run past 5 × (their usual time + 10 s)), leaves out mutants argued equivalent,
and counts mutants not run (an interrupted run) and any other status against the score.

Run from the repository root: ``python tools/mutation_report.py [--check]``. With ``--check`` it
exits 1 when a survivor is unexplained or the score is below the target, and writes nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "testing.md"
EQUIVALENT = ROOT / "docs" / "mutation-equivalent.tsv"
START, END = "<!-- mutation-report:start -->", "<!-- mutation-report:end -->"
TARGET = 0.90
KILLED = {1: "killed", 3: "killed"}
TIMEOUT = {36, 24, -24, 152, 255}
_NAME = re.compile(r"^(?P<module>.+?)\.x(?:ǁ(?P<cls>[^ǁ]+)ǁ|_)(?P<func>.+?)__mutmut_(?P<n>\d+)$")


@dataclass(frozen=True)
class Mutant:
    """One mutant: where it is, what it changes, what the suite did."""

    name: str
    module: str
    function: str
    removed: str
    added: str
    status: str


def _status(code: int | None) -> str:
    if code in KILLED:
        return "killed"
    if code in TIMEOUT:
        return "timeout"
    if code == 0:
        return "survived"
    if code in (5, 33):
        return "no tests"
    return "not run" if code is None else f"other ({code})"


def _changed_lines(diff: str) -> tuple[str, str]:
    body = [line for line in diff.splitlines()[2:] if not line.startswith("@@")]
    removed = " ".join(line[1:].strip() for line in body if line.startswith("-"))
    added = " ".join(line[1:].strip() for line in body if line.startswith("+"))
    return removed, added


def load_mutants(root: Path) -> list[Mutant]:
    """Every mutant of every mutated file, with its status and changed lines."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    mutants = []
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        source = meta.relative_to(root / "mutants").with_suffix("")
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for name, code in codes.items():
            match = _NAME.match(name)
            if match is None:
                raise SystemExit(f"cannot read the mutant name {name!r}")
            func = match["func"] if match["cls"] is None else f"{match['cls']}.{match['func']}"
            status = _status(code)
            removed = added = ""
            if status in ("survived", "no tests"):
                removed, added = _changed_lines(get_diff_for_mutant(name, path=source))
            mutants.append(Mutant(name, match["module"], func, removed, added, status))
    return mutants


def load_equivalent(path: Path) -> dict[tuple[str, str, str], str]:
    """The mutants argued equivalent: (module.function, removed, added) -> reason."""
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh, delimiter="\t") if r and not r[0].startswith("#")]
    return {(r[0], r[1], r[2]): r[3] for r in rows}


def _key(m: Mutant) -> tuple[str, str, str]:
    return (f"{m.module}.{m.function}", m.removed, m.added)


_COLUMNS = ("killed", "timeout", "equivalent")


def _score(c: Counter) -> float:
    """Killed (or timed out) over every mutant not argued equivalent; unrun ones count against."""
    live = sum(c.values()) - c["equivalent"]
    return (c["killed"] + c["timeout"]) / max(live, 1)


def _row(module: str, c: Counter) -> str:
    known = {"killed", "timeout", "equivalent", "survived", "no tests", "not run"}
    other = sum(v for k, v in c.items() if k not in known)
    cells = [c[k] for k in _COLUMNS] + [c["survived"] + c["no tests"], c["not run"], other]
    return (
        f"| {module} | {sum(c.values())} | "
        + " | ".join(map(str, cells))
        + (f" | {100 * _score(c):.1f}% |")
    )


def summarise(mutants: list[Mutant], equivalent: dict) -> tuple[str, float, list[Mutant]]:
    """The Markdown block, the score over non-equivalent mutants, and the unexplained survivors."""
    counts: dict[str, Counter] = {}
    open_ = []
    for m in mutants:
        status = m.status
        if status in ("survived", "no tests") and _key(m) in equivalent:
            status = "equivalent"
        elif status in ("survived", "no tests"):
            open_.append(m)
        counts.setdefault(m.module, Counter())[status] += 1
    total = sum(counts.values(), Counter())
    lines = [
        "| module | mutants | killed | timeout | equivalent | survived | not run | other | score |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for module, c in [*sorted(counts.items()), ("**all**", total)]:
        lines.append(_row(module, c))
    score = _score(total)
    lines += ["", f"Score over non-equivalent mutants: **{100 * score:.1f}%** (target 90%)."]
    if open_:
        lines += ["", "Survivors not yet killed or argued equivalent:", ""]
        lines += [f"- `{m.name}`: `{m.removed}` → `{m.added}`" for m in open_]
    return "\n".join(lines), score, open_


def _stale(mutants: list[Mutant], equivalent: dict) -> list[tuple[str, str, str]]:
    """Arguments in the equivalence list that match no surviving mutant (code since changed)."""
    alive = {_key(m) for m in mutants if m.status in ("survived", "no tests")}
    return sorted(key for key in equivalent if key not in alive)


def write_block(doc: Path, block: str) -> None:
    """Replace the text between the report markers in ``doc``."""
    text = doc.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{START}\n{block}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail on open or unrun mutants or stale equivalence arguments; write nothing",
    )
    parser.add_argument("--list", action="store_true", help="print open survivors as TSV rows")
    args = parser.parse_args(argv)
    mutants = load_mutants(ROOT)
    if not mutants:
        raise SystemExit("no mutmut results under mutants/: run `make mutate` first")
    block, score, open_ = summarise(mutants, load_equivalent(EQUIVALENT))
    if args.list:
        for m in open_:
            print("\t".join([f"{m.module}.{m.function}", m.removed, m.added, m.name]))
        return 0
    stale = _stale(mutants, load_equivalent(EQUIVALENT))
    if args.check:
        print(block)
        for key in stale:
            print("argued equivalent but no such survivor: " + "\t".join(key))
        unrun = sum(m.status == "not run" for m in mutants)
        return 0 if score >= TARGET and not open_ and not unrun and not stale else 1
    write_block(DOC, block)
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
