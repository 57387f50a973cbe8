"""Whatever a field of the source holds, an importer answers with jobs and notes, or refuses the
input as unreadable: never another exception (which the command would show as a traceback)."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.importers import celery, dkron, kubernetes
from cronwheel.importers.report import ImportResult, UnreadableInputError

from .support import OPTIONS, fixture

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
DKRON = json.loads(fixture("dkron_jobs.json"))
KUBERNETES = list(yaml.safe_load_all(fixture("cronjobs.yaml")))
BEAT = yaml.safe_load(fixture("celery_beat.yaml"))


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a document, down to its leaves."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    return [path for key, item in items for path in [(*prefix, key), *paths(item, (*prefix, key))]]


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(document)
    place = changed
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return changed


def answers(convert: Any, text: str) -> None:
    with contextlib.suppress(UnreadableInputError):
        assert isinstance(convert(text, OPTIONS), ImportResult)


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(paths(DKRON)), value=VALUES)
def test_dkron_fields(path: tuple[Any, ...], value: Any) -> None:
    answers(dkron.convert, json.dumps(replaced(DKRON, path, value)))


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(paths(KUBERNETES)), value=VALUES)
def test_kubernetes_fields(path: tuple[Any, ...], value: Any) -> None:
    answers(kubernetes.convert, yaml.safe_dump_all(replaced(KUBERNETES, path, value)))


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(paths(BEAT)), value=VALUES)
def test_celery_data_fields(path: tuple[Any, ...], value: Any) -> None:
    answers(
        lambda text, options: celery.convert(text, options, python=False),
        yaml.safe_dump(replaced(BEAT, path, value)),
    )
