"""The webhook's serving certificate rotates under a real member apiserver, without a restart (issue 8).

What a CA rotation by cert-manager + its CA injector looks like, step by step, against member-1:

1. the agent's webhook serves certificate A (CA A), the registration's caBundle is CA A;
2. the caBundle becomes CA A + CA B (the injector publishes the new CA before it is used);
3. the certificate files are replaced with certificate B (signed by CA B), by rename, as the
   kubelet updates a mounted Secret: the same `WebhookServer` object — no restart — now serves B
   to every new connection (`ssl.get_server_certificate` sees it);
4. the caBundle becomes CA B alone: the apiserver can only be talking to certificate B now.

Throughout, a background loop keeps asking the apiserver to admit pods (server-side dry-run
creates: the webhook is called, nothing is stored). The registration is the agent's own, with
`failurePolicy: Fail` instead of Ignore, so that any admission call the apiserver cannot make (a
certificate it does not trust) refuses the create instead of silently skipping the webhook; every
one must succeed and carry the webhook's subset annotation. Each step's registration also admits
a new value of a `rotation` label, so that the test knows when the apiserver runs with that
step's caBundle (a pod with that value is mutated only then). A last, deliberately wrong step (a
caBundle of a third CA that signed nothing served) must be refused with a certificate error: it
shows the checks above can fail. (Not CA A again: the apiserver caches one client per
clientConfig, and the one of step 1 may still hold a kept-alive connection verified against A.)
"""

from __future__ import annotations

import copy
import itertools
import pathlib
import ssl
import threading
from collections.abc import Iterator

import pytest
from conftest import Clusters
from cryptography import x509
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from agents import bookkeeping, metrics
from agents.webhook import handler, registration, server
from federation.api import names
from federation.certs import pki, store
from federation.rpc import assignment

MEMBER = "member-1"
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
SPREAD = "probe"
STEP_LABEL = "fedspread-test/rotation"
BACKGROUND = "0"  # the background loop's pods: admitted by every step's registration
NAMESPACE_LABEL = "fedspread-test/rotation-namespace"  # 1.20 has no kubernetes.io/metadata.name


def spread_assignment(namespace: str) -> assignment.Assignment:
    rule = assignment.SubsetRule(name="any", index=0, quota=1_000_000)
    return assignment.Assignment(spread=f"{namespace}/{SPREAD}", generation=1, namespace=namespace,
                                 workload=SPREAD, replicas=1, template={}, template_revision="",
                                 subsets=(rule,), subset_count=1)


class Rotation:
    """One webhook server for the test namespace and its registration, step by step."""

    def __init__(self, clusters: Clusters, namespace: str, directory: pathlib.Path) -> None:
        self.clusters, self.namespace, self.directory = clusters, namespace, directory
        self.name = f"fedspread-rotation-{namespace}"
        self.ca_a = pki.CertificateAuthority.create(f"rotation CA A {namespace}")
        self.ca_b = pki.CertificateAuthority.create(f"rotation CA B {namespace}")
        self.ca_c = pki.CertificateAuthority.create(f"rotation CA C {namespace}")  # signs nothing served
        self.install(self.ca_a)
        book = bookkeeping.Bookkeeping()
        book.set_assignment(spread_assignment(namespace))
        self.server = server.WebhookServer(
            handler.AdmissionHandler(book, metrics.AgentMetrics(cluster=MEMBER)), host="127.0.0.1", port=0,
            cert_file=directory / store.CERT, key_file=directory / store.KEY)
        self.steps: list[str] = [BACKGROUND]
        self._names = itertools.count()

    def install(self, authority: pki.CertificateAuthority) -> None:
        """Serving files from `authority`, replaced by rename (as a Secret volume update)."""
        pair = authority.issue_server("fedspread-agent", ips=("127.0.0.1",))
        store.write_files(self.directory, {store.CERT: pair.cert_pem, store.KEY: pair.key_pem},
                          private={store.KEY}, force=True)

    def served_issuer(self) -> str:
        """The issuer of the certificate a new connection to the webhook gets."""
        pem = ssl.get_server_certificate(("127.0.0.1", self.server.port), timeout=10)
        return x509.load_pem_x509_certificate(pem.encode()).issuer.rfc4514_string()

    def register(self, step: str, *bundle: pki.CertificateAuthority) -> None:
        """The agent's registration with caBundle `bundle`, failing closed, admitting label `step`."""
        self.steps.append(step)
        config = registration.configuration(
            registration.url_client_config(self.server.url(), ca_pem=b"".join(a.cert_pem for a in bundle)),
            name=self.name, namespace_selector={"matchLabels": {NAMESPACE_LABEL: self.namespace}})
        pods = copy.deepcopy(config["webhooks"][0])
        pods.update(failurePolicy="Fail", timeoutSeconds=10)
        pods["objectSelector"]["matchExpressions"].append(
            {"key": STEP_LABEL, "operator": "In", "values": list(self.steps)})
        config["webhooks"] = [pods]
        registration.apply_registration(self.clusters.api(MEMBER), config)

    def admit(self, step: str) -> str | None:
        """Dry-run create a pod labelled `step`; the subset the webhook gave it (None: not called)."""
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"probe-{next(self._names)}",
                            "labels": {names.SPREAD_LABEL: SPREAD, STEP_LABEL: step}},
               "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}
        created = self.clusters.core(MEMBER).create_namespaced_pod(self.namespace, pod, dry_run="All")
        return (created.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)

    def step_in_force(self, step: str) -> None:
        """Wait until the apiserver runs the registration of `step` (and calls the webhook with it)."""
        wait_for(lambda: self.admit(step) == "any", timeout=WAIT,
                 message=f"the apiserver never admitted a pod through the registration of step {step}")


class Background:
    """Admits pods through the webhook until stopped; remembers every refusal or unmutated pod."""

    def __init__(self, rotation: Rotation) -> None:
        self.rotation = rotation
        self.admitted = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rotation-background")

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                subset = self.rotation.admit(BACKGROUND)
            except ApiException as error:
                self.failures.append(f"{error.status}: {(error.body or '')[:300]}")
                continue
            if subset != "any":
                self.failures.append(f"admitted without the webhook's subset (got {subset!r})")
            else:
                self.admitted += 1

    def __enter__(self) -> Background:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.fixture
def rotation(clusters: Clusters, namespace: str, tmp_path: pathlib.Path) -> Iterator[Rotation]:
    clusters.core(MEMBER).patch_namespace(namespace, {"metadata": {"labels": {NAMESPACE_LABEL: namespace}}})
    running = Rotation(clusters, namespace, tmp_path / "webhook-tls")
    running.server.start()
    try:
        yield running
    finally:
        registration.remove_registration(clusters.api(MEMBER), running.name)
        running.server.stop()


def test_certificate_and_ca_rotate_with_admissions_succeeding_throughout(rotation: Rotation) -> None:
    issuer_a, issuer_b = (a.certificate.subject.rfc4514_string() for a in (rotation.ca_a, rotation.ca_b))
    rotation.register("1", rotation.ca_a)
    rotation.step_in_force("1")
    assert rotation.served_issuer() == issuer_a

    with Background(rotation) as background:
        wait_for(lambda: background.admitted or background.failures, timeout=WAIT,
                 message="the background loop admitted nothing")
        rotation.register("2", rotation.ca_a, rotation.ca_b)  # the injector publishes CA B first
        rotation.step_in_force("2")

        rotation.install(rotation.ca_b)  # the Secret renewed: same server object, new files
        wait_for(lambda: rotation.served_issuer() == issuer_b, timeout=WAIT,
                 message="the webhook kept serving certificate A after its files changed")
        assert rotation.admit("2") == "any"

        rotation.register("3", rotation.ca_b)  # CA A retired: only certificate B can be trusted now
        rotation.step_in_force("3")
        admitted_before = background.admitted
        wait_for(lambda: background.admitted > admitted_before or background.failures, timeout=WAIT,
                 message="the background loop admitted nothing after the rotation")
    assert not background.failures, "admissions failed during the rotation:\n" + "\n".join(
        background.failures[:10])
    assert rotation.served_issuer() == issuer_b

    # The checks can fail: a caBundle that does not trust the served certificate is refused.
    rotation.register("4", rotation.ca_c)

    def refused() -> str | None:
        try:
            rotation.admit("4")
        except ApiException as error:
            return str(error.body)
        return None

    reason = wait_for(refused, timeout=WAIT, message="a caBundle of CA C never refused certificate B")
    assert "x509" in reason or "certificate" in reason, reason
