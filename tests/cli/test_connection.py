"""Where the CLI's server and token come from (cronwheel.client.connection): flags > environment >
context > the local server's token file, and a token never goes to a server it was not for."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from cronwheel.auth import localtoken
from cronwheel.client.connection import (
    DEFAULT_URL,
    Config,
    Connection,
    Context,
    config_path,
    load_config,
    resolve,
    save_config,
)
from cronwheel.errors import InvalidInputError

PROD = "https://cron.example.com"
CONFIG = Config("prod", {"prod": Context(PROD, token="cw-prod"), "local": Context(DEFAULT_URL)})


def _resolve(
    tmp_path: Path,
    *,
    url: str | None = None,
    token: str | None = None,
    context: str | None = None,
    env: dict[str, str] | None = None,
    config: Config = CONFIG,
) -> Connection:
    environment = {"XDG_STATE_HOME": str(tmp_path / "state"), **(env or {})}
    return resolve(url=url, token=token, context=context, env=environment, config=config, cwd=tmp_path)


def test_flags_win_over_the_environment_which_wins_over_the_context(tmp_path: Path) -> None:
    env = {"CRONWHEEL_URL": "http://env.example", "CRONWHEEL_TOKEN": "cw-env"}
    assert _resolve(tmp_path, url="http://flag.example", token="cw-flag", env=env) == Connection(
        "http://flag.example", "cw-flag", "--token"
    )
    assert _resolve(tmp_path, env=env) == Connection("http://env.example", "cw-env", "CRONWHEEL_TOKEN")
    assert _resolve(tmp_path) == Connection(PROD, "cw-prod", "context prod")


def test_a_named_context_wins_over_the_current_one(tmp_path: Path) -> None:
    assert _resolve(tmp_path, context="local").url == DEFAULT_URL
    assert _resolve(tmp_path, env={"CRONWHEEL_CONTEXT": "local"}).url == DEFAULT_URL
    with pytest.raises(InvalidInputError, match=r"no context named 'staging'.*known: local, prod"):
        _resolve(tmp_path, context="staging")


def test_a_contexts_token_goes_only_to_its_own_server(tmp_path: Path) -> None:
    elsewhere = _resolve(tmp_path, url="https://evil.example")
    assert elsewhere == Connection("https://evil.example", None, "none")
    assert _resolve(tmp_path, url=PROD + "/").token == "cw-prod"


def test_without_anything_the_default_url_and_the_local_token_file(tmp_path: Path) -> None:
    assert _resolve(tmp_path, config=Config()) == Connection(DEFAULT_URL, None, "none")
    (tmp_path / "cronwheel.db.token").write_text("cw-local\n")
    assert _resolve(tmp_path, config=Config()) == Connection(
        DEFAULT_URL, "cw-local", str(tmp_path / "cronwheel.db.token")
    )
    assert _resolve(tmp_path, url="http://other.example", config=Config()).token is None  # not loopback


def test_the_local_token_of_the_database_in_the_environment_comes_first(tmp_path: Path) -> None:
    (tmp_path / "cronwheel.db.token").write_text("cw-cwd")
    (tmp_path / "elsewhere.db.token").write_text("cw-elsewhere")
    env = {"CRONWHEEL_DATABASE_URL": f"sqlite:///{tmp_path / 'elsewhere.db'}"}
    assert _resolve(tmp_path, env=env, config=Config()).token == "cw-elsewhere"


def test_a_servers_pointer_finds_its_token_from_any_directory(tmp_path: Path) -> None:
    token_file = tmp_path / "data" / "cronwheel.db.token"
    token_file.parent.mkdir()
    token_file.write_text("cw-pointed")
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    pointer = localtoken.pointer_file("http://127.0.0.1:9090", env)
    assert pointer is not None
    localtoken.write_private(pointer, f"{token_file}\n")
    found = _resolve(tmp_path / "state", url="http://127.0.0.1:9090", env=env, config=Config())
    assert found.token == "cw-pointed"
    assert _resolve(tmp_path, url="http://127.0.0.1:9091", env=env, config=Config()).token is None


def test_the_config_file_round_trips_privately(tmp_path: Path) -> None:
    path = config_path({"XDG_CONFIG_HOME": str(tmp_path)})
    assert path == tmp_path / "cronwheel" / "config.yaml"
    assert config_path({"CRONWHEEL_CONFIG": "/etc/cw.yaml", "XDG_CONFIG_HOME": "/x"}) == Path("/etc/cw.yaml")
    assert load_config(path) == Config()
    saved = Config("prod", {"prod": Context(PROD, token_file="/secrets/prod"), "local": Context(DEFAULT_URL)})
    save_config(path, saved)
    assert load_config(path) == saved
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "token-file: /secrets/prod" in path.read_text()


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        "contexts: {a: {}}",
        "contexts: {a: {url: x, tokn: y}}",
        "other: 1",
        "a: [",
        "contexts: {a: 3}",
    ],
)
def test_a_bad_config_file_is_refused_with_its_path(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match=str(path)):
        load_config(path)


def test_a_context_token_file_is_read_when_used(tmp_path: Path) -> None:
    secret = tmp_path / "prod.token"
    secret.write_text("cw-from-file\n")
    config = Config("prod", {"prod": Context(PROD, token_file=str(secret))})
    assert _resolve(tmp_path, config=config).token == "cw-from-file"
    secret.unlink()
    with pytest.raises(InvalidInputError, match="cannot read the token file"):
        _resolve(tmp_path, config=config)


def test_tls_files_come_from_the_flags_the_environment_or_the_contexts_own_url(tmp_path: Path) -> None:
    tls_context = Context(
        PROD, token="cw-prod", ca_cert="~/prod-ca.pem", client_cert="/c.pem", client_key="/k.pem"
    )
    config = Config("prod", {"prod": tls_context})
    found = _resolve(tmp_path, config=config)
    assert (found.ca_cert, found.client_cert, found.client_key) == (
        str(Path("~/prod-ca.pem").expanduser()),
        "/c.pem",
        "/k.pem",
    )
    env = {"CRONWHEEL_CA_CERT": "/env-ca.pem"}
    assert _resolve(tmp_path, config=config, env=env).ca_cert == "/env-ca.pem"
    flagged = resolve(
        url=None, token=None, context=None, env=env, config=config, cwd=tmp_path, tls={"ca_cert": "/flag.pem"}
    )
    assert flagged.ca_cert == "/flag.pem"
    elsewhere = _resolve(tmp_path, url="https://evil.example", config=config)
    assert (elsewhere.token, elsewhere.ca_cert, elsewhere.client_cert, elsewhere.client_key) == (None,) * 4


def test_a_contexts_tls_files_survive_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    config = Config("prod", {"prod": Context(PROD, token_file="/t", ca_cert="/ca.pem", client_cert="/c.pem")})
    save_config(path, config)
    assert "ca-cert: /ca.pem" in path.read_text()
    assert load_config(path) == config
