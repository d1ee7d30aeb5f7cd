"""Exception types shared by the API and the command line."""

from __future__ import annotations


class VarcheckError(ValueError):
    """A value given to varcheck is not acceptable.

    The message names the value and says what is accepted; the command line prints it as one
    line and exits with status 2.
    """
