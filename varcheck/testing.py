"""pytest helpers: assert variance claims from a project's own test suite.

>>> from varcheck.testing import assert_variance
>>> result = assert_variance(64, claim="dk", seed=1)    # passes silently, returns the result
>>> result.outcome
'pass'
"""

from __future__ import annotations

from typing import Any

from .checks.render import verify_paragraph
from .checks.verify import VerifyResult, verify

__all__ = ["assert_variance"]


def assert_variance(
    dk: int,
    claim: str | float = "theory",
    *,
    allow_inconclusive: bool = False,
    **options: Any,
) -> VerifyResult:
    """Raise ``AssertionError`` unless the claim about Var(q·k) passes.

    Call it inside a test function; the failure message is the claim's paragraph, with the
    command that reproduces the run.

    Parameters
    ----------
    dk : int
        Length of q and k.
    claim : str or float
        The claimed variance (see :func:`varcheck.verify`).
    allow_inconclusive : bool
        Accept an inconclusive test with a tolerance (neither inside nor outside the band
        shown) instead of raising.
    **options
        Any keyword of :func:`varcheck.verify`: ``dist``, ``q_dist``, ``k_dist``, ``rho``,
        ``scaled``, ``tolerance`` (pass when the whole 90% interval lies inside claim ± T;
        fail when the whole 95% interval lies outside it; otherwise inconclusive),
        ``confidence``/``alpha``, ``precision``/``samples``,
        ``max_seconds``, ``seed``. Pass a ``seed`` for reproducible test runs; without one, a seed
        is drawn and printed in the failure message.

    Returns
    -------
    VerifyResult
        When the claim passes.

    Raises
    ------
    AssertionError
        With a paragraph giving the claim, estimate, interval, p-value and the command that
        reproduces the run, when the claim fails, is inconclusive, or cannot be tested
        (infinite moments).
    KeyboardInterrupt
        When Ctrl-C or SIGTERM cut the run short: the test neither passes nor fails.
    """
    result = verify(dk, claim=claim, **options)
    if result.interrupted:  # Ctrl-C: a verdict on partial data would pass or fail the test
        raise KeyboardInterrupt
    ok = result.outcome == "pass" or (allow_inconclusive and result.outcome == "inconclusive")
    if not ok:
        raise AssertionError(verify_paragraph(result))
    return result
