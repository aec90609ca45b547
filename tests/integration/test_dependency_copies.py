"""The agent's rules for the member copies of the objects pods need (`agents/controller/dependencies.py`),
on a real sandbox member apiserver: what is created, shared, kept, handed over and deleted.

The dependency sync is driven directly with assignments in the agent's bookkeeping, as the link
stores them, so each rule is one step: two spreads sharing a ConfigMap (the copy names both, and
goes only when neither needs it), a reference dropped from a template, an orphaning removal (the
copy stays, recorded as orphaned, and is never deleted), `propagateDependencies: false` (handed
over, kept), a hub object gone (the copy kept), another federation's object (never touched), and
a copy deleted by hand in the member (put back at the next resync), and nothing rewritten when
nothing changed.
"""

from __future__ import annotations

from typing import Any

import conftest
import pytest
from kubernetes import client

from agents import bookkeeping
from agents.controller import dependencies
from federation.api import names
from federation.rpc import assignment

MEMBER = "member-1"
FEDERATION = "fed-a"


def shared(name: str, *, data: str = "v1") -> assignment.DependencyCopy:
    return assignment.DependencyCopy(kind="ConfigMap", name=name, body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": data}})


def assigned(namespace: str, spread: str, *copies: assignment.DependencyCopy,
             propagate: bool = True) -> assignment.Assignment:
    return assignment.Assignment(
        spread=f"{namespace}/{spread}", generation=1, namespace=namespace, workload=spread, replicas=1,
        template={}, template_revision="r", subsets=(), subset_count=1, spread_uid=f"uid-{spread}",
        federation=FEDERATION, propagate_dependencies=propagate, dependencies=copies)


def marks(clusters: conftest.Clusters, namespace: str, name: str) -> tuple[str, str] | None:
    """(needed-by, orphaned-by) of our copy `name`; None when absent or not ours."""
    try:
        found = clusters.core(MEMBER).read_namespaced_config_map(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    if (found.metadata.labels or {}).get(names.FEDERATION_LABEL) != FEDERATION:
        return None
    notes = found.metadata.annotations or {}
    return notes.get(names.NEEDED_BY_ANNOTATION, ""), notes.get(names.ORPHANED_BY_ANNOTATION, "")


@pytest.fixture
def sync(clusters: conftest.Clusters) -> tuple[dependencies.DependencySync, bookkeeping.Bookkeeping]:
    books = bookkeeping.Bookkeeping()
    return dependencies.DependencySync(clusters.core(MEMBER), books), books


def test_a_shared_copy_goes_only_when_no_spread_needs_it_and_an_orphaned_one_never(
        clusters: conftest.Clusters, namespace: str,
        sync: tuple[dependencies.DependencySync, bookkeeping.Bookkeeping]) -> None:
    copies, books = sync
    web, api = f"{namespace}/web", f"{namespace}/api"
    books.set_assignment(assigned(namespace, "web", shared("common"), shared("web-only")))
    books.set_assignment(assigned(namespace, "api", shared("common")))
    assert copies.sync_once() == {"created": 2, "updated": 1}  # api adds itself to common
    assert marks(clusters, namespace, "common") == (f"{api},{web}", "")
    assert marks(clusters, namespace, "web-only") == (web, "")

    # web's template stops referencing web-only: web leaves it, nobody needs it, it goes
    books.set_assignment(assigned(namespace, "web", shared("common")))
    copies.sync_once()
    assert marks(clusters, namespace, "web-only") is None

    # web removed from this cluster (Delete): common stays for api
    books.remove_assignment(web)
    assert copies.remove(web, federation=FEDERATION) == 1
    assert marks(clusters, namespace, "common") == (api, "")

    # api removed with its workload orphaned: the copy stays, recorded, and is never deleted
    books.remove_assignment(api)
    assert copies.release(api, federation=FEDERATION) == 1
    assert marks(clusters, namespace, "common") == ("", api)

    # a new spread needs it again: updated from the hub for it; when it goes, the orphan still holds it
    books.set_assignment(assigned(namespace, "new", shared("common", data="v2")))
    copies.sync_once()
    assert marks(clusters, namespace, "common") == (f"{namespace}/new", api)
    assert clusters.core(MEMBER).read_namespaced_config_map("common", namespace).data == {"k": "v2"}
    books.remove_assignment(f"{namespace}/new")
    copies.remove(f"{namespace}/new", federation=FEDERATION)
    assert marks(clusters, namespace, "common") == ("", api)


def test_turning_propagation_off_hands_over_and_a_hub_object_gone_is_kept(
        clusters: conftest.Clusters, namespace: str,
        sync: tuple[dependencies.DependencySync, bookkeeping.Bookkeeping]) -> None:
    copies, books = sync
    web = f"{namespace}/web"
    books.set_assignment(assigned(namespace, "web", shared("config"), shared("other")))
    copies.sync_once()
    books.set_assignment(assigned(namespace, "web", assignment.DependencyCopy("ConfigMap", "config"),
                                  shared("other")))  # config deleted on the hub
    copies.sync_once()
    assert marks(clusters, namespace, "config") == (web, "")
    assert clusters.core(MEMBER).read_namespaced_config_map("config", namespace).data == {"k": "v1"}
    books.set_assignment(assigned(namespace, "web", propagate=False))
    copies.sync_once()
    assert marks(clusters, namespace, "config") == ("", web)
    assert marks(clusters, namespace, "other") == ("", web)


def test_another_federation_s_object_is_never_touched_and_a_deleted_copy_comes_back(
        clusters: conftest.Clusters, namespace: str,
        sync: tuple[dependencies.DependencySync, bookkeeping.Bookkeeping],
        monkeypatch: pytest.MonkeyPatch) -> None:
    copies, books = sync
    core = clusters.core(MEMBER)
    theirs: dict[str, Any] = {"metadata": {"name": "theirs", "labels": {names.FEDERATION_LABEL: "fed-b"}},
                              "data": {"k": "b"}}
    core.create_namespaced_config_map(namespace, theirs)
    books.set_assignment(assigned(namespace, "web", shared("theirs"), shared("mine")))
    assert copies.sync_once() == {"conflict": 1, "created": 1}
    assert copies.conflicts() == {f"{namespace}/web": ("ConfigMap/theirs",)}
    assert core.read_namespaced_config_map("theirs", namespace).data == {"k": "b"}
    books.remove_assignment(f"{namespace}/web")
    copies.remove(f"{namespace}/web", federation=FEDERATION)
    assert core.read_namespaced_config_map("theirs", namespace).data == {"k": "b"}  # still theirs

    monkeypatch.setattr(dependencies, "RESYNC_SECONDS", 0.0)  # every turn a resync
    books.set_assignment(assigned(namespace, "web", shared("mine")))
    assert copies.sync_once() == {"created": 1}
    core.delete_namespaced_config_map("mine", namespace)
    assert copies.sync_once() == {"created": 1}  # put back
    assert marks(clusters, namespace, "mine") == (f"{namespace}/web", "")
    assert copies.sync_once() == {"unchanged": 1}
