"""The ``varcheck`` command line: a thin layer over the Python API."""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import sys
import traceback

# Many small batched matrix products: BLAS's own threads only contend (badly, on a busy machine;
# bench/README.md), so the CLI runs BLAS single-threaded and parallelises over chunks with
# --workers instead. Set before numpy is first imported; an explicit setting by the user wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import click  # noqa: E402

from .._version import __version__  # noqa: E402
from ..errors import VarcheckError  # noqa: E402

__all__ = ["EXIT_CODES_HELP", "EXIT_MEANINGS", "cli", "exit_codes_help", "main"]

#: what each exit status means, closing the help of the commands that can return it
#: (core.verdicts.exit_code sets 0-4, and 128 + the signal cli/signals noted: 130 or 143)
EXIT_MEANINGS = {
    0: "0 all consistent (or pass)",
    1: "1 some claim rejected (fail)",
    2: "2 bad usage or input",
    3: "3 inconclusive",
    4: "4 no valid test for some row (infinite variance or fourth moment, kurtosis above 10^6, "
    "a constant (q·k)^2, or fewer samples than a valid interval needs)",
    130: "130 interrupted by Ctrl-C and 143 by SIGTERM (partial results are printed)",
    141: "141 output pipe closed (e.g. | head)",
}


def exit_codes_help(*codes: int, meanings: dict[int, str] | None = None) -> str:
    """The help's closing line: the exit statuses a command can return (130 stands for 143).

    ``meanings`` replaces :data:`EXIT_MEANINGS`' words for a command whose statuses say more
    (project's 1 is a check row rejected, train's 0 that it tests nothing).
    """
    words = EXIT_MEANINGS | (meanings or {})
    return "Exit codes: " + ", ".join(words[c] for c in (*codes, 130, 141)) + "."


EXIT_CODES_HELP = exit_codes_help(0, 1, 2, 3, 4)

#: command name -> module in this package defining a click command named ``command``.
#: Modules are imported only when their command runs (start-up stays light).
COMMANDS: dict[str, str] = {
    "sweep": "sweep",
    "assert": "assert_",
    "check": "check",
    "explain": "explain",
    "softmax": "softmax",
    "derive": "derive",
    "project": "project",
    "beta": "beta",
    "train": "train",
    "audit": "audit",
    "probe": "probe",
    "plan": "plan",
}


class LazyGroup(click.Group):
    """A group whose subcommands live in their own modules and are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _module_exists(COMMANDS[name])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None or not _module_exists(module):
            return None
        return importlib.import_module(f"{__name__}.{module}").command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command named first in ``args``; a mistyped name is refused with the closest."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            from ..core.messages import cut, did_you_mean

            raise click.UsageError(
                f"no command {cut(name)!r}{did_you_mean(name, COMMANDS)}; the commands are "
                f"{', '.join(self.list_commands(ctx))}"
            )
        return super().resolve_command(ctx, args)


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(f"{__name__}.{module}") is not None


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="""\b
Examples:
  varcheck sweep --dk 2..512                  # the main job: Var(q·k) = d_k
  varcheck sweep --dk 2..512 --format json    # for machines
  varcheck assert --dk 64 --claim 1 --scaled  # one claim as a CI gate
  varcheck check examples/claims.toml         # claims, Holm over all
  varcheck explain                            # why a 2x2 np.var gave 1.6
  varcheck softmax --dk 2..512                # what 1/sqrt(d_k) does
  varcheck derive --dist normal:mean=0.5      # where the derivation breaks
  varcheck project --dx 64 --dk 16            # Q = XW_q, K = XW_k: the paper
  varcheck train                              # fixed vs adaptive beta
  varcheck audit all-MiniLM-L6-v2             # a transformer's logit scale
  varcheck probe kernels.py:attn --dk 64      # a kernel's effective scale
  varcheck COMMAND --help                     # every option of a command

"""
    + EXIT_CODES_HELP,
)
@click.version_option(__version__, "-V", "--version", prog_name="varcheck")
@click.option("--debug", is_flag=True, help="Show a traceback on errors (for bug reports).")
def cli(debug: bool) -> None:
    """varcheck: Monte-Carlo verification of Var(q·k) = d_k and its generalisations.

    If q and k have d_k independent zero-mean unit-variance entries, Var(q·k) = d_k, so
    q·k/√d_k has unit variance. varcheck checks that claim, and the exact formula for other
    distributions, with confidence intervals that account for the dependence between products
    of one matrix.
    """


#: longest word and longest line an error message may print (a 120 KB --dk is not echoed whole);
#: messages cut the values they repeat to about 60 characters themselves, and a path as long as
#: a deep CI checkout's stays whole here
_WORD, _LINE = 160, 1000


def _short(word: str) -> str:
    return word if len(word) <= _WORD else word[: _WORD - 60] + "…" + word[-59:]


def _error(prefix: str, message: str) -> None:
    """One line; every value it repeats cut (most are already, this catches the rest), and any
    control character a file name or a value holds shown as its escape, never acted on."""
    from ..output.text import visible

    line = visible(" ".join(_short(word) for word in message.split()))
    if len(line) > _LINE:
        line = line[: _LINE - 1] + "…"
    click.echo(f"{prefix}: error: {line}", err=True)


def _command_path(args: list[str]) -> str:
    """``varcheck NAME`` for the subcommand named in ``args`` (for error prefixes)."""
    name = next((a for a in args if not a.startswith("-")), None)
    return f"varcheck {name}" if name in COMMANDS else "varcheck"


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI and map every outcome to a documented exit code."""
    from .signals import exit_status, handling_signals, ignore_signals

    # called in-process, the caller's handlers come back afterwards
    with handling_signals(restore=argv is not None):
        code = _run(sys.argv[1:] if argv is None else argv)
        code = exit_status(code)
    if argv is None:
        # the console script: Python's teardown restores the default actions, and a signal
        # then would kill the process (after its output) instead of exiting with ``code``
        ignore_signals()
    sys.exit(code)


def _global_option_hint(exc: click.UsageError, args: list[str]) -> str:
    """Where an option of ``varcheck`` itself, given after a command, belongs."""
    if isinstance(exc, click.NoSuchOption) and exc.option_name == "--debug":
        command = next((a for a in args if a in COMMANDS), "COMMAND")
        return f"; --debug goes before the command: varcheck --debug {command} ..."
    return ""


def _run(args: list[str]) -> int:
    """Run one command line; its exit code (before a signal's status replaces it)."""
    from .signals import received, writing

    debug = "--debug" in args
    try:
        code = cli.main(args=args, prog_name="varcheck", standalone_mode=False)
    except click.UsageError as exc:
        prefix = exc.ctx.command_path if exc.ctx is not None else "varcheck"
        hint = _global_option_hint(exc, args)
        message = exc.format_message()
        _error(prefix, message.rstrip(".") + hint if hint else message)
        code = 2
    except click.ClickException as exc:
        _error("varcheck", exc.format_message())
        code = exc.exit_code
    except VarcheckError as exc:
        if debug:
            traceback.print_exc()
        _error(_command_path(args), str(exc))
        code = 2
    except (click.exceptions.Abort, KeyboardInterrupt):
        word = "terminated" if received() == signal.SIGTERM else "interrupted"
        when = "while writing the results (they may be cut)" if writing() else "before any result"
        click.echo(f"varcheck: {word} {when}", err=True)
        code = 130
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): exit quietly, as a pipe writer killed by SIGPIPE
        # would (128 + 13), without a second error when Python flushes stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 141
    except Exception as exc:  # noqa: BLE001 - last line of defence: one line, never a traceback
        if debug:
            traceback.print_exc()
        _error(
            "varcheck",
            f"internal error: {type(exc).__name__}: {exc} (rerun with --debug "
            "for a traceback and please report it)",
        )
        code = 70
    return 0 if code is None else int(code)
