"""A user's attention kernel, by name or as a callable, with its bound keyword arguments.

Loading is :mod:`varcheck.core.user_code`'s (``MODULE:FUNCTION`` and ``file.py:FUNCTION``, the
current directory searched first, bound arguments, one-line errors); only the call differs: a
kernel is called as ``fn(q, k, v, **args)``. An argument may be an :class:`ArgExpression` in
``dk`` and ``h`` (``scale=1/dk``), evaluated at each d_k (:meth:`KernelTarget.at`).
"""

from __future__ import annotations

import ast
import dataclasses
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import VarcheckError
from ..user_code import Kind, UserFunction, as_function, parse_sampler_arg
from .expectation import evaluate, parse_expression

__all__ = [
    "KernelTarget",
    "ArgExpression",
    "as_kernel",
    "parse_kernel_arg",
    "command_line",
    "KERNEL",
    "PASSED",
]

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

    def __call__(self, q: Any, k: Any, v: Any) -> Any:
        return self.fn(q, k, v, **dict(self.args))

    def at(self, dk: int, h: int) -> KernelTarget:
        """This kernel with its :class:`ArgExpression` arguments evaluated at ``dk`` and ``h``
        (itself when it has none)."""
        if not any(isinstance(v, ArgExpression) for _, v in self.args):
            return self
        args = tuple(
            (k, v.value(dk, h, k) if isinstance(v, ArgExpression) else v) for k, v in self.args
        )
        return dataclasses.replace(self, args=args)


class ArgExpression(str):
    """A kernel argument that is an expression in ``dk`` and ``h`` (``"1/dk"``), evaluated at
    each d_k: ``args={"scale": ArgExpression("1/dk")}`` (``--arg scale=1/dk``).

    It is a string (so that the output records its text) whose ``repr`` is that text. Its value
    is an int when the expression is integer arithmetic (``dk*h``), else a float.
    """

    __slots__ = ("_tree",)
    _tree: ast.Expression

    def __new__(cls, text: str) -> ArgExpression:
        if not isinstance(text, str):
            raise VarcheckError(f"an argument expression must be a string, got {text!r}")
        self = super().__new__(cls, text.strip())
        self._tree = parse_expression(text, "argument expression")
        return self

    def __repr__(self) -> str:
        return str(self)

    def value(self, dk: int, h: int, name: str = "argument") -> int | float:
        out = evaluate(self._tree, dk, h, f"argument {name}={self}")
        if not out == out or out in (float("inf"), float("-inf")):
            raise VarcheckError(f"argument {name}={self} is {out} at d_k={dk}")
        if _integral(self._tree.body) and out.is_integer():
            return int(out)
        return out


def _integral(node: ast.AST) -> bool:
    """Integer arithmetic: whole constants, names, + − ×, and powers by whole constants."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.UnaryOp):
        return _integral(node.operand)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            right = node.right
            if not (isinstance(right, ast.Constant) and isinstance(right.value, int | float)):
                return False
            return _integral(node.left) and right.value >= 0
        return isinstance(node.op, ast.Add | ast.Sub | ast.Mult) and (
            _integral(node.left) and _integral(node.right)
        )
    return False


def parse_kernel_arg(text: str) -> tuple[str, Any]:
    """``key=value`` with ``value`` a Python literal (``4``, ``'relu'``) or, failing that, an
    expression in ``dk`` and ``h`` (``1/dk``: an :class:`ArgExpression`)."""
    try:
        return parse_sampler_arg(text, "kernel")
    except VarcheckError as literal:
        key, sep, value = text.partition("=")
        if not sep or not key.strip().isidentifier():
            raise
        try:
            return key.strip(), ArgExpression(value)
        except VarcheckError:
            raise VarcheckError(
                f"{literal} or an expression in dk and h such as scale=1/dk"
            ) from None


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


def _shell_word(word: str) -> str:
    """``word`` quoted for a POSIX shell, in double quotes when it holds single ones
    (``"dtype='float32'"``, not ``'dtype='"'"'float32'"'"''``)."""
    quoted = shlex.quote(word)
    if quoted == word or "'" not in word or any(c in word for c in '"$`\\!'):
        return quoted
    return f'"{word}"'


def command_line(parts: list[str]) -> str:
    """A command line of ``parts`` (a kernel's ``--arg KEY=VALUE`` as Python reads them back)."""
    return " ".join(_shell_word(p) for p in parts)
