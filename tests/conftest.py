"""Shared test helpers."""

from __future__ import annotations

import pytest
from click.testing import CliRunner


@pytest.fixture
def run_cli():
    """Invoke ``varcheck`` through ``main`` (the real entry point, with its exit-code mapping)."""
    from varcheck.cli import main

    runner = CliRunner()

    def _run(*args: str):
        def entry() -> None:
            main(list(args))

        import click

        cmd = click.Command("varcheck", callback=entry)
        return runner.invoke(cmd, [], catch_exceptions=False)

    return _run


# CI machines vary in speed; hypothesis' per-example deadline would make timing a failure cause.
from hypothesis import settings  # noqa: E402

settings.register_profile("varcheck", deadline=None, max_examples=100)
settings.load_profile("varcheck")
