"""``cronwheel notifications ...`` against a live API server: rules from a YAML file (or stdin),
shown as a table or JSON, a job's own rules and back to the team's; bad input exits non-zero with
a message and writes nothing."""

from __future__ import annotations

from pathlib import Path

from cronwheel.notifications.rules import team_scope

from .conftest import Server

RULES = """\
- conditions: [failure, recovery]
  channels:
    - {type: webhook, url: https://hooks.example.com/cw}
    - {type: email, to: [ops@example.com]}
"""


async def test_set_get_a_jobs_own_and_reset(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    done = server.run("notifications", "set", "--team", "data", str(path))
    assert done.exit_code == 0, done.stderr
    assert "source: team" in done.stdout
    assert "webhook:https://hooks.example.com/cw, email:ops@example.com" in done.stdout
    created = server.run("jobs", "create", "--team", "data", "--name", "nightly", "--schedule", "@daily",
                         "--http", "https://hooks.example.com/n")  # fmt: skip
    assert created.exit_code == 0, created.stderr
    assert server.json("notifications", "get", "--job", "data/nightly")["source"] == "team"
    own = server.run("notifications", "set", "--job", "data/nightly", "-", input="rules: []\n")
    assert own.exit_code == 0, own.stderr
    assert server.json("notifications", "get", "--job", "data/nightly") == {"rules": [], "source": "job"}
    assert server.run("notifications", "reset", "--job", "data/nightly").exit_code == 0
    assert server.json("notifications", "get", "--job", "data/nightly")["source"] == "team"
    sent = server.run("notifications", "test", "--team", "data", "--job", "nightly")
    assert sent.exit_code == 0, sent.stderr
    assert "to 2 channel(s)" in sent.stdout


async def test_bad_input_exits_non_zero_and_writes_nothing(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("- conditions: [failure]\n  channels: [{type: webhook, url: 'http://10.0.0.1/x'}]\n")
    refused = server.run("notifications", "set", "--team", "data", str(path))
    assert refused.exit_code == 2
    assert "non-public address" in refused.stderr
    path.write_text("conditions: [failure\n")
    assert server.run("notifications", "set", "--team", "data", str(path)).exit_code == 2
    both = server.run("notifications", "get", "--team", "data", "--job", "data/x")
    assert both.exit_code == 2
    assert "exactly one of --team" in both.stderr
    assert await server.store.notification_rules(team_scope("data")) is None
    nothing = server.run("notifications", "test", "--team", "data")
    assert nothing.exit_code == 1
    assert "no notification rules apply to data" in nothing.stderr
