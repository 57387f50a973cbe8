"""``--arm-ahead`` (``CRONWHEEL_ARM_AHEAD``): schedulers arm ahead by default, with the lead capped
at :data:`cronwheel.scheduler.ARM_AHEAD_S`; 0 turns it off. What a lead of 0 does (records at the
slot, arms nothing) is tests/roles/test_arming.py's."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.cli.server import scheduler, server
from cronwheel.node.server import ServerSettings
from cronwheel.scheduler import ARM_AHEAD_S


@pytest.mark.parametrize(
    ("args", "env", "lead"),
    [
        ([], {}, ARM_AHEAD_S),
        (["--arm-ahead", "0"], {}, 0.0),
        ([], {"CRONWHEEL_ARM_AHEAD": "0"}, 0.0),
        (["--arm-ahead", "12.5"], {}, 12.5),
    ],
)
@pytest.mark.parametrize("command", [server, scheduler])
def test_the_option_reaches_the_settings(
    settings_of: Any, command: Any, args: list[str], env: dict[str, str], lead: float
) -> None:
    assert settings_of(command, args, env).arm_ahead_s == lead


def test_arming_is_on_by_default_with_a_30_s_cap() -> None:
    assert ServerSettings().arm_ahead_s == ARM_AHEAD_S == 30.0
