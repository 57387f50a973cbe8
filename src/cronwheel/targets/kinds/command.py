"""The ``command`` target kind: a program run on the worker (environment values may refer to
team secrets)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from cronwheel.model import CommandTarget
from cronwheel.targets.checks import check_command
from cronwheel.targets.kinds.base import Flag, Kind, values_from_json, values_to_json


def to_json(target: CommandTarget) -> dict[str, Any]:
    return {
        "type": "command",
        "argv": list(target.argv),
        "env": values_to_json(target.env),
        "cwd": target.cwd,
    }


def from_json(data: Mapping[str, Any]) -> CommandTarget:
    return CommandTarget(
        argv=tuple(str(arg) for arg in data["argv"]), env=values_from_json(data["env"]), cwd=data["cwd"]
    )


def summary(target: Mapping[str, Any]) -> str:
    return "command " + shlex.join(target["argv"])


KIND = Kind(
    tag="command",
    record=CommandTarget,
    check=check_command,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    pairs="env",
    reserved=True,
    refused_field="target.type",  # refused as a kind, not for its argv
    flags=(Flag("--command", "command", "Target: run this command line.", metavar="CMD"),),
)
