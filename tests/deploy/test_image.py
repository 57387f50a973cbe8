"""The container image and the compose files hold: the Dockerfile installs only from hash-checked
locks, whose pins are requirements/dev.lock's (the versions the suite ran against), runs as the
non-root user the manifests name and exposes their ports; the compose files use it, take the
secret keys from outside the file, and the PostgreSQL-only one names no coordinator and no queue.
(No Docker engine here: nothing is built.)
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronwheel.secrets.keys import ENV_KEYS

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LOCKS = ROOT / "requirements"
COMPOSE = {"etcd-redis": ROOT / "docker-compose.yml", "postgres": ROOT / "docker-compose.postgres.yml"}
CONFIG_MAP = ROOT / "deploy" / "kubernetes" / "base" / "configmap.yaml"
BACKENDS = {"CRONWHEEL_DATABASE_URL", "CRONWHEEL_COORDINATOR_URL", "CRONWHEEL_QUEUE_URL"}


def pins(lock: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, hashes) of a pip-compile style lock."""
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for entry in re.split(r"\n(?=\S)", lock.read_text()):
        head = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", entry)
        if head:
            name = re.sub(r"[-_.]+", "-", head.group(1)).lower()
            found[name] = (head.group(2), frozenset(re.findall(r"--hash=(sha256:[0-9a-f]{64})", entry)))
    return found


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined, comments left out)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


@pytest.mark.parametrize("lock", ["runtime.lock", "build.lock"])
def test_the_image_locks_pin_what_the_development_lock_pins(lock: str) -> None:
    """Every package of the image's locks is in dev.lock at the same version, each hash one of
    dev.lock's: regenerated with `-c requirements/dev.lock` (their headers), nothing new comes in."""
    development = pins(LOCKS / "dev.lock")
    image = pins(LOCKS / lock)
    assert image
    command = (LOCKS / lock).read_text().splitlines()[1]
    assert "uv pip compile" in command
    assert "--generate-hashes" in command
    assert "-c requirements/dev.lock" in command
    assert f"-o requirements/{lock}" in command
    for name, (version, hashes) in image.items():
        assert name in development, f"{lock}: {name} is not in dev.lock"
        assert version == development[name][0], f"{lock}: {name} {version}, dev.lock {development[name][0]}"
        assert hashes, f"{lock}: {name} has no hash"
        assert hashes <= development[name][1], f"{lock}: {name} has hashes dev.lock lacks"


def test_the_runtime_lock_holds_every_dependency_and_no_tool() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["otel"]
    names = {re.sub(r"[-_.]+", "-", re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0]).lower() for spec in wanted}
    runtime = pins(LOCKS / "runtime.lock")
    assert names <= runtime.keys()
    assert not {"pytest", "mypy", "ruff", "playwright", "hatchling", "kubernetes-validate"} & runtime.keys()


def test_the_dockerfile_installs_only_from_hashed_locks() -> None:
    installs = [argument for kind, argument in instructions() if kind == "RUN"]
    commands = [part.strip() for run in installs for part in run.split("&&") if "pip install" in part]
    assert len(commands) == 3
    for command in commands:
        locked = re.search(r"--require-hashes -r requirements/(runtime|build)\.lock$", command)
        own_wheel = re.search(r"pip install --no-deps /dist/cronwheel-\*\.whl$", command)
        assert locked or own_wheel, command
    assert "--no-build-isolation" in " ".join(installs)  # the wheel is built with the locked hatchling


def test_the_image_runs_cronwheel_as_a_numeric_non_root_user() -> None:
    steps = instructions()
    froms = [argument for kind, argument in steps if kind == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]  # one base for both stages
    final = steps[max(index for index, (kind, _) in enumerate(steps) if kind == "FROM") :]
    (user,) = [argument for kind, argument in final if kind == "USER"]
    assert re.fullmatch(r"[1-9][0-9]*:[1-9][0-9]*", user)
    assert user.split(":")[0] == "10001"  # the manifests' runAsUser (test_manifests.UID)
    assert ("ENTRYPOINT", '["cronwheel"]') in final
    env = " ".join(argument for kind, argument in final if kind == "ENV")
    assert "TMPDIR=/tmp" in env
    assert "HOME=/tmp" in env
    assert "PYTHONDONTWRITEBYTECODE=1" in env


def test_the_image_exposes_the_ports_the_manifests_use() -> None:
    settings = yaml.safe_load(CONFIG_MAP.read_text())["data"]
    (exposed,) = [argument for kind, argument in instructions() if kind == "EXPOSE"]
    assert set(exposed.split()) == {settings["CRONWHEEL_PORT"], settings["CRONWHEEL_METRICS_PORT"]}


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore  # everything else stays out: .venv, .git, tests, local databases and tokens
    copied = [
        source
        for kind, argument in instructions()
        if kind == "COPY" and not argument.startswith("--from")
        for source in argument.split()[:-1]
    ]
    for source in copied:
        top = source.split("/")[0]
        assert f"!{top}" in ignore or f"!{top}/" in ignore, source


def compose(mode: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE[mode].read_text())
    return loaded


def cronwheel_services(mode: str) -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose(mode)["services"].items() if "build" in service}


@pytest.mark.parametrize("mode", sorted(COMPOSE))
def test_compose_runs_every_role_from_the_dockerfile(mode: str) -> None:
    services = cronwheel_services(mode)
    assert sorted(service["command"][0] for service in services.values()) == ["api", "scheduler", "worker"]
    for name, service in services.items():
        assert service["build"] == ".", f"{name}: the image is the repository's Dockerfile"
        assert service["read_only"] is True, name
        assert "/tmp" in service["tmpfs"], name


def test_compose_over_postgres_alone_names_no_coordinator_and_no_queue() -> None:
    files = compose("postgres")
    assert set(files["services"]) == {"postgres", "api", "scheduler", "worker"}
    for name, service in cronwheel_services("postgres").items():
        assert set(service["environment"]) & BACKENDS == {"CRONWHEEL_DATABASE_URL"}, name
        assert service["depends_on"] == ["postgres"], name


def test_compose_over_etcd_and_redis_names_all_three() -> None:
    for name, service in cronwheel_services("etcd-redis").items():
        assert set(service["environment"]) >= BACKENDS, name


@pytest.mark.parametrize("mode", sorted(COMPOSE))
def test_compose_gives_every_process_the_secret_keys_from_outside_the_file(mode: str) -> None:
    """The keyring comes from the shell or ``.env`` (compose's ``${NAME:?message}``: no start
    without it), never written in the file, and reaches every role."""
    for name, service in cronwheel_services(mode).items():
        keys = service["environment"][ENV_KEYS]
        assert re.fullmatch(r"\$\{" + ENV_KEYS + r":\?[^}]+\}", keys), f"{name}: {keys}"
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
