"""A settings field declares its command-line face once (:mod:`cronwheel.settings`): the variable
is derived from the flag unless named, nested records are walked into and built back, and the
fields that must not be options are none."""

from __future__ import annotations

from dataclasses import dataclass, field

from cronwheel.node.server import ServerSettings
from cronwheel.settings import API, DEFAULT_DATABASE_URL, Option, build, nested, option, settings


@dataclass(frozen=True)
class Inner:
    size: int = field(default=3, metadata=option("--inner-size", "A size.", low=1))


@dataclass(frozen=True)
class Outer:
    name: str | None = field(default=None, metadata=option("--name", "A name.", roles=frozenset({API})))
    inner: Inner = field(default_factory=Inner, metadata=nested())
    hidden: str = "not an option"


def test_the_variable_comes_from_the_flag_unless_named_or_refused() -> None:
    assert Option("--max-body-bytes").envvar == "CRONWHEEL_MAX_BODY_BYTES"
    assert Option("--allowed-host", env="CRONWHEEL_ALLOWED_HOSTS").envvar == "CRONWHEEL_ALLOWED_HOSTS"
    assert Option("--allow-python", env=False).envvar is None


def test_options_are_found_depth_first_with_their_types_and_built_back() -> None:
    found = list(settings(Outer))
    assert [(each.path, each.name, each.kind) for each in found] == [
        (("name",), "name", str),
        (("inner", "size"), "inner__size", int),
    ]
    assert Outer(**build(Outer, {("inner", "size"): 7, ("name",): None})) == Outer(inner=Inner(7))


def test_the_secrets_of_a_node_are_no_options() -> None:
    names = {each.path[0] for each in settings(ServerSettings)}
    assert {"secret_keys", "smtp_url", "roles"}.isdisjoint(names)
    assert {"limits", "oidc", "command_isolation"} <= names


def test_every_flag_and_variable_is_one_options() -> None:
    faces = [each.option for each in settings(ServerSettings)]
    assert len({face.flag for face in faces}) == len(faces)
    variables = [face.envvar for face in faces if face.envvar is not None]
    assert len(set(variables)) == len(variables)
    assert ServerSettings().database_url == DEFAULT_DATABASE_URL
