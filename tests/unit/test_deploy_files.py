"""The deployment files parse: every Kubernetes manifest and kustomization under docker/ as YAML, the seccomp profile
as JSON of the shape runtimes read (tests/deploy checks what they say)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

YAML = sorted((REPO / "docker").glob("kubernetes*/*.yaml"))


@pytest.mark.parametrize("path", YAML, ids=lambda p: str(p.relative_to(REPO)))
def test_manifest_parses(path: Path) -> None:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert docs and all("apiVersion" in doc and "kind" in doc for doc in docs)


def test_there_are_both_deployments() -> None:
    names = {p.parent.name for p in YAML}
    assert names == {"kubernetes", "kubernetes-isolated"}


def test_seccomp_profile_parses() -> None:
    profile = json.loads((REPO / "docker" / "seccomp" / "sandbox-desktop.json").read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert all(rule["action"] in ("SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO") and rule["names"] for rule in profile["syscalls"])
