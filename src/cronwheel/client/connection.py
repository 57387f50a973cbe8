"""Which server a client talks to, with which token and TLS settings: the one place that decides
(for :meth:`cronwheel.client.Client.from_environment` and so for the CLI).

Each of the URL and the token is taken from the first of:

1. the arguments (the CLI's flags ``--url``, ``--token``);
2. the environment, ``CRONWHEEL_URL``, ``CRONWHEEL_TOKEN``;
3. a *context* of the config file (``--context`` or ``CRONWHEEL_CONTEXT``, else the file's
   ``current-context``), as kubectl does;
4. for a server on this machine's loopback, the embedded server's token file
   (:func:`cronwheel.auth.localtoken.find_local_token`);

and the URL defaults to ``http://127.0.0.1:8080``. A context's token goes only to that context's
URL, and a local token file only to a loopback URL: a ``--url`` pointing elsewhere never receives
them.

TLS for an ``https://`` server: ``ca_cert`` (a PEM file of the CA(s) to trust instead of the
system's), ``client_cert`` and ``client_key`` (a client certificate, for servers that ask for one),
each from the arguments (``--ca-cert``, ``--client-cert``, ``--client-key``), else
``CRONWHEEL_CA_CERT``, ``CRONWHEEL_CLIENT_CERT``, ``CRONWHEEL_CLIENT_KEY``, else the context's
``ca-cert``, ``client-cert``, ``client-key`` (a context's, like its token, only for its own URL).

The config file is ``$CRONWHEEL_CONFIG``, else ``$XDG_CONFIG_HOME/cronwheel/config.yaml``, else
``~/.config/cronwheel/config.yaml`` (written 0600: it may hold tokens)::

    current-context: prod
    contexts:
      prod:
        url: https://cron.example.com
        token-file: ~/.config/cronwheel/prod.token   # or token: cw_...
        ca-cert: ~/.config/cronwheel/prod-ca.pem     # optional: a private CA
      local:
        url: http://127.0.0.1:8080

Pure (no click, no HTTP): it only reads files and the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from cronwheel.auth import localtoken
from cronwheel.client.errors import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class Context:
    url: str
    token: str | None = None
    token_file: str | None = None
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    def read_token(self) -> str | None:
        if self.token:
            return self.token
        if self.token_file:
            path = Path(self.token_file).expanduser()
            text = localtoken.read_token(path)
            if text is None:
                raise ConfigurationError(f"cannot read the token file {path}")
            return text
        return None


@dataclass(frozen=True, slots=True)
class Config:
    current: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Connection:
    url: str
    token: str | None
    source: str  # where the token came from ("--token", "CRONWHEEL_TOKEN", "context prod", a file), or "none"
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


# Context attributes and their keys in the file (the url aside).
_KEYS = {
    "token": "token",
    "token_file": "token-file",
    "ca_cert": "ca-cert",
    "client_cert": "client-cert",
    "client_key": "client-key",
}
_TLS_ENV = {
    "ca_cert": "CRONWHEEL_CA_CERT",
    "client_cert": "CRONWHEEL_CLIENT_CERT",
    "client_key": "CRONWHEEL_CLIENT_KEY",
}
VARIABLES = {"url": "CRONWHEEL_URL", "token": "CRONWHEEL_TOKEN", "context": "CRONWHEEL_CONTEXT", **_TLS_ENV}
"""The variable each argument of :func:`resolve` is read from when it is not given."""


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("CRONWHEEL_CONFIG"):
        return Path(env["CRONWHEEL_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "cronwheel" / "config.yaml"


def load_config(path: Path) -> Config:
    """The config file at ``path`` (an empty one when there is none)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Config()
    except OSError as error:
        raise ConfigurationError(f"cannot read {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{path} is not valid YAML: {error}") from None
    return _config(data, path)


def _config(data: Any, path: Path) -> Config:
    if not isinstance(data, dict) or not set(data) <= {"current-context", "contexts"}:
        raise ConfigurationError(f"{path}: expected the keys current-context and contexts")
    contexts: dict[str, Context] = {}
    for name, entry in (data.get("contexts") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ConfigurationError(f"{path}: context {name!r} needs a url")
        unknown = set(entry) - {"url", *_KEYS.values()}
        if unknown:
            raise ConfigurationError(f"{path}: context {name!r} has unknown keys {sorted(unknown)}")
        contexts[str(name)] = Context(entry["url"], **{attr: entry.get(key) for attr, key in _KEYS.items()})
    current = data.get("current-context")
    return Config(None if current is None else str(current), contexts)


def save_config(path: Path, config: Config) -> None:
    """Write ``config`` to ``path``, 0600 (it may hold tokens)."""
    contexts = {
        name: {"url": ctx.url}
        | {key: getattr(ctx, attr) for attr, key in _KEYS.items() if getattr(ctx, attr) is not None}
        for name, ctx in sorted(config.contexts.items())
    }
    data: dict[str, Any] = {"current-context": config.current, "contexts": contexts}
    localtoken.write_private(path, yaml.safe_dump(data, sort_keys=False))


def resolve(
    *,
    url: str | None,
    token: str | None,
    context: str | None,
    env: Mapping[str, str],
    config: Config,
    cwd: Path,
    tls: Mapping[str, str | None] | None = None,
) -> Connection:
    """The URL, token and TLS files to use (see the module docstring for the order); ``tls``
    holds the arguments ``ca_cert``, ``client_cert``, ``client_key`` given."""
    given = _given(url, token, env, tls)
    chosen = _context(context or env.get(VARIABLES["context"]) or config.current, config)
    found = given if chosen is None else _with_context(given, *chosen)
    found = replace(found, url=found.url or DEFAULT_URL)
    if found.token is None:
        local = localtoken.find_local_token(found.url, env, cwd)
        if local is not None:
            found = replace(found, token=local[0], source=str(local[1]))
    return found if found.token else replace(found, source="none")


def _given(
    url: str | None, token: str | None, env: Mapping[str, str], tls: Mapping[str, str | None] | None
) -> Connection:
    """What the arguments and the environment say (an empty URL: not said yet)."""
    files = {attr: (tls or {}).get(attr) or env.get(name) or None for attr, name in _TLS_ENV.items()}
    variable = VARIABLES["token"]
    source = "--token" if token else variable if env.get(variable) else "none"
    token = token or env.get(variable) or None
    return Connection(url or env.get(VARIABLES["url"]) or "", token, source, **files)


def _with_context(given: Connection, name: str, ctx: Context) -> Connection:
    """A context fills what was not given: its URL, and, for its own server only, its token and
    TLS files."""
    url = given.url or ctx.url
    if not _same_server(url, ctx.url):
        return replace(given, url=url)
    token, source = (
        (ctx.read_token(), f"context {name}") if given.token is None else (given.token, given.source)
    )
    return Connection(
        url,
        token,
        source,
        ca_cert=given.ca_cert or _expanded(ctx.ca_cert),
        client_cert=given.client_cert or _expanded(ctx.client_cert),
        client_key=given.client_key or _expanded(ctx.client_key),
    )


def checked_url(url: str) -> str:
    """``url`` without a trailing ``/``, if it is an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(f"{url!r} is not an http(s) URL such as {DEFAULT_URL}")
    return url.rstrip("/")


def _expanded(path: str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser())


def _context(name: str | None, config: Config) -> tuple[str, Context] | None:
    if name is None:
        return None
    if name not in config.contexts:
        known = ", ".join(sorted(config.contexts)) or "none"
        raise ConfigurationError(f"no context named {name!r} in the config file (known: {known})")
    return name, config.contexts[name]


def _same_server(one: str, other: str) -> bool:
    return one.rstrip("/") == other.rstrip("/")
