"""`fedspread agent`: run the member agent against one cluster and one coordinator.

Why here: the agent's flags and its one-line startup errors live with the other commands; the
agent itself (`agents.main`, with gRPC and the Kubernetes client) is imported only when the
command runs. Logging is quiet and structured: one line per event, `key=value` pairs after the
message, INFO by default (connections, Deployments written, outages), and the Kubernetes client's
own chatter muted.

Two kinds of certificate, two flag families: `--tls-*` is the webhook's *serving* certificate
(what the member's apiserver trusts), `--link-*` the agent's *client* certificate towards the
coordinator (what names this cluster). The link is mTLS unless `--insecure` says otherwise;
neither is a usage error, so nobody runs plaintext by forgetting a flag. Bad flags exit 2; an
agent that cannot start exits 1.
"""

from __future__ import annotations

import functools
import pathlib

import click

from federation.cli import options


def label_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """`key=value` strings as a dict; ValueError naming the bad one."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{pair!r} is not key=value")
        out[key] = value
    return out


@click.command("agent")
@click.option("--cluster", required=True, metavar="NAME",
              help="This member cluster's name, as in its MemberCluster object in the hub.")
@options.kubeconfig_options(
    help_text="Kubeconfig of the member cluster the agent manages (default: the KUBECONFIG "
              "environment variable, else the in-cluster service account, when the agent runs in "
              "a pod of that cluster).")
@click.option("--coordinator", required=True, metavar="HOST:PORT",
              help="Address of the coordinator's gRPC AgentService.")
@click.option("--webhook-port", default=9443, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the HTTPS admission webhook (0: any free port).")
@click.option("--webhook-url-host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Host the apiserver uses to reach the webhook (goes into the registered URL and, "
                   "without --tls-cert, into the generated certificate).")
@click.option("--webhook-service", metavar="NAMESPACE/NAME",
              help="Register the webhook behind this in-cluster Service (port 443 to --webhook-port) "
                   "instead of by URL; the generated certificate then names the Service.")
@click.option("--register-webhook/--no-register-webhook", default=True, show_default=True,
              help="Create or replace the MutatingWebhookConfiguration at startup.")
@click.option("--deregister-on-exit", is_flag=True,
              help="Delete the MutatingWebhookConfiguration when the agent stops.")
@click.option("--webhook-name", default="fedspread-agent", show_default=True, metavar="NAME",
              help="Name of the MutatingWebhookConfiguration (change it to run two agents on one "
                   "cluster, e.g. in tests).")
@click.option("--webhook-namespace-label", "namespace_labels", multiple=True, metavar="KEY=VALUE",
              help="Only handle pods in namespaces with this label (repeatable; default: all).")
@options.webhook_client_options(apiserver="member")
@click.option("--metrics-port", default=9090, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the Prometheus /metrics endpoint (0: off).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Topology label reported to the coordinator, e.g. "
                   "topology.fedspread.io/region=eu-west (repeatable).")
@options.cert_key_ca_options(
    prefix="tls-", must_exist=True,
    cert_help="Webhook serving certificate (PEM; what the member's apiserver trusts, not the "
              "coordinator link's --link-cert). Without it the agent makes one, signed by a CA held "
              "only in memory, and registers that CA.",
    key_help="Private key of --tls-cert (PEM).",
    ca_help="CA certificate the apiserver should trust for --tls-cert "
            "(default: --tls-cert itself, right for a self-signed certificate).")
@options.cert_key_ca_options(
    prefix="link-",
    cert_help="This agent's client certificate for the coordinator link (PEM; `fedspread certs "
              "agent --cluster NAME`). It names the cluster: the coordinator refuses a Hello for "
              "any other. Not the webhook's --tls-cert.",
    key_help="Private key of --link-cert (PEM).",
    ca_help="CA certificate (PEM) that signed the coordinator's serving certificate.")
@options.insecure_option(
    help_text="Plaintext gRPC to the coordinator instead of mTLS (the coordinator must run with "
              "--insecure too). For local use only.")
@click.option("--heartbeat-seconds", default=10.0, show_default=True, type=click.FloatRange(0.1, 300),
              help="How often heartbeats and unchanged reports are sent to the coordinator.")
@click.option("--max-node-pools", default=100, show_default=True, type=click.IntRange(1, 100_000),
              help="The most node pools the inventory reports. Beyond it, nodes of one kind (labels, "
                   "taints, allocatable) but different load share a pool that states the most any of "
                   "them requested: never more room than real, some room unseen. A cluster with more "
                   "kinds of node than this reports one pool per kind, and logs a warning.")
@click.option("--usage-interval", default=15, show_default=True, type=click.IntRange(1, 3600),
              help="Seconds between reads of this cluster's resource metrics API (metrics.k8s.io, as "
                   "metrics-server serves it) for the usage of each spread's Running and Ready pods, "
                   "which the coordinator serves to the hub's HorizontalPodAutoscaler. A report is sent "
                   "when a spread's figures change, else every 4 intervals; the coordinator takes a "
                   "cluster's figures as stale after 5. Without a metrics API the pods are reported "
                   "unmeasured and the MemberCluster says so.")
@options.federation_id_option(
    help_text="The federation this agent belongs to: its coordinator's --federation-id. Before the "
              "first Welcome the agent tells the coordinator about the member Deployments marked "
              "with it, and it warns when a coordinator of another federation welcomes it (that "
              "coordinator manages only its own Deployments). A warning is logged when it is left "
              "at the default.")
@options.log_level_option()
def agent_command(*, cluster: str, kubeconfig: pathlib.Path | None, context: str | None, coordinator: str,
                  webhook_port: int, webhook_url_host: str, webhook_service: str | None,
                  register_webhook: bool, deregister_on_exit: bool, webhook_name: str,
                  namespace_labels: tuple[str, ...], metrics_port: int, labels: tuple[str, ...],
                  tls_cert: pathlib.Path | None, tls_key: pathlib.Path | None, tls_ca: pathlib.Path | None,
                  link_cert: pathlib.Path | None, link_key: pathlib.Path | None,
                  link_ca: pathlib.Path | None, insecure: bool, heartbeat_seconds: float,
                  max_node_pools: int, usage_interval: int, federation_id: str, log_level: str,
                  webhook_client_ca: pathlib.Path | None, webhook_allowed_cns: tuple[str, ...]) -> None:
    """Run the member agent: enforce this cluster's share of every spread, report what it has.

    \b
    The agent
      * keeps one gRPC stream to the coordinator, which sends this cluster's quotas per spread;
      * creates the member Deployment of each spread with this cluster's replica count;
      * serves the admission webhook that places each new pod into a subset (node affinity,
        tolerations, patch) from the local quota table - no network call on that path;
      * keeps deletion costs, reschedules pods stuck Pending (Adaptive), and reports nodes,
        pod counts and the spreads' pod usage (metrics.k8s.io);
      * leaves a member HorizontalPodAutoscaler's replica count alone (reported on the spread).
    If the coordinator is unreachable the agent keeps enforcing its last quotas (fail static)
    and retries forever with jittered backoff. Stop it with SIGTERM or Ctrl-C.

    \b
    The link to the coordinator is mTLS: --link-cert/--link-key/--link-ca, from
    `fedspread certs agent --cluster NAME` (renewed files are used from the next reconnect).
    --insecure speaks plaintext instead, for local use only. The --tls-* flags are something
    else: the webhook's serving certificate, which the member's apiserver trusts.

    \b
    Example, against the sandbox (`fedspread sandbox up`), certificates in pki/:
      fedspread agent --cluster member-1 --kubeconfig ~/.cache/fedspread/sandbox/member-1/kubeconfig \\
          --coordinator 127.0.0.1:7443 --link-cert pki/member-1/tls.crt \\
          --link-key pki/member-1/tls.key --link-ca pki/member-1/ca.crt
    """
    link_tls = options.mtls_files(
        flags=("--link-cert", "--link-key", "--link-ca"), cert=link_cert, key=link_key, ca=link_ca,
        insecure=insecure, advice="issue them with `fedspread certs agent --cluster NAME`")
    if (tls_cert is None) != (tls_key is None):
        options.usage_error("--tls-cert and --tls-key go together")
    options.check_webhook_clients(webhook_client_ca, webhook_allowed_cns)
    options.host_port(coordinator, flag="--coordinator")
    service = None
    if webhook_service is not None:
        namespace, _, name = webhook_service.partition("/")
        if not namespace or not name:
            options.usage_error(f"--webhook-service {webhook_service!r} is not NAMESPACE/NAME")
        service = (namespace, name)
    try:
        topology = label_pairs(labels)
        namespace_selector = label_pairs(namespace_labels) or None
    except ValueError as error:
        options.usage_error(f"--label/--webhook-namespace-label: {error}")
    from agents import main as agent_main  # gRPC, Kubernetes: only once the agent runs
    from federation import logs
    from federation.certs import transport

    logs.configure(log_level)
    settings = agent_main.AgentConfig(
        link=agent_main.LinkSettings(
            coordinator, cluster, labels=topology, heartbeat_seconds=heartbeat_seconds,
            credentials=(None if link_tls is None  # the files are read again for every stream
                         else functools.partial(transport.channel_credentials, link_tls))),
        kubeconfig=kubeconfig, context=context, federation_id=federation_id,
        webhook=agent_main.WebhookSettings(
            port=webhook_port, url_host=webhook_url_host, name=webhook_name,
            namespace_selector=namespace_selector, service=service, register=register_webhook,
            deregister_on_exit=deregister_on_exit, tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca,
            client_ca=webhook_client_ca, allowed_cns=tuple(webhook_allowed_cns)),
        metrics=agent_main.MetricsSettings(port=metrics_port),
        inventory=agent_main.InventorySettings(max_node_pools=max_node_pools),
        usage=agent_main.UsageSettings(interval_seconds=usage_interval))
    try:
        agent = agent_main.Agent(settings)
    except agent_main.AgentError as error:
        options.fail(str(error))
    try:
        agent.start()
    except agent_main.AgentError as error:
        agent.stop()
        options.fail(str(error))
    agent.run()
