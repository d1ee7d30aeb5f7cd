"""The ``varcheck`` pytest fixture: variance claims about your own code as ordinary tests.

Installing varcheck registers this plugin (entry point ``pytest11``); nothing else is needed.
A test asks for the ``varcheck`` fixture and asserts a claim about the values its sampler
returns::

    def test_logits_have_unit_variance(varcheck):
        varcheck.assert_variance(64, claim=1, sampler=attention.logits, tolerance=0.02)

``varcheck.assert_scale(kernel, dk, expect="1/sqrt(dk)", ...)`` and ``varcheck.probe(kernel,
dk, ...)`` do the same for the effective scale of an attention kernel ``fn(q, k, v)``, with the
keyword arguments of :func:`varcheck.probe` (docs/probe.md).

``varcheck.assert_variance(dk, ...)`` and ``varcheck.verify(dk, ...)`` take the keyword
arguments of :func:`varcheck.verify` (``sampler``, ``claim``, ``scaled``, ``tolerance``,
``precision``, ``samples``, ``max_seconds``, ``confidence``/``alpha``, ``workers``, ``dist``,
...). ``assert_variance`` returns the result when the claim passes and raises
``AssertionError`` otherwise — on a fail, an inconclusive equivalence test (with how many more
values would settle it), or a variance no interval can be trusted for — with a few lines: the
claim, estimate, interval, p-value, verdict and the command that reproduces the test.

Options
-------
``--varcheck-seed N``
    The session's seed (a whole number >= 0). Without it one is drawn per session; either way
    it is shown in pytest's header line. Each test's seed is derived from the session's seed
    and the test's node id, so tests do not depend on each other or on their order, and
    ``pytest "NODEID" --varcheck-seed N`` reruns one test exactly. Each further call in the
    same test gets a seed of its own; ``seed=`` given to a call wins. ``varcheck.seed`` is the
    test's seed (that of its first call).
``--varcheck-alpha A``
    The default ``alpha`` (0 < A < 1, default 0.05) of every call that gives neither
    ``confidence`` nor ``alpha``: each interval then has confidence 1 - A.

Under pytest-xdist the workers share the session's seed, so a test gets the same seed wherever
it runs. With plugin autoloading off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) load it with
``pytest -p varcheck`` (the entry point's name: ``-p varcheck.pytest_plugin`` would register it a
second time when autoloading is on); ``-p no:varcheck`` turns it off.

False alarms across a suite
---------------------------
Each assertion of a true claim fails with probability up to alpha when the seed is fresh. A
suite of m independent assertions of true claims, each at alpha, therefore fails somewhere
with probability up to 1 - (1 - alpha)^m: 5% for one, 23% for 5 and 64% for 20 at
alpha = 0.05. Ways to control it:

- pin the seed in CI (``--varcheck-seed N``): every run is then the same draw, so a passing
  suite does not fail at random from run to run and a failure always reproduces; the outcome
  changes only when the code under test (or the seed) does, and each such change is a fresh
  draw with the rate above;
- lower the level of each assertion: ``--varcheck-alpha`` set to alpha / m (Bonferroni) keeps
  the suite-wide rate below alpha, at the cost of wider intervals (more samples for the same
  precision);
- put the claims in one claim file and run ``varcheck check FILE.toml``, which adjusts the
  p-values across all its claims (Holm): a suite-wide rate below alpha, with more power than
  Bonferroni.

With ``tolerance=`` T a claim is the band claim × [1 − T, 1 + T]: it passes when the whole 90%
interval lies inside the band and fails only when the whole 95% interval lies outside it, so a
variance inside the band fails at most alpha of the time (at most alpha / 2 once the band is
wider than the interval, far less well inside it); the rate above is the bound for consistency
tests.
"""

from __future__ import annotations

import os
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from .checks.verify import VerifyResult
    from .kernels.probe import ProbeResult

T = TypeVar("T")

__all__ = ["VarcheckFixture"]

DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class _Session:
    """The session's seed and the default alpha of its calls."""

    seed: int
    alpha: float


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("varcheck", "varcheck: variance claims (the varcheck fixture)")
    group.addoption(
        "--varcheck-seed",
        metavar="N",
        default=None,
        help="seed of the session's varcheck assertions (whole number >= 0); "
        "drawn and shown in the header when not given",
    )
    group.addoption(
        "--varcheck-alpha",
        metavar="A",
        default=None,
        help=f"default alpha of each varcheck assertion, 0 < A < 1 (default {DEFAULT_ALPHA}): "
        "confidence 1 - A unless the call gives confidence or alpha",
    )


def _seed_option(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise pytest.UsageError(f"--varcheck-seed must be a whole number >= 0, got {text!r}")
    return seed


def _alpha_option(text: str) -> float:
    try:
        alpha = float(text)
    except ValueError:
        alpha = float("nan")
    if not 0.0 < alpha < 1.0:
        raise pytest.UsageError(f"--varcheck-alpha must be a number in (0, 1), got {text!r}")
    return alpha


def pytest_configure(config: pytest.Config) -> None:
    text = config.getoption("varcheck_seed")
    alpha = config.getoption("varcheck_alpha")
    alpha = DEFAULT_ALPHA if alpha is None else _alpha_option(alpha)
    shared = getattr(config, "workerinput", {}).get("varcheck_seed")
    if text is not None:
        session = _Session(_seed_option(text), alpha)
    elif shared is not None:  # an xdist worker: the controller's seed
        session = _Session(int(shared), alpha)
    else:
        import secrets

        session = _Session(secrets.randbelow(2**32), alpha)
    config.stash[_SESSION] = session


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the controller's seed to each worker."""
    node.workerinput["varcheck_seed"] = node.config.stash[_SESSION].seed


def pytest_report_header(config: pytest.Config) -> str:
    session = config.stash[_SESSION]
    return (
        f"varcheck: seed {session.seed} (reproduce with --varcheck-seed {session.seed}), "
        f"alpha {session.alpha:g}"
    )


def _derived_seed(*entropy: int) -> int:
    """A 32-bit seed from the given whole numbers (numpy's SeedSequence mixing)."""
    from numpy.random import SeedSequence

    return int(SeedSequence(list(entropy)).generate_state(1)[0])


def _quoted(nodeid: str) -> str:
    """The node id quoted for a POSIX shell: in double quotes, as the docs show it, when safe."""
    if any(c in nodeid for c in '"$`\\!'):
        return shlex.quote(nodeid)
    return f'"{nodeid}"'


class VarcheckFixture:
    """What the ``varcheck`` fixture gives a test: :func:`varcheck.verify` with the test's seed.

    Attributes
    ----------
    seed : int
        This test's seed, used by its first call; derived from the session's seed and the
        test's node id.
    session_seed : int
        The session's seed (``--varcheck-seed``, or drawn).
    alpha : float
        The default alpha of each call (``--varcheck-alpha``).
    nodeid : str
        The test's node id.
    folder : str or None
        The test file's folder: a relative ``file.py:FUNCTION`` that is not found from the
        working directory is looked up there.
    """

    def __init__(
        self, nodeid: str, session_seed: int, alpha: float, folder: str | None = None
    ) -> None:
        self.nodeid = nodeid
        self.folder = folder
        self.session_seed = session_seed
        self.alpha = alpha
        self.seed = _derived_seed(session_seed, zlib.crc32(nodeid.encode("utf-8")))
        self._calls = 0

    def __repr__(self) -> str:
        return f"<varcheck fixture {self.nodeid!r} seed={self.seed}>"

    def _next_seed(self) -> int:
        """The first call uses :attr:`seed`; call i (from 1) a seed derived from it and i."""
        index = self._calls
        self._calls += 1
        return self.seed if index == 0 else _derived_seed(self.seed, index)

    def _call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function`` with the next seed (unless given) and varcheck's errors in one line."""
        __tracebackhide__ = True
        from .errors import VarcheckError

        seed = self._next_seed()
        if kwargs.get("seed") is None:
            kwargs["seed"] = seed
        try:
            return function(*args, **kwargs)
        except VarcheckError as exc:  # one line: varcheck's own frames say nothing here
            raise exc.with_traceback(None) from exc.__cause__

    def verify(self, dk: int, **kwargs: Any) -> VerifyResult:
        """:func:`varcheck.verify` with this test's next seed and the session's alpha.

        Parameters
        ----------
        dk : int
            Passed to the sampler (the length of q and k without one).
        **kwargs
            Any keyword of :func:`varcheck.verify`; a ``seed`` or a ``confidence``/``alpha``
            given here wins over the fixture's.

        Returns
        -------
        VerifyResult
        """
        __tracebackhide__ = True
        from .checks.verify import verify

        if kwargs.get("confidence") is None and kwargs.get("alpha") is None:
            kwargs["alpha"] = self.alpha
        kwargs["sampler"] = _beside(kwargs.get("sampler"), self.folder)
        return self._call(verify, dk, **kwargs)

    def assert_variance(self, dk: int, **kwargs: Any) -> VerifyResult:
        """:func:`varcheck.testing.assert_variance` with this test's next seed and the session's
        alpha (see :meth:`verify`): the result when the claim passes, else ``AssertionError``.

        An inconclusive claim fails too (the message says how to settle it). The message's
        reproduce line is the pytest command, and the ``varcheck assert`` one when the
        sampler is given by name. After Ctrl-C or SIGTERM it raises ``KeyboardInterrupt``: a
        run cut short neither passes nor fails the test.
        """
        __tracebackhide__ = True
        result = self.verify(dk, **kwargs)
        if result.interrupted:  # Ctrl-C: a verdict on partial data would pass or fail the test
            raise KeyboardInterrupt
        if result.outcome != "pass":
            raise AssertionError(self._message(result, by_name=_named(kwargs.get("sampler"))))
        return result

    def probe(self, fn: Any, dk: int, **kwargs: Any) -> ProbeResult:
        """:func:`varcheck.probe` with this test's next seed and the session's alpha.

        Parameters
        ----------
        fn : callable or str
            The attention kernel ``fn(q, k, v)``, or ``"module:function"``.
        dk : int
            The width of q and k.
        **kwargs
            Any keyword of :func:`varcheck.probe` (``expect``, ``tolerance``, ``layout``,
            ``causal``, ...); a ``seed`` or a ``confidence``/``alpha`` given here wins.

        Returns
        -------
        ProbeResult
        """
        __tracebackhide__ = True
        from .core.options import confidence_from
        from .kernels.probe import probe

        def with_confidence(alpha: float | None = None, **rest: Any) -> ProbeResult:
            __tracebackhide__ = True
            if rest.get("confidence") is None:
                rest["confidence"] = confidence_from(None, self.alpha if alpha is None else alpha)
            return probe(_beside(fn, self.folder), dk, **rest)

        return self._call(with_confidence, **kwargs)

    def assert_scale(
        self, fn: Any, dk: int, expect: str | float = "1/sqrt(dk)", **kwargs: Any
    ) -> ProbeResult:
        """Raise ``AssertionError`` unless the kernel's effective scale passes; see :meth:`probe`.

        Returns
        -------
        ProbeResult
            When the scale passes.

        Raises
        ------
        AssertionError
            When it fails or is inconclusive: the expected and effective scales, the interval,
            the nearest law with the factor left over, the diagnostics, and how to reproduce.
        """
        __tracebackhide__ = True
        result = self.probe(fn, dk, expect=expect, **kwargs)
        if result.outcome != "pass":
            raise AssertionError(self._scale_message(result))
        return result

    def _rerun(self) -> str:
        """The pytest command that reruns this test with the same seeds and alpha."""
        rerun = f"pytest {_quoted(self.nodeid)} --varcheck-seed {self.session_seed}"
        if self.alpha != DEFAULT_ALPHA:
            rerun += f" --varcheck-alpha {self.alpha!r}"
        return rerun

    def _scale_message(self, result: ProbeResult) -> str:
        """probe_paragraph's account with a pytest command to reproduce the test."""
        from .kernels.render import probe_paragraph, reproduce_command

        rerun = self._rerun()
        direct = reproduce_command(result)
        if direct:
            rerun += f"\n         or: {direct}"
        return probe_paragraph(result, reproduce=rerun)

    def _message(self, result: VerifyResult, by_name: bool) -> str:
        """verify_paragraph's account with a pytest command to reproduce the test."""
        from .checks.render import reproduce_command, verify_paragraph

        rerun = self._rerun()
        if by_name:
            rerun += f"\n         or: {reproduce_command(result)}"
        text = verify_paragraph(result, reproduce=rerun)
        if result.outcome == "inconclusive":
            text += (
                "\n  inconclusive counts as a failure: give more samples (precision=, samples=) "
                "or a wider tolerance"
            )
        return text


def _beside(target: Any, folder: str | None) -> Any:
    """A relative ``file.py:FUNCTION`` not found from the working directory but found next to
    the test file, named by its path from the working directory (so that the reproduce
    command works from there too); anything else as it is."""
    if not isinstance(target, str) or folder is None or ":" not in target:
        return target
    where, _, attr = target.rpartition(":")
    if not where.endswith(".py") or os.path.isabs(where) or os.path.exists(where):
        return target
    beside = os.path.join(folder, where)
    return f"{os.path.relpath(beside)}:{attr}" if os.path.isfile(beside) else target


def _named(sampler: Any) -> bool:
    """Whether ``varcheck assert`` can rerun the call: no sampler, or one given by name."""
    from .core.user_code import UserSampler

    return sampler is None or isinstance(sampler, str | UserSampler)


@pytest.fixture
def varcheck(request: pytest.FixtureRequest) -> VarcheckFixture:
    """Assert variance claims with the test's own seed: ``varcheck.assert_variance(dk, ...)``,
    ``varcheck.assert_scale(kernel, dk)``."""
    session = request.config.stash[_SESSION]
    folder = os.path.dirname(str(request.node.path))
    return VarcheckFixture(request.node.nodeid, session.seed, session.alpha, folder)
