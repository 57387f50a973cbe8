"""deploy/kubernetes holds: each overlay renders (tests/deploy/kustomize.py, checked against
kustomize itself where one is installed), every resource it makes is valid against the Kubernetes
API's schemas in strict mode (unknown fields refused; kubernetes-validate, offline), and the
policies that matter hold: non-root, read-only containers with every capability dropped, probes on
the endpoints each role serves, resources, a PodDisruptionBudget per Deployment, one image, no
secret in a manifest (the backend URLs and keys come from the Secret by secretKeyRef), the settings
named as cronwheel reads them, and each cluster mode's backends and nothing more.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from cronwheel.cli.options import setting_list
from cronwheel.secrets.keys import ENV_KEYS
from cronwheel.worker.loop import Worker
from deploy.kustomize import Resource, UnsupportedError, render

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = {
    "postgres": KUBERNETES / "overlays" / "postgres",
    "etcd-redis": KUBERNETES / "overlays" / "etcd-redis",
}
# The oldest Kubernetes the manifests are written for, and the newest whose schemas the validator
# bundles: a field removed or added in between fails one of the two.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
ROLES = ("api", "scheduler", "worker")
URLS = {
    "CRONWHEEL_DATABASE_URL": "database-url",
    "CRONWHEEL_COORDINATOR_URL": "coordinator-url",
    "CRONWHEEL_QUEUE_URL": "queue-url",
}
MODE_URLS = {
    "postgres": {"CRONWHEEL_DATABASE_URL"},
    "etcd-redis": {"CRONWHEEL_DATABASE_URL", "CRONWHEEL_COORDINATOR_URL", "CRONWHEEL_QUEUE_URL"},
}
SECRET = "cronwheel"  # the Secret the README has the operator create
ENV_ONLY = {ENV_KEYS, "CRONWHEEL_SMTP_URL"}  # read from the environment only, never an option
UID = 10001  # the Dockerfile's USER


def rendered(mode: str) -> list[Resource]:
    return render(OVERLAYS[mode])


def of_kind(resources: list[Resource], kind: str) -> list[Resource]:
    return [resource for resource in resources if resource["kind"] == kind]


def deployments(mode: str) -> Iterator[tuple[str, Resource]]:
    for deployment in of_kind(rendered(mode), "Deployment"):
        yield deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"], deployment


def container(deployment: Resource) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, deployment["metadata"]["name"]
    found: dict[str, Any] = containers[0]
    return found


def env(deployment: Resource) -> dict[str, dict[str, Any]]:
    entries = container(deployment)["env"]
    names = [entry["name"] for entry in entries]
    assert len(names) == len(set(names)), f"{deployment['metadata']['name']}: a variable set twice"
    return {entry["name"]: entry for entry in entries}


def config_map(mode: str) -> dict[str, str]:
    (found,) = of_kind(rendered(mode), "ConfigMap")
    data: dict[str, str] = found["data"]
    return data


def options_by_variable() -> dict[str, frozenset[str]]:
    """Every CRONWHEEL_* variable a node reads as an option, and the roles that read it."""
    return {
        setting.option.envvar: setting.option.roles
        for setting in setting_list()
        if setting.option.envvar is not None
    }


modes = pytest.mark.parametrize("mode", sorted(OVERLAYS))


# -- rendering and schemas ------------------------------------------------------------------------


@modes
def test_an_overlay_renders_every_role(mode: str) -> None:
    resources = rendered(mode)
    assert sorted(role for role, _ in deployments(mode)) == sorted(ROLES)
    kinds = sorted(resource["kind"] for resource in resources)
    assert kinds == sorted(
        ["ConfigMap", "ServiceAccount", "Service"] + ["Deployment", "PodDisruptionBudget"] * len(ROLES)
    )
    names = [(resource["kind"], resource["metadata"]["name"]) for resource in resources]
    assert len(names) == len(set(names))


@modes
@pytest.mark.parametrize("version", VERSIONS)
def test_every_resource_is_valid_against_the_kubernetes_schemas(mode: str, version: str) -> None:
    for resource in rendered(mode):
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = "/".join(map(str, error.absolute_path))
            pytest.fail(
                f"{mode}: {resource['kind']} {resource['metadata']['name']} at {where}: {error.message}"
            )


def test_the_validator_refuses_an_unknown_field() -> None:
    """Strict mode is on: a misspelt field (here in a probe) is an error, not ignored."""
    _, deployment = next(deployments("postgres"))
    container(deployment)["livenessProbe"]["httpGet"]["paht"] = "/healthz"
    with pytest.raises(kubernetes_validate.ValidationError, match="paht"):
        kubernetes_validate.validate(deployment, VERSIONS[0], strict=True)


def test_every_manifest_file_is_rendered_by_an_overlay() -> None:
    """A manifest left out of every kustomization would be neither applied nor checked."""
    used = {KUBERNETES / "base" / "kustomization.yaml"}
    for directory in (KUBERNETES / "base", *OVERLAYS.values()):
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        used.add(directory / "kustomization.yaml")
        used |= {(directory / entry).resolve() for entry in kustomization.get("resources", [])}
        used |= {(directory / patch["path"]).resolve() for patch in kustomization.get("patches", [])}
    assert set(KUBERNETES.rglob("*.yaml")) <= used


@modes
def test_the_rendering_is_kustomizes_own(mode: str) -> None:
    """The renderer the other tests use agrees with kustomize (skipped where none is installed)."""
    if shutil.which("kustomize"):
        command = ["kustomize", "build", str(OVERLAYS[mode])]
    elif shutil.which("kubectl"):
        command = ["kubectl", "kustomize", str(OVERLAYS[mode])]
    else:
        pytest.skip("neither kustomize nor kubectl is installed")
    built = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout

    def keyed(resources: list[Resource]) -> dict[tuple[str, str], str]:
        return {
            (resource["kind"], resource["metadata"]["name"]): json.dumps(resource, sort_keys=True)
            for resource in resources
        }

    assert keyed(rendered(mode)) == keyed([document for document in yaml.safe_load_all(built) if document])


def test_the_renderer_refuses_what_it_does_not_model(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: prod-\n")
    with pytest.raises(UnsupportedError, match="namePrefix"):
        render(tmp_path)


# -- the pods' security -----------------------------------------------------------------------------


@modes
def test_every_container_runs_as_non_root_on_a_read_only_root(mode: str) -> None:
    for role, deployment in deployments(mode):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, role
        assert pod["securityContext"]["runAsUser"] == UID, role
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, role
        assert pod["automountServiceAccountToken"] is False, role
        assert pod["enableServiceLinks"] is False, f"{role}: CRONWHEEL_API_* variables from the Service"
        assert pod["serviceAccountName"] == "cronwheel", role
        for each in pod["containers"] + pod.get("initContainers", []):
            context = each["securityContext"]
            assert context["runAsNonRoot"] is True, role
            assert context["runAsUser"] == UID, role
            assert context["readOnlyRootFilesystem"] is True, role
            assert context["allowPrivilegeEscalation"] is False, role
            assert context["capabilities"] == {"drop": ["ALL"]}, role
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, role
            assert "privileged" not in context, role
        mounts = {mount["mountPath"]: mount["name"] for mount in container(deployment)["volumeMounts"]}
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], f"{role}: /tmp (TMPDIR, HOME) must be writable"


@modes
def test_no_secret_is_written_in_a_manifest(mode: str) -> None:
    """No Secret resource, no literal value where a credential may go: the URLs and keys are read
    from the Secret by secretKeyRef; the ConfigMap holds no URL."""
    resources = rendered(mode)
    assert not of_kind(resources, "Secret")
    for role, deployment in deployments(mode):
        variables = env(deployment)
        for name, entry in variables.items():
            if name in URLS or name in ENV_ONLY or any(word in name for word in ("PASSWORD", "TOKEN", "KEY")):
                assert "value" not in entry, f"{role}: {name} is written in the manifest"
                assert entry["valueFrom"]["secretKeyRef"]["name"] == SECRET, f"{role}: {name}"
            assert "://" not in str(entry.get("value", "")), f"{role}: {name} holds a URL"
        assert variables[ENV_KEYS]["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": "secret-keys"}
        for source in container(deployment)["envFrom"]:
            assert set(source) == {"configMapRef"}, (
                f"{role}: variables from a Secret must be named one by one"
            )
    for name, value in config_map(mode).items():
        assert "://" not in value, f"ConfigMap {name}: a URL"
        assert "@" not in value, f"ConfigMap {name}: a credential"
        assert not any(word in name for word in ("PASSWORD", "TOKEN", "KEY", "URL")), name


@modes
def test_each_mode_names_its_backends_and_no_other(mode: str) -> None:
    for role, deployment in deployments(mode):
        variables = env(deployment)
        assert {name for name in variables if name in URLS} == MODE_URLS[mode], role
        for name in MODE_URLS[mode]:
            assert variables[name]["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": URLS[name]}, role
    assert not URLS.keys() & config_map(mode).keys()


@modes
def test_every_setting_is_one_cronwheel_reads(mode: str) -> None:
    """A misspelt CRONWHEEL_* variable would be ignored silently: each one named is an option of a
    role the pods run, or one read from the environment only."""
    options = options_by_variable()
    for name in config_map(mode):
        assert name in options, f"ConfigMap: {name} is no cronwheel setting"
    for role, deployment in deployments(mode):
        assert container(deployment)["args"][0] == role
        for name in env(deployment):
            assert name in ENV_ONLY or role in options.get(name, ()), (
                f"{role}: {name} is not read by a {role}"
            )


# -- probes, ports, metrics ---------------------------------------------------------------------------


@modes
def test_probes_ask_the_endpoints_each_role_serves(mode: str) -> None:
    """The api serves /healthz and /readyz on its API port; a scheduler or worker serves /healthz
    (and /metrics) on its metrics port, from the ConfigMap's CRONWHEEL_METRICS_PORT."""
    settings = config_map(mode)
    for role, deployment in deployments(mode):
        ports = {port["name"]: port["containerPort"] for port in container(deployment)["ports"]}
        expected_port = (
            ("http", int(settings["CRONWHEEL_PORT"]))
            if role == "api"
            else ("metrics", int(settings["CRONWHEEL_METRICS_PORT"]))
        )
        assert ports == dict([expected_port]), role
        probes = {
            kind: container(deployment)[f"{kind}Probe"]["httpGet"]
            for kind in ("startup", "liveness", "readiness")
        }
        assert {probe["port"] for probe in probes.values()} == {expected_port[0]}, role
        assert probes["startup"]["path"] == probes["liveness"]["path"] == "/healthz", role
        assert probes["readiness"]["path"] == ("/readyz" if role == "api" else "/healthz"), role
        startup = container(deployment)["startupProbe"]
        # A starting process waits for its backends and applies migrations (up to 600 s) first.
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 600, role


@modes
def test_every_process_is_scraped_on_its_metrics_port(mode: str) -> None:
    for role, deployment in deployments(mode):
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", role
        assert annotations["prometheus.io/path"] == "/metrics", role
        ports = [port["containerPort"] for port in container(deployment)["ports"]]
        assert [int(annotations["prometheus.io/port"])] == ports, role


@modes
def test_the_service_reaches_the_api_pods(mode: str) -> None:
    (service,) = of_kind(rendered(mode), "Service")
    api = next(deployment for role, deployment in deployments(mode) if role == "api")
    assert service["spec"]["selector"] == api["spec"]["template"]["metadata"]["labels"]
    names = {port["name"] for port in container(api)["ports"]}
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= names


# -- availability and shutdown ------------------------------------------------------------------------


@modes
def test_every_role_is_highly_available_with_a_disruption_budget(mode: str) -> None:
    budgets = of_kind(rendered(mode), "PodDisruptionBudget")
    for role, deployment in deployments(mode):
        spec = deployment["spec"]
        assert spec["replicas"] >= 2, role
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
        (budget,) = [
            budget
            for budget in budgets
            if budget["spec"]["selector"] == {"matchLabels": spec["selector"]["matchLabels"]}
        ]
        assert budget["spec"].get("maxUnavailable", 0) < spec["replicas"], role
        assert budget["spec"].get("minAvailable", 1) >= 1, role


@modes
def test_resources_are_requested_and_limited(mode: str) -> None:
    for role, deployment in deployments(mode):
        resources = container(deployment)["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"}, role
        assert set(resources["limits"]) == {"cpu", "memory"}, role


@modes
def test_a_worker_has_time_to_drain(mode: str) -> None:
    """On SIGTERM a worker gives running attempts ``drain_s`` to finish, then closes its backends:
    Kubernetes must not kill it before."""
    drain_s = inspect.signature(Worker.run).parameters["drain_s"].default
    for role, deployment in deployments(mode):
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace >= (drain_s + 15 if role == "worker" else 30), role


@modes
def test_one_image_of_this_version(mode: str) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    images = {container(deployment)["image"] for _, deployment in deployments(mode)}
    assert images == {f"cronwheel:{version}"}
