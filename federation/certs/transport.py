"""gRPC credentials from certificate files, for the coordinator, the agents and the SDK.

Why one module: all three build their TLS the same way — mutual, with the fedspread CA — and
should fail the same way: at startup, in one line naming the file, instead of as an opaque
handshake failure minutes later. So the files are read and checked here (`store.read_pair`)
before gRPC sees them. gRPC's credentials hold bytes, not paths: a process that should pick up
renewed files builds new credentials from the same `TLSFiles` (the agent's link does it on every
reconnect).

`hint` turns the few messages gRPC gives for TLS trouble into advice: a server that refuses a
client certificate (or a plaintext client) just closes the socket, and the client only sees
UNAVAILABLE "Socket closed", indistinguishable from a coordinator that is away.
"""

from __future__ import annotations

import dataclasses
import pathlib

import grpc

from federation.certs import store


@dataclasses.dataclass(frozen=True)
class TLSFiles:
    """A certificate, its key, and the CA that must have signed the other side's certificate."""

    cert: pathlib.Path
    key: pathlib.Path
    ca: pathlib.Path

    @classmethod
    def in_directory(cls, directory: pathlib.Path) -> TLSFiles:
        """The files of a bundle directory written by `fedspread certs` (tls.crt, tls.key, ca.crt)."""
        return cls(directory / store.CERT, directory / store.KEY, directory / store.CA_CERT)

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(certificate, key, CA) PEM, checked; CertFileError naming the file otherwise."""
        cert_pem, key_pem = store.read_pair(self.cert, self.key)
        ca_pem, _ = store.read_certificate(self.ca, "CA certificate")
        return cert_pem, key_pem, ca_pem


def files_from_flags(
    *, flags: tuple[str, str, str], cert: pathlib.Path | None, key: pathlib.Path | None,
    ca: pathlib.Path | None, insecure: bool, advice: str,
) -> TLSFiles | None:
    """The mTLS files three command-line flags (named `flags`: cert, key, CA) give, or None with
    --insecure; ValueError with a one-line usage message for any other combination (`advice`:
    where to get the files, said when none is given)."""
    given = [flag for flag, value in zip(flags, (cert, key, ca), strict=True) if value]
    if insecure:
        if given:
            raise ValueError(f"--insecure contradicts {', '.join(given)}: give one or the other")
        return None
    if not given:
        raise ValueError(f"give {', '.join(flags)} for mTLS ({advice}), or --insecure for plaintext "
                         "(local use only)")
    if cert is None or key is None or ca is None:
        missing = [flag for flag in flags if flag not in given]
        raise ValueError(f"{', '.join(given)} without {', '.join(missing)}: mTLS needs all three")
    return TLSFiles(cert=cert, key=key, ca=ca)


def server_credentials(files: TLSFiles) -> grpc.ServerCredentials:
    """TLS that serves `files.cert` and admits only clients with a certificate `files.ca` signed."""
    cert_pem, key_pem, ca_pem = files.read()
    return grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=ca_pem,
                                       require_client_auth=True)


def channel_credentials(files: TLSFiles) -> grpc.ChannelCredentials:
    """TLS that presents `files.cert` and trusts only a server certificate `files.ca` signed."""
    cert_pem, key_pem, ca_pem = files.read()
    return grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=key_pem,
                                        certificate_chain=cert_pem)


def hint(details: str, *, secure: bool) -> str:
    """Advice for an UNAVAILABLE whose `details` suggest TLS trouble; "" when there is none."""
    text = details.lower()
    if "certificate_verify_failed" in text or "certificate signature failure" in text:
        return ("the coordinator's certificate is not signed by the CA given to this client "
                "(check the CA file)")
    if "hostname verification" in text:
        return ("the coordinator's certificate does not name the host dialled (issue it with "
                "`fedspread certs coordinator --host <that host>`)")
    if "wrong_version_number" in text:
        return "the coordinator serves plaintext (it was started with --insecure)"
    if "socket closed" in text:
        if secure:
            return ("the coordinator may have refused this client certificate (not signed by the CA it "
                    "trusts?)")
        return ("the coordinator may require mTLS: give the CA, certificate and key (plaintext only "
                "reaches a coordinator started with --insecure)")
    return ""
