"""``--allow-plain-credentials`` (``CRONWHEEL_ALLOW_PLAIN_CREDENTIALS``): off by default, for the
api processes as for ``cronwheel server``; given, it reaches the settings the api builds its
target policy from."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.cli.server import api, server
from cronwheel.jobs.service import TargetPolicy


@pytest.mark.parametrize(
    ("args", "env", "allowed"),
    [
        ([], {}, False),
        (["--allow-plain-credentials"], {}, True),
        ([], {"CRONWHEEL_ALLOW_PLAIN_CREDENTIALS": "1"}, True),
    ],
)
@pytest.mark.parametrize("command", [server, api])
def test_the_option_reaches_the_settings(
    settings_of: Any, command: Any, args: list[str], env: dict[str, str], allowed: bool
) -> None:
    assert settings_of(command, args, env).allow_plain_credentials is allowed


def test_the_policy_refuses_them_by_default() -> None:
    assert TargetPolicy().allow_plain_credentials is False
