"""Python configuration modules read as text, never imported or run: the values of their
module-level assignments and calls, as far as they are literals or calls of names this package
knows (``crontab(minute=0)``, ``timedelta(hours=1)``, ``datetime(2027, 1, 1)``).

Anything else (a variable computed at import time, a function call of the user's) is
:class:`NotLiteralError`: the importer says it could not read that entry without running code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from cronwheel.importers.report import UnreadableInputError


class NotLiteralError(ValueError):
    """An expression whose value needs the module to run."""


@dataclass(frozen=True)
class CallValue:
    """A call of a known name: ``crontab(minute="*/15")`` is ``CallValue("crontab", (), {...})``."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def parse(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as error:
        raise UnreadableInputError(f"not valid Python: line {error.lineno}: {error.msg}") from None


def dotted(node: ast.expr) -> str | None:
    """``app.conf.beat_schedule`` of an attribute chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def value(node: ast.expr, known: frozenset[str], names: dict[str, Any] | None = None) -> Any:
    """The value of ``node``: literals, containers of values, ``-x``, calls of a name in
    ``known`` (``timedelta(...)``, ``CronTrigger.from_crontab(...)`` by their last part), and
    names bound to values in ``names``."""
    names = names or {}
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = value(node.operand, known, names)
        if isinstance(inner, int | float):
            return -inner
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [value(item, known, names) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise NotLiteralError("a ** in a dict")
        return {
            value(k, known, names): value(v, known, names)
            for k, v in zip(node.keys, node.values, strict=True)
            if k
        }
    if isinstance(node, ast.Call):
        return _call(node, known, names)
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    raise NotLiteralError(ast.unparse(node))


def _call(node: ast.Call, known: frozenset[str], names: dict[str, Any]) -> CallValue:
    name = dotted(node.func)
    short = None if name is None else name.rsplit(".", 1)[-1]
    if name is not None and name.endswith("CronTrigger.from_crontab"):
        short = "from_crontab"
    if short not in known or any(isinstance(arg, ast.Starred) for arg in node.args):
        raise NotLiteralError(ast.unparse(node))
    kwargs = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise NotLiteralError(ast.unparse(node))
        kwargs[keyword.arg] = value(keyword.value, known, names)
    assert short is not None
    return CallValue(short, tuple(value(arg, known, names) for arg in node.args), kwargs)
