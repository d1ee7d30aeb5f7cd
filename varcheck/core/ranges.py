"""The d_k grammar: ``A..B`` doubles, ``A..B:S`` steps, commas mix them (``2,3,10..40:10``)."""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable

from ..errors import VarcheckError
from .messages import shown

__all__ = ["parse_dk", "resolve_dks", "MAX_DK"]

#: Largest accepted d_k (a memory and time guard; sampling chunks along d_k beyond ~10^6).
MAX_DK = 1_000_000
#: Most d_k values one run may ask for (each is a row of its own).
MAX_VALUES = 1000

_ACCEPTED = "accepted: N, A..B (doubling), A..B:S (step S), or a comma list such as 2,3,10..40:10"


def _int(text: str, whole: str) -> int:
    text = text.strip()
    try:
        if not re.fullmatch(r"-?[0-9]+", text):  # no "1_000", "+4", " 4 2"
            raise ValueError
        value = int(text)
    except ValueError:
        raise VarcheckError(
            f"d_k {shown(whole)}: {shown(text)} is not a whole number; {_ACCEPTED}"
        ) from None
    if value < 1:
        raise VarcheckError(f"d_k {shown(whole)}: d_k={shown(value)} must be >= 1; {_ACCEPTED}")
    if value > MAX_DK:
        raise VarcheckError(f"d_k {shown(whole)}: d_k={shown(value)} is above the limit {MAX_DK}")
    return value


def parse_dk(text: str) -> list[int]:
    """Parse a d_k specification into the list of values, in the order given.

    Parameters
    ----------
    text : str
        ``A..B`` doubles from A while <= B (``2..512`` gives 2, 4, ..., 512); ``A..B:S`` steps by S
        from A while <= B; a comma list mixes both with single values.

    Returns
    -------
    list of int

    Raises
    ------
    VarcheckError
        Malformed items, values < 1 or above ``MAX_DK``, B < A, S < 1, or a value listed twice.

    Examples
    --------
    >>> parse_dk("2..512")
    [2, 4, 8, 16, 32, 64, 128, 256, 512]
    >>> parse_dk("2,3,10..40:10")
    [2, 3, 10, 20, 30, 40]
    """
    if not isinstance(text, str) or not text.strip():
        raise VarcheckError(f"d_k {shown(text)} is empty; {_ACCEPTED}")
    out: list[int] = []
    seen: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise VarcheckError(f"d_k {shown(text)}: empty item between commas; {_ACCEPTED}")
        if ".." in item:
            lo_text, _, rest = item.partition("..")
            hi_text, colon, step_text = rest.partition(":")
            lo, hi = _int(lo_text, text), _int(hi_text, text)
            if hi < lo:
                raise VarcheckError(f"d_k {shown(text)}: range {shown(item)} ends below its start")
            if colon:
                if re.fullmatch(r"\s*-?[0-9]+\s*", step_text) and int(step_text) < 1:
                    raise VarcheckError(
                        f"d_k {shown(text)}: the step :{step_text.strip()} must be >= 1; "
                        + _ACCEPTED
                    )
                step = _int(step_text, text)
                values = list(range(lo, hi + 1, step))
            else:
                values = []
                v = lo
                while v <= hi:
                    values.append(v)
                    v *= 2
        elif ":" in item:
            raise VarcheckError(f"d_k {shown(text)}: a step ':S' needs a range A..B:S; {_ACCEPTED}")
        else:
            values = [_int(item, text)]
        for v in values:
            if v in seen:
                raise VarcheckError(f"d_k {shown(text)}: d_k={shown(v)} is listed twice")
            seen.add(v)
            out.append(v)
            if len(out) > MAX_VALUES:
                raise VarcheckError(f"d_k {shown(text)} names more than {MAX_VALUES} values")
    return out


def resolve_dks(dk: int | str | Iterable[int]) -> list[int]:
    """d_k values from a spec string (see :func:`parse_dk`), one int, or an iterable of ints."""
    if isinstance(dk, str):
        return parse_dk(dk)
    if isinstance(dk, Iterable):
        values = list(dk)
    elif isinstance(dk, numbers.Integral) and not isinstance(dk, bool):
        values = [dk]
    else:  # None, a float, a bool: a TypeError, as list(dk) gave (probe_sweep words it)
        raise TypeError(f"dk must be a d_k, a range or a list of d_k, got {shown(dk)}")
    if not values:
        raise VarcheckError("dk must name at least one value")
    if len(values) > MAX_VALUES:
        raise VarcheckError(f"dk names {len(values)} values; at most {MAX_VALUES} are accepted")
    values = [
        int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v for v in values
    ]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_DK:
            raise VarcheckError(f"dk must be whole numbers in 1..{MAX_DK}, got {shown(v)}")
    if len(set(values)) != len(values):
        raise VarcheckError(f"dk lists a value twice: {shown(values)}")
    return values
