"""The build caches Debian's kubectl next to the control plane, without network in these tests.

Why: tests apply, dry-run and query with `build.kubectl()` and must never fall back to a kubectl
someone installed by hand (deploy/ is rendered with `build.kustomize()`: test_build_kustomize.py).
apt-get is replaced by a fake that hands out a real .deb made here with dpkg-deb (so the
extraction is the real one); everything else runs as in `fedspread sandbox build`.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections.abc import Sequence

import pytest

from federation.sandbox import build, debian_fetch, kube_patches, kustomize_fetch

VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
SOURCES = (
    "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
    "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
)



def fake_deb(directory: pathlib.Path, *, version: str, symlink: bool = False) -> pathlib.Path:
    """A kubernetes-client .deb whose usr/bin/kubectl is a script (or an absolute symlink to one)."""
    root = directory / f"pkg-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: kubernetes-client\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: test <test@example.org>\nDescription: fake kubectl\n")
    script = f"#!/bin/sh\necho kubectl {version}\n"
    (root / "usr" / "bin").mkdir(parents=True)
    if symlink:
        (root / "usr" / "lib" / "kubernetes").mkdir(parents=True)
        (root / "usr" / "lib" / "kubernetes" / "kubectl").write_text(script)
        (root / "usr" / "bin" / "kubectl").symlink_to("/usr/lib/kubernetes/kubectl")
    else:
        (root / "usr" / "bin" / "kubectl").write_text(script)
    deb = directory / f"kubernetes-client_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb


class FakeApt:
    """Stands in for apt-get in `debian_fetch._run`; dpkg-deb and the rest run for real."""

    def __init__(self, debs: dict[str, pathlib.Path]) -> None:
        self.debs = debs  # download spec -> the .deb it yields; other specs fail like apt-get
        self.commands: list[list[str]] = []
        self.real_run = debian_fetch._run

    def __call__(self, command: Sequence[str], *, cwd: pathlib.Path | None = None, what: str,
                 timeout: float = debian_fetch.LOCAL_SECONDS) -> str:
        if command[0] != "apt-get":
            return self.real_run(command, cwd=cwd, what=what, timeout=timeout)
        self.commands.append(list(command))
        if "download" in command:
            spec = command[-1]
            if spec not in self.debs:
                raise debian_fetch.FetchError(f"{what} failed (exit 100):\nE: Version not found")
            assert cwd is not None
            shutil.copy(self.debs[spec], cwd / self.debs[spec].name)
        return ""

    def downloads(self) -> list[str]:
        return [c[-1] for c in self.commands if "download" in c]


@pytest.fixture
def cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A cache root with kustomize only, a Debian sources file, and no host checks or package installs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(build.ENV_BIN, raising=False)
    sources = tmp_path / "debian.sources"
    sources.write_text(SOURCES)
    monkeypatch.setattr(debian_fetch, "DEBIAN_SOURCES", sources)
    monkeypatch.setattr(build, "_check_host", lambda: None)
    monkeypatch.setattr(build, "ensure_packages", lambda report: None)
    monkeypatch.setattr(build, "_etcd", lambda: pathlib.Path("/usr/bin/etcd"))
    root = build.cache_root()
    assert root == tmp_path / "xdg" / "fedspread"
    kustomize = kustomize_fetch.cached(root)  # cached already: these tests are about kubectl
    kustomize.parent.mkdir(parents=True)
    kustomize.write_text("#!/bin/sh\n")
    kustomize.chmod(0o755)
    return root


def control_plane(root: pathlib.Path, version: str = VERSION) -> pathlib.Path:
    """A cached build of the three control-plane binaries (and no kubectl), with today's patches."""
    directory = root / build.cache_directory(version).name / "bin"
    directory.mkdir(parents=True)
    for name in build.BINARIES:
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)
    return directory


def test_binary_entries_keep_the_hosts_archives_as_deb(tmp_path: pathlib.Path) -> None:
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(SOURCES + "\nTypes: deb deb-src\nURIs: http://mirror.example/debian-security\n"
                      "Suites: bookworm-security\nComponents: main\n")
    entries = debian_fetch.binary_entries(deb822)
    assert entries.count("Types: deb\n") == 2 and "deb-src" not in entries
    assert "URIs: http://mirror.example/debian-security" in entries
    one_line = tmp_path / "sources.list"
    one_line.write_text("# c\ndeb http://x bookworm main\ndeb-src http://y bookworm main\n")
    assert debian_fetch.binary_entries(one_line) == "deb http://x bookworm main\n"


def test_a_cache_without_kubectl_gets_kubectl_only(
    cache: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube_bin = control_plane(cache)
    before = {name: (kube_bin / name).stat().st_mtime_ns for name in build.BINARIES}
    apt = FakeApt({f"kubernetes-client={VERSION}": fake_deb(tmp_path, version=VERSION)})
    monkeypatch.setattr(debian_fetch, "_run", apt)

    def no_rebuild(report: build.Report) -> pathlib.Path:
        raise AssertionError("only kubectl was missing: nothing may be rebuilt")

    monkeypatch.setattr(build, "build", no_rebuild)
    lines: list[str] = []
    tools = build.ensure(lines.append)

    assert tools.kube_bin == kube_bin
    kubectl = kube_bin / "kubectl"
    assert os.access(kubectl, os.X_OK)
    assert subprocess.run([str(kubectl)], capture_output=True, text=True).stdout == f"kubectl {VERSION}\n"
    assert {name: (kube_bin / name).stat().st_mtime_ns for name in build.BINARIES} == before
    assert apt.downloads() == [f"kubernetes-client={VERSION}"], "the same version as the control plane"
    for command in apt.commands:  # the private apt configuration, never the host's lists
        assert "Dir::Etc::SourceList=/dev/null" in command
        parts = next(o for o in command if o.startswith("Dir::Etc::SourceParts="))
        assert parts.partition("=")[2].startswith(str(cache))
    assert not list(cache.glob("fedspread-kubectl-*")), "the scratch directory is removed"
    assert not list(kube_bin.glob("*.partial"))
    assert any("kubectl" in line and "cached in" in line for line in lines)

    assert build.kubectl() == kubectl
    build.ensure(lines.append)  # cached now: nothing fetched again
    assert apt.downloads() == [f"kubernetes-client={VERSION}"]


def test_kubectl_of_another_version_when_the_archive_moved_on(
    cache: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube_bin = control_plane(cache)
    newer = "1.20.5+really1.20.2-1.1+deb12u2"
    apt = FakeApt({"kubernetes-client": fake_deb(tmp_path, version=newer, symlink=True)})
    monkeypatch.setattr(debian_fetch, "_run", apt)
    lines: list[str] = []
    path = build.kubectl(lines.append)
    assert path == kube_bin / "kubectl"
    assert apt.downloads() == [f"kubernetes-client={VERSION}", "kubernetes-client"]
    assert any("no longer in the archive" in line for line in lines)
    assert subprocess.run([str(path)], capture_output=True, text=True).stdout == f"kubectl {newer}\n"
    assert not path.is_symlink(), "the binary itself is cached, not a link into a removed directory"


def test_a_package_without_kubectl_is_a_build_error(
    cache: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    control_plane(cache)
    empty = tmp_path / "empty"
    (empty / "DEBIAN").mkdir(parents=True)
    (empty / "DEBIAN" / "control").write_text("Package: kubernetes-client\nVersion: 1\nArchitecture: all\n"
                                              "Maintainer: t <t@e.org>\nDescription: x\n")
    deb = tmp_path / "kubernetes-client_1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(empty), str(deb)], check=True,
                   capture_output=True)
    monkeypatch.setattr(debian_fetch, "_run", FakeApt({f"kubernetes-client={VERSION}": deb}))
    with pytest.raises(build.BuildError, match="holds no usr/bin/kubectl"):
        build.kubectl(lambda line: None)


def test_a_fresh_build_caches_kubectl_with_the_control_plane(
    cache: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "kubernetes"
    (source / "_output" / "bin").mkdir(parents=True)
    for name in build.BINARIES:
        (source / "_output" / "bin" / name).write_text("#!/bin/sh\n")
        (source / "_output" / "bin" / name).chmod(0o755)
    monkeypatch.setattr(debian_fetch, "fetch_source", lambda workdir, report: (source, VERSION))
    monkeypatch.setattr(build, "replace_reflect2", lambda tree: None)
    patched: list[pathlib.Path] = []
    monkeypatch.setattr(build, "apply_patches", lambda tree, report: patched.append(tree))
    monkeypatch.setattr(build, "compile_binaries", lambda tree, report, log: tree / "_output" / "bin")
    apt = FakeApt({f"kubernetes-client={VERSION}": fake_deb(tmp_path, version=VERSION)})
    monkeypatch.setattr(debian_fetch, "_run", apt)

    tools = build.ensure(lambda line: None)
    assert patched == [source], "fedspread's patches are applied to the source before compiling"
    assert tools.kube_bin == cache / f"kube-{VERSION}-{kube_patches.stamp()}" / "bin"
    assert sorted(p.name for p in tools.kube_bin.iterdir()) == sorted([*build.BINARIES, "kubectl"])
    assert build.kubectl() == tools.binary("kubectl")


def test_kubectl_never_builds_behind_the_callers_back(cache: pathlib.Path) -> None:
    with pytest.raises(build.BuildError, match="fedspread sandbox build"):
        build.kubectl()


def test_the_env_override_supplies_kubectl_too(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "envtest"
    given.mkdir()
    monkeypatch.setenv(build.ENV_BIN, str(given))
    with pytest.raises(build.BuildError, match=f"{build.ENV_BIN}=.*holds no executable kubectl"):
        build.kubectl()
    (given / "kubectl").write_text("#!/bin/sh\n")
    (given / "kubectl").chmod(0o755)
    assert build.kubectl() == given / "kubectl"
    for name in build.BINARIES:  # and the control plane from there, as before (no kubectl needed)
        (given / name).write_text("#!/bin/sh\n")
        (given / name).chmod(0o755)
    monkeypatch.setattr(build, "_etcd", lambda: pathlib.Path("/usr/bin/etcd"))
    assert build.ensure(lambda line: None).kube_bin == given
