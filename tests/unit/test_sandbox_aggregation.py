"""The sandbox's aggregation layer, pure: the front-proxy PKI, the apiserver and hub flags, the
manifests that route an APIService to loopback, and state files from before it.

Why: a wrong flag or manifest shows up as an APIService that never becomes Available, far from its
cause; the sandbox test (test_sandbox_metrics.py) checks the running result.
"""

from __future__ import annotations

import base64
import json
import pathlib

from cryptography import x509
from cryptography.x509.oid import NameOID

from federation.certs import pki
from federation.sandbox import aggregation, hub_controllers, member_metrics, state


def _common_name(path: pathlib.Path) -> str:
    certificate = x509.load_pem_x509_certificate(path.read_bytes())
    return str(certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_front_proxy_client_is_signed_by_a_ca_of_its_own(tmp_path: pathlib.Path) -> None:
    files = aggregation.write_front_proxy(tmp_path)
    assert files == aggregation.front_proxy_files(tmp_path)
    assert _common_name(files.ca_file) == aggregation.FRONT_PROXY_CA_CN
    assert _common_name(files.client_cert_file) == aggregation.FRONT_PROXY_CLIENT_CN
    ca = x509.load_pem_x509_certificate(files.ca_file.read_bytes())
    client = x509.load_pem_x509_certificate(files.client_cert_file.read_bytes())
    client.verify_directly_issued_by(ca)
    assert files.client_key_file.stat().st_mode & 0o077 == 0


def test_apiserver_flags_name_the_files_and_the_allowed_name(tmp_path: pathlib.Path) -> None:
    files = aggregation.front_proxy_files(tmp_path)
    flags = dict(flag.removeprefix("--").split("=", 1) for flag in aggregation.apiserver_flags(files))
    assert flags == {
        "requestheader-client-ca-file": str(files.ca_file),
        "requestheader-allowed-names": "front-proxy-client",
        "requestheader-username-headers": "X-Remote-User", "requestheader-group-headers": "X-Remote-Group",
        "requestheader-extra-headers-prefix": "X-Remote-Extra-",
        "proxy-client-cert-file": str(files.client_cert_file),
        "proxy-client-key-file": str(files.client_key_file)}


def test_api_service_manifests_route_to_localhost_on_the_port() -> None:
    service, api_service = aggregation.api_service_manifests(
        "external.metrics.k8s.io", "v1beta1", namespace="fedspread-system", service="coordinator-metrics",
        port=7446, ca_pem=b"PEM")
    assert service["kind"] == "Service" and service["metadata"] == {
        "name": "coordinator-metrics", "namespace": "fedspread-system"}
    assert (service["spec"]["type"], service["spec"]["externalName"]) == ("ExternalName", "localhost")
    assert api_service["metadata"]["name"] == "v1beta1.external.metrics.k8s.io"
    spec = api_service["spec"]
    assert (spec["group"], spec["version"], spec["service"]) == (
        "external.metrics.k8s.io", "v1beta1",
        {"namespace": "fedspread-system", "name": "coordinator-metrics", "port": 7446})
    assert base64.b64decode(spec["caBundle"]) == b"PEM" and "insecureSkipTLSVerify" not in spec


def test_available_condition_is_found_or_none() -> None:
    available = {"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck", "message": "503"}
    assert aggregation.available_condition({"status": {"conditions": [available]}}) == available
    assert aggregation.available_condition({"status": {}}) is None
    assert aggregation.available_condition({}) is None


def test_member_metrics_serving_certificate_names_the_service(tmp_path: pathlib.Path) -> None:
    ca = pki.CertificateAuthority.create("sandbox-ca")
    argv = member_metrics.nodesim_args(tmp_path, ca=ca, cluster="member-1", port=4443,
                                       client_ca=tmp_path / "front-proxy-ca.crt")
    flags = dict(zip(argv[::2], argv[1::2], strict=True))
    assert flags["--metrics-port"] == "4443"
    assert flags["--metrics-client-ca"] == str(tmp_path / "front-proxy-ca.crt")
    certificate = x509.load_pem_x509_certificate(pathlib.Path(flags["--metrics-cert"]).read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "sandbox-metrics.kube-system.svc" in names.get_values_for_type(x509.DNSName)
    assert member_metrics.API_SERVICE == "v1beta1.metrics.k8s.io"


def test_hub_controllers_run_the_hpa_with_the_sandbox_periods() -> None:
    flags = dict(flag.removeprefix("--").split("=", 1) for flag in hub_controllers.controller_flags())
    assert "horizontalpodautoscaling" in flags["controllers"].split(",")
    assert not {"deployment", "replicaset", "statefulset", "job", "*"} & set(flags["controllers"].split(","))
    assert flags["horizontal-pod-autoscaler-sync-period"] == f"{hub_controllers.HPA_SYNC_PERIOD_SECONDS}s"
    assert flags["horizontal-pod-autoscaler-downscale-stabilization"] == (
        f"{hub_controllers.HPA_DOWNSCALE_STABILIZATION_SECONDS}s")


def test_a_state_file_from_before_the_aggregation_layer_loads(tmp_path: pathlib.Path) -> None:
    (tmp_path / state.STATE_FILE).write_text(json.dumps({
        "directory": str(tmp_path), "etcd_port": 2379, "token": "t", "ca_file": "ca.crt",
        "clusters": [{"name": "member-1", "role": "member", "port": 6443, "kubeconfig": "k"}],
        "components": []}))
    loaded = state.SandboxState.load(tmp_path)
    assert loaded.front_proxy_ca_file == "" and loaded.cluster("member-1").metrics_port == 0
    loaded.front_proxy_ca_file, loaded.clusters[0].metrics_port = "fp.crt", 4443
    loaded.save()
    again = state.SandboxState.load(tmp_path)
    assert (again.front_proxy_ca_file, again.cluster("member-1").metrics_port) == ("fp.crt", 4443)
