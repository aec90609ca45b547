"""What the agent's admission webhook is told: where it serves, how it is registered, whom it admits.

Why one frozen object: a dozen `fedspread agent` flags configure the webhook (`--webhook-*`,
`--tls-*`, `--register-webhook`, `--deregister-on-exit`); grouped here, with their defaults in one
place, they travel from the command line to `agents.main` as one value, as kopf's
`OperatorSettings` groups an operator's. The flags' names, defaults and help stay the command's
(`federation.cli.agent`); these fields mirror them.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping

from agents.webhook import registration


@dataclasses.dataclass(frozen=True)
class WebhookSettings:
    """The webhook's settings (`agents.main.AgentConfig.webhook`)."""

    port: int = 9443
    """HTTPS port (`--webhook-port`; 0: any free port)."""
    url_host: str = "127.0.0.1"
    """Host the apiserver dials, in the registered URL and the generated certificate
    (`--webhook-url-host`)."""
    name: str = registration.NAME
    """Name of the MutatingWebhookConfiguration (`--webhook-name`)."""
    namespace_selector: Mapping[str, str] | None = None
    """Only pods in namespaces with these labels (`--webhook-namespace-label`); None: all."""
    service: tuple[str, str] | None = None
    """(namespace, name) of the in-cluster Service the webhook is registered behind
    (`--webhook-service`); None: registered by URL."""
    register: bool = True
    """Create or replace the MutatingWebhookConfiguration at start (`--register-webhook`)."""
    deregister_on_exit: bool = False
    """Delete it when the agent stops (`--deregister-on-exit`)."""
    tls_cert: pathlib.Path | None = None
    """Serving certificate (`--tls-cert`); None: the agent makes one, signed by a CA held in memory."""
    tls_key: pathlib.Path | None = None
    """Private key of `tls_cert` (`--tls-key`)."""
    tls_ca: pathlib.Path | None = None
    """CA the apiserver should trust for `tls_cert` (`--tls-ca`; default: the certificate itself)."""
    client_ca: pathlib.Path | None = None
    """Only callers with a client certificate this CA signed may post reviews (`--webhook-client-ca`);
    None: anyone."""
    allowed_cns: tuple[str, ...] = ()
    """With `client_ca`: only these common names (`--webhook-allowed-cn`; empty: any the CA signed)."""
