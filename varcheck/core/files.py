"""Reading the files a user names: regular files only, up to a stated size, one-line errors.

A path a user gives may be a FIFO (an ``open`` that waits forever for a writer), ``/dev/zero``
(a read that never ends), a folder, or a file far larger than any input varcheck needs. Every
reader goes through :func:`read_bytes` (or :func:`read_text`), which refuses all of these before
reading, and reads at most the limit even when the file grows meanwhile.
"""

from __future__ import annotations

import os
import stat

from ..errors import VarcheckError
from .options import cut

__all__ = ["MIB", "read_bytes", "read_text", "regular_file"]

#: one mebibyte, the unit limits are stated in
MIB = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _size(limit: int) -> str:
    return f"{limit / MIB:g} MiB" if limit >= MIB else f"{limit} bytes"


def _refuse(path: str, what: str, reason: str) -> VarcheckError:
    return VarcheckError(f"{cut(path)}: cannot read {what} ({reason})")


def regular_file(path: str | os.PathLike[str], what: str, limit: int) -> int:
    """Check that ``path`` is a regular file of at most ``limit`` bytes; its size.

    Raises
    ------
    VarcheckError
        ``PATH: cannot read WHAT (REASON)``: missing, unreadable, not a regular file, too large.
    """
    path = os.fspath(path)
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise _refuse(path, what, getattr(exc, "strerror", None) or str(exc)) from None
    _check_kind(path, what, info.st_mode)
    if info.st_size > limit:
        raise _refuse(path, what, f"{_size(info.st_size)}, above the limit of {_size(limit)}")
    return info.st_size


def _check_kind(path: str, what: str, mode: int) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise _refuse(path, what, f"{kind}, not a regular file")
    if not stat.S_ISREG(mode):
        raise _refuse(path, what, "not a regular file")


def read_bytes(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of the regular file ``path``, refused when it holds more than ``limit``.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What it is, for messages ("the claim file").
    limit : int
        Largest size accepted, in bytes.

    Examples
    --------
    >>> read_bytes("/", "it", MIB)
    Traceback (most recent call last):
    ...
    varcheck.errors.VarcheckError: /: cannot read it (a folder, not a regular file)
    """
    path = os.fspath(path)
    regular_file(path, what, limit)
    try:
        # O_NONBLOCK: should the path become a FIFO after the check, open returns at once
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _refuse(path, what, exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as fh:
        _check_kind(path, what, os.fstat(fd).st_mode)
        data = fh.read(limit + 1)
    if len(data) > limit:  # the file grew since it was looked at
        raise _refuse(path, what, f"more than the limit of {_size(limit)}")
    return data


def read_text(path: str | os.PathLike[str], what: str, limit: int) -> str:
    """The UTF-8 text of a regular file (a byte-order mark is dropped); see :func:`read_bytes`."""
    path = os.fspath(path)
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _refuse(path, what, f"not UTF-8 text: byte {exc.start} is invalid") from None
