"""fedspread's patches to the sandbox's Kubernetes source: applied exactly or the build fails, and a
cache built without today's patches is never used.

Why: the sandbox's ReplicaSet controller honours pod-deletion-cost only through our patch
(tests/integration/test_sandbox_workloads.py proves the order on the real controller). A patch that
silently failed to apply, or a cache built before it, would turn that proof into a false failure or,
worse, leave a stale binary in use; these tests pin the build's side of it without compiling.
"""

from __future__ import annotations

import pathlib

import pytest

from federation.sandbox import build, kube_patches

ORIGINAL = "package controller\n\nfunc rank() int {\n\treturn 1\n}\n"
PATCH = """our own words before the diff are ignored by patch

--- a/pkg/controller/rank.go
+++ b/pkg/controller/rank.go
@@ -1,5 +1,5 @@
 package controller

 func rank() int {
-\treturn 1
+\treturn 2
 }
"""


def tree_and_patches(tmp_path: pathlib.Path, original: str = ORIGINAL) -> tuple[pathlib.Path, pathlib.Path]:
    tree, patches = tmp_path / "kubernetes", tmp_path / "patches"
    (tree / "pkg" / "controller").mkdir(parents=True)
    (tree / "pkg" / "controller" / "rank.go").write_text(original)
    patches.mkdir()
    (patches / "0001-rank.patch").write_text(PATCH)
    return tree, patches


def test_a_patch_that_applies_changes_the_source(tmp_path: pathlib.Path) -> None:
    tree, patches = tree_and_patches(tmp_path)
    assert kube_patches.apply(tree, patches) == ["0001-rank.patch"]
    assert "return 2" in (tree / "pkg" / "controller" / "rank.go").read_text()
    assert not list(tree.rglob("*.orig")) and not list(tree.rglob("*.rej"))


@pytest.mark.parametrize("original", [ORIGINAL.replace("return 1", "return 7"), None],
                         ids=["source-differs", "file-missing"])
def test_a_patch_that_does_not_apply_fails_loudly_and_changes_nothing(
        tmp_path: pathlib.Path, original: str | None) -> None:
    tree, patches = tree_and_patches(tmp_path, original or ORIGINAL)
    if original is None:
        (tree / "pkg" / "controller" / "rank.go").unlink()
    before = {p: p.read_text() for p in tree.rglob("*") if p.is_file()}
    with pytest.raises(kube_patches.PatchError, match=r"0001-rank\.patch does not apply"):
        kube_patches.apply(tree, patches)
    assert {p: p.read_text() for p in tree.rglob("*") if p.is_file()} == before, "the dry run went first"


def test_a_patch_applied_already_is_refused_not_reversed(tmp_path: pathlib.Path) -> None:
    tree, patches = tree_and_patches(tmp_path)
    kube_patches.apply(tree, patches)
    with pytest.raises(kube_patches.PatchError, match="does not apply"):
        kube_patches.apply(tree, patches)
    assert "return 2" in (tree / "pkg" / "controller" / "rank.go").read_text()


def test_the_build_reports_a_patch_that_does_not_apply_as_a_build_error(tmp_path: pathlib.Path) -> None:
    """The real patch against a tree without the ReplicaSet controller's file: the build stops."""
    tree = tmp_path / "kubernetes"
    tree.mkdir()
    with pytest.raises(build.BuildError, match=r"0001-replicaset-honours-pod-deletion-cost\.patch"):
        build.apply_patches(tree, lambda line: None)


def test_no_patches_at_all_is_an_error_not_an_unpatched_build(tmp_path: pathlib.Path) -> None:
    with pytest.raises(kube_patches.PatchError, match="missing"):
        kube_patches.stamp(tmp_path)


def test_the_stamp_follows_the_patches_bytes(tmp_path: pathlib.Path) -> None:
    _, patches = tree_and_patches(tmp_path)
    first = kube_patches.stamp(patches)
    assert first == kube_patches.stamp(patches) and first.startswith("fedspread-")
    (patches / "0001-rank.patch").write_text(PATCH.replace("return 2", "return 3"))
    assert kube_patches.stamp(patches) != first


def test_the_shipped_patch_adds_the_deletion_cost_rule_after_readiness() -> None:
    """The rule sits where Kubernetes 1.22 puts it: after not-ready < ready, before the rank."""
    (patch,) = kube_patches.patches()
    added = [line[1:] for line in patch.read_text().splitlines() if line.startswith("+")]
    text = "\n".join(added)
    assert 'pod.Annotations["controller.kubernetes.io/pod-deletion-cost"]' in text
    assert "return costI < costJ" in text
    body, rule = patch.read_text(), "fedspreadDeletionCost(s.Pods[i])"
    assert body.index("return !podutil.IsPodReady(s.Pods[i])") < body.index(rule)
    assert body.index(rule) < body.index("+\t// 5. Doubled up < not doubled up")


def test_a_cache_built_without_todays_patches_is_not_used(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(build.ENV_BIN, raising=False)
    old = build.cache_root() / "kube-1.20.5+really1.20.2-1.1+deb12u1" / "bin"  # before patches existed
    older = build.cache_root() / "kube-1.20.5+really1.20.2-1.1+deb12u1-fedspread-00000000" / "bin"
    for directory in (old, older):
        directory.mkdir(parents=True)
        for name in (*build.BINARIES, "kubectl"):
            (directory / name).write_text("#!/bin/sh\n")
            (directory / name).chmod(0o755)
    assert build.cached_binaries() is None
    with pytest.raises(build.BuildError, match="fedspread sandbox build"):
        build.kubectl()
    current = build.cache_directory("1.20.5+really1.20.2-1.1+deb12u1") / "bin"
    current.mkdir(parents=True)
    for name in build.BINARIES:
        (current / name).write_text("#!/bin/sh\n")
        (current / name).chmod(0o755)
    assert build.cached_binaries() == current
    assert build._version_of(current) == "1.20.5+really1.20.2-1.1+deb12u1"
    assert old.is_dir() and older.is_dir(), "an old cache is left alone (other checkouts may use it)"
