"""`fedspread certs`: the files it writes, their modes and names, and every refusal (issue 8).

Run through click's runner against real files in a temporary directory; the certificates are
parsed back with `cryptography` and checked against the CA. test_mtls.py puts the same
certificates through real gRPC handshakes.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import pathlib
from collections.abc import Iterator

import pytest
from click import testing
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from federation import cli
from federation.certs import bundles, pki, store, transport


def run(*args: str) -> testing.Result:
    return testing.CliRunner().invoke(cli.main, ["certs", *args])


def load(path: pathlib.Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: pathlib.Path) -> int:
    return path.stat().st_mode & 0o777


def sans(cert: x509.Certificate) -> x509.SubjectAlternativeName:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value


def usage(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """Umask 0: keys must still be 0600 (the mode is set on creation, not left to the umask)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def ca(tmp_path: pathlib.Path) -> pathlib.Path:
    result = run("ca", "--out", str(tmp_path / "ca"))
    assert result.exit_code == 0, result.output
    return tmp_path / "ca"


@pytest.mark.usefixtures("permissive_umask")
def test_ca_is_a_self_signed_ca_with_a_private_key(tmp_path: pathlib.Path) -> None:
    result = run("ca", "--out", str(tmp_path / "ca"), "--name", "acme CA", "--days", "30")
    assert result.exit_code == 0, result.output
    assert f"wrote {tmp_path / 'ca' / 'ca.key'} (0600)" in result.output
    assert mode(tmp_path / "ca" / "ca.key") == 0o600 and mode(tmp_path / "ca" / "ca.crt") == 0o644
    cert = load(tmp_path / "ca" / "ca.crt")
    cert.verify_directly_issued_by(cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "acme CA"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert datetime.timedelta(days=30) <= lifetime <= datetime.timedelta(days=31)
    store.load_authority(tmp_path / "ca")  # reads back


@pytest.mark.usefixtures("permissive_umask")
def test_coordinator_certificate_names_every_host_and_loopback(ca: pathlib.Path,
                                                               tmp_path: pathlib.Path) -> None:
    out = tmp_path / "coordinator"
    result = run("coordinator", "--ca", str(ca), "--out", str(out), "--host", "coord.example.com",
                 "--host", "10.20.0.15", "--host", "fd00::1")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert mode(out / "tls.key") == 0o600 and mode(out / "tls.crt") == 0o644
    assert (out / "ca.crt").read_bytes() == (ca / "ca.crt").read_bytes()
    cert = load(out / "tls.crt")
    cert.verify_directly_issued_by(load(ca / "ca.crt"))
    names = sans(cert)
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "coord.example.com"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address(ip) for ip in ("127.0.0.1", "10.20.0.15", "fd00::1")]
    assert usage(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert "--tls-cert" in result.output  # says what to do next
    transport.TLSFiles.in_directory(out).read()  # key and certificate belong together


def test_agent_certificate_names_its_cluster(ca: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "dc1"
    result = run("agent", "--ca", str(ca), "--out", str(out), "--cluster", "dc1")
    assert result.exit_code == 0, result.output
    cert = load(out / "tls.crt")
    cert.verify_directly_issued_by(load(ca / "ca.crt"))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "dc1"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "fedspread:agents"
    assert sans(cert).get_values_for_type(x509.UniformResourceIdentifier) == ["fedspread://cluster/dc1"]
    assert usage(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert mode(out / "tls.key") == 0o600
    assert "--link-cert" in result.output


def test_client_certificate_names_a_user_not_a_cluster(ca: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "alice"
    result = run("client", "--ca", str(ca), "--out", str(out), "--name", "alice", "--days", "7")
    assert result.exit_code == 0, result.output
    cert = load(out / "tls.crt")
    assert sans(cert).get_values_for_type(x509.UniformResourceIdentifier) == ["fedspread://user/alice"]
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "fedspread:users"
    assert usage(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc <= datetime.timedelta(days=8)


def test_default_ca_names_differ(tmp_path: pathlib.Path) -> None:
    """TLS stacks look issuers up by subject: two CAs called the same confuse the error messages."""
    for name in ("one", "two"):
        assert run("ca", "--out", str(tmp_path / name)).exit_code == 0
    subjects = {load(tmp_path / n / "ca.crt").subject.rfc4514_string() for n in ("one", "two")}
    assert len(subjects) == 2 and all(s.startswith("CN=fedspread CA ") for s in subjects)


def test_existing_files_are_kept_unless_forced(ca: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "dc1"
    assert run("agent", "--ca", str(ca), "--out", str(out), "--cluster", "dc1").exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = run("agent", "--ca", str(ca), "--out", str(out), "--cluster", "dc1")
    assert again.exit_code == 2
    assert again.output.strip().splitlines() == [again.output.strip()], "one line"
    assert "refusing to overwrite" in again.output and "--force" in again.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before, "nothing written"
    ca_again = run("ca", "--out", str(ca))
    assert ca_again.exit_code == 2 and "refusing to overwrite" in ca_again.output, "a CA is never replaced"
    forced = run("agent", "--ca", str(ca), "--out", str(out), "--cluster", "dc1", "--force")
    assert forced.exit_code == 0, forced.output
    assert (out / "tls.key").read_bytes() != before["tls.key"]
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"], "no temporary files"


@pytest.mark.parametrize(("args", "message"), [
    (["agent", "--cluster", "DC_1"], "not a valid MemberCluster name"),
    (["client", "--name", "a/b"], "client name 'a/b'"),
    (["coordinator", "--host", "not a host!"], "neither an IP address nor a DNS name"),
])
def test_bad_names_are_one_line_errors(ca: pathlib.Path, tmp_path: pathlib.Path, args: list[str],
                                       message: str) -> None:
    result = run(*args, "--ca", str(ca), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and message in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_a_missing_or_broken_ca_is_explained(ca: pathlib.Path, tmp_path: pathlib.Path) -> None:
    missing = run("agent", "--ca", str(tmp_path / "none"), "--out", str(tmp_path / "x"), "--cluster", "dc1")
    assert missing.exit_code == 2 and "holds no CA" in missing.output
    assert "fedspread certs ca" in missing.output
    leaf = tmp_path / "leaf"
    assert run("agent", "--ca", str(ca), "--out", str(leaf), "--cluster", "dc1").exit_code == 0
    (leaf / "ca.key").write_bytes((leaf / "tls.key").read_bytes())  # a leaf's key next to the CA cert
    wrong = run("agent", "--ca", str(leaf), "--out", str(tmp_path / "y"), "--cluster", "dc2")
    assert wrong.exit_code == 2 and "does not belong to" in wrong.output
    (ca / "ca.key").write_text("not a key")
    garbled = run("client", "--ca", str(ca), "--out", str(tmp_path / "z"), "--name", "bob")
    assert garbled.exit_code == 2 and "is not an unencrypted PEM private key" in garbled.output


def test_missing_required_flags_are_usage_errors(tmp_path: pathlib.Path) -> None:
    result = run("agent", "--out", str(tmp_path / "x"), "--cluster", "dc1")
    assert result.exit_code == 2 and "--ca" in result.output


@pytest.mark.parametrize("command", ["ca", "coordinator", "agent", "client"])
def test_every_command_explains_itself(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output and "--out" in result.output


def test_group_help_shows_the_whole_procedure() -> None:
    text = run("--help").output
    for step in ("certs ca", "certs coordinator", "certs agent", "certs client", "--tls-cert", "--link-cert"):
        assert step in text


# --- reading files back ------------------------------------------------------------------------------


def test_read_pair_refuses_mismatched_garbled_and_expired_files(tmp_path: pathlib.Path) -> None:
    authority = pki.CertificateAuthority.create("t")
    cert, key = authority.issue_client("a").write(tmp_path, "a")
    other_cert, other_key = authority.issue_client("b").write(tmp_path, "b")
    assert store.read_pair(cert, key)[0] == cert.read_bytes()
    with pytest.raises(store.CertFileError, match="does not belong to certificate"):
        store.read_pair(cert, other_key)
    with pytest.raises(store.CertFileError, match="is not a PEM certificate"):
        store.read_pair(key, key)
    with pytest.raises(store.CertFileError, match="no such file"):
        store.read_pair(tmp_path / "absent.crt", key)
    with pytest.raises(store.CertFileError, match="is a directory"):
        store.read_pair(tmp_path, key)
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=400)
    with pytest.raises(store.CertFileError, match="expired on"):
        store.read_pair(other_cert, other_key, now=later)


def test_split_hosts_adds_loopback_once() -> None:
    hosts = bundles.split_hosts(["localhost", "127.0.0.1", "[::1]", "Coord.Example.com", "*.svc.local"])
    assert hosts.dns_names == ("localhost", "coord.example.com", "*.svc.local")
    assert hosts.ips == ("127.0.0.1", "::1")
