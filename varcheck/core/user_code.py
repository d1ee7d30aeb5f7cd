"""A user's function (a sampler, a kernel), by name or as a callable, with its bound keyword
arguments.

``MODULE:FUNCTION`` imports a module (the current directory is searched first, as with
``python -m``); ``path/to/file.py:FUNCTION`` loads a file, which may import modules next to it.
``FUNCTION`` may be dotted (``Layer.sample``). Every failure is one :class:`VarcheckError` line
naming the target and what is wrong; the user's own exception is chained to it (``--debug``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from ..errors import VarcheckError

__all__ = [
    "Kind",
    "SAMPLER",
    "takes_batch",
    "UserFunction",
    "UserSampler",
    "as_function",
    "as_sampler",
    "load_function",
    "load_sampler",
    "parse_sampler_arg",
    "call_user",
    "first_line",
    "MAX_SOURCE_BYTES",
]

#: The largest sampler file read (a source file, not data).
MAX_SOURCE_BYTES = 10 * 2**20

_FORM = "give MODULE:FUNCTION or path/to/file.py:FUNCTION"

#: A user's function of some kind (a sampler, a kernel).
F = TypeVar("F", bound="UserFunction")

#: Prefix of the module names under which users' files are loaded.
_FILE_MODULE = "varcheck_user_"


def _cut(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _tail(text: str, width: int = 60) -> str:
    """A long target or path cut at its start: its end names the file and function."""
    return text if len(text) <= width else "…" + text[1 - width :]


def _shown_path(path: str | None) -> str:
    """A file's path relative to the working directory when it lies below it."""
    if path is None:
        return "?"
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


#: Characters of a user's exception message kept in the one-line error: enough for a
#: framework's own advice ("... Use Tensor.cpu() to copy the tensor to host memory first.").
MESSAGE_CHARS = 160


def first_line(exc: BaseException) -> str:
    """``": "`` and the first line of an exception's message (cut to :data:`MESSAGE_CHARS`),
    or ``""``."""
    try:
        lines = str(exc).strip().splitlines()
    except BaseException as inner:  # noqa: BLE001 - some errors cannot even say what they are
        _reraise_interrupt(inner)
        return ""
    return f": {_cut(lines[0], MESSAGE_CHARS)}" if lines else ""


def _reraise_interrupt(exc: BaseException) -> None:
    """Raise Ctrl-C or SIGTERM again if ``exc`` is one, or is a group that holds one.

    Everything else a user's code raises is its failure, whatever its class: ``SystemExit``,
    ``GeneratorExit`` or a class derived from ``BaseException`` directly are one line (exit 2)
    like any ``Exception``; only an interrupt stops the run and keeps what it found.
    """
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    if isinstance(exc, BaseExceptionGroup):
        held = exc.subgroup(lambda e: isinstance(e, KeyboardInterrupt))
        while isinstance(held, BaseExceptionGroup):
            held = held.exceptions[0]
        if held is not None:
            raise held from exc


class ReturnedTuple(VarcheckError):
    """A user's function returned a tuple of arrays (``(out, weights)``) where one was wanted."""


def _is_array(x: Any) -> bool:
    """An array, a tensor or a list: something with elements, not a number."""
    ndim = getattr(x, "ndim", 0)
    return isinstance(x, list) or (isinstance(ndim, int) and ndim > 0)


def call_user(
    fn: Callable[..., Any], *args: Any, what: str, one_array: str | None = None
) -> tuple[Any, Any]:
    """Call a user's function: what it returned, and that as a numpy array.

    Any failure of the user's code, and a return value numpy cannot read as an array, is one
    :class:`~varcheck.errors.VarcheckError` line naming ``what`` (``"sampler NAME"``,
    ``"kernel NAME"``); the caller checks the array's kind, shape and values. With
    ``one_array`` (what to return instead), a tuple of arrays (``(out, weights)``) is refused
    as such, not read as one stacked array of the wrong shape.
    """
    import numpy as np

    from .arrays import read_returned

    try:
        out = fn(*args)
    except BaseException as exc:  # the user's code: any failure but an interrupt is one line
        _reraise_interrupt(exc)
        raise VarcheckError(f"{what} raised {_class_name(exc)}{first_line(exc)}") from exc
    if one_array and isinstance(out, tuple) and any(_is_array(x) for x in out):
        count = f"{len(out)} array" + ("" if len(out) == 1 else "s")
        raise ReturnedTuple(f"{what} returned a tuple of {count}; {one_array}")
    try:
        return out, np.asarray(read_returned(out))  # bfloat16 and DLPack read as well
    except BaseException as exc:  # e.g. a tensor that needs .detach() or lives on a GPU
        _reraise_interrupt(exc)
        hint = "; return t.detach().cpu() (or .numpy()) instead" if _is_tensor(out) else ""
        raise VarcheckError(
            f"{what} returned a {_class_name(out)}, which numpy cannot read as an "
            f"array of numbers{first_line(exc)}{hint}"
        ) from exc


def _class_name(obj: object) -> str:
    """The name of ``obj``'s class, even when the class hides or spoils ``__name__``."""
    name = getattr(type(obj), "__name__", None)
    return name if isinstance(name, str) else "object"


def _is_tensor(out: object) -> bool:
    """A framework's tensor (it has ``detach`` and ``cpu``), asked without trusting its
    attribute lookup (a hostile ``__getattr__`` may raise anything)."""
    try:
        return hasattr(out, "detach") and hasattr(out, "cpu")
    except BaseException as exc:  # noqa: BLE001
        _reraise_interrupt(exc)
        return False


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


#: Types a bound argument may have: what JSON output records exactly (tuples become arrays).
_PLAIN = (bool, int, float, str, type(None))


def _json_safe(value: Any, depth: int = 0) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, _PLAIN):
        return True
    if depth > 20:
        return False
    if isinstance(value, list | tuple):
        return all(_json_safe(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_safe(v, depth + 1) for k, v in value.items())
    return False


@dataclass(frozen=True)
class Kind:
    """What a user's function is for: the word errors use, the arguments varcheck passes, and
    the keyword that, when the function has it, makes it vectorised (``None``: no such form)."""

    word: str
    passed: tuple[str, ...]
    batch: str | None = None

    @property
    def call(self) -> str:
        return "fn(" + ", ".join(self.passed) + ")"


SAMPLER = Kind("sampler", ("rng", "dk"), batch="calls")


def takes_batch(fn: Callable[..., Any], kind: Kind = SAMPLER) -> bool:
    """Whether ``fn`` is the vectorised form of its kind: it has a parameter named
    ``kind.batch`` that can be passed by keyword (a sampler's ``calls``, docs/own-code.md)."""
    if kind.batch is None:
        return False
    try:
        parameter = inspect.signature(fn).parameters.get(kind.batch)
    except (TypeError, ValueError):  # no signature to read: the plain form
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


@dataclass(frozen=True)
class UserFunction:
    """A user's function ``fn(*passed, **args)`` and how to name it.

    Attributes
    ----------
    target : str
        ``module:function``, ``file.py:function``, or the callable's qualified name.
    args : tuple of (str, object)
        Keyword arguments bound to every call, sorted by name.
    fn : callable
        The function itself (not compared, not shown).
    """

    KIND: ClassVar[Kind] = SAMPLER

    target: str
    args: tuple[tuple[str, Any], ...] = ()
    fn: Callable[..., Any] = field(default=print, compare=False, repr=False)

    def __call__(self, *passed: Any) -> Any:
        return self.fn(*passed, **dict(self.args))

    @property
    def label(self) -> str:
        """``target`` with its arguments, e.g. ``attention.py:logits(heads=4)``."""
        if not self.args:
            return self.target
        return f"{self.target}(" + ", ".join(f"{k}={v!r}" for k, v in self.args) + ")"

    def as_dict(self) -> dict[str, Any]:
        """``{"target": ..., "args": {...}}`` for machine-readable output."""
        return {"target": self.target, "args": dict(self.args)}


@dataclass(frozen=True)
class UserSampler(UserFunction):
    """A sampler ``fn(rng, dk, **args)``: the values of one independent run of the user's code;
    a vectorised one, ``fn(rng, dk, calls, **args)``, returns ``calls`` runs at once."""

    def __call__(self, rng: Any, dk: int, calls: int | None = None) -> Any:
        if calls is None:
            return self.fn(rng, dk, **dict(self.args))
        return self.fn(rng, dk, calls=calls, **dict(self.args))

    @functools.cached_property
    def vectorized(self) -> bool:
        """Whether the sampler takes ``calls`` (see :func:`takes_batch`)."""
        return takes_batch(self.fn, self.KIND)


def _check_args(
    target: str, args: Mapping[str, Any] | None, kind: Kind = SAMPLER
) -> tuple[tuple[str, Any], ...]:
    word = kind.word
    if args is None:
        return ()
    if not isinstance(args, Mapping):
        raise VarcheckError(f"{word} {target}: args must be a table of name = value")
    for key in args:
        if not isinstance(key, str) or not key.isidentifier():
            raise VarcheckError(
                f"{word} {target}: argument name {_cut(repr(key))} is not a Python identifier"
            )
        if key in kind.passed:
            raise VarcheckError(
                f"{word} {target}: {key!r} is passed by varcheck on every call; "
                "it cannot be bound as an argument"
            )
        if not _json_safe(args[key]):
            raise VarcheckError(
                f"{word} {_tail(target)}: argument {key} = {_cut(repr(args[key]))} is "
                f"{_article(type(args[key]).__name__)}; bound arguments are finite numbers, "
                "strings, True/False/None, and lists or tables of them (what the output records)"
            )
    return tuple(sorted(args.items()))


def _check_signature(
    target: str, fn: Callable[..., Any], args: tuple[tuple[str, Any], ...], kind: Kind = SAMPLER
) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: the first call tells
        return
    batch: dict[str, None] = {}
    if takes_batch(fn, kind):
        assert kind.batch is not None
        if kind.batch in dict(args):
            raise VarcheckError(
                f"{kind.word} {target}: {kind.batch!r} is passed by varcheck to a vectorised "
                f"{kind.word} (one that takes {kind.batch}); it cannot be bound as an argument"
            )
        batch = {kind.batch: None}
    try:
        sig.bind(*([None] * len(kind.passed)), **batch, **dict(args))
    except TypeError as exc:
        given = ", ".join([*kind.passed, *batch, *(k for k, _ in args)])
        raise VarcheckError(
            f"{kind.word} {target} cannot be called as fn({given}): {exc}; a {kind.word} takes "
            f"({', '.join(kind.passed)}) and the bound arguments"
        ) from None
    first = list(sig.parameters)[: len(kind.passed)]
    if sorted(first) == sorted(kind.passed) and first != list(kind.passed):
        raise VarcheckError(
            f"{kind.word} {target} takes ({', '.join(first)}); varcheck passes "
            f"({', '.join(kind.passed)}) in that order"
        )


def as_sampler(obj: Any, args: Mapping[str, Any] | None = None) -> UserSampler:
    """A :class:`UserSampler` from a callable, a ``"module:function"`` name or a sampler.

    ``args`` are bound to every call (added to those of a given :class:`UserSampler`).
    """
    return as_function(obj, args, cls=UserSampler)


def as_function(
    obj: Any, args: Mapping[str, Any] | None = None, *, cls: type[F], base: str | None = None
) -> F:
    """A ``cls`` (a :class:`UserFunction`) from a callable, a name or another of its kind.

    ``args`` are bound to every call (added to those already bound); a name is loaded by
    :func:`load_function`, a relative file from ``base`` when given.
    """
    kind = cls.KIND
    if isinstance(obj, UserFunction):
        bound = _check_args(obj.target, {**dict(obj.args), **dict(args or {})}, kind)
        _check_signature(obj.target, obj.fn, bound, kind)
        return cls(obj.target, bound, obj.fn)
    if isinstance(obj, str):
        return load_function(obj, args, cls=cls, base=base)
    if not callable(obj):
        raise VarcheckError(
            f"{kind.word} must be a callable {kind.call} or a name ({_FORM}), got {_cut(repr(obj))}"
        )
    if _plain_partial(obj, kind):
        # the bound keywords become the function's arguments, named in every output
        return as_function(obj.func, {**obj.keywords, **dict(args or {})}, cls=cls)
    target = _callable_name(obj)
    bound = _check_args(target, args, kind)
    _check_signature(target, obj, bound, kind)
    return cls(target, bound, obj)


def _callable_name(obj: Any) -> str:
    """``module:qualname`` of a callable (a file loaded by name: its path), or its type."""
    inner = getattr(obj, "func", obj)  # functools.partial shows the function it wraps
    target = getattr(inner, "__qualname__", None) or type(obj).__name__
    module = getattr(inner, "__module__", None)
    if module and module.startswith(_FILE_MODULE) and module in sys.modules:
        # loaded from a file by name: name it by that file, as the command line would
        return f"{_shown_path(sys.modules[module].__file__)}:{target}"
    if module and module not in ("__main__", "builtins"):
        return f"{module}:{target}"
    return target


def _plain_partial(obj: Any, kind: Kind) -> bool:
    """A ``functools.partial`` of keywords alone, each one an argument the output can record."""
    return (
        isinstance(obj, functools.partial)
        and not obj.args
        and bool(obj.keywords)
        and all(_json_safe(v) for v in obj.keywords.values())
        and not (set(kind.passed) & set(obj.keywords))
    )


def load_sampler(
    target: str, args: Mapping[str, Any] | None = None, *, base: str | None = None
) -> UserSampler:
    """Import ``MODULE:FUNCTION`` or load ``path/to/file.py:FUNCTION``, checking it is callable
    with ``(rng, dk, **args)``; a relative file path is read from ``base`` when given."""
    return load_function(target, args, cls=UserSampler, base=base)


def load_function(
    target: str, args: Mapping[str, Any] | None = None, *, cls: type[F], base: str | None = None
) -> F:
    """Import ``MODULE:FUNCTION`` or load ``path/to/file.py:FUNCTION`` as a ``cls``, checking it
    is callable with the arguments varcheck passes and ``args``."""
    word = cls.KIND.word
    if not isinstance(target, str) or ":" not in target.strip(":"):
        raise VarcheckError(f"{word} {_cut(repr(target))} has no ':FUNCTION'; {_FORM}")
    where, _, attr = target.rpartition(":")
    if not where or not attr:
        raise VarcheckError(f"{word} {_cut(repr(target))}: {_FORM}")
    is_file = where.endswith(".py") or "/" in where or os.sep in where
    if is_file:
        obj: Any = _load_file(target, os.path.join(base, where) if base else where, word)
    else:
        obj = _import_module(target, where, word)
    for part in attr.split("."):
        if not part.isidentifier():
            raise VarcheckError(f"{word} {_tail(target)}: {part!r} is not a Python name")
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise VarcheckError(f"{word} {_tail(target)}: {where} has no {attr!r}") from None
    if not callable(obj):
        raise VarcheckError(
            f"{word} {_tail(target)}: {attr} is {_article(type(obj).__name__)}, not a function"
        )
    bound = _check_args(target, args, cls.KIND)
    _check_signature(target, obj, bound, cls.KIND)
    return cls(target, bound, obj)


@contextlib.contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while the user's code is imported."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _run_import(target: str, what: str, load: Callable[[], Any], word: str) -> Any:
    """Run the user's import (its prints go to stderr: stdout holds the results); its failures
    become one line."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return load()
    except VarcheckError:
        raise
    except SyntaxError as exc:
        raise VarcheckError(
            f"{word} {_tail(target)}: {what} has a syntax error at line {exc.lineno}"
        ) from exc
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        try:
            first = (str(exc).strip().splitlines() or [""])[0]
        except Exception:  # noqa: BLE001 - an exception that cannot say what it is
            first = ""
        # a file's code is loaded as a top-level module: a relative import has no package
        relative = isinstance(exc, ImportError) and "relative import" in first
        raise VarcheckError(
            f"{word} {_tail(target)}: importing {what} raised {type(exc).__name__}"
            + (f": {_cut(first)}" if first else "")
            + (
                " (use the package.module:FUNCTION form for code inside a package)"
                if relative
                else ""
            )
        ) from exc


def _import_module(target: str, name: str, word: str) -> Any:
    if not all(part.isidentifier() for part in name.split(".")):
        raise VarcheckError(f"{word} {_tail(target)}: {name!r} is not a module name; {_FORM}")

    def load() -> Any:
        try:
            with _on_path(os.getcwd()):
                return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                raise VarcheckError(
                    f"{word} {_tail(target)}: no module named {exc.name!r} (searched the "
                    "current directory and sys.path)"
                ) from None
            raise

    return _run_import(target, f"module {name}", load, word)


def _load_file(target: str, path: str, word: str) -> Any:
    if not os.path.exists(path):
        raise VarcheckError(f"{word} {_tail(target)}: file {_tail(path)} not found")
    if not os.path.isfile(path):
        raise VarcheckError(f"{word} {_tail(target)}: {_tail(path)} is not a regular file")
    if not path.endswith(".py"):
        raise VarcheckError(f"{word} {_tail(target)}: {_tail(path)} is not a .py file")
    if os.path.getsize(path) > MAX_SOURCE_BYTES:
        raise VarcheckError(
            f"{word} {_tail(target)}: {_tail(path)} is larger than {MAX_SOURCE_BYTES >> 20} MiB"
        )
    full = os.path.abspath(path)
    stem = "".join(c if c.isalnum() else "_" for c in os.path.basename(full)[:-3])
    # the whole path, hashed: names made of its characters alone collide (a/b_c.py, a/b/c.py)
    name = f"{_FILE_MODULE}{stem}_{hashlib.sha256(full.encode()).hexdigest()[:16]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise VarcheckError(f"{word} {_tail(target)}: {_tail(path)} cannot be loaded")
    module = importlib.util.module_from_spec(spec)

    def load() -> Any:
        sys.modules[name] = module  # dataclasses and pickling look their module up here
        try:
            with _on_path(os.path.dirname(full)):
                spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException:
            del sys.modules[name]
            raise
        return module

    return _run_import(target, _tail(path), load, word)


def parse_sampler_arg(text: str, word: str = "sampler") -> tuple[str, Any]:
    """``key=value`` with ``value`` read as a Python literal (``4``, ``0.5``, ``'relu'``,
    ``[1, 2]``, ``True``); errors name a ``word`` argument (``sampler``, ``kernel``)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise VarcheckError(f"{word} argument {_cut(repr(text))}: give KEY=VALUE, e.g. heads=4")
    try:
        return key, ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise VarcheckError(
            f"{word} argument {_cut(repr(text))}: the value is not a Python literal (a number, "
            "True/False/None, a quoted string such as \"act='relu'\", a list or a dict)"
        ) from None
