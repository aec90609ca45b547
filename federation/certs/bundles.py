"""What `fedspread certs` issues: a CA, and the coordinator's, agents' and users' certificates.

Why separate from the command line: the demo (`federation.demo.environment`) and tests issue the
same bundles without going through click, and the decisions — which names go into which
certificate, which files a directory holds — must be the same everywhere. A leaf bundle is a
directory with `tls.crt`, `tls.key` (0600) and `ca.crt` (the CA to trust for the other side),
ready for `kubectl create secret generic NAME --from-file=DIR`.

The coordinator's serving certificate always covers `localhost` and `127.0.0.1` besides the
hosts asked for: local runs and `kubectl port-forward` reach it there, and those names mean
"this machine" for every client, so they widen nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib
import re
import secrets
from collections.abc import Sequence

from federation.certs import names, pki, store

LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)
_DNS_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_DNS = re.compile(rf"(\*\.)?{_DNS_LABEL}(\.{_DNS_LABEL})*")


@dataclasses.dataclass(frozen=True)
class Hosts:
    """Subject alternative names of a serving certificate."""

    dns_names: tuple[str, ...]
    ips: tuple[str, ...]


def split_hosts(hosts: Sequence[str]) -> Hosts:
    """`hosts` (DNS names and IP addresses, any order) plus the loopback names, deduplicated;
    ValueError naming a host that is neither."""
    dns: list[str] = list(LOOPBACK_NAMES)
    ips: list[str] = list(LOOPBACK_IPS)
    for host in hosts:
        text = host.strip()
        try:
            address = str(ipaddress.ip_address(text.strip("[]")))
        except ValueError:
            if len(text) > 253 or not _DNS.fullmatch(text):
                raise ValueError(f"--host {host!r} is neither an IP address nor a DNS name") from None
            dns.append(text.lower())
        else:
            ips.append(address)
    return Hosts(tuple(dict.fromkeys(dns)), tuple(dict.fromkeys(ips)))


def _days(days: int) -> datetime.timedelta:
    if days < 1:
        raise ValueError(f"a certificate must be valid for at least one day, not {days}")
    return datetime.timedelta(days=days)


def _leaf(authority: pki.CertificateAuthority, pair: pki.KeyPair, out: pathlib.Path, *,
          force: bool) -> list[pathlib.Path]:
    return store.write_files(out, {store.CERT: pair.cert_pem, store.KEY: pair.key_pem,
                                   store.CA_CERT: authority.cert_pem},
                             private={store.KEY}, force=force)


def make_ca(out: pathlib.Path, *, name: str | None = None, days: int = 3650,
            force: bool = False) -> list[pathlib.Path]:
    """A new self-signed CA in `out` (`ca.crt`, `ca.key`); its name defaults to `fedspread CA <random>`,
    so that two CAs never share a subject (TLS stacks find issuers by subject)."""
    common_name = name or f"fedspread CA {secrets.token_hex(4)}"
    authority = pki.CertificateAuthority.create(common_name, validity=_days(days))
    pair = authority.pair()
    return store.write_files(out, {store.CA_CERT: pair.cert_pem, store.CA_KEY: pair.key_pem},
                             private={store.CA_KEY}, force=force)


def make_coordinator(ca: pathlib.Path, out: pathlib.Path, *, hosts: Sequence[str] = (), days: int = 365,
                     force: bool = False) -> list[pathlib.Path]:
    """The coordinator's serving certificate for `hosts` (and loopback), signed by the CA in `ca`."""
    sans, validity = split_hosts(hosts), _days(days)
    authority = store.load_authority(ca)
    pair = authority.issue_server(names.COORDINATOR_COMMON_NAME, dns_names=sans.dns_names, ips=sans.ips,
                                  validity=validity)
    return _leaf(authority, pair, out, force=force)


def make_agent(ca: pathlib.Path, out: pathlib.Path, *, cluster: str, days: int = 365,
               force: bool = False) -> list[pathlib.Path]:
    """The client certificate of the agent of `cluster` (`names.agent_uri`), signed by the CA in `ca`."""
    uri, validity = names.agent_uri(cluster), _days(days)
    authority = store.load_authority(ca)
    pair = authority.issue_client(cluster, organization=names.AGENT_ORGANIZATION, uris=(uri,),
                                  validity=validity)
    return _leaf(authority, pair, out, force=force)


def make_client(ca: pathlib.Path, out: pathlib.Path, *, name: str, days: int = 365,
                force: bool = False) -> list[pathlib.Path]:
    """An SDK / `fedspread get` user's client certificate (`names.user_uri`), signed by the CA in `ca`."""
    uri, validity = names.user_uri(name), _days(days)
    authority = store.load_authority(ca)
    pair = authority.issue_client(name, organization=names.USER_ORGANIZATION, uris=(uri,),
                                  validity=validity)
    return _leaf(authority, pair, out, force=force)


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names an apiserver dials an in-cluster Service `namespace/service` by."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


def make_webhook(out: pathlib.Path, *, service: str, namespace: str, ca: pathlib.Path | None = None,
                 days: int = 825, force: bool = False) -> list[pathlib.Path]:
    """A serving certificate for the webhook behind Service `namespace/service`, in `out` as the
    Secret wants it (`tls.crt`, `tls.key`, `ca.crt`). Signed by the CA in `ca`, or else by a CA made
    for this certificate alone, whose key is thrown away: nothing else can be signed with it, and a
    renewal is a new pair (certificate and caBundle) applied together."""
    validity = _days(days)
    if ca is not None:
        authority = store.load_authority(ca)
    else:
        authority = pki.CertificateAuthority.create(f"fedspread webhook CA {secrets.token_hex(4)}",
                                                    validity=validity)
    pair = authority.issue_server(service, dns_names=service_names(service, namespace), ips=(),
                                  validity=validity)
    return _leaf(authority, pair, out, force=force)
