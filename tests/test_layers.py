"""The import map stays one-way: every import between the top-level units of ``cronwheel`` runs
down the layers below, units of one layer never import each other, and no module imports itself
back through others (no circle, at any depth). Imports under ``TYPE_CHECKING`` and inside
functions count: a circle there is still a circle in the design.

``LAYERS`` is the architecture, bottom first: a new package goes where its imports put it.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "cronwheel"

LAYERS: list[set[str]] = [
    {"errors"},
    {"settings"},  # how a settings field is given on the command line
    {"clock", "failpoints", "receiver", "retrying", "schedule", "tls", "redaction", "v1"},
    {"targets"},  # the target kinds: records, checks, JSON, secret references
    {"importers"},  # other schedulers' job definitions as apply files (pure)
    {"model", "limits", "auth"},  # records and pure rules
    {"lateness", "retention", "telemetry", "audit", "client"},
    {"notifications"},  # rules the store applies inside its transactions
    {"store"},  # the metadata store's port and backends
    # the trigger queue and the coordinator: ports and backends, one of each on the store's database
    {"queue", "coordinator"},
    {"secrets"},
    {"scheduler", "worker"},  # the roles
    {"notifier", "jobs", "cluster"},
    {"api"},
    {"grpc_api"},
    {"node"},  # wires every role and backend
    {"cli"},
    {"__main__"},
]
LAYER = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path) -> Iterator[str]:
    """The cronwheel modules ``name`` imports (``from package import module`` is the module)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                yield f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module


def known(target: str) -> str | None:
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in MODULES and target != "cronwheel" else None


@functools.cache
def import_map() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for target in imported(name, path):
            module = known(target)
            if module is not None and module != name:
                edges[name].add(module)
    return edges


def unit(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_unit_has_a_layer() -> None:
    units = {unit(name) for name in MODULES if name != "cronwheel"}
    assert units - LAYER.keys() == set(), "put each new package or loose module in LAYERS"
    assert LAYER.keys() - units == set(), "LAYERS names a unit that is gone"


def upward(edges: dict[str, set[str]]) -> list[str]:
    """The imports between units that do not run down a layer."""
    return sorted(
        f"{source} -> {target} (layers {LAYER[unit(source)]} -> {LAYER[unit(target)]})"
        for source, targets in edges.items()
        for target in targets
        if unit(source) != unit(target) and LAYER[unit(target)] >= LAYER[unit(source)]
    )


def test_imports_run_down_the_layers() -> None:
    assert upward(import_map()) == []


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(MODULES):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_imports_itself_back() -> None:
    assert circles(import_map()) == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_circles_are_found(
    edges: dict[str, set[str]], expected: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.MODULES", dict.fromkeys("abcd", PACKAGE))
    assert circles(edges) == expected


def test_upward_and_sideways_imports_are_seen() -> None:
    edges = import_map()
    assert "cronwheel.model" in edges["cronwheel.store.port"]  # the map is read at all
    assert upward({"cronwheel.model": {"cronwheel.store.port"}}) != []
    assert upward({"cronwheel.scheduler.loop": {"cronwheel.worker.loop"}}) != []
    assert upward({"cronwheel.store.port": {"cronwheel.model"}}) == []
