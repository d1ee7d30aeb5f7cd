"""Shared test helpers."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

# BLAS on one thread, as under the command line (varcheck/cli/__init__.py says why): the small
# matrix products of the samplers and the audits' forward passes only contend with more threads
# on a busy machine (the SmolLM2 audit fixture: 72 s with two, 8 s with one), and two xdist
# workers on two cores already fill them. The variables reach the child processes tests start;
# numpy reads them only when first imported, and a plugin (pytest-randomly) imports it before
# this file, so the loaded BLAS is limited through threadpoolctl too. A user's setting wins.
_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
if not any(_var in os.environ for _var in _BLAS_VARS):
    for _var in _BLAS_VARS:
        os.environ[_var] = "1"
    try:  # in the dev extra; another environment (the framework suite's) may lack it
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if "numpy" in sys.modules and threadpool_limits is not None:
        threadpool_limits(limits=1, user_api="blas")

#: The framework reference suite (torch, transformers, timm) runs in its own environment, by
#: `make test-frameworks`, which sets this variable; the main suite never collects it.
if not os.environ.get("VARCHECK_FRAMEWORK_SUITE"):
    collect_ignore = ["frameworks"]

if TYPE_CHECKING:
    import numpy as np

#: Seconds the whole suite may take on two quiet cores (`make test`, docs/testing.md): a run of
#: the whole suite that takes longer ends with a warning naming the budget.
SUITE_BUDGET_SECONDS = 240.0


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.monotonic()


@pytest.hookimpl(trylast=True)  # after the --durations list it refers to
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Warn when the whole suite (not a selection of it) took longer than its budget."""
    started = config.stash.get(_STARTED, None)
    if started is None or hasattr(config, "workerinput") or not _whole_suite(config):
        return
    took = time.monotonic() - started
    if took > SUITE_BUDGET_SECONDS:
        terminalreporter.write_line(
            f"WARNING: the suite took {took:.0f} s, over its budget of "
            f"{SUITE_BUDGET_SECONDS:.0f} s on two cores (docs/testing.md); the slowest tests "
            "are listed above (--durations)",
            yellow=True,
            bold=True,
        )


def _whole_suite(config: pytest.Config) -> bool:
    """Whether this run is the whole suite: the configured test paths, with no -k or -m."""
    return (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not config.option.keyword
        and not config.option.markexpr
    )


_STARTED = pytest.StashKey[float]()

#: Modules whose module-scoped fixtures (a model's audit, a training run, every interrupted
#: child of a signal test, the runs a pooled calibration test reuses) cost seconds: each is one
#: xdist group, so that ``make test`` (``-n 2 --dist loadgroup``) computes them on one worker
#: only, not once on each worker that gets some of the module's tests. Without ``--dist
#: loadgroup`` the marks change nothing.
ONE_WORKER_MODULES = frozenset(
    {
        "test_audit",
        "test_audit_reference",
        "test_audit_render",
        "test_budget_rule",
        "test_calibration",
        "test_decoder_audit",
        "test_decoder_render",
        "test_exit_codes",
        "test_llama_forward",
        "test_paper_docs",
        "test_paper_render",
        "test_probe_display",
        "test_probe_family",
        "test_robustness_table",
        "test_shared",
        "test_signals",
        "test_teaching_render",
        "test_training",
    }
)

#: Modules that share a session-scoped fixture below (a real model's audit) share one group, so
#: that one worker computes it once for all of them.
SHARED_GROUPS = {
    "test_audit": "minilm",
    "test_audit_reference": "minilm",
    "test_audit_render": "minilm",
    "test_decoder_audit": "smollm2",
    "test_decoder_render": "smollm2",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        help="also run the longer calibration runs (tests marked long; `make test-long`)",
    )


@pytest.hookimpl(trylast=True)  # after -k and -m, and after xdist's own reading of the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests marked ``long`` unless ``--long`` is given (docs/testing.md: they
    repeat a calibration or power check of the suite over more seeds or laws, by `make
    test-long`); put each of :data:`ONE_WORKER_MODULES` in an xdist group of its own."""
    if not config.getoption("long"):
        long = [item for item in items if item.get_closest_marker("long") is not None]
        if long:
            config.hook.pytest_deselected(items=long)
            items[:] = [item for item in items if item.get_closest_marker("long") is None]
    grouping = getattr(config.option, "loadgroup", False)  # set in an xdist worker
    for item in items:
        module = item.module.__name__ if getattr(item, "module", None) else ""
        if module not in ONE_WORKER_MODULES:
            continue
        group = SHARED_GROUPS.get(module, module)
        item.add_marker(pytest.mark.xdist_group(group))
        if grouping and "@" not in item.nodeid:
            # what xdist 3.8 does to name the group (a suffix of the test's id), which under
            # pytest 9 (ids kept as `_id`, no longer `_nodeid`) no longer takes effect
            item._id = type(item._id).parse(f"{item.nodeid}@{group}")


@pytest.fixture(autouse=True)
def _close_leftover_figures():
    """Close the pyplot figures a test leaves open: pyplot's list of figures is global to the
    process, and a later test that counts open figures must not see another test's."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture(scope="session")
def minilm_checkpoint():
    """The MiniLM checkpoint, loaded once per test process (tests/test_audit*.py)."""
    from varcheck.audit import bert

    return bert.load_checkpoint("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def minilm_default_audit():
    """``audit("all-MiniLM-L6-v2")`` with every default (all six layers on the built-in text),
    computed once per test process for the tests of its values and of its outputs."""
    from varcheck.audit.command import audit

    return audit("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def smollm2_default_audit():
    """``audit_decoder("SmolLM2-135M")`` with every default, computed once per test process for
    the tests of its values and of the command line's JSON."""
    from varcheck.audit.decoder import audit_decoder

    return audit_decoder("SmolLM2-135M")


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


def _pooled_coverage_p_value(indicators: np.ndarray, level: float = 0.95) -> float:
    """Two-sided p-value of "every interval covers with probability ``level``".

    ``indicators`` has one row per seed and one column per interval. Intervals of one seed may
    be dependent (configurations with the same d_k draw from the same random streams; rows of a
    sweep share blocks), so they are not counted as independent Bernoulli trials: the seeds are
    independent, and the per-seed totals T_s are i.i.d. with mean ``level`` times the number of
    intervals; their mean is compared with it by a z-test (central limit theorem over the
    seeds), with the variance of T estimated from the seeds themselves.
    """
    import math

    from scipy.stats import norm

    totals = indicators.sum(axis=1)
    expected = level * indicators.shape[1]
    se = float(totals.std(ddof=1)) / math.sqrt(totals.size)
    if se == 0.0:
        return 0.0 if float(totals.mean()) != expected else 1.0
    z = (float(totals.mean()) - expected) / se
    return float(2.0 * norm.sf(abs(z)))


@pytest.fixture
def pooled_coverage_p_value():
    """The pooled-coverage test shared by tests/test_calibration.py and tests/test_shared.py."""
    return _pooled_coverage_p_value
