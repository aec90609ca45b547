"""Fetch from Debian's archive what the sandbox build takes from it: packages, sources, kubectl.

Why a module of its own: what it knows is Debian's archive and apt, and nothing of Kubernetes'
build or of the cache's layout (`build` decides where things go and in which order). It installs
the Debian packages the build and the sandbox need (`APT_PACKAGES`: Go, etcd, ...), downloads and
unpacks the `kubernetes` source package, and downloads Debian's `kubernetes-client` binary package
to extract its `usr/bin/kubectl` (downloaded, never installed).

The source and the client package are fetched through a private apt configuration under a
directory the caller gives: its source entries (deb-src, or deb for `apt-get download`) are derived
from the machine's own Debian sources file, its package lists and archives live there too, so
nothing of the host's apt setup changes and no mirror host name is in our files. Only the package
installation uses the host's apt as it is (that is what installing a package means).

Progress is reported as events (`federation.sandbox.progress`): bytes downloaded and extracted
(`federation.sandbox.meters` reads them off apt's listing and the directories). A failure is a
`FetchError` saying what failed (for a tool that failed, with the last lines it printed).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

import tenacity

from federation.sandbox import meters, progress

APT_PACKAGES = ("golang-go", "etcd-server", "golang-github-modern-go-reflect2-dev", "dpkg-dev", "rsync")
"""The Debian packages the build (Go, reflect2, dpkg-source, rsync) and the sandbox (etcd) need."""
DEBIAN_SOURCES = pathlib.Path("/etc/apt/sources.list.d/debian.sources")
DEBIAN_SOURCES_LIST = pathlib.Path("/etc/apt/sources.list")
CLIENT_PACKAGE = "kubernetes-client"
KUBECTL = "kubectl"
"""The client binary's name: in the package (usr/bin/kubectl) and wherever it is put."""

Reporter = progress.Report | progress.Sink


LOCAL_SECONDS = 900.0
"""Deadline of a local tool (unpacking the source tree, extracting a package)."""
NETWORK_SECONDS = 900.0
"""Deadline of one attempt of a command that downloads (package lists, the source, a package)."""
INSTALL_SECONDS = 1800.0
"""Deadline of one `apt-get install` of the build's packages (Go alone is about 100 MB)."""
ATTEMPTS = 3
"""Attempts of a downloading command before its error is the build's (jittered waits between)."""


class FetchError(RuntimeError):
    """Something cannot be fetched from Debian's archive; the message says what failed."""


def _run(command: Sequence[str], *, cwd: pathlib.Path | None = None, what: str,
         timeout: float = LOCAL_SECONDS) -> str:
    """Run a tool to its end or `timeout`; its stdout, or a FetchError with the last lines it printed."""
    try:
        result = subprocess.run(
            list(command), cwd=cwd, capture_output=True, text=True, check=False, timeout=timeout,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    except subprocess.TimeoutExpired as expired:
        raise FetchError(f"{what} did not finish within {timeout:g} s") from expired
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise FetchError(f"{what} failed (exit {result.returncode}):\n{tail}")
    return result.stdout


@tenacity.retry(retry=tenacity.retry_if_exception_type(FetchError),
                stop=tenacity.stop_after_attempt(ATTEMPTS),
                wait=tenacity.wait_random_exponential(multiplier=2, max=30), reraise=True)
def _fetch(command: Sequence[str], *, cwd: pathlib.Path | None = None, what: str,
           timeout: float = NETWORK_SECONDS) -> str:
    """`_run` for a command that talks to the archive: retried (a mirror's hiccup is common)."""
    return _run(command, cwd=cwd, what=what, timeout=timeout)


def missing_packages() -> list[str]:
    """The apt packages the build and the sandbox need that are not installed."""
    return [p for p in APT_PACKAGES if not _installed(p)]


def install_packages(packages: Sequence[str], report: Reporter) -> None:
    """Install `packages` with the host's apt (one step; root, and a Debian host, are the caller's
    to check)."""
    sink = progress.sink_of(report)
    sink.step(f"installing Debian packages: {' '.join(packages)}")
    _fetch(["apt-get", "update", "-qq"], what="apt-get update")
    _fetch(["apt-get", "install", "-y", "-qq", *packages], what="apt-get install", timeout=INSTALL_SECONDS)
    sink.done()


def _installed(package: str) -> bool:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
    )
    return result.returncode == 0 and "install ok installed" in result.stdout


def _sources_file(path: pathlib.Path | None, what: str) -> pathlib.Path:
    if path is None:
        path = next((p for p in (DEBIAN_SOURCES, DEBIAN_SOURCES_LIST) if p.exists()), None)
    if path is None or not path.exists():
        raise FetchError(f"no Debian sources file ({path or f'{DEBIAN_SOURCES} or {DEBIAN_SOURCES_LIST}'}) "
                         f"to derive {what} from")
    return path


def source_entries(path: pathlib.Path | None = None) -> str:
    """deb-src entries derived from a Debian sources file: `path` (deb822 if it ends in .sources,
    else one-line), by default the machine's own."""
    path = _sources_file(path, "deb-src")
    if path.suffix == ".sources":
        return re.sub(r"(?m)^Types:\s*deb\s*$", "Types: deb-src", path.read_text())
    lines = [line.replace("deb ", "deb-src ", 1) for line in path.read_text().splitlines()
             if line.startswith("deb ")]
    return "\n".join(lines) + "\n"


def binary_entries(path: pathlib.Path | None = None) -> str:
    """deb (binary package) entries of a Debian sources file, by default the machine's own: the
    same archives as `source_entries`, for `apt-get download`."""
    path = _sources_file(path, "deb entries")
    if path.suffix == ".sources":
        return re.sub(r"(?m)^Types:.*$", "Types: deb", path.read_text())
    lines = [line for line in path.read_text().splitlines() if line.startswith("deb ")]
    return "\n".join(lines) + "\n"


def _apt_options(workdir: pathlib.Path, *, binary: bool = False) -> list[str]:
    """apt-get options for a private configuration under `workdir`: deb-src entries, or with
    `binary` deb entries, derived from the machine's sources; the host's apt state is not touched."""
    parts = workdir / ("apt-bin" if binary else "apt")  # apart: an update drops the other's lists
    for sub in ("sources.list.d", "lists/partial", "cache/archives/partial"):
        (parts / sub).mkdir(parents=True, exist_ok=True)
    suffix = ".sources" if DEBIAN_SOURCES.exists() else ".list"
    entries = binary_entries() if binary else source_entries()
    (parts / "sources.list.d" / f"fedspread-{'bin' if binary else 'src'}{suffix}").write_text(entries)
    return [
        "-o", "Dir::Etc::SourceList=/dev/null",
        "-o", f"Dir::Etc::SourceParts={parts / 'sources.list.d'}",
        "-o", f"Dir::State::Lists={parts / 'lists'}",
        "-o", f"Dir::Cache={parts / 'cache'}",
        "-o", "APT::Sandbox::User=root",
    ]


def fetch_source(workdir: pathlib.Path, report: Reporter) -> tuple[pathlib.Path, str]:
    """Download and unpack Debian's kubernetes source package under `workdir` (two steps); return
    (tree, version)."""
    sink = progress.sink_of(report)
    options = _apt_options(workdir)
    sink.step("downloading the kubernetes source package (about 35 MB)")
    _fetch(["apt-get", *options, "update", "-qq"], what="apt-get update (deb-src)")
    download = workdir / "download"
    download.mkdir(exist_ok=True)
    listing = _fetch(["apt-get", *options, "-qq", "--print-uris", "source", "--download-only", "kubernetes"],
                     cwd=download, what="apt-get --print-uris source kubernetes")
    with meters.downloading(sink, download, meters.planned_downloads(listing)):
        _fetch(["apt-get", *options, "source", "--download-only", "kubernetes"], cwd=download,
               what="apt-get source --download-only kubernetes")
    dsc = next(download.glob("kubernetes_*.dsc"), None)
    if dsc is None:
        raise FetchError("apt-get source gave no kubernetes .dsc file")
    version = dsc.name.removeprefix("kubernetes_").removesuffix(".dsc")
    sink.done(f"kubernetes {version}")
    tree = workdir / "kubernetes"
    sink.step(f"extracting kubernetes {version}")

    def extracted() -> None:
        sink.advance(meters.bytes_under(tree) if tree.is_dir() else 0, unit="bytes")

    with meters.Ticker(extracted, interval=5.0):
        _run(["dpkg-source", "-x", "--no-check", str(dsc), str(tree)], what="dpkg-source -x")
    sink.done()
    return tree, version


def _client_binary(unpacked: pathlib.Path) -> pathlib.Path:
    """usr/bin/kubectl inside an extracted package, following a symlink inside the tree."""
    found = unpacked / "usr" / "bin" / KUBECTL
    seen = 0
    while found.is_symlink() and seen < 8:
        link = pathlib.Path(os.readlink(found))
        found = unpacked / link.relative_to("/") if link.is_absolute() else found.parent / link
        seen += 1
    if not found.is_file():
        raise FetchError(f"Debian's {CLIENT_PACKAGE} package holds no usr/bin/{KUBECTL}")
    return found


def fetch_kubectl(target: pathlib.Path, report: Reporter, *, version: str | None,
                  scratch: pathlib.Path) -> pathlib.Path:
    """Put kubectl from Debian's kubernetes-client package (`version` when the archive still has
    it, else its current one) into the directory `target` (one step); return its path. Nothing is
    installed: the package is downloaded through the private apt configuration, in a temporary
    directory under `scratch` (removed after), and extracted."""
    sink = progress.sink_of(report)
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fedspread-kubectl-", dir=scratch) as temporary:
        workdir = pathlib.Path(temporary)
        options = _apt_options(workdir, binary=True)
        sink.step(f"fetching kubectl from Debian's {CLIENT_PACKAGE} package (about 8 MB)")
        _fetch(["apt-get", *options, "update", "-qq"], what="apt-get update (deb)")
        download = workdir / "download"
        download.mkdir()
        wanted = [f"{CLIENT_PACKAGE}={version}", CLIENT_PACKAGE] if version else [CLIENT_PACKAGE]
        for spec in wanted:
            try:
                # A pinned version missing from the archive fails at once; only the last try retries.
                runner = _fetch if spec == wanted[-1] else _run
                with meters.downloading(sink, download, []):
                    runner(["apt-get", *options, "download", spec], cwd=download,
                           what=f"apt-get download {spec}", timeout=NETWORK_SECONDS)
                break
            except FetchError:
                if spec == wanted[-1]:
                    raise
                sink.note(f"{spec} is no longer in the archive; taking its current {CLIENT_PACKAGE}")
        deb = next(download.glob(f"{CLIENT_PACKAGE}_*.deb"), None)
        if deb is None:
            raise FetchError(f"apt-get download gave no {CLIENT_PACKAGE} .deb file")
        unpacked = workdir / "unpacked"
        _run(["dpkg-deb", "-x", str(deb), str(unpacked)], what=f"dpkg-deb -x {deb.name}")
        target.mkdir(parents=True, exist_ok=True)
        partial = target / f"{KUBECTL}.partial"
        shutil.copyfile(_client_binary(unpacked), partial)
        partial.chmod(0o755)
        partial.replace(target / KUBECTL)
    sink.done(f"kubectl {deb.name.split('_')[1]} cached in {target}")
    return target / KUBECTL
