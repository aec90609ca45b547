"""A webhook's TLS context: the serving pair (and the client CA) reloaded when their files change.

Why: cert-manager, a CSR rotation or an operator replacing the Secret rewrites the files under a
running webhook; it must pick them up without a restart, and it must never stop serving because a
rotation is half-written. So every new connection first stats the files (two stat calls, three
with a client CA: cheap next to a TLS handshake) and, when they changed, builds a new context. A
pair that fails to load is logged once and ignored until the files change again; connections keep
the last context that worked.

Why apart from `webhook_https`: that module moves HTTP bytes; this one decides which certificates
a new connection is served with and which it asks of the caller (`webhook_clients.ClientAuth`
configures the client CA). Both webhooks, the agent's and the coordinator's, use it unchanged.
"""

from __future__ import annotations

import logging
import os
import pathlib
import ssl
import threading

from federation.kube import webhook_clients

LOG = logging.getLogger(__name__)

Signature = tuple[int, ...]


class Certificates:
    """The SSLContext for new connections, rebuilt when the certificate, key or client CA file changes."""

    def __init__(self, cert_file: pathlib.Path, key_file: pathlib.Path, *,
                 client_auth: webhook_clients.ClientAuth | None = None) -> None:
        """OSError or ssl.SSLError when the files cannot be read or loaded now."""
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_auth = client_auth
        """Who may post reviews (its CA is loaded into every context); None: anyone."""
        self._lock = threading.Lock()
        self._signature = self._stat()
        self._context = self._build()
        self._rejected: Signature | None = None

    def _stat(self) -> Signature:
        files = [self.cert_file, self.key_file]
        if self.client_auth is not None:
            files.append(self.client_auth.ca_file)
        return tuple(value for path in files for found in [os.stat(path)]
                     for value in (found.st_mtime_ns, found.st_size, found.st_ino))

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.client_auth is not None:
            self.client_auth.configure(context)
        return context

    def current(self) -> ssl.SSLContext:
        """The context for a new connection (reloaded first if the files changed)."""
        with self._lock:
            try:
                signature = self._stat()
            except OSError as error:
                if self._rejected is None:
                    LOG.warning("cannot stat the serving certificate (%s); keeping the loaded one", error)
                    self._rejected = (0,)
                return self._context
            if signature == self._signature or signature == self._rejected:
                return self._context
            try:
                context = self._build()
            except (OSError, ssl.SSLError) as error:
                LOG.warning("serving certificate %s changed but does not load (%s); keeping the old one",
                            self.cert_file, error)
                self._rejected = signature
                return self._context
            self._context, self._signature, self._rejected = context, signature, None
            LOG.info("serving certificate %s reloaded", self.cert_file)
            return context
