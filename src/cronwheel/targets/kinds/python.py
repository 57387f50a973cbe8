"""The ``python`` target kind: a function of the worker's allowed modules, called in process."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import dotted
from cronwheel.targets.kinds.base import Flag, Kind


@dataclass(frozen=True, slots=True)
class PythonTarget:
    function: str  # "package.module:function"
    type: Literal["python"] = "python"


def check_python(target: PythonTarget) -> None:
    """``package.module:function``: a dotted module path and one function name, as the API's
    schema says. An attribute path (``mod:helper.attr``) would reach whatever ``mod`` imported,
    and a ``__dunder__`` name what every module has (:mod:`cronwheel.targets.python`)."""
    module, sep, function = target.function.partition(":")
    dunder = function.startswith("__") and function.endswith("__")
    if not sep or not dotted(module) or not function.isidentifier() or dunder:
        raise InvalidInputError(
            "target.function must be 'package.module:function' (a dotted module path, then one function name)"
        )


def to_json(target: PythonTarget) -> dict[str, Any]:
    return {"type": "python", "function": target.function}


def from_json(data: Mapping[str, Any]) -> PythonTarget:
    return PythonTarget(function=data["function"])


def summary(target: Mapping[str, Any]) -> str:
    return f"python {target['function']}"


KIND = Kind(
    tag="python",
    record=PythonTarget,
    check=check_python,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    reserved=True,
    refused_field="target.function",
    flags=(Flag("--python", "function", "Target: call this function.", metavar="MOD:FUNC"),),
)
