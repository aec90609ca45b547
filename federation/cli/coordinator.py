"""`fedspread coordinator`: run the coordinator against a hub cluster.

Why here: the coordinator's flags and its one-line startup errors live with the other commands;
the coordinator itself (`federation.coordinator.process`, with Ray, gRPC and the Kubernetes
client) is imported only when the command runs, so `--help` stays fast. Logging is quiet and
structured like the agent's (`federation.logs`).

Transport: mTLS (`--tls-cert/--tls-key/--tls-ca`) or, said out loud, plaintext (`--insecure`);
neither is a usage error, so that nobody serves plaintext by forgetting a flag. Flags that
contradict each other exit 2; a coordinator that cannot start exits 1.
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

import click

from federation.cli import options
from federation.coordinator.model import stall  # pure: the default grace, defined once

if TYPE_CHECKING:  # imported when the command runs: `--help` stays fast
    from federation.coordinator import process as coordinator_main
    from federation.coordinator.hub import leader


@click.command("coordinator")
@options.kubeconfig_options(
    flag="--hub-kubeconfig", dest="hub_kubeconfig",
    help_text="Kubeconfig of the hub cluster, where FederatedSpreads, MemberClusters and the target "
              "Deployments live (the sandbox writes one: `fedspread sandbox up`). Default: the "
              "KUBECONFIG environment variable, else the in-cluster service account, when the "
              "coordinator runs in a pod of the hub (deploy/coordinator).")
@click.option("--ray-address", metavar="ADDRESS", default=None,
              help="Join an existing Ray cluster (e.g. ray://head:10001 for KubeRay, or a head's "
                   "host:6379) instead of starting a local Ray in this process.")
@click.option("--ray-join-seconds", default=25.0, show_default=True, type=click.FloatRange(1, 600),
              help="Give up joining --ray-address after this long, with one line saying why (the "
                   "address is asked once first: nothing listening, no answer or a missing Ray "
                   "token fail within seconds).")
@click.option("--local-ray", is_flag=True,
              help="Start a local Ray on this machine and place on its shard actors. Off by default: "
                   "on one machine the Ray shards were slower than placing in this process at every "
                   "size measured (bench/README.md, \"Ray or in-process, measured again\").")
@click.option("--no-ray", is_flag=True,
              help="Place in this process, without Ray: the default unless --ray-address or "
                   "--local-ray is given (kept so that scripts that say it keep working).")
@click.option("--spread-shards", default=2, show_default=True, type=click.IntRange(1, 256),
              help="SpreadShard actors placements are computed on (each is one ~90 MB process); "
                   "spreads are hashed onto them.")
@click.option("--ray-round-min-spreads", default=None, type=click.IntRange(2, None), metavar="N",
              help="A round of fewer spreads (a scale, a new spread, a cordon) is placed in the "
                   "coordinator's process, without a Ray round trip, with the same answer. Default: "
                   "4096, the crossover measured on 2 cores, where Ray was slower at every size "
                   "measured (shards.RAY_ROUND_MIN_SPREADS; bench/README.md, \"Where Ray starts to "
                   "pay\").")
@click.option("--cluster-shards", default=1, show_default=True, type=click.IntRange(1, 256),
              help="ClusterShard actors holding the node inventories for capacity simulations.")
@click.option("--listen", default="0.0.0.0:7443", show_default=True, metavar="HOST:PORT",
              help="Address of the gRPC server agents (AgentService) and `fedspread get` / the SDK "
                   "(PlacementService) connect to.")
@options.cert_key_ca_options(
    prefix="tls-",
    cert_help="Serving certificate of the gRPC server (PEM; `fedspread certs coordinator`). "
              "It must name every host agents and SDK users dial.",
    key_help="Private key of --tls-cert (PEM).",
    ca_help="CA certificate (PEM) that signed the agents' and SDK users' client certificates; "
            "clients without one are refused at the handshake.")
@options.insecure_option(
    help_text="Serve plaintext gRPC instead of mTLS: no client is authenticated and any of them "
              "can speak for any cluster. For local use only (laptop, tests).")
@click.option("--heartbeat-seconds", default=10.0, show_default=True, type=click.FloatRange(0.5, 300),
              help="How often each agent stream is pinged, and the heartbeat interval agents are told.")
@click.option("--failover-clusters-per-minute", default=10, show_default=True,
              type=click.IntRange(0, 100_000),
              help="At most this many lost clusters start failing over per minute across the federation "
                   "(the others keep their replicas until the budget allows); 0: no limit.")
@options.federation_id_option(
    help_text="This federation's identity, sent to agents: they manage only member Deployments "
              "labelled with it (fedspread.io/federation). Give each federation its own (a warning "
              "is logged when it is left at the default), and never change it once agents have "
              "created Deployments.")
@click.option("--webhook-port", default=9443, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the HTTPS server for the hub's validating webhook, on every address "
                   "(served only with --webhook-cert and --webhook-key; 0: any free port); "
                   "deploy/coordinator's ValidatingWebhookConfiguration reaches it through the Service.")
@click.option("--webhook-cert", type=options.FILE, metavar="FILE", default=None,
              help="Serving certificate (PEM) of the validating webhook, for the name the hub's "
                   "apiserver dials (fedspread-coordinator.fedspread-system.svc); re-read when the "
                   "file changes. Without it, invalid specs are still reported in their Valid condition.")
@click.option("--webhook-key", type=options.FILE, metavar="FILE", default=None,
              help="Private key (PEM) of --webhook-cert.")
@options.webhook_client_options(apiserver="hub")
@click.option("--external-metrics-port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Serve external.metrics.k8s.io (HTTPS, every address) so that a HorizontalPodAutoscaler "
                   "on the hub can scale a spread from its pods' usage in every member "
                   "(docs/autoscaling.md). The hub apiserver forwards to it through an APIService "
                   "(deploy/external-metrics); only its front-proxy client certificate "
                   "is believed, and the hub's RBAC decides who reads what. 0: off. Needs "
                   "--external-metrics-cert and --external-metrics-key.")
@click.option("--external-metrics-cert", type=options.FILE, metavar="FILE", default=None,
              help="Serving certificate (PEM) of the external metrics API, naming "
                   "fedspread-external-metrics.fedspread-system.svc, the Service the hub apiserver dials "
                   "(e.g. the coordinator's own: `fedspread certs coordinator --host` that name); "
                   "re-read when the file changes.")
@click.option("--external-metrics-key", type=options.FILE, metavar="FILE", default=None,
              help="Private key (PEM) of --external-metrics-cert.")
@click.option("--metrics-port", default=9095, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the Prometheus /metrics endpoint (plain HTTP, on the --listen host; not the "
                   "agent's 9090, so both run on one machine): placement rounds and their latency, "
                   "spreads, agents, outbox, status writes, failovers. 0: off.")
@click.option("--health-port", default=7444, show_default=True, type=click.IntRange(0, 65535),
              help="Port of a plaintext gRPC server (on the --listen host) serving only "
                   "grpc.health.v1.Health, for the kubelet's gRPC probes, which cannot present a "
                   "client certificate: NOT_SERVING until the hub is listed, then SERVING (service "
                   "\"liveness\": SERVING while running). Health and reflection are served on --listen "
                   "too. 0: off.")
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True,
              help="Act only while holding a coordination.k8s.io Lease in the hub, so that two "
                   "coordinators (deploy/coordinator runs two) never both act: the other stands by "
                   "(health NOT_SERVING, nothing served or written) and takes over when the leader's "
                   "lease expires or is released. A leader that cannot renew exits (status 1). In a "
                   "pod (POD_NAME set), the leader labels it fedspread.io/coordinator-leader=true "
                   "for the Service to select. Off for a single local coordinator.")
@click.option("--leader-election-namespace", default="fedspread-system", show_default=True,
              envvar="POD_NAMESPACE", metavar="NAMESPACE",
              help="Hub namespace of the Lease (environment: POD_NAMESPACE).")
@click.option("--lease-name", default="fedspread-coordinator", show_default=True, metavar="NAME",
              help="Name of the Lease the coordinators compete for.")
@click.option("--lease-duration-seconds", default=15.0, show_default=True, type=click.FloatRange(1, 600),
              help="A standby takes a lease not renewed for this long (client-go's default).")
@click.option("--renew-deadline-seconds", default=10.0, show_default=True, type=click.FloatRange(0.5, 600),
              help="A leader that has not renewed for this long stops and exits; shorter than the "
                   "lease duration, so it stops before another may lead.")
@click.option("--retry-period-seconds", default=2.0, show_default=True, type=click.FloatRange(0.1, 60),
              help="Renew, or try to acquire, this often.")
@click.option("--leader-stall-grace-seconds", default=stall.GRACE_SECONDS, show_default=True,
              type=click.FloatRange(1, 3600),
              help="A leader whose hub-events or timer loop has not turned for the watchdog's limit "
                   "plus this long, while the hub answers it, gives up: it stops acting, releases "
                   "the Lease to the standby and exits (status 1).")
@options.log_level_option()
def coordinator_command(*, hub_kubeconfig: pathlib.Path | None, context: str | None, ray_address: str | None,
                        ray_join_seconds: float, local_ray: bool, no_ray: bool, spread_shards: int,
                        ray_round_min_spreads: int | None, cluster_shards: int,
                        listen: str, tls_cert: pathlib.Path | None, tls_key: pathlib.Path | None,
                        tls_ca: pathlib.Path | None, insecure: bool, heartbeat_seconds: float,
                        failover_clusters_per_minute: int, federation_id: str, webhook_port: int,
                        webhook_cert: pathlib.Path | None, webhook_key: pathlib.Path | None,
                        webhook_client_ca: pathlib.Path | None, webhook_allowed_cns: tuple[str, ...],
                        external_metrics_port: int, external_metrics_cert: pathlib.Path | None,
                        external_metrics_key: pathlib.Path | None,
                        metrics_port: int, health_port: int, leader_elect: bool,
                        leader_election_namespace: str, lease_name: str, lease_duration_seconds: float,
                        renew_deadline_seconds: float, retry_period_seconds: float,
                        leader_stall_grace_seconds: float, log_level: str) -> None:
    """Run the coordinator: decide how many replicas each cluster gets, and keep deciding.

    \b
    The coordinator
      * watches the hub for FederatedSpreads, MemberClusters and their target Deployments;
      * places every spread's replicas over its ordered subsets, on the capacity agents report
        (in this process; on Ray shard actors with --ray-address or --local-ray);
      * sends each member cluster's agent its share (one gRPC stream per agent);
      * moves replicas away from clusters whose agent stays silent (failover), unless more than
        half of a spread's clusters are silent at once (then the fault is probably its own and
        nothing moves), and at most --failover-clusters-per-minute clusters a minute;
      * writes FederatedSpread, MemberCluster and hub Deployment status back to the hub;
      * with --webhook-cert/--webhook-key, refuses invalid FederatedSpreads and MemberClusters at
        the hub's door (a validating webhook, every problem with its field path), answering only
        the hub apiserver's client certificate with --webhook-client-ca;
      * with --external-metrics-port, serves external.metrics.k8s.io, so that a hub
        HorizontalPodAutoscaler scales a spread from its pods' usage (docs/autoscaling.md);
      * answers placement questions (`fedspread get placement`, the Python SDK);
      * serves Prometheus metrics (--metrics-port) and gRPC health (--health-port, and --listen).
    With --leader-elect, two or more may run: one leads (holds the hub Lease), the others stand by.
    Stop it with SIGTERM or Ctrl-C.

    \b
    The gRPC server speaks mTLS: every client needs a certificate signed by --tls-ca, and an
    agent may only speak for the cluster its certificate names (`fedspread certs --help`).
    --insecure serves plaintext instead, for local use only.

    \b
    Example, against the sandbox (`fedspread sandbox up`), certificates in pki/:
      fedspread coordinator --hub-kubeconfig ~/.cache/fedspread/sandbox/hub/kubeconfig \\
          --listen 127.0.0.1:7443 --tls-cert pki/coordinator/tls.crt \\
          --tls-key pki/coordinator/tls.key --tls-ca pki/coordinator/ca.crt
    Without --hub-kubeconfig, KUBECONFIG is used if set; in a pod of the hub
    (deploy/coordinator) leave both out and the pod's service account is used.
    """
    tls = options.mtls_files(
        flags=("--tls-cert", "--tls-key", "--tls-ca"), cert=tls_cert, key=tls_key, ca=tls_ca,
        insecure=insecure, advice="issue them with `fedspread certs ca` and `fedspread certs coordinator`")
    options.host_port(listen, flag="--listen")
    if (webhook_cert is None) != (webhook_key is None):
        options.usage_error("--webhook-cert and --webhook-key go together; give both or neither")
    options.check_webhook_clients(webhook_client_ca, webhook_allowed_cns)
    if webhook_client_ca is not None and webhook_cert is None:
        options.usage_error("--webhook-client-ca needs --webhook-cert and --webhook-key: without them "
                            "no webhook is served")
    if external_metrics_port and (external_metrics_cert is None or external_metrics_key is None):
        options.usage_error("--external-metrics-port needs --external-metrics-cert and "
                            "--external-metrics-key: a serving certificate for "
                            "fedspread-external-metrics.fedspread-system.svc")
    if no_ray and (ray_address or local_ray):
        options.usage_error(f"--no-ray and {'--ray-address' if ray_address else '--local-ray'} "
                            "contradict each other; give one")
    if local_ray and ray_address:
        options.usage_error("--local-ray and --ray-address contradict each other: the first starts a "
                            "Ray here, the second joins one; give one")
    from federation import collector, logs
    from federation.coordinator import process as coordinator_main  # Ray, gRPC, Kubernetes
    from federation.coordinator import ray_join
    from federation.coordinator.hub import admission
    from federation.coordinator.services import metrics_api
    from federation.kube import webhook_clients

    if ray_address:
        try:
            ray_join.target(ray_address)
        except ray_join.RayJoinError as error:
            options.usage_error(str(error))
    logs.configure(log_level)
    collector.tune()  # a round spends a third of its time collecting with the interpreter's thresholds
    collector.freeze_rounds()  # a large round's survivors are walked by no collection for a while
    settings = coordinator_main.CoordinatorConfig(
        hub_kubeconfig=hub_kubeconfig, hub_context=context, listen=listen,
        use_ray=bool(ray_address) or local_ray,
        ray_address=ray_address, ray_join_seconds=ray_join_seconds, spread_shards=spread_shards,
        cluster_shards=cluster_shards,
        **({"ray_round_min_spreads": ray_round_min_spreads} if ray_round_min_spreads else {}),
        heartbeat_seconds=heartbeat_seconds, tls=tls, federation_id=federation_id,
        failover_clusters_per_minute=failover_clusters_per_minute or None, metrics_port=metrics_port,
        health_port=health_port, leader_stall_grace_seconds=leader_stall_grace_seconds,
        webhook=admission.WebhookSettings(
            cert_file=webhook_cert, key_file=webhook_key, port=webhook_port,
            client_auth=None if webhook_client_ca is None else webhook_clients.ClientAuth(
                webhook_client_ca, frozenset(webhook_allowed_cns)))
        if webhook_cert is not None and webhook_key is not None else None,
        external_metrics=metrics_api.ExternalMetricsSettings(
            cert_file=external_metrics_cert, key_file=external_metrics_key, port=external_metrics_port)
        if external_metrics_port and external_metrics_cert and external_metrics_key else None)
    lease = None
    if leader_elect:
        from federation.coordinator.hub import leader
        from federation.coordinator.model import election
        try:
            timing = election.Timing(lease_seconds=lease_duration_seconds,
                                     renew_deadline_seconds=renew_deadline_seconds,
                                     retry_seconds=retry_period_seconds)
        except ValueError as error:
            options.usage_error(str(error))
        lease = leader.LeaseSettings(namespace=leader_election_namespace, name=lease_name, timing=timing)
    try:
        process = coordinator_main.CoordinatorProcess(settings)
    except coordinator_main.CoordinatorError as error:
        options.fail(str(error))
    if lease is not None:
        _lead(process, lease)
        return
    try:
        process.start()
    except coordinator_main.CoordinatorError as error:
        process.stop()
        options.fail(str(error))
    process.run()


def _lead(process: coordinator_main.CoordinatorProcess, lease: leader.LeaseSettings) -> None:
    """Run `process` under leader election (`federation.coordinator.leading`); exit 1 when the
    Lease is lost, so the container restarts as a standby."""
    from federation.coordinator import leading
    from federation.coordinator import process as coordinator_main
    from federation.coordinator.hub import leader, pod_label

    elector = leader.LeaderElector(process.api, lease, on_stopped=process.stopping.set)
    label = pod_label.LeaderLabel.from_environment(process.api, namespace=lease.namespace)
    try:
        code = leading.LeaderRun(process, elector, label=label).run()
    except coordinator_main.CoordinatorError as error:
        options.fail(str(error))
    if code:
        options.fail("lost or gave up the leader lease; exiting so that this coordinator restarts as a "
                     "standby", code=code)
