"""Build (once) and cache the Kubernetes control-plane binaries the sandbox runs.

Why from source: there is no Docker engine and no internet here beyond the package registries, so
kind, k3s and envtest's downloads are out. Debian ships the Kubernetes *source* package; with
Debian's Go it builds into the real kube-apiserver, kube-controller-manager and kube-scheduler
(DESIGN §7a). One fix is needed: the vendored modern-go/reflect2 1.0.1 crashes under Go >= 1.18,
so it is replaced by Debian's packaged copy. The build takes minutes, once; the binaries are cached
under ~/.cache/fedspread/kube-<version>/ and every later run is instant. `FEDSPREAD_KUBE_BIN`
points at binaries from anywhere else (envtest's, say) and skips all of this.

The apt source entries are derived from the machine's own Debian sources file in a private apt
configuration, so nothing of the host's apt setup changes and no mirror host name is in our files.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
APT_PACKAGES = ("golang-go", "etcd-server", "golang-github-modern-go-reflect2-dev", "dpkg-dev", "rsync")
DEBIAN_SOURCES = pathlib.Path("/etc/apt/sources.list.d/debian.sources")
DEBIAN_SOURCES_LIST = pathlib.Path("/etc/apt/sources.list")
REFLECT2_SOURCE = pathlib.Path("/usr/share/gocode/src/github.com/modern-go/reflect2")
ENV_BIN = "FEDSPREAD_KUBE_BIN"

Report = Callable[[str], None]


class BuildError(RuntimeError):
    """The binaries cannot be built here; the message says what to do instead."""


@dataclasses.dataclass(frozen=True)
class Toolset:
    """Where the sandbox finds its executables."""

    kube_bin: pathlib.Path
    etcd: pathlib.Path

    def binary(self, name: str) -> pathlib.Path:
        """The path of one Kubernetes binary."""
        return self.kube_bin / name


def cache_root() -> pathlib.Path:
    """~/.cache/fedspread (respecting XDG_CACHE_HOME)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "fedspread"


def _complete(directory: pathlib.Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in BINARIES)


def cached_binaries() -> pathlib.Path | None:
    """The newest cached build with all three binaries, if any."""
    root = cache_root()
    if not root.is_dir():
        return None
    builds = sorted((p / "bin" for p in root.glob("kube-*") if _complete(p / "bin")), reverse=True)
    return builds[0] if builds else None


def _run(command: Sequence[str], *, cwd: pathlib.Path | None = None, what: str) -> str:
    result = subprocess.run(
        list(command), cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise BuildError(f"{what} failed (exit {result.returncode}):\n{tail}")
    return result.stdout


def _check_host() -> None:
    if not pathlib.Path("/etc/debian_version").exists():
        raise BuildError(
            "building the sandbox control plane needs Debian (its kubernetes source package); "
            f"on other systems set {ENV_BIN} to a directory holding {', '.join(BINARIES)} "
            "(for example envtest's binaries) and install etcd"
        )
    if os.geteuid() != 0:
        raise BuildError(
            "building the sandbox control plane installs Debian packages and needs root; run "
            f"`sudo fedspread sandbox build` once, or set {ENV_BIN} to prebuilt binaries"
        )


def ensure_packages(report: Report) -> None:
    """Install the apt packages the build and the sandbox need, if any is missing."""
    missing = [p for p in APT_PACKAGES if not _installed(p)]
    if not missing:
        return
    _check_host()
    report(f"installing Debian packages: {' '.join(missing)}")
    _run(["apt-get", "update", "-qq"], what="apt-get update")
    _run(["apt-get", "install", "-y", "-qq", *missing], what="apt-get install")


def _installed(package: str) -> bool:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
    )
    return result.returncode == 0 and "install ok installed" in result.stdout


def source_entries(path: pathlib.Path | None = None) -> str:
    """deb-src entries derived from a Debian sources file: `path` (deb822 if it ends in .sources,
    else one-line), by default the machine's own."""
    if path is None:
        path = next((p for p in (DEBIAN_SOURCES, DEBIAN_SOURCES_LIST) if p.exists()), None)
    if path is None or not path.exists():
        raise BuildError(f"no Debian sources file ({path or f'{DEBIAN_SOURCES} or {DEBIAN_SOURCES_LIST}'}) "
                         "to derive deb-src from")
    if path.suffix == ".sources":
        return re.sub(r"(?m)^Types:\s*deb\s*$", "Types: deb-src", path.read_text())
    lines = [line.replace("deb ", "deb-src ", 1) for line in path.read_text().splitlines()
             if line.startswith("deb ")]
    return "\n".join(lines) + "\n"


def _apt_options(workdir: pathlib.Path) -> list[str]:
    parts = workdir / "apt"
    for sub in ("sources.list.d", "lists/partial", "cache/archives/partial"):
        (parts / sub).mkdir(parents=True, exist_ok=True)
    suffix = ".sources" if DEBIAN_SOURCES.exists() else ".list"
    (parts / "sources.list.d" / f"fedspread-src{suffix}").write_text(source_entries())
    return [
        "-o", "Dir::Etc::SourceList=/dev/null",
        "-o", f"Dir::Etc::SourceParts={parts / 'sources.list.d'}",
        "-o", f"Dir::State::Lists={parts / 'lists'}",
        "-o", f"Dir::Cache={parts / 'cache'}",
        "-o", "APT::Sandbox::User=root",
    ]


def fetch_source(workdir: pathlib.Path, report: Report) -> tuple[pathlib.Path, str]:
    """Download and unpack Debian's kubernetes source package; return (tree, version)."""
    options = _apt_options(workdir)
    report("fetching the kubernetes source package (about 35 MB)")
    _run(["apt-get", *options, "update", "-qq"], what="apt-get update (deb-src)")
    download = workdir / "download"
    download.mkdir(exist_ok=True)
    _run(["apt-get", *options, "source", "--download-only", "kubernetes"], cwd=download,
         what="apt-get source --download-only kubernetes")
    dsc = next(download.glob("kubernetes_*.dsc"), None)
    if dsc is None:
        raise BuildError("apt-get source gave no kubernetes .dsc file")
    version = dsc.name.removeprefix("kubernetes_").removesuffix(".dsc")
    tree = workdir / "kubernetes"
    report(f"unpacking kubernetes {version}")
    _run(["dpkg-source", "-x", "--no-check", str(dsc), str(tree)], what="dpkg-source -x")
    return tree, version


def replace_reflect2(tree: pathlib.Path) -> None:
    """Swap the vendored modern-go/reflect2 (crashes under Go >= 1.18) for Debian's copy."""
    vendored = tree / "vendor" / "github.com" / "modern-go" / "reflect2"
    if not REFLECT2_SOURCE.is_dir():
        raise BuildError(f"{REFLECT2_SOURCE} is missing: install golang-github-modern-go-reflect2-dev")
    shutil.rmtree(vendored, ignore_errors=True)
    shutil.copytree(REFLECT2_SOURCE, vendored)


def compile_binaries(tree: pathlib.Path, report: Report, *, log: pathlib.Path) -> pathlib.Path:
    """Run the Kubernetes build for the three binaries, reporting progress every 20 s."""
    report(f"compiling {', '.join(BINARIES)} (about 6 minutes on 2 cores, once); log: {log}")
    started = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(
            ["make", f"WHAT={' '.join('cmd/' + b for b in BINARIES)}"],
            cwd=tree, stdout=sink, stderr=subprocess.STDOUT,
        )
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(20):
                lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
                last = lines[-1].strip() if lines else ""
                report(f"  ... {int(time.monotonic() - started)} s: {last[:90]}")

        ticker = threading.Thread(target=heartbeat, daemon=True)
        ticker.start()
        code = process.wait()
        done.set()
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise BuildError(f"the Kubernetes build failed (exit {code}); last lines of {log}:\n{tail}")
    report(f"compiled in {int(time.monotonic() - started)} s")
    return tree / "_output" / "bin"


def build(report: Report) -> pathlib.Path:
    """Build the binaries into the cache and return the cache's bin directory."""
    _check_host()
    ensure_packages(report)
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fedspread-build-", dir=cache_root()) as scratch:
        workdir = pathlib.Path(scratch)
        tree, version = fetch_source(workdir, report)
        replace_reflect2(tree)
        built = compile_binaries(tree, report, log=cache_root() / "build.log")
        target = cache_root() / f"kube-{version}" / "bin"
        staging = target.with_name("bin.partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in BINARIES:
            shutil.copy2(built / name, staging / name)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    report(f"cached in {target}")
    return target


def _etcd() -> pathlib.Path:
    found = shutil.which("etcd") or ("/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)
    if found is None:
        raise BuildError("etcd is not installed: `apt-get install etcd-server` (Debian) or put etcd on PATH")
    return pathlib.Path(found)


def ensure(report: Report | None = None) -> Toolset:
    """The sandbox's executables: FEDSPREAD_KUBE_BIN, else the cache, else a fresh build."""
    say: Report = report or (lambda line: print(line, file=sys.stderr, flush=True))
    given = os.environ.get(ENV_BIN)
    if given:
        directory = pathlib.Path(given)
        if not _complete(directory):
            raise BuildError(f"{ENV_BIN}={given} must hold executable {', '.join(BINARIES)}")
        return Toolset(kube_bin=directory, etcd=_etcd())
    cached = cached_binaries()
    if cached is not None and shutil.which("etcd"):
        return Toolset(kube_bin=cached, etcd=_etcd())
    if cached is None:
        cached = build(say)
    else:
        ensure_packages(say)
    return Toolset(kube_bin=cached, etcd=_etcd())
