"""The ``command`` target kind: a program run on the worker (environment values may refer to
team secrets)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import MAX_EXEC_BYTES, POINTER_BYTES, c_text, check_reference, exec_string
from cronwheel.targets.kinds.base import Flag, Kind, values_from_json, values_to_json
from cronwheel.targets.values import SecretRef, Value


@dataclass(frozen=True, slots=True)
class CommandTarget:
    argv: tuple[str, ...]
    env: tuple[tuple[str, Value], ...] = ()
    cwd: str | None = None
    type: Literal["command"] = "command"


def check_command(target: CommandTarget) -> None:
    if not target.argv:
        raise InvalidInputError("target.argv must not be empty")
    if not target.argv[0]:
        raise InvalidInputError("target.argv[0] (the program) must not be empty")
    total = 0
    for index, arg in enumerate(target.argv):
        total += exec_string(f"target.argv[{index}]", arg) + POINTER_BYTES
    for name, value in target.env:
        if not name:
            raise InvalidInputError("target.env has an empty variable name")
        field = f"target.env[{name!r}]"
        c_text(f"{field} (the name)", name)
        if "=" in name:
            raise InvalidInputError(f"{field}: a variable name cannot contain '='")
        if isinstance(value, SecretRef):  # measured once resolved, by the worker
            check_reference(field, value)
            continue
        total += exec_string(field, f"{name}={value}") + POINTER_BYTES
    if target.cwd is not None:
        c_text("target.cwd", target.cwd)
        if not os.path.isabs(target.cwd):
            raise InvalidInputError("target.cwd must be an absolute path")
    if total > MAX_EXEC_BYTES:
        raise InvalidInputError(
            f"target.argv and target.env take {total} bytes to start the program; "
            f"at most {MAX_EXEC_BYTES} are accepted"
        )


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
