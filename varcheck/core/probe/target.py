"""A user's attention kernel, by name or as a callable, with its bound keyword arguments.

Loading is :mod:`varcheck.core.user_code`'s (``MODULE:FUNCTION`` and ``file.py:FUNCTION``, the
current directory searched first, bound arguments, one-line errors); only the call differs: a
kernel is called as ``fn(q, k, v, **args)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..user_code import Kind, UserFunction, as_function

__all__ = ["KernelTarget", "as_kernel", "KERNEL", "PASSED"]

#: What varcheck passes to a kernel on every call.
KERNEL = Kind("kernel", ("q", "k", "v"))
PASSED = KERNEL.passed


@dataclass(frozen=True)
class KernelTarget(UserFunction):
    """An attention kernel ``fn(q, k, v, **args)`` and how to name it.

    Attributes
    ----------
    by_name : bool
        Whether it was loaded by name (so that a command line can load it again); the other
        attributes are :class:`~varcheck.core.user_code.UserFunction`'s.
    """

    KIND: ClassVar[Kind] = KERNEL

    by_name: bool = False

    def __call__(self, q: Any, k: Any, v: Any) -> Any:  # type: ignore[override]
        return self.fn(q, k, v, **dict(self.args))


def as_kernel(
    obj: Any, args: Mapping[str, Any] | None = None, *, base: str | None = None
) -> KernelTarget:
    """A :class:`KernelTarget` from a callable, a ``"module:function"`` name or a target.

    ``args`` are bound to every call (added to those of a given :class:`KernelTarget`); a
    relative ``file.py`` is read from ``base`` when given.
    """
    kernel = as_function(obj, args, cls=KernelTarget, base=base)
    by_name = isinstance(obj, str) or (isinstance(obj, KernelTarget) and obj.by_name)
    return dataclasses.replace(kernel, by_name=by_name)
