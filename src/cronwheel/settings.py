"""Settings declared once: a field of a settings dataclass says how it appears on the command line.

A field carries an :class:`Option` in its metadata (:func:`option`): the flag, the help, the
roles (``api``, ``scheduler``, ``worker``) it applies to, and how its value is read (a range,
choices, repeatable, an on/off flag). Its default is the field's own and its ``CRONWHEEL_*``
variable is derived from the flag unless named, so neither is written a second time; the command
line (:mod:`cronwheel.cli.options`) derives its options from these fields. A field of another
settings dataclass is walked into when it says so (:func:`nested`). A field without an option is
not one: the secret keys and the SMTP URL are read from the environment only, because options
show in ``ps``.

This module sits at the bottom of the layers: every settings record may use it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

DEFAULT_DATABASE_URL = "sqlite:///cronwheel.db"
"""The store when none is named: the embedded server's SQLite file, in the working directory."""

ENV_PREFIX = "CRONWHEEL_"
API, SCHEDULER, WORKER = "api", "scheduler", "worker"
ROLES = (API, SCHEDULER, WORKER)
EVERY_ROLE = frozenset(ROLES)

_OPTION = "cronwheel.option"
_NESTED = "cronwheel.nested"


@dataclass(frozen=True, slots=True)
class Option:
    """How one settings field is given on the command line.

    ``env``: True derives the variable from the flag (``--max-body-bytes``:
    ``CRONWHEEL_MAX_BODY_BYTES``), a string names it, False: no variable. ``low`` and ``high``
    bound a number (inclusive; None: unbounded). A field whose default is computed at start has
    no default here: its help says what it is."""

    flag: str
    help: str = ""
    roles: frozenset[str] = EVERY_ROLE
    metavar: str | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    multiple: bool = False
    is_flag: bool = False
    env: str | bool = True

    @property
    def envvar(self) -> str | None:
        """The ``CRONWHEEL_*`` variable this option is also read from (None: none)."""
        if isinstance(self.env, str):
            return self.env
        if not self.env:
            return None
        return ENV_PREFIX + self.flag.removeprefix("--").replace("-", "_").upper()

    @property
    def bounded(self) -> bool:
        return self.low is not None or self.high is not None


def option(flag: str, help: str = "", **face: Any) -> dict[str, Any]:
    """The metadata of a field given as ``flag`` (``dataclasses.field(metadata=option(...))``);
    ``face`` holds the other :class:`Option` attributes."""
    return {_OPTION: Option(flag, help, **face)}


def nested() -> dict[str, Any]:
    """The metadata of a field that is itself a settings dataclass whose fields are options."""
    return {_NESTED: True}


@dataclass(frozen=True, slots=True)
class Setting:
    """One option of a settings tree: where its field is (``("limits", "max_body_bytes")``), the
    field, its option, and the field's type with ``None`` taken out."""

    path: tuple[str, ...]
    field: dataclasses.Field[Any]
    option: Option
    kind: Any

    @property
    def name(self) -> str:
        """The option's parameter name: the path joined by ``__`` (unique, a Python name)."""
        return "__".join(self.path)

    @property
    def default(self) -> Any:
        """The field's default (None when it is computed at start)."""
        return None if self.field.default is dataclasses.MISSING else self.field.default


def settings(cls: type[Any], path: tuple[str, ...] = ()) -> Iterator[Setting]:
    """Every option field of the dataclass ``cls`` and, depth first, of its nested fields."""
    hints = typing.get_type_hints(cls)
    for each in dataclasses.fields(cls):
        if each.metadata.get(_NESTED):
            yield from settings(hints[each.name], (*path, each.name))
        elif _OPTION in each.metadata:
            yield Setting((*path, each.name), each, each.metadata[_OPTION], _without_none(hints[each.name]))


def build(cls: type[Any], values: dict[tuple[str, ...], Any], path: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments of ``cls`` from option values by path, nested records built; a value of
    None is left out (the field's default applies), as is a field no value names."""
    hints = typing.get_type_hints(cls)
    built: dict[str, Any] = {}
    for each in dataclasses.fields(cls):
        here = (*path, each.name)
        if each.metadata.get(_NESTED):
            built[each.name] = hints[each.name](**build(hints[each.name], values, here))
        elif values.get(here) is not None:
            built[each.name] = values[here]
    return built


def _without_none(hint: Any) -> Any:
    """``int | None`` -> ``int`` (other types as they are)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else hint
    return hint
