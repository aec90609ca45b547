"""Each sandbox member's resource metrics API: the node simulator's part and the APIService.

Why apart from the launcher: the launcher starts processes; this says how a member's
`metrics.k8s.io` is wired, as metrics-server is in a real cluster: the node simulator serves it on a
loopback port with a serving certificate of the sandbox CA for `METRICS_SERVICE`.`METRICS_NAMESPACE`
.svc (the name the aggregator checks), taking only the aggregator's front-proxy client certificate;
the member's apiserver routes `v1beta1.metrics.k8s.io` there (`aggregation`).
"""

from __future__ import annotations

import pathlib

from federation.certs import pki
from federation.sandbox import aggregation, pod_metrics

METRICS_SERVICE = "sandbox-metrics"
METRICS_NAMESPACE = "kube-system"
API_SERVICE = aggregation.api_service_name(pod_metrics.GROUP, pod_metrics.VERSION)


def nodesim_args(directory: pathlib.Path, *, ca: pki.CertificateAuthority, cluster: str, port: int,
                 client_ca: pathlib.Path) -> list[str]:
    """Write `cluster`'s metrics serving certificate into `directory`; the node simulator's flags
    that serve the metrics API on `port` to callers with a client certificate of `client_ca` (the
    front-proxy CA)."""
    name = aggregation.serving_name(namespace=METRICS_NAMESPACE, service=METRICS_SERVICE)
    serving = ca.issue_server(f"{cluster}-metrics", dns_names=(name, "localhost"), ips=("127.0.0.1",))
    cert, key = serving.write(directory, f"{cluster}-metrics")
    return ["--metrics-port", str(port), "--metrics-cert", str(cert), "--metrics-key", str(key),
            "--metrics-client-ca", str(client_ca)]


def register(kubeconfig: str, *, port: int, ca_pem: bytes,
             timeout: float = aggregation.AVAILABLE_SECONDS) -> str:
    """Route the member's `metrics.k8s.io/v1beta1` to its node simulator on `port` and wait until the
    APIService is Available; its name."""
    return aggregation.register_api_service(kubeconfig, aggregation.api_service_manifests(
        pod_metrics.GROUP, pod_metrics.VERSION, namespace=METRICS_NAMESPACE, service=METRICS_SERVICE,
        port=port, ca_pem=ca_pem), timeout=timeout)
