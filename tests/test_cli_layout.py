"""The command line's layout (#14): what its shared modules promise the commands.

Guards against start-up getting heavier again (``varcheck.cli`` once loaded numpy through its
option types), against commands importing each other instead of the shared modules, and pins
what the option groups and ``exclusive`` hand over or refuse.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import varcheck.cli
from varcheck.cli import COMMANDS, EXIT_MEANINGS, exit_codes_help
from varcheck.cli.options import (
    distinct_keys,
    exclusive,
    grouped,
    int_option,
    output_options,
    sampling_options,
    stack,
)
from varcheck.cli.run import run
from varcheck.cli.signals import handling_signals

CLI = Path(varcheck.cli.__file__).parent


def test_importing_the_command_line_loads_no_numpy() -> None:
    """``import varcheck.cli`` (every start-up, --help and --version included) stays light."""
    code = "import sys, varcheck.cli; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"beta"}))
def test_a_command_help_loads_no_numpy(name: str) -> None:
    """Parsing (--help, usage errors) waits for numpy only where the help text itself comes
    from a numpy module (beta's epilog is paper.beta.WEIGHTS_FORMAT)."""
    code = (
        "import sys\nfrom varcheck.cli import main\n"
        f"try:\n    main([{name!r}, '--help'])\nexcept SystemExit:\n    pass\n"
        "print('numpy' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == "False"


@pytest.mark.parametrize("module", sorted(set(COMMANDS.values())))
def test_commands_do_not_import_each_other(module: str) -> None:
    """A command module imports the shared modules (types, options, console, run), never a
    sibling command: what two commands share belongs in a shared module."""
    tree = ast.parse((CLI / f"{module}.py").read_text(encoding="utf-8"))
    siblings = set(COMMANDS.values()) - {module}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = {node.module} if node.module else {a.name for a in node.names}
            assert not names & siblings, f"cli/{module}.py imports {names & siblings}"


def _invoke(command: click.Command, *args: str) -> click.testing.Result:
    return CliRunner().invoke(command, list(args), catch_exceptions=False)


def test_grouped_options_reach_the_command_as_one_argument() -> None:
    seen = {}

    @click.command()
    @grouped("sizes", stack(int_option("--a", 1, 9, 2, "A."), int_option("--b", 1, 9, 3, "B.")))
    @int_option("--c", 1, 9, 4, "C.")
    def command(sizes: dict, c: int) -> None:
        seen.update(sizes=sizes, c=c)

    assert _invoke(command, "--b", "5").exit_code == 0
    assert seen == {"sizes": {"a": 2, "b": 5}, "c": 4}
    help_text = _invoke(command, "--help").output
    assert help_text.index("--a") < help_text.index("--b") < help_text.index("--c")


def test_sampling_options_hand_over_the_api_arguments() -> None:
    """--samples replaces the default --precision; the five values keep the API's names."""
    seen = {}

    @click.command()
    @sampling_options
    def command(sampling: dict) -> None:
        seen.update(sampling)

    assert _invoke(command, "--samples", "1e6", "--seed", "3").exit_code == 0
    assert seen == {
        "confidence": 0.95,
        "precision": None,
        "samples": 1_000_000,
        "max_seconds": None,
        "seed": 3,
    }
    refused = _invoke(command, "--samples", "1e6", "--precision", "0.01")
    assert refused.exit_code == 2
    assert "--precision and --samples cannot be used together: --samples fixes" in refused.output


@pytest.mark.parametrize(
    ("args", "refused"),
    [((), False), (("--x", "1"), False), (("--y", "1"), False), (("--x", "1", "--y", "2"), True)],
)
def test_exclusive_refuses_only_both_given(args: tuple[str, ...], refused: bool) -> None:
    """An option given on the command line counts, even with its default value; a default
    alone never does."""

    @click.command()
    @int_option("--x", 0, None, 1, "X.")
    @int_option("--y", 0, None, None, "Y.")
    def command(x: int, y: int | None) -> None:
        exclusive("x", "y", "pick one")

    result = _invoke(command, *args)
    assert (result.exit_code == 2) == refused
    if refused:
        assert "--x and --y cannot be used together: pick one" in result.output


def test_output_options_hand_run_its_format_and_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--format and --plot reach the command as ``output``, which ``run`` takes as it is; the
    result is rendered and drawn by the presenters its type has."""
    from varcheck.output import presenters

    seen: dict = {}
    render = lambda result, fmt, console: seen.update(rendered=(result, fmt))  # noqa: E731
    monkeypatch.setattr(presenters, "presenter_of", lambda result: (render, dict))
    monkeypatch.setattr(
        presenters, "figure_of", lambda result: lambda r, path: seen.update(drawn=(r, path))
    )

    @click.command()
    @output_options("a test figure")
    def command(output: dict) -> None:
        seen.update(output)
        run(lambda: 7, **output)

    figure = str(tmp_path / "f.png")
    with handling_signals():  # run's signal state belongs to one command line
        assert _invoke(command, "--format", "json", "--plot", figure).exit_code == 0
    assert seen == {"fmt": "json", "plot": figure, "rendered": (7, "json"), "drawn": (7, figure)}
    assert "Also write a figure (PNG) of a test figure" in _invoke(command, "--help").output


def test_output_options_without_a_figure_have_no_plot() -> None:
    seen: dict = {}

    @click.command()
    @output_options(formats=("table", "json"))
    def command(output: dict) -> None:
        seen.update(output)

    assert _invoke(command).exit_code == 0
    assert seen == {"fmt": "table"}
    assert _invoke(command, "--plot", "x.png").exit_code == 2
    assert _invoke(command, "--format", "csv").exit_code == 2


def test_distinct_keys_refuses_a_key_given_twice() -> None:
    assert distinct_keys("--arg", (("a", 1), ("b", 2))) == {"a": 1, "b": 2}
    with pytest.raises(click.UsageError, match="^--arg b is given twice$"):
        distinct_keys("--arg", (("c", 1), ("b", 2), ("c", 3), ("b", 4)))


def test_exit_codes_help_takes_a_command_s_own_words() -> None:
    """A command's words replace the shared ones; 130 and 141 always close the line."""
    line = exit_codes_help(0, 2, meanings={0: "0 done"})
    assert line == f"Exit codes: 0 done, {EXIT_MEANINGS[2]}, {EXIT_MEANINGS[130]}, " + (
        f"{EXIT_MEANINGS[141]}."
    )
