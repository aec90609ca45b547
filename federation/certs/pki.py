"""fedspread's one certificate authority: every certificate fedspread makes comes from here.

Why our own, and why one: the sandbox's apiservers need serving certificates whose SANs cover
the loopback address they are reached at, webhooks need a certificate their apiserver trusts
through `caBundle`, service accounts need a signing key, and users without cert-manager need a CA
plus coordinator, agent and client certificates for the mTLS link (`fedspread certs`). One
implementation means one set of choices: ECDSA P-256 keys (fast to make, accepted by Go's TLS
stack and by gRPC), SHA-256 signatures, a five-minute backdated start against clock skew, and an
extended key usage on every leaf (server or client, never both). What a certificate *means* to
fedspread (which cluster an agent speaks for) is `federation.certs.names`; writing files safely
is `federation.certs.store`.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509 import oid

from federation import clock

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
VALIDITY = datetime.timedelta(days=365)
CA_VALIDITY = 10 * VALIDITY


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: pathlib.Path, name: str) -> tuple[pathlib.Path, pathlib.Path]:
        """Write `<name>.crt` and `<name>.key` (0600) into `directory`."""
        directory.mkdir(parents=True, exist_ok=True)
        cert = directory / f"{name}.crt"
        key = directory / f"{name}.key"
        cert.write_bytes(self.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(self.key_pem)
        return cert, key


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    """A subject: CN, and O when given (Kubernetes reads them as user and group)."""
    parts = [x509.NameAttribute(oid.NameOID.COMMON_NAME, common_name)]
    if organization:
        parts.append(x509.NameAttribute(oid.NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _now() -> datetime.datetime:
    """Now, backdated five minutes: a certificate is valid on members whose clocks run a little behind."""
    return clock.utcnow() - datetime.timedelta(minutes=5)


class CertificateAuthority:
    """Issues serving and client certificates signed by one self-signed root."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self._cert = cert
        self._key = key

    @classmethod
    def create(cls, common_name: str, *, validity: datetime.timedelta = CA_VALIDITY) -> CertificateAuthority:
        """A new self-signed CA, valid for `validity` (ten years by default)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(common_name)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now()).not_valid_after(_now() + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                              content_commitment=False, key_encipherment=False,
                              data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert_file: pathlib.Path, key_file: pathlib.Path) -> CertificateAuthority:
        """A CA from PEM files."""
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_file} is not an ECDSA key")
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate (what clients trust; a webhook's caBundle)."""
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def pair(self) -> KeyPair:
        """The CA's own certificate and key."""
        return KeyPair(self.cert_pem, _key_pem(self._key))

    @property
    def certificate(self) -> x509.Certificate:
        """The CA certificate, parsed."""
        return self._cert

    def _issue(
        self, subject: x509.Name, *, usage: x509.ObjectIdentifier, sans: Sequence[x509.GeneralName],
        validity: datetime.timedelta,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now()).not_valid_after(_now() + validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def issue_server(
        self, common_name: str, *, dns_names: Sequence[str] = ("localhost",),
        ips: Sequence[str] = ("127.0.0.1",), validity: datetime.timedelta = VALIDITY,
    ) -> KeyPair:
        """A serving certificate valid for the given DNS names and IP addresses."""
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        return self._issue(_name(common_name), usage=oid.ExtendedKeyUsageOID.SERVER_AUTH, sans=sans,
                           validity=validity)

    def issue_client(
        self, common_name: str, *, organization: str | None = None, uris: Sequence[str] = (),
        validity: datetime.timedelta = VALIDITY,
    ) -> KeyPair:
        """A client certificate; Kubernetes reads CN as the user and O as the group, fedspread
        reads its identity from the URI SANs (`federation.certs.names`)."""
        return self._issue(
            _name(common_name, organization), usage=oid.ExtendedKeyUsageOID.CLIENT_AUTH,
            sans=[x509.UniformResourceIdentifier(u) for u in uris], validity=validity,
        )


def service_account_keys() -> KeyPair:
    """An RSA key pair for signing service-account tokens (cert_pem holds the public key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public, _key_pem(key))
