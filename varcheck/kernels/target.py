"""A user's attention kernel, by name or as a callable, with its bound keyword arguments.

Loading reuses :mod:`varcheck.core.user_code` (``MODULE:FUNCTION`` and ``file.py:FUNCTION``,
the current directory searched first, one-line errors); only the call differs: a kernel is
called as ``fn(q, k, v, **args)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import user_code
from ..errors import VarcheckError

__all__ = ["KernelTarget", "as_kernel", "PASSED"]

#: the arguments varcheck passes on every call
PASSED = ("q", "k", "v")
_FORM = "give MODULE:FUNCTION or path/to/file.py:FUNCTION"


def _cut(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class KernelTarget:
    """An attention kernel ``fn(q, k, v, **args)`` and how to name it.

    Attributes
    ----------
    target : str
        ``module:function``, ``file.py:function``, or the callable's qualified name.
    args : tuple of (str, object)
        Keyword arguments bound to every call, sorted by name.
    fn : callable
        The function itself (not compared, not shown).
    by_name : bool
        Whether it was loaded by name (so that a command line can load it again).
    """

    target: str
    args: tuple[tuple[str, Any], ...] = ()
    fn: Callable[..., Any] = field(default=print, compare=False, repr=False)
    by_name: bool = False

    def __call__(self, q: Any, k: Any, v: Any) -> Any:
        return self.fn(q, k, v, **dict(self.args))

    @property
    def label(self) -> str:
        """``target`` with its arguments, e.g. ``kernels.py:attention(layer=2)``."""
        if not self.args:
            return self.target
        return f"{self.target}(" + ", ".join(f"{k}={v!r}" for k, v in self.args) + ")"

    def as_dict(self) -> dict[str, Any]:
        """``{"target": ..., "args": {...}}`` for machine-readable output."""
        return {"target": self.target, "args": dict(self.args)}


def _as_kernel_error(exc: VarcheckError) -> VarcheckError:
    """core.user_code's message about a *sampler*, reworded for a kernel."""
    text = str(exc)
    if text.startswith("sampler "):
        text = "kernel " + text[len("sampler ") :]
    return VarcheckError(text)


def _check_args(target: str, args: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    if args is None:
        return ()
    if not isinstance(args, Mapping):
        raise VarcheckError(f"kernel {target}: args must be a table of name = value")
    for key in args:
        if not isinstance(key, str) or not key.isidentifier():
            raise VarcheckError(
                f"kernel {target}: argument name {_cut(repr(key))} is not a Python identifier"
            )
        if key in PASSED:
            raise VarcheckError(
                f"kernel {target}: {key!r} is passed by varcheck on every call; "
                "it cannot be bound as an argument"
            )
    return tuple(sorted(args.items()))


def _check_signature(target: str, fn: Callable[..., Any], args: tuple[tuple[str, Any], ...]):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: the first call tells
        return
    try:
        sig.bind(None, None, None, **dict(args))
    except TypeError as exc:
        given = ", ".join([*PASSED, *(k for k, _ in args)])
        raise VarcheckError(
            f"kernel {target} cannot be called as fn({given}): {exc}; a kernel takes "
            "(q, k, v) and the bound arguments"
        ) from None


def _load(target: str, base: str | None = None) -> Any:
    """The object ``MODULE:FUNCTION`` / ``file.py:FUNCTION`` names (core.user_code's loading);
    a relative file path is read from ``base`` when given (a claim file's folder)."""
    if not isinstance(target, str) or ":" not in target.strip(":"):
        raise VarcheckError(f"kernel {_cut(repr(target))} has no ':FUNCTION'; {_FORM}")
    where, _, attr = target.rpartition(":")
    if not where or not attr:
        raise VarcheckError(f"kernel {_cut(repr(target))}: {_FORM}")
    import os

    try:
        if where.endswith(".py") or "/" in where or os.sep in where:
            path = os.path.join(base, where) if base else where
            obj: Any = user_code._load_file(target, path)
        else:
            obj = user_code._import_module(target, where)
    except VarcheckError as exc:
        raise _as_kernel_error(exc) from exc.__cause__
    for part in attr.split("."):
        if not part.isidentifier():
            raise VarcheckError(f"kernel {_cut(target)}: {part!r} is not a Python name")
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise VarcheckError(f"kernel {_cut(target)}: {where} has no {attr!r}") from None
    if not callable(obj):
        raise VarcheckError(
            f"kernel {_cut(target)}: {attr} is a {type(obj).__name__}, not a function"
        )
    return obj


def as_kernel(
    obj: Any, args: Mapping[str, Any] | None = None, *, base: str | None = None
) -> KernelTarget:
    """A :class:`KernelTarget` from a callable, a ``"module:function"`` name or a target.

    ``args`` are bound to every call (added to those of a given :class:`KernelTarget`); a
    relative ``file.py`` is read from ``base`` when given.
    """
    if isinstance(obj, KernelTarget):
        bound = _check_args(obj.target, {**dict(obj.args), **dict(args or {})})
        _check_signature(obj.target, obj.fn, bound)
        return KernelTarget(obj.target, bound, obj.fn, obj.by_name)
    if isinstance(obj, str):
        fn, target, by_name = _load(obj, base), obj, True
    elif callable(obj):
        inner = getattr(obj, "func", obj)  # functools.partial shows the function it wraps
        target = getattr(inner, "__qualname__", None) or type(obj).__name__
        module = getattr(inner, "__module__", None)
        if module and module not in ("__main__", "builtins"):
            target = f"{module}:{target}"
        fn, by_name = obj, False
    else:
        raise VarcheckError(
            f"kernel must be a callable fn(q, k, v) or a name ({_FORM}), got {_cut(repr(obj))}"
        )
    bound = _check_args(target, args)
    _check_signature(target, fn, bound)
    return KernelTarget(target, bound, fn, by_name)
