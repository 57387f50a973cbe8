"""What ``kubectl kustomize DIR`` makes of deploy/kubernetes, without a kustomize binary: the
resources of a kustomization (files, and directories holding a kustomization, recursively) with
its JSON patches (RFC 6902) applied to the resources their target selects.

Only what deploy/kubernetes uses is understood, and anything else is refused (an unknown field of a
kustomization, a target selector or a patch operation beyond these), so that the tests never check
a rendering that kustomize would not produce. Where a kustomize is installed, the tests also
compare this rendering with its own (test_manifests.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]

_KUSTOMIZATION = {"apiVersion", "kind", "resources", "patches"}
_PATCH = {"path", "target"}
_TARGET = {"kind", "name"}


class UnsupportedError(Exception):
    """The kustomization uses what this renderer does not model."""


def render(directory: Path) -> list[Resource]:
    """The resources ``kustomize build directory`` outputs (in the order of the files)."""
    kustomization = _load_one(directory / "kustomization.yaml")
    unknown = set(kustomization) - _KUSTOMIZATION
    if unknown:
        raise UnsupportedError(f"{directory}: kustomization fields {sorted(unknown)} are not modelled")
    resources: list[Resource] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            resources += render(path)
        else:
            resources += [document for document in yaml.safe_load_all(path.read_text()) if document]
    for patch in kustomization.get("patches", []):
        _apply(directory, patch, resources)
    return resources


def _load_one(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    if not isinstance(loaded, dict):
        raise UnsupportedError(f"{path}: not a mapping")
    return loaded


def _apply(directory: Path, patch: dict[str, Any], resources: list[Resource]) -> None:
    if set(patch) - _PATCH or "path" not in patch or "target" not in patch:
        raise UnsupportedError(f"{directory}: a patch needs exactly path and target, not {sorted(patch)}")
    target = patch["target"]
    if set(target) - _TARGET:
        raise UnsupportedError(
            f"{directory}: target selectors {sorted(set(target) - _TARGET)} are not modelled"
        )
    operations = yaml.safe_load((directory / patch["path"]).read_text())
    if not isinstance(operations, list):
        raise UnsupportedError(f"{patch['path']}: only JSON patches (a list of operations) are modelled")
    selected = [
        resource
        for resource in resources
        if all(
            (resource["kind"] if key == "kind" else resource["metadata"]["name"]) == value
            for key, value in target.items()
        )
    ]
    if not selected:
        raise UnsupportedError(f"{patch['path']}: its target {target} selects no resource")
    for resource in selected:
        for operation in operations:
            _operate(resource, operation)


def _operate(resource: Resource, operation: dict[str, Any]) -> None:
    if operation.get("op") not in ("add", "replace") or set(operation) != {"op", "path", "value"}:
        raise UnsupportedError(f"JSON patch operation {operation!r} is not modelled (add, replace)")
    *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]]
    node: Any = resource
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    value = copy.deepcopy(operation["value"])
    if isinstance(node, list):
        if last == "-" and operation["op"] == "add":
            node.append(value)
        elif operation["op"] == "add":
            node.insert(int(last), value)
        else:
            node[int(last)] = value
    elif operation["op"] == "replace" and last not in node:
        raise UnsupportedError(f"replace of {operation['path']}: nothing there")
    else:
        node[last] = value
