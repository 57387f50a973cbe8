"""The suite is apart from the user's own cronwheel (suite_isolation): it passes in a clone where
``scripts/cronwheel server`` left ``cronwheel.db`` and ``cronwheel.db.token``, for a user with a
config file and contexts, a local server's pointer and CRONWHEEL_* settings in their shell."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from cronwheel.auth import localtoken
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import issue
from cronwheel.client import connection
from suite_isolation import XDG_DIRECTORIES, Isolation, isolated_environment, suite_setting

REPO = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)


def _user_of_their_own(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A clone where the user's server ran (its database and admin token in the clone root), and
    the user's shell: a home with a config file whose current context is that server, the server's
    pointer, and CRONWHEEL_URL, CRONWHEEL_TOKEN, CRONWHEEL_DATABASE_URL set."""
    clone, home = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    sqlite3.connect(clone / "cronwheel.db").close()
    token_file = clone / "cronwheel.db.token"
    localtoken.write_private(token_file, issue("local admin", None, [Scope.ADMIN], NOW)[1] + "\n")
    config = home / ".config" / "cronwheel" / "config.yaml"
    context = {"url": "http://127.0.0.1:8080", "token": issue("mine", None, [Scope.ADMIN], NOW)[1]}
    contexts = {"current-context": "mine", "contexts": {"mine": context}}
    localtoken.write_private(config, yaml.safe_dump(contexts))
    pointer = localtoken.pointer_file("http://127.0.0.1:8080", {"HOME": str(home)})
    assert pointer is not None
    localtoken.write_private(pointer, f"{token_file}\n")
    shell = {name: value for name, value in os.environ.items() if name not in XDG_DIRECTORIES}
    shell |= {
        "HOME": str(home),
        "CRONWHEEL_URL": "http://127.0.0.1:8080",
        "CRONWHEEL_TOKEN": issue("shell", None, [Scope.ADMIN], NOW)[1],
        "CRONWHEEL_CONTEXT": "mine",
        "CRONWHEEL_DATABASE_URL": f"sqlite:///{clone / 'cronwheel.db'}",
    }
    return clone, shell


def test_the_token_cli_tests_pass_in_a_clone_where_the_users_server_ran(tmp_path: Path) -> None:
    clone, shell = _user_of_their_own(tmp_path)
    # What the CLI would use there, unisolated: the token file the user's server left in the
    # clone root, for any loopback server (the CLI tests' is on a free port of 127.0.0.1).
    found = localtoken.find_local_token("http://127.0.0.1:9", {"HOME": shell["HOME"]}, clone)
    assert found is not None
    assert found[1] == clone / "cronwheel.db.token"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "tests" / "cli" / "test_tokens_cli.py"),
         "-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO), "-p", "no:cacheprovider", "-q"],
        cwd=clone, env=shell, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\b9 passed\b", run.stdout), run.stdout[-2000:]


def test_this_run_has_a_home_and_working_directory_of_its_own(isolation: Isolation) -> None:
    assert Path.cwd() == isolation.cwd
    assert not any(isolation.cwd.glob("cronwheel.db*"))
    assert Path.home() == isolation.home != Path(isolation.environment.get("HOME") or "/")
    assert connection.config_path(os.environ).is_relative_to(isolation.home)
    assert localtoken.state_dir(os.environ).is_relative_to(isolation.home)
    assert [name for name in os.environ if name.startswith("CRONWHEEL_") and not suite_setting(name)] == []


def test_the_users_settings_go_and_the_suites_stay(tmp_path: Path) -> None:
    user = {
        "HOME": "/home/me",
        "XDG_CONFIG_HOME": "/home/me/.cfg",
        "PATH": "/usr/bin",
        "CRONWHEEL_URL": "https://cron.example.com",
        "CRONWHEEL_TOKEN": "cw_x_y",
        "CRONWHEEL_CONFIG": "/home/me/cw.yaml",
        "CRONWHEEL_DATABASE_URL": "postgresql://me@db/cron",
        "CRONWHEEL_TEST_POSTGRES_URL": "postgresql://postgres@127.0.0.1/cronwheel_test",
        "CRONWHEEL_TEST_RUN": "cronwheel-test-1-2",
        "CRONWHEEL_CHROMIUM": "/usr/bin/chromium",
    }
    isolated = isolated_environment(user, tmp_path, Path("/src/cronwheel"))
    assert {name for name in isolated if name.startswith("CRONWHEEL_")} == {
        "CRONWHEEL_TEST_POSTGRES_URL",
        "CRONWHEEL_TEST_RUN",
        "CRONWHEEL_CHROMIUM",
    }
    assert isolated["HOME"] == str(tmp_path)
    assert isolated["XDG_CONFIG_HOME"] == str(tmp_path / ".config")
    assert isolated["PATH"] == "/usr/bin"
    assert isolated["HYPOTHESIS_STORAGE_DIRECTORY"] == "/src/cronwheel/.hypothesis"


def test_no_setting_of_cronwheels_own_counts_as_the_suites() -> None:
    """Every CRONWHEEL_* variable the program reads is cleared for the run (a suite setting of
    the same name would let the user's value through)."""
    sources = (REPO / "src" / "cronwheel").rglob("*.py")
    read = {name for path in sources for name in re.findall(r"CRONWHEEL_[A-Z0-9_]+", path.read_text())}
    assert {"CRONWHEEL_URL", "CRONWHEEL_TOKEN", "CRONWHEEL_DATABASE_URL"} <= read
    assert sorted(name for name in read if suite_setting(name)) == []
