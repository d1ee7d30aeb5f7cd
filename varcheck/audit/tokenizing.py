"""Calling the ``tokenizers`` library on a stranger's tokenizer and text: bounded, one line.

The library is Rust. A tokenizer file can make it panic (a template naming a special token it
does not declare, a normaliser's regular expression that backtracks past its limit): the panic
prints its message and a backtrace on the process's stderr, then reaches Python as
``PanicException``, which derives from ``BaseException`` and escapes ``except Exception``.
:func:`native_errors` captures file descriptor 2 while the library runs and turns any failure
into one :class:`~varcheck.errors.VarcheckError` line.

A text can make it slow or large: its BPE is quadratic in the length of a word (a 16 MB line is
one word to a byte-level tokenizer), and every ``Encoding`` it returns holds about a hundred
bytes per token, so 16 MB of text took 3.4 GB before the audit's plan could refuse it. Lines are
cut to :data:`CHARS_PER_TOKEN` characters per token kept before they reach the library (a token
of real text averages four), and encoded in chunks of :data:`CHUNK_CHARS` characters, keeping
only the ids: Ctrl-C and SIGTERM act between chunks (the library does not return to Python
inside one), and memory holds one chunk's encodings at a time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence

from ..errors import VarcheckError

__all__ = [
    "CHARS_PER_TOKEN",
    "CHUNK_CHARS",
    "native_errors",
    "cut_lines",
    "encode_in_chunks",
    "first_token_texts",
]

#: Characters of a line kept per token of ``max_length`` before tokenising.
CHARS_PER_TOKEN = 64
#: Characters handed to the library in one call.
CHUNK_CHARS = 1 << 18


def first_token_texts(
    ids: Sequence[Sequence[int]], text_of: Callable[[int], str] | None
) -> tuple[str, ...]:
    """The distinct token-0 texts of the sequences (at most five, quoted), the token an
    attention sink forms on; their ids when there is no tokenizer to name them."""
    firsts = sorted({s[0] for s in ids if s})[:5]
    return tuple(str(i) if text_of is None else repr(text_of(i)) for i in firsts)


def _is_panic(exc: BaseException) -> bool:
    return any(kind.__name__ == "PanicException" for kind in type(exc).__mro__)


@contextlib.contextmanager
def _stderr_captured() -> Iterator[Callable[[], str]]:
    """Point file descriptor 2 at a temporary file (what Rust prints goes there); yields a
    function returning what was written."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)

        def written() -> str:
            sink.seek(0)
            return sink.read(4096).decode("utf-8", "replace")

        try:
            yield written
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _first_words(text: str) -> str:
    """The panic's message: the line after Rust's ``thread '…' panicked at …:``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "panicked at" in line and i + 1 < len(lines):
            return lines[i + 1]
    return lines[0] if lines else ""


@contextlib.contextmanager
def native_errors(where: str, doing: str) -> Iterator[None]:
    """Run tokenizers code: its panic or error becomes ``WHERE: cannot DOING (MESSAGE)``.

    Parameters
    ----------
    where : str
        The file the tokenizer came from.
    doing : str
        What was asked ("build the tokenizer", "encode the text").
    """
    with _stderr_captured() as written:
        try:
            yield
        except VarcheckError:
            raise
        except Exception as exc:  # noqa: BLE001 - tokenizers raises bare Exceptions
            message = str(exc) or type(exc).__name__
        except BaseException as exc:
            if not _is_panic(exc):
                raise
            message = _first_words(written()) or str(exc) or "a Rust panic"
        else:
            return
    first = (message.strip().splitlines() or [""])[0]
    raise VarcheckError(f"{where}: cannot {doing} ({first[:100]})")


def cut_lines(lines: Sequence[str], max_length: int) -> tuple[list[str], list[bool]]:
    """Each line cut to ``CHARS_PER_TOKEN × max_length`` characters, and which were cut."""
    limit = CHARS_PER_TOKEN * max_length
    return [line[:limit] for line in lines], [len(line) > limit for line in lines]


def encode_in_chunks(
    encode: Callable[[list[str]], list[list[int]]], lines: Sequence[str], where: str
) -> list[list[int]]:
    """``encode`` (a list of lines to their ids) over chunks of at most :data:`CHUNK_CHARS`
    characters (and at least one line), under :func:`native_errors`."""
    out: list[list[int]] = []
    start = 0
    while start < len(lines):
        end, size = start, 0
        while end < len(lines) and (end == start or size + len(lines[end]) <= CHUNK_CHARS):
            size += len(lines[end])
            end += 1
        with native_errors(where, "encode the text"):
            out += encode(list(lines[start:end]))
        start = end
    return out
