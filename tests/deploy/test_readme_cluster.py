"""The README's "Run a cluster" recipe starts what it says: each role it runs, under the settings
its ``export`` lines give (a command substitution run as the shell would), takes its options,
passes the checks a node makes before touching a backend, and holds a keyring, so that the
cluster can store team secrets (without keys ``cronwheel secrets set`` answers 503)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from cronwheel.cli import cli
from cronwheel.cli.options import NodeCommand, setting_list
from cronwheel.cli.server import api, node_settings, scheduler, worker
from cronwheel.errors import PermanentError
from cronwheel.node.server import ServerSettings
from cronwheel.secrets.keys import ENV_KEYS, load_keyring

README = Path(__file__).resolve().parents[2] / "README.md"
COMMANDS: dict[str, NodeCommand] = {"api": api, "scheduler": scheduler, "worker": worker}
# What a node reads from the environment: its options' variables, and the keys (never an option)
NODE_VARIABLES = {setting.option.envvar for setting in setting_list() if setting.option.envvar} | {ENV_KEYS}
ASSIGNMENT = re.compile(r"(?:export\s+)?([A-Za-z_]\w*)=(\$\([^)]*\)|\"[^\"]*\"|\S*)")


def recipe() -> list[str]:
    """The commands of the console blocks of the README's "Run a cluster" section, in order."""
    section = README.read_text().split("\n## Run a cluster\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```console\n(.*?)```", section, flags=re.DOTALL)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def shell_value(value: str) -> str:
    """An assignment's value as the shell gives it; ``$(scripts/cronwheel ...)`` runs the CLI."""
    if value.startswith('"'):
        return value[1:-1]
    if value.startswith("$("):
        words = shlex.split(value[2:-1])
        assert words[0] == "scripts/cronwheel", value
        done = CliRunner().invoke(cli, words[1:])
        assert done.exit_code == 0, done.output
        return done.stdout.strip()
    return value


Role = tuple[NodeCommand, list[str], dict[str, str]]  # a command, its arguments, the exports before it


def roles_and_settings() -> tuple[list[Role], dict[str, str]]:
    """Each role command the recipe runs, with its arguments and the node settings exported before
    it; and those exported by the end (the etcd and Redis variant's URLs added)."""
    variables: dict[str, str] = {}
    exported: dict[str, str] = {}
    roles: list[Role] = []
    for command in recipe():
        assignment = ASSIGNMENT.fullmatch(command.split("  #", 1)[0].strip())
        if assignment:
            name, value = assignment.groups()
            if command.startswith("export ") and name not in NODE_VARIABLES:
                continue  # for the CLI (a token), not for the nodes
            variables[name] = shell_value(value)
            if command.startswith("export "):
                exported[name] = variables[name]
            continue
        words = shlex.split(re.sub(r"\$(\w+)", lambda found: variables[found[1]], command), comments=True)
        if words[:1] == ["scripts/cronwheel"] and words[1] in COMMANDS:
            roles.append((COMMANDS[words[1]], [word for word in words[2:] if word != "&"], dict(exported)))
    return roles, exported


def role_settings(command: NodeCommand, args: list[str]) -> ServerSettings:
    return node_settings(command.roles, command.make_context(command.roles[0], list(args)).params)


def test_the_recipe_runs_every_role_with_the_keys_and_a_cluster_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    roles, at_the_end = roles_and_settings()
    assert sorted(command.roles[0] for command, _, _ in roles) == ["api", "scheduler", "scheduler", "worker"]
    for command, args, exported in roles:
        assert {ENV_KEYS, "CRONWHEEL_DATABASE_URL"} <= exported.keys(), command.roles
        for settings in (exported, at_the_end):
            with monkeypatch.context() as environment:
                for name, value in settings.items():
                    environment.setenv(name, value)
                node = role_settings(command, args)
            node.check()  # what a node refuses before it touches a backend
            assert not node.embedded, command.roles
            keys = load_keyring(node.secret_keys, node.secret_key_file, None)
            assert keys.keyring is not None, f"{command.roles} would hold no secret keys"


def test_without_the_recipe_settings_a_role_refuses_to_start_and_holds_no_keys() -> None:
    """What the test above relies on: the exports are what make the roles start and hold keys."""
    roles, _ = roles_and_settings()
    command, args = next((command, args) for command, args, _ in roles if command.roles == ("api",))
    settings = role_settings(command, args)
    with pytest.raises(PermanentError, match="need every role in one process"):
        settings.check()
    assert load_keyring(settings.secret_keys, settings.secret_key_file, None).keyring is None
