"""`fedspread coordinator`: run the coordinator against a hub cluster.

Why a separate module: the `fedspread` group (federation/cli.py) only registers commands; the
coordinator's flags, logging setup and one-line startup errors live next to the coordinator.
Logging is quiet and structured like the agent's (`federation.logs`).

Transport: mTLS (`--tls-cert/--tls-key/--tls-ca`) or, said out loud, plaintext (`--insecure`);
neither is a usage error, so that nobody serves plaintext by forgetting a flag (issue 8).
"""

from __future__ import annotations

import pathlib
import sys
from typing import NoReturn

import click

from federation import logs
from federation.certs import transport
from federation.coordinator import process as coordinator_main

_File = click.Path(dir_okay=False, path_type=pathlib.Path)


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def tls_files(*, cert: pathlib.Path | None, key: pathlib.Path | None, ca: pathlib.Path | None,
              insecure: bool) -> transport.TLSFiles | None:
    """The mTLS files, or None with --insecure; click.UsageError for any other combination."""
    try:
        return transport.files_from_flags(
            flags=("--tls-cert", "--tls-key", "--tls-ca"), cert=cert, key=key, ca=ca, insecure=insecure,
            advice="issue them with `fedspread certs ca` and `fedspread certs coordinator`")
    except ValueError as error:
        raise click.UsageError(str(error)) from None


@click.command("coordinator")
@click.option("--hub-kubeconfig", metavar="FILE", default=None,
              type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="Kubeconfig of the hub cluster, where FederatedSpreads, MemberClusters and the "
                   "target Deployments live (the sandbox writes one: `fedspread sandbox up`). "
                   "Default: the in-cluster service account, when the coordinator runs in a pod "
                   "of the hub (deploy/coordinator).")
@click.option("--ray-address", metavar="ADDRESS", default=None,
              help="Join an existing Ray cluster (e.g. ray://head:10001 for KubeRay, or a head's "
                   "host:6379) instead of starting a local Ray in this process.")
@click.option("--no-ray", is_flag=True,
              help="Place in this process, without Ray: for a laptop, or a federation of a few spreads.")
@click.option("--spread-shards", default=2, show_default=True, type=click.IntRange(1, 256),
              help="SpreadShard actors placements are computed on (each is one ~90 MB process); "
                   "spreads are hashed onto them.")
@click.option("--cluster-shards", default=1, show_default=True, type=click.IntRange(1, 256),
              help="ClusterShard actors holding the node inventories for capacity simulations.")
@click.option("--listen", default="0.0.0.0:7443", show_default=True, metavar="HOST:PORT",
              help="Address of the gRPC server agents (AgentService) and `fedspread get` / the SDK "
                   "(PlacementService) connect to.")
@click.option("--tls-cert", metavar="FILE", type=_File,
              help="Serving certificate of the gRPC server (PEM; `fedspread certs coordinator`). "
                   "It must name every host agents and SDK users dial.")
@click.option("--tls-key", metavar="FILE", type=_File, help="Private key of --tls-cert (PEM).")
@click.option("--tls-ca", metavar="FILE", type=_File,
              help="CA certificate (PEM) that signed the agents' and SDK users' client certificates; "
                   "clients without one are refused at the handshake.")
@click.option("--insecure", is_flag=True,
              help="Serve plaintext gRPC instead of mTLS: no client is authenticated and any of them "
                   "can speak for any cluster. For local use only (laptop, tests).")
@click.option("--heartbeat-seconds", default=10.0, show_default=True, type=click.FloatRange(0.5, 300),
              help="How often each agent stream is pinged, and the heartbeat interval agents are told.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
              help="Least severe log level printed.")
def coordinator_command(*, hub_kubeconfig: pathlib.Path | None, ray_address: str | None, no_ray: bool,
                        spread_shards: int, cluster_shards: int, listen: str, tls_cert: pathlib.Path | None,
                        tls_key: pathlib.Path | None, tls_ca: pathlib.Path | None, insecure: bool,
                        heartbeat_seconds: float, log_level: str) -> None:
    """Run the coordinator: decide how many replicas each cluster gets, and keep deciding.

    \b
    The coordinator
      * watches the hub for FederatedSpreads, MemberClusters and their target Deployments;
      * places every spread's replicas over its ordered subsets, on the capacity agents report
        (on Ray shard actors: a local Ray unless --ray-address or --no-ray);
      * sends each member cluster's agent its share (one gRPC stream per agent);
      * moves replicas away from clusters whose agent stays silent (failover);
      * writes FederatedSpread, MemberCluster and hub Deployment status back to the hub;
      * answers placement questions (`fedspread get placement`, the Python SDK).
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
    In a pod of the hub (deploy/coordinator), leave out --hub-kubeconfig: the pod's
    service account is used.
    """
    tls = tls_files(cert=tls_cert, key=tls_key, ca=tls_ca, insecure=insecure)
    logs.configure(log_level)
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        _fail(f"--listen {listen!r} is not HOST:PORT")
    if no_ray and ray_address:
        _fail("--no-ray and --ray-address contradict each other; give one")
    settings = coordinator_main.CoordinatorConfig(
        hub_kubeconfig=hub_kubeconfig, listen=listen, use_ray=not no_ray, ray_address=ray_address,
        spread_shards=spread_shards, cluster_shards=cluster_shards, heartbeat_seconds=heartbeat_seconds,
        tls=tls)
    try:
        process = coordinator_main.CoordinatorProcess(settings)
    except coordinator_main.CoordinatorError as error:
        _fail(str(error))
    try:
        process.start()
    except coordinator_main.CoordinatorError as error:
        process.stop()
        _fail(str(error))
    process.run()
