"""fedspread's own patches to the Kubernetes source the sandbox builds, and the cache stamp they set.

Why: the sandbox runs Debian's Kubernetes 1.20, whose ReplicaSet controller ignores
`controller.kubernetes.io/pod-deletion-cost` (honoured from 1.22), the annotation fedspread's scale-down
order rests on. Rather than prove that order on a model only, the build applies
`patches/0001-replicaset-honours-pod-deletion-cost.patch` (the 1.22 rule, written for us) to the source
before compiling, so the tests watch the real controller delete the cheapest pods first.

Each patch must apply exactly (`patch --forward --fuzz=0`, checked with a dry run first): a patch that
does not apply fails the build with patch's own words, never a silently unpatched binary. The cached
build's directory name carries `stamp()`, a digest of the patches, so a cache built before a patch
was added or changed is not used: the next `fedspread sandbox build` (or `ensure`) builds afresh.
`patch` comes with dpkg-dev, which the build installs anyway.
"""

from __future__ import annotations

import hashlib
import pathlib
import subprocess

PATCHES = pathlib.Path(__file__).with_name("patches")
PATCH_SECONDS = 120.0


class PatchError(RuntimeError):
    """A patch is missing or does not apply; the message names it and says why."""


def patches(directory: pathlib.Path = PATCHES) -> list[pathlib.Path]:
    """The patches, in the order they apply (by name); none is an error (an installation without
    its package data would otherwise build an unpatched control plane)."""
    found = sorted(directory.glob("*.patch"))
    if not found:
        raise PatchError(f"no *.patch under {directory}: the sandbox's Kubernetes patches are missing "
                         "from this installation of fedspread")
    return found


def stamp(directory: pathlib.Path = PATCHES) -> str:
    """`fedspread-<8 hex digits>`: a digest of every patch's name and bytes, for the cache's name."""
    digest = hashlib.sha256()
    for patch in patches(directory):
        digest.update(patch.name.encode() + b"\0" + patch.read_bytes() + b"\0")
    return f"fedspread-{digest.hexdigest()[:8]}"


def _patch(tree: pathlib.Path, patch: pathlib.Path, *, dry_run: bool) -> subprocess.CompletedProcess[str]:
    command = ["patch", "-p1", "--forward", "--batch", "--fuzz=0", "--no-backup-if-mismatch",
               f"--input={patch}", *(["--dry-run"] if dry_run else [])]
    try:
        return subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False,
                              timeout=PATCH_SECONDS)
    except FileNotFoundError as error:
        raise PatchError("`patch` is not installed (Debian: apt-get install patch)") from error


def apply(tree: pathlib.Path, directory: pathlib.Path = PATCHES) -> list[str]:
    """Apply every patch to the source tree, each checked by a dry run first; the names applied."""
    applied = []
    for patch in patches(directory):
        for dry_run in (True, False):
            result = _patch(tree, patch, dry_run=dry_run)
            if result.returncode != 0:
                said = (result.stdout + result.stderr).strip()
                raise PatchError(f"fedspread's patch {patch.name} does not apply to the Kubernetes source "
                                 f"in {tree} (patch exit {result.returncode}):\n{said}")
        applied.append(patch.name)
    return applied
