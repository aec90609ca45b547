"""Certificate files on disk: written safely, read back with errors a user can act on.

Why its own module: every way a certificate reaches fedspread — `fedspread certs`, the demo, the
coordinator's and agent's `--tls-*`/`--link-*` flags, the SDK — goes through files, and the same
mistakes happen to all of them (a missing file, a key that belongs to another certificate, PEM
that is not PEM, an overwritten CA). Here:

* **Layout.** A directory per identity, named like a Kubernetes TLS Secret's keys, so that
  `kubectl create secret generic NAME --from-file=DIR` turns it into the Secret the deploy/
  manifests mount: `tls.crt`, `tls.key`, `ca.crt`; a CA directory holds `ca.crt` and `ca.key`.
* **Writes** never overwrite unless told (`force`); keys are created 0600 (never readable by
  others, not even for a moment: the mode is set at creation); every file is written to a
  temporary name and renamed into place, so a reader (the webhook's reload, a Secret sync) sees
  the old file or the new one, never half of one.
* **Reads** check what they read: a certificate parses, a key parses and matches its
  certificate, a CA is a CA. The error names the file and the fix.
"""

from __future__ import annotations

import datetime
import os
import pathlib
from collections.abc import Collection, Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from federation.certs import pki

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
CERT = "tls.crt"
KEY = "tls.key"
PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644


class CertFileError(Exception):
    """A certificate file is missing, unreadable, malformed or would be overwritten; one line."""


def write_files(directory: pathlib.Path, files: Mapping[str, bytes], *, private: Collection[str],
                force: bool) -> list[pathlib.Path]:
    """Write `files` (name -> bytes) into `directory`; names in `private` get mode 0600.

    CertFileError, before anything is written, when one exists and `force` is false.
    """
    targets = [directory / name for name in files]
    existing = [str(path) for path in targets if path.exists()]
    if existing and not force:
        raise CertFileError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                            "refusing to overwrite (give --force to replace)")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for path, data in zip(targets, files.values(), strict=True):
            _write_atomically(path, data, mode=PRIVATE_MODE if path.name in private else PUBLIC_MODE)
    except OSError as error:
        raise CertFileError(f"cannot write into {directory}: {error.strerror or error}") from None
    return targets


def _write_atomically(path: pathlib.Path, data: bytes, *, mode: int) -> None:
    """`data` into `path` through a temporary file created with `mode`, then renamed over `path`."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(descriptor, mode)  # the umask may have taken bits away; set exactly `mode`
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, path)


def _read(path: pathlib.Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CertFileError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise CertFileError(f"{what} {path} is a directory, not a file") from None
    except OSError as error:
        raise CertFileError(f"{what} {path}: {error.strerror or error}") from None


def read_certificate(path: pathlib.Path, what: str = "certificate") -> tuple[bytes, x509.Certificate]:
    """The PEM bytes of `path` and the first certificate in it (CertFileError if there is none)."""
    data = _read(path, what)
    try:
        return data, x509.load_pem_x509_certificate(data)
    except ValueError:
        raise CertFileError(f"{what} {path} is not a PEM certificate") from None


def read_key(path: pathlib.Path, what: str = "private key") -> tuple[bytes, pki.PrivateKey]:
    """The PEM bytes of `path` and the unencrypted private key in it (CertFileError otherwise)."""
    data = _read(path, what)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise CertFileError(f"{what} {path} is not an unencrypted PEM private key") from None
    if not isinstance(key, pki.PrivateKey):
        raise CertFileError(f"{what} {path} is neither an ECDSA nor an RSA key")
    return data, key


def _spki(public: Any) -> bytes:
    encoded: bytes = public.public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    return encoded


def _same_key(certificate: x509.Certificate, key: pki.PrivateKey) -> bool:
    return _spki(certificate.public_key()) == _spki(key.public_key())


def read_pair(cert: pathlib.Path, key: pathlib.Path, *,
              now: datetime.datetime | None = None) -> tuple[bytes, bytes]:
    """PEM certificate and key, checked to belong together and to be valid now."""
    cert_pem, certificate = read_certificate(cert)
    key_pem, private = read_key(key)
    if not _same_key(certificate, private):
        raise CertFileError(f"private key {key} does not belong to certificate {cert}")
    moment = now or datetime.datetime.now(datetime.UTC)
    if certificate.not_valid_after_utc < moment:
        raise CertFileError(f"certificate {cert} expired on {certificate.not_valid_after_utc:%Y-%m-%d}")
    if certificate.not_valid_before_utc > moment:
        raise CertFileError(f"certificate {cert} is not valid before "
                            f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
    return cert_pem, key_pem


def load_authority(directory: pathlib.Path) -> pki.CertificateAuthority:
    """The CA in `directory` (`ca.crt`, `ca.key`), checked to be a CA whose key matches."""
    if not (directory / CA_CERT).exists() and not (directory / CA_KEY).exists():
        raise CertFileError(f"{directory} holds no CA ({CA_CERT}, {CA_KEY}); make one with "
                            f"`fedspread certs ca --out {directory}`")
    _, certificate = read_certificate(directory / CA_CERT, "CA certificate")
    _, key = read_key(directory / CA_KEY, "CA key")
    if not _same_key(certificate, key):
        raise CertFileError(f"CA key {directory / CA_KEY} does not belong to {directory / CA_CERT}")
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise CertFileError(f"{directory / CA_CERT} is not a CA certificate (no basicConstraints CA:TRUE)")
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertFileError(f"CA key {directory / CA_KEY} is not an ECDSA key (fedspread signs with ECDSA)")
    return pki.CertificateAuthority(certificate, key)
