"""The ``python`` target kind: a function of the worker's allowed modules, called in process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronwheel.model import PythonTarget
from cronwheel.targets.checks import check_python
from cronwheel.targets.kinds.base import Flag, Kind


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
