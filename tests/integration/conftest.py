"""Fixtures for tests on the real sandbox: one hub + two members for the whole session.

The sandbox must start: if it cannot, every integration test errors with the reason (no skip).
Each test gets a fresh namespace, created in the hub and every member and deleted afterwards.

Every test under this directory is marked `integration` here, by where it lives, so that no file can
forget the mark: `pytest -m "not integration"` is the unit suite alone.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Iterator

import pytest
import ray
from kubernetes import client, config

from federation.demo import environment
from federation.sandbox import hubsetup, launcher, nodesim, state

HERE = pathlib.Path(__file__).parent

MEMBERS = ("member-1", "member-2")
NODES_PER_MEMBER = 3


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test collected from this directory `integration`."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


def _say(line: str) -> None:
    print(f"[sandbox] {line}", flush=True)


def start_sandbox(directory: pathlib.Path, members: tuple[str, ...] = MEMBERS) -> state.SandboxState:
    """Start a sandbox for tests: default node profile, CRDs installed in the hub."""
    return launcher.up(
        directory, members=list(members),
        profiles={m: nodesim.default_profile(m, NODES_PER_MEMBER) for m in members},
        crds=hubsetup.bundled_crds(), report=_say,
    )


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[state.SandboxState]:
    """A running sandbox shared by the session; stopped (every process) at the end."""
    directory = tmp_path_factory.mktemp("sandbox")
    started = start_sandbox(directory)
    try:
        yield started
    finally:
        launcher.down(directory, remove=False)


class Clusters:
    """API clients for every sandbox cluster, by name."""

    def __init__(self, sandbox: state.SandboxState) -> None:
        self.sandbox = sandbox
        self._clients = {c.name: config.new_client_from_config(config_file=c.kubeconfig)
                         for c in sandbox.clusters}

    def api(self, name: str) -> client.ApiClient:
        """The ApiClient of cluster `name`."""
        return self._clients[name]

    def core(self, name: str) -> client.CoreV1Api:
        """CoreV1Api of cluster `name`."""
        return client.CoreV1Api(self._clients[name])

    def apps(self, name: str) -> client.AppsV1Api:
        """AppsV1Api of cluster `name`."""
        return client.AppsV1Api(self._clients[name])

    def custom(self, name: str) -> client.CustomObjectsApi:
        """CustomObjectsApi of cluster `name`."""
        return client.CustomObjectsApi(self._clients[name])

    def admission(self, name: str) -> client.AdmissionregistrationV1Api:
        """AdmissionregistrationV1Api of cluster `name`."""
        return client.AdmissionregistrationV1Api(self._clients[name])

    @property
    def names(self) -> list[str]:
        """Every cluster name, hub first."""
        return [c.name for c in self.sandbox.clusters]


@pytest.fixture(scope="session")
def clusters(sandbox: state.SandboxState) -> Clusters:
    """Clients for the session sandbox."""
    return Clusters(sandbox)


@pytest.fixture
def namespace(clusters: Clusters) -> Iterator[str]:
    """A fresh namespace, present in the hub and every member, deleted after the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    for cluster in clusters.names:
        clusters.core(cluster).create_namespace({"metadata": {"name": name}})
    yield name
    for cluster in clusters.names:
        clusters.core(cluster).delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="session")
def local_ray() -> Iterator[str]:
    """One small local Ray for the session (its GCS address, for coordinators that join it).

    Ray gives its GCS 30 s to bind its port; on 2 busy cores (the sandbox's apiservers starting
    beside it) that was once not enough, so the session allows 120 s, as Ray does for slow stores.
    """
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        address: str = ray.get_runtime_context().gcs_address
        yield address
    finally:
        ray.shutdown()


USAGE_INTERVAL_SECONDS = 5
"""The shared federation's agents' `--usage-interval`: the sandbox hub's HPA sync period."""


@pytest.fixture(scope="session")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[environment.Federation]:
    """The demo's federation — hub, dc1, aws-eu, gcp-eu, the coordinator and an agent per member,
    each its own process — for end-to-end tests. Tests leave it as they found it: every agent
    running, their own workloads deleted. Its agents read the pods' usage every
    `USAGE_INTERVAL_SECONDS` instead of the default 15 s, so that the autoscaling tests' HPA steps
    wait a third as long for a report (what they test does not depend on the interval)."""
    with environment.Federation(tmp_path_factory.mktemp("federation"), members=3, report=_say,
                                usage_interval=USAGE_INTERVAL_SECONDS) as started:
        yield started
