"""Every command's --help fits an 80-column terminal, and every example in it parses.

Help texts are read in terminals of 80 columns (issue #18): click wraps the prose of an epilog to
the width, but ``\\b`` blocks (the examples, the claim-file sketch) are printed as written, so
their lines are checked here. Each example line is parsed by the command it names (option names,
types, choices and existing files are checked; nothing runs), from the folder a preceding
``cd`` line names, so the help cannot teach an option that no longer exists.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from varcheck.cli import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[1]


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_fits_80_columns(name: str | None) -> None:
    text = _help([name] if name else [])
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, "\n".join(long)


def _examples(text: str) -> list[tuple[str, list[str]]]:
    """(folder, arguments after ``varcheck``) of each example line of a help text."""
    out, folder = [], "."
    for line in text.splitlines():
        if not line.strip().startswith(("varcheck ", "cd ")):
            continue
        words = shlex.split(line, comments=True)
        if words[:1] == ["cd"]:
            folder = words[1]
        elif words[:1] == ["varcheck"] and "COMMAND" not in words:
            out.append((folder, words[1:]))
    return out


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_examples_parse(name: str | None, monkeypatch) -> None:
    examples = _examples(_help([name] if name else []))
    assert examples or name is None
    for folder, args in examples:
        monkeypatch.chdir(ROOT / folder)
        # the parent context carries varcheck's settings (-h beside --help): click caches a
        # command's help option the first time it parses, so parsing without them would leave
        # "--help" alone in that command's help for the rest of the process
        parent = click.Context(cli, **cli.context_settings)
        command = cli.get_command(parent, args[0])
        assert command is not None, args
        try:
            command.make_context(args[0], args[1:], parent=parent)
        except click.ClickException as err:  # pragma: no cover - the failure message
            pytest.fail(f"varcheck {shlex.join(args)} (in {folder}): {err.format_message()}")
        monkeypatch.chdir(ROOT)
    assert os.getcwd() == str(ROOT) or name is None or not examples


@pytest.mark.parametrize("name", ["sweep", "assert", "explain", "softmax"])
def test_help_says_which_laws_are_standardised(name: str) -> None:
    """t:df=5 and scipy.t:df=5 differ in variance; the --dist help says why."""
    text = " ".join(_help([name]).split())
    assert "mean 0, sd 1" in text and "scipy" in text and "own" in text
