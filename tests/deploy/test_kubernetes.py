"""The Kubernetes manifests: valid against the API schemas (offline), rendered by kustomize, and consistent
with what they run: the server's routes and flags, the CLI's probe command, the image's user and paths."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from api.app import collect_operations
from api.cli import probe as ready_probe
from api.cli.main import build_parser
from api.http.openapi import build_openapi
from api.middleware.auth import PUBLIC_PATHS
from api.server.config import VERSION
from sandbox_desktop_client import _base as calls
from tests.conftest import REPO

MANIFESTS = REPO / "docker" / "kubernetes"
SECRET = MANIFESTS / "secret.example.yaml"
# The oldest Kubernetes still widely run, and the newest the validator knows.
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
UNITS = {"": Fraction(1), "m": Fraction(1, 1000), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
         "Gi": Fraction(2**30), "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9)}
DOCUMENTED_GRACEFUL_SHUTDOWN_S = 5


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifest_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = [doc["kind"] for doc in docs]
    assert len(kinds) == len(set(kinds)), kinds
    return {doc["kind"]: doc for doc in docs}


@cache
def base() -> dict[str, dict[str, Any]]:
    """The resources kustomization.yaml deploys, by kind."""
    listed = documents(MANIFESTS / "kustomization.yaml")[0]["resources"]
    return by_kind([doc for name in listed for doc in documents(MANIFESTS / name)])


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = base()["Deployment"]["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    containers = pod_spec()["containers"]
    assert len(containers) == 1, "one desktop container per pod"
    return dict(containers[0])


def env(name: str) -> dict[str, Any]:
    return next(e for e in container()["env"] if e["name"] == name)


def quantity(text: str | int) -> Fraction:
    """A Kubernetes quantity (`300m`, `448Mi`, `2`) as a number."""
    match = re.fullmatch(r"([0-9.]+)(m|[KMG]i|[kMG]|)", str(text))
    assert match is not None, f"not a quantity this test knows: {text!r}"
    return Fraction(match.group(1)) * UNITS[match.group(2)]


def validate(doc: dict[str, Any]) -> None:
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} invalid for Kubernetes {version} at {where}: "
                        f"{exc.message}")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize rendering is not checked")
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@cache
def entrypoint_server_args() -> list[str]:
    """The `sandbox-desktop server ...` command line docker/entrypoint.sh runs, without `"$@"`."""
    text = (REPO / "docker" / "entrypoint.sh").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.strip().startswith("exec sandbox-desktop server"))
    words = shlex.split(line)
    return [w for w in words[3:] if w != "$@"]


def server_args() -> Any:
    """The server's parsed flags in the pod: the entrypoint's and the Deployment's `args`."""
    return build_parser().parse_args(["server", *entrypoint_server_args(), *container().get("args", [])])


@cache
def image_user() -> tuple[int, str]:
    """(uid, name) of the user docker/Dockerfile creates and runs as."""
    text = (REPO / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
    words = shlex.split(next(line for line in text.splitlines() if "useradd" in line))
    words = words[words.index("useradd"):words.index("&&") if "&&" in words else None]
    name = words[-1]
    assert re.search(rf"^USER {name}$", text, re.M), f"the image does not run as {name}"
    return int(words[words.index("--uid") + 1]), name


@cache
def openapi() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(build_openapi(collect_operations(), VERSION))
    return document


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: p.name)
def test_manifest_is_valid_against_the_kubernetes_schemas(path: Path) -> None:
    docs = documents(path)
    assert docs, f"{path.name} is empty"
    for doc in docs:
        assert "namespace" not in doc["metadata"], "the namespace is chosen at deploy time"
        validate(doc)


def test_kustomization_deploys_every_manifest_but_the_example_secret() -> None:
    listed = documents(MANIFESTS / "kustomization.yaml")[0]["resources"]
    assert sorted(listed) == sorted(p.name for p in manifest_files() if p != SECRET)
    assert set(base()) == {"Deployment", "Service", "NetworkPolicy"}


def test_kustomize_renders_the_manifests_unchanged() -> None:
    rendered = by_kind(kustomize(MANIFESTS))
    assert rendered == base()


def test_one_stateful_desktop_per_pod() -> None:
    spec = base()["Deployment"]["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}, "an old and a new desktop must never overlap"
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert base()["Service"]["spec"]["selector"].items() <= labels.items()
    assert base()["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert container()["image"] == "sandbox-desktop:latest"
    assert container()["imagePullPolicy"] == "IfNotPresent", "`:latest` would otherwise always be pulled"


def test_service_reaches_the_port_the_server_listens_on() -> None:
    server = server_args()
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert ports == {"http": server.port}
    assert server.host == "0.0.0.0"
    (service_port,) = base()["Service"]["spec"]["ports"]
    target = service_port["targetPort"]
    assert ports.get(target, target) == server.port
    assert service_port["protocol"] == "TCP"
    ingress_ports = {p["port"] for rule in base()["NetworkPolicy"]["spec"]["ingress"] for p in rule["ports"]
                     if p["protocol"] == "TCP"}
    assert ingress_ports == {server.port}
    url = env("SANDBOX_DESKTOP_URL")["value"]
    assert url == f"http://127.0.0.1:{server.port}", "the readiness probe must reach this pod's server"


def test_liveness_and_startup_probes_use_the_open_health_route() -> None:
    named_ports = {p["name"] for p in container()["ports"]}
    for probe in ("livenessProbe", "startupProbe"):
        get = container()[probe]["httpGet"]
        assert get["port"] in named_ports
        operation = openapi()["paths"][get["path"]]["get"]
        assert "security" not in operation and get["path"] in PUBLIC_PATHS, "a probe cannot send the token"


def test_readiness_probe_runs_the_cli_end_to_end_check() -> None:
    command = container()["readinessProbe"]["exec"]["command"]
    scripts = re.search(r"^\[project\.scripts\]\n(.*?)^\[", (REPO / "pyproject.toml").read_text(), re.M | re.S)
    assert scripts is not None and f'{command[0]} = "api.cli.entry:main"' in scripts.group(1)
    args = build_parser().parse_args(command[1:])
    assert args.command == "ready"  # the full CLI knows it; the console script's fast path runs api.probe
    assert ready_probe.READY_PATH == calls.ready().path == "/v1/health/ready"
    operation = openapi()["paths"]["/v1/health/ready"]["get"]
    assert operation["security"] == [{"bearer": []}] and "503" in operation["responses"]
    timeout = container()["readinessProbe"]["timeoutSeconds"]
    assert timeout >= 3, "a Python start-up plus checks of up to 2 s each"


def test_token_comes_from_the_example_secret() -> None:
    secret = documents(SECRET)[0]
    validate(secret)
    reference = env("SANDBOX_DESKTOP_TOKEN")["valueFrom"]["secretKeyRef"]
    assert reference["name"] == secret["metadata"]["name"]
    assert reference["key"] in secret["stringData"]
    assert not reference.get("optional"), "no token must mean no pod"
    assert "kubectl create secret generic " + secret["metadata"]["name"] in SECRET.read_text()
    flags = {arg.split("=")[0] for arg in [*entrypoint_server_args(), *container().get("args", [])]}
    assert not flags & {"-t", "--token", "-n", "--no-token"}, "the token comes from the environment only"


def test_requests_fit_within_limits() -> None:
    resources = container()["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory", "ephemeral-storage"}
    for name, request in resources["requests"].items():
        assert 0 < quantity(request) <= quantity(resources["limits"][name]), name
    volumes = {v["name"]: v["emptyDir"] for v in pod_spec()["volumes"]}
    in_memory = sum(quantity(v["sizeLimit"]) for v in volumes.values() if v.get("medium") == "Memory")
    on_disk = sum(quantity(v["sizeLimit"]) for v in volumes.values() if v.get("medium") != "Memory")
    assert in_memory < quantity(resources["limits"]["memory"]) / 2
    assert on_disk <= quantity(resources["limits"]["ephemeral-storage"])


def test_runs_as_the_image_user_without_privileges() -> None:
    uid, _ = image_user()
    pod = pod_spec()["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == uid != 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container()["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context.get("privileged") is not True
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert pod_spec()["automountServiceAccountToken"] is False


def test_everything_the_server_writes_is_a_volume() -> None:
    assert container()["securityContext"]["readOnlyRootFilesystem"] is True
    _, user = image_user()
    server = server_args()
    mounts = {m["mountPath"]: m["name"] for m in container()["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    # /tmp: Xvfb's sockets and locks, D-Bus, temporary files; the state dir: desktop HOME, recordings, logs.
    for path in ("/tmp", str(server.state_dir), f"/home/{user}", "/dev/shm"):
        assert path in mounts, f"{path} is not writable with a read-only root"
        assert "emptyDir" in volumes[mounts[path]]
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"


def test_grace_period_covers_the_graceful_shutdown() -> None:
    grace = pod_spec()["terminationGracePeriodSeconds"]
    assert DOCUMENTED_GRACEFUL_SHUTDOWN_S < grace <= 30


def session_overlay() -> str:
    """The per-session overlay docs/kubernetes.md shows."""
    text = (REPO / "docs" / "kubernetes.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    return next(b for b in blocks if "nameSuffix:" in b)


def test_the_documented_session_overlay_routes_to_its_own_pod(tmp_path: Path) -> None:
    overlay = yaml.safe_load(session_overlay())
    overlay["resources"] = [os.path.relpath(MANIFESTS, tmp_path)]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    rendered = by_kind(kustomize(tmp_path))
    for doc in rendered.values():
        validate(doc)
    session = overlay["labels"][0]["pairs"]
    deployment, service = rendered["Deployment"], rendered["Service"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert session.items() <= service["spec"]["selector"].items() <= pod_labels.items()
    assert session.items() <= deployment["spec"]["selector"]["matchLabels"].items()
    assert service["metadata"]["name"].endswith(overlay["nameSuffix"])
    # The session's own token: the generated Secret, its hashed name followed by the reference.
    token = next(e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
                 if e["name"] == "SANDBOX_DESKTOP_TOKEN")
    assert token["valueFrom"]["secretKeyRef"]["name"] == rendered["Secret"]["metadata"]["name"]
    # The session label selects the pod, not the clients allowed to reach it.
    policy = rendered["NetworkPolicy"]["spec"]
    assert session.items() <= policy["podSelector"]["matchLabels"].items()
    peers = [peer for rule in policy["ingress"] for peer in rule["from"]]
    peers += [peer for rule in policy["egress"] for peer in rule["to"]]
    clients = [peer["podSelector"] for peer in peers if "podSelector" in peer]
    assert len(clients) == 2 and all("matchLabels" not in selector for selector in clients)
