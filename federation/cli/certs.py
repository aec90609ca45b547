"""`fedspread certs`: issue the CA and the certificates of fedspread's mTLS link, without cert-manager.

Why a command: agents, the coordinator and SDK users authenticate each other with certificates
from one CA, and each agent's certificate must name its cluster in the form the coordinator
checks (`federation.certs.names`). Getting that right with openssl is a page of flags; here it is
one line per certificate. The work is `federation.certs.bundles`; this module parses flags and
prints what was written and what to do next. Every error here is the user's to fix (a name, a
missing or broken CA, a file that would be overwritten): one line, exit 2.
"""

from __future__ import annotations

import base64
import pathlib
from collections.abc import Callable

import click
import yaml

from federation.api import names
from federation.certs import bundles, store
from federation.cli import options

_Dir = click.Path(file_okay=False, path_type=pathlib.Path)


def _issue(make: Callable[[], list[pathlib.Path]]) -> list[pathlib.Path]:
    try:
        return make()
    except (store.CertFileError, ValueError) as error:  # a bad name, CA or --out: the user's to fix
        options.usage_error(str(error))


def _report(written: list[pathlib.Path], *, next_step: str) -> None:
    for path in written:
        mode = path.stat().st_mode & 0o777
        click.echo(f"wrote {path} ({mode:04o})")
    click.echo(next_step)


_ca_option = click.option(
    "--ca", "ca_dir", required=True, type=_Dir, metavar="DIR",
    help="Directory of the CA that signs (ca.crt and ca.key, from `fedspread certs ca`).")
_out_option = click.option(
    "--out", required=True, type=_Dir, metavar="DIR",
    help="Directory to write tls.crt, tls.key (mode 0600) and a copy of the CA's ca.crt into "
         "(created if missing).")
_force_option = click.option("--force", is_flag=True, help="Replace files that already exist in --out.")
_days_option = click.option("--days", default=365, show_default=True, type=click.IntRange(1, 36500),
                            help="How long the certificate is valid.")


@click.group("certs")
def certs_group() -> None:
    """Issue certificates for mTLS between agents, the coordinator and SDK users.

    \b
    Everything is signed by one CA you make first. Each command writes a directory shaped
    like a Kubernetes Secret (`kubectl create secret generic NAME --from-file=DIR`):
      fedspread certs ca          --out pki/ca
      fedspread certs coordinator --ca pki/ca --out pki/coordinator --host coordinator.example.com
      fedspread certs agent       --ca pki/ca --out pki/dc1 --cluster dc1      (one per member)
      fedspread certs client      --ca pki/ca --out pki/alice --name alice     (SDK, fedspread get)
    and, apart from that CA, the agent webhook's serving certificate and caBundle:
      fedspread certs webhook     --out pki/dc1-webhook --patch OVERLAY/webhook-ca.yaml
    Then run the coordinator with --tls-cert/--tls-key/--tls-ca, each agent with
    --link-cert/--link-key/--link-ca, and `fedspread get` with --cert/--key/--ca.
    Keep pki/ca/ca.key offline: whoever holds it can speak for any cluster.
    """


@certs_group.command("ca")
@click.option("--out", required=True, type=_Dir, metavar="DIR",
              help="Directory to write ca.crt and ca.key (mode 0600) into (created if missing).")
@click.option("--name", default=None,
              help="The CA's common name  [default: fedspread CA <8 random hex digits>, unique].")
@click.option("--days", default=3650, show_default=True, type=click.IntRange(1, 36500),
              help="How long the CA is valid.")
@_force_option
def ca_command(*, out: pathlib.Path, name: str | None, days: int, force: bool) -> None:
    """Make a new certificate authority: --out DIR gets ca.crt and ca.key (0600).

    Every other `fedspread certs` command signs with it. The coordinator trusts client
    certificates it signed (--tls-ca), agents and SDK users trust the coordinator's (--link-ca,
    --ca). Example:

        fedspread certs ca --out pki/ca
    """
    written = _issue(lambda: bundles.make_ca(out, name=name, days=days, force=force))
    _report(written, next_step=f"next: fedspread certs coordinator --ca {out} --out DIR --host HOST")


@certs_group.command("coordinator")
@_ca_option
@_out_option
@click.option("--host", "hosts", multiple=True, metavar="NAME",
              help="A DNS name or IP address agents and SDK users dial the coordinator at (repeatable). "
                   "localhost and 127.0.0.1 are always included.")
@_days_option
@_force_option
def coordinator_command(*, ca_dir: pathlib.Path, out: pathlib.Path, hosts: tuple[str, ...], days: int,
                        force: bool) -> None:
    """Issue the coordinator's serving certificate, for every address clients dial.

    A client checks that the certificate names the host in its --coordinator HOST:PORT, so
    list each one: the Service's DNS name, an internal load balancer's name or IP, ...
    Example:

        fedspread certs coordinator --ca pki/ca --out pki/coordinator \\
            --host fedspread-coordinator.fedspread-system.svc --host 10.20.0.15

    Then: fedspread coordinator --tls-cert pki/coordinator/tls.crt
    --tls-key pki/coordinator/tls.key --tls-ca pki/coordinator/ca.crt ...
    """
    written = _issue(lambda: bundles.make_coordinator(ca_dir, out, hosts=hosts, days=days, force=force))
    _report(written, next_step=f"next: fedspread coordinator --tls-cert {out / store.CERT} "
                               f"--tls-key {out / store.KEY} --tls-ca {out / store.CA_CERT} ...")


@certs_group.command("agent")
@_ca_option
@_out_option
@click.option("--cluster", required=True, metavar="NAME",
              help="The member cluster this agent speaks for (its MemberCluster name).")
@_days_option
@_force_option
def agent_command(*, ca_dir: pathlib.Path, out: pathlib.Path, cluster: str, days: int, force: bool) -> None:
    """Issue the client certificate of one member cluster's agent.

    The certificate names the cluster (URI SAN fedspread://cluster/NAME, and CN NAME): the
    coordinator accepts this agent's stream only for that cluster, and refuses it
    (PERMISSION_DENIED) for any other. Issue one per member. Example:

        fedspread certs agent --ca pki/ca --out pki/dc1 --cluster dc1

    Then: fedspread agent --cluster dc1 --link-cert pki/dc1/tls.crt --link-key pki/dc1/tls.key
    --link-ca pki/dc1/ca.crt ...
    """
    written = _issue(lambda: bundles.make_agent(ca_dir, out, cluster=cluster, days=days, force=force))
    _report(written, next_step=f"next: fedspread agent --cluster {cluster} --link-cert {out / store.CERT} "
                               f"--link-key {out / store.KEY} --link-ca {out / store.CA_CERT} ...")


@certs_group.command("client")
@_ca_option
@_out_option
@click.option("--name", required=True, metavar="NAME",
              help="Who uses it (a person or a script), e.g. alice or ci-bot.")
@_days_option
@_force_option
def client_command(*, ca_dir: pathlib.Path, out: pathlib.Path, name: str, days: int, force: bool) -> None:
    """Issue a client certificate for the Python SDK and `fedspread get`.

    It reads placements (PlacementService) but cannot open an agent stream: it names a user
    (URI SAN fedspread://user/NAME), not a cluster. Example:

        fedspread certs client --ca pki/ca --out pki/alice --name alice

    Then: fedspread get clusters --coordinator HOST:PORT --cert pki/alice/tls.crt
    --key pki/alice/tls.key --ca pki/alice/ca.crt
    """
    written = _issue(lambda: bundles.make_client(ca_dir, out, name=name, days=days, force=force))
    _report(written, next_step=f"next: fedspread get clusters --coordinator HOST:PORT --cert "
                               f"{out / store.CERT} --key {out / store.KEY} --ca {out / store.CA_CERT}")


@certs_group.command("webhook")
@_out_option
@click.option("--service", default=names.AGENT_WEBHOOK_SERVICE, show_default=True, metavar="NAME",
              help="The Service the member's apiserver calls the webhook through (deploy/agent's).")
@click.option("--namespace", default=names.AGENT_NAMESPACE, show_default=True, metavar="NAME",
              help="The Service's namespace.")
@click.option("--ca", "ca_dir", type=_Dir, metavar="DIR", default=None,
              help="Sign with this CA (ca.crt and ca.key). Default: a CA made for this certificate "
                   "alone, whose key is not kept.")
@click.option("--patch", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE",
              default=None,
              help="Also write the overlay's caBundle patch here (deploy/agent/overlays/<cluster>/"
                   "webhook-ca.yaml), filled for every webhook of the agent.")
@click.option("--days", default=825, show_default=True, type=click.IntRange(1, 36500),
              help="How long the certificate is valid (825 days: what browsers' rules allow, a "
                   "common limit of TLS stacks).")
@_force_option
def webhook_command(*, out: pathlib.Path, service: str, namespace: str, ca_dir: pathlib.Path | None,
                    patch: pathlib.Path | None, days: int, force: bool) -> None:
    """Issue the agent webhook's serving certificate and the caBundle that trusts it.

    The member's apiserver calls the agent's admission webhook over HTTPS through a Service and
    trusts only the CA in the webhook configuration's caBundle. This writes the Secret's files
    (tls.crt, tls.key, ca.crt) for the Service's DNS names and, with --patch, the overlay's
    webhook-ca.yaml with that CA filled in. Example, for member dc1:

    \b
        fedspread certs webhook --out pki/dc1-webhook \\
            --patch deploy/agent/overlays/dc1/webhook-ca.yaml
        kubectl --context dc1 -n fedspread-system create secret generic fedspread-agent-tls \\
            --from-file=pki/dc1-webhook

    Renew by running it again with --force and applying both the Secret and the overlay (the
    agent reloads its certificate when the Secret's files change).
    """
    written = _issue(lambda: bundles.make_webhook(out, service=service, namespace=namespace, ca=ca_dir,
                                                  days=days, force=force))
    bundle = base64.b64encode((out / store.CA_CERT).read_bytes()).decode()
    if patch is not None:
        if patch.exists() and not force:
            options.usage_error(f"{patch} exists; --force replaces it")
        operations = [{"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle}
                      for index, _ in enumerate(names.AGENT_WEBHOOKS)]
        header = "# The CA of Secret fedspread-agent-tls (`fedspread certs webhook`), for both webhooks.\n"
        patch.parent.mkdir(parents=True, exist_ok=True)
        patch.write_text(header + yaml.safe_dump(operations, sort_keys=False, width=1 << 20))
        written.append(patch)
    _report(written, next_step=f"next: kubectl -n {namespace} create secret generic fedspread-agent-tls "
                               f"--from-file={out}" + ("" if patch else f"; caBundle: {bundle}"))
