"""pytest helpers: assert variance claims from a project's own test suite.

>>> from varcheck.testing import assert_variance
>>> result = assert_variance(64, claim="dk", seed=1)    # passes silently, returns the result
>>> result.outcome
'pass'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from .checks.render import verify_paragraph
from .checks.verify import VerifyResult, verify

__all__ = ["assert_variance"]


class _Tested(Protocol):
    @property
    def outcome(self) -> str: ...


#: a finished test (VerifyResult, ProbeResult)
R = TypeVar("R", bound=_Tested)


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
        Accept an inconclusive equivalence test instead of raising.
    **options
        Any keyword of :func:`varcheck.verify`: ``dist``, ``q_dist``, ``k_dist``, ``rho``,
        ``scaled``, ``tolerance``, ``confidence``/``alpha``, ``precision``/``samples``,
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
    """
    result = verify(dk, claim=claim, **options)
    return passed(result, verify_paragraph, allow_inconclusive=allow_inconclusive)


def passed(result: R, message: Callable[[R], str], *, allow_inconclusive: bool = False) -> R:
    """The gate of every assertion helper (this module's and the pytest fixture's).

    Parameters
    ----------
    result : VerifyResult or ProbeResult
        A finished test.
    message : callable
        The failure message, from the result.
    allow_inconclusive : bool
        Accept an inconclusive test.

    Returns
    -------
    The result, when its outcome is pass (or inconclusive, where accepted).

    Raises
    ------
    AssertionError
        With ``message(result)`` otherwise.
    """
    __tracebackhide__ = True
    accepted = ("pass", "inconclusive") if allow_inconclusive else ("pass",)
    if result.outcome not in accepted:
        raise AssertionError(message(result))
    return result
