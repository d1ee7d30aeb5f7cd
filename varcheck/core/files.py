"""Reading the files a user names: regular files only, up to a stated size, one-line errors.

A path a user gives may be a FIFO (an ``open`` that waits forever for a writer), ``/dev/zero``
(a read that never ends), a folder, or a file far larger than any input varcheck needs. Every
reader goes through :func:`read_bytes` (or :func:`read_text`), which refuses all of these before
reading, and reads at most the limit even when the file grows meanwhile.

Large files read piece by piece (a GGUF model, a safetensors checkpoint, the end of a zip
archive) go through :class:`PinnedFile`, which reads at offsets with ``pread`` instead of
mapping the file into memory: a file truncated or rewritten by another process while varcheck
reads it is then one line (``... changed while it was read``), where a memory map would kill
the process with SIGBUS. A SIGBUS handler cannot do that job in Python: the signal arrives
inside numpy's copy loop, and Python runs its handlers only between bytecodes, so the faulting
load would repeat for ever. The price is one copy of the bytes read, which the readers turn
into float32 arrays several times larger anyway.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator

from ..errors import VarcheckError
from .messages import cut, size_text

__all__ = ["MIB", "PinnedFile", "path_exists", "read_bytes", "read_text", "regular_file"]

#: one mebibyte, the unit limits are stated in
MIB = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


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
        raise _refuse(
            path, what, f"{size_text(info.st_size)}, above the limit of {size_text(limit)}"
        )
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
        raise _refuse(path, what, f"more than the limit of {size_text(limit)}")
    return data


def read_text(path: str | os.PathLike[str], what: str, limit: int) -> str:
    """The UTF-8 text of a regular file (a byte-order mark is dropped); see :func:`read_bytes`."""
    path = os.fspath(path)
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _refuse(path, what, f"not UTF-8 text: byte {exc.start} is invalid") from None


def path_exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names something; a name the system refuses (too long, a NUL) is refused
    in one line instead of raising ``OSError``."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        if getattr(exc, "errno", None) in (errno.ENOENT, errno.ENOTDIR):
            return False
        reason = getattr(exc, "strerror", None) or str(exc)
        raise VarcheckError(f"{cut(os.fspath(path))}: cannot use this path ({reason})") from None
    return True


class PinnedFile:
    """A regular file read at offsets, that notices when it changes under the reader.

    The file's identity (device, inode, size, modification time) is taken when it is checked;
    every read opens it again, compares, reads with ``pread`` and compares once more, so a file
    truncated, rewritten or replaced meanwhile is refused in one line instead of giving garbage
    or (through a memory map) SIGBUS.

    Parameters
    ----------
    path : path-like
    what : str
        What the file is, for messages ("the model").
    limit : int, optional
        Largest size accepted, in bytes.
    """

    def __init__(self, path: str | os.PathLike[str], what: str, limit: int | None = None) -> None:
        self.path = os.fspath(path)
        self.what = what
        self.size = regular_file(self.path, what, (1 << 62) if limit is None else limit)
        self._identity = self._stat_identity(os.stat(self.path))

    @staticmethod
    def _stat_identity(info: os.stat_result) -> tuple[int, ...]:
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def changed(self, how: str) -> VarcheckError:
        """The one-line error for a file that changed while it was read."""
        return _refuse(self.path, self.what, f"it changed while it was read: {how}")

    def _check(self, fd: int) -> None:
        if self._stat_identity(os.fstat(fd)) != self._identity:
            raise self.changed("its size, time or inode differs from when it was opened")

    @contextlib.contextmanager
    def reading(self) -> Iterator[Callable[[int, int], bytes]]:
        """Open the file once for several reads: yields ``read(offset, size)``."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise self.changed(exc.strerror or str(exc)) from None
        try:
            self._check(fd)

            def read(offset: int, size: int) -> bytes:
                if offset < 0 or size < 0 or offset + size > self.size:
                    raise self.changed(f"{size} bytes at offset {offset} lie beyond its end")
                data = os.pread(fd, size, offset)
                if len(data) != size:
                    raise self.changed(f"it ends at byte {offset + len(data)}")
                return data

            yield read
            self._check(fd)
        finally:
            os.close(fd)

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset``."""
        with self.reading() as read:
            return read(offset, size)
