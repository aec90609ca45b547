"""Every connected agent's MemberCluster on the hub: created on first join, recreated after a delete.

Why a module of its own: the hub object is not the cluster. An agent that joins registers its
cluster (the Hello's topology labels); a MemberCluster deleted on the hub while its agent is
connected (a GitOps prune, a mistaken `kubectl delete`) is created again with the labels and taints
the World last had for it, and nothing moves. A decommissioned cluster left the federation and is
never created again. One existing object on the hub always wins (409). The process calls
`on_hello` for each welcomed agent and `restore` when the hub reports a member deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kubernetes import client

from federation.api import cluster as cluster_api
from federation.api import common
from federation.coordinator import facade
from federation.coordinator.model import world as world_model
from federation.kube import deadlines
from federation.kube import events as kube_events
from federation.rpc import agent_pb2

log = logging.getLogger(__name__)

HUB_CALL_TIMEOUT = deadlines.CALL
"""Deadline of the hub call that registers a new agent's MemberCluster."""


class MemberClusters:
    """Creates the MemberClusters of connected agents; `members` is the set the hub has now."""

    def __init__(
        self, api: client.ApiClient, *, coordinator: facade.Coordinator, members: set[str],
        agent_versions: dict[str, str], recorder: kube_events.EventRecorder,
    ) -> None:
        self._custom = client.CustomObjectsApi(api)
        self.coordinator = coordinator
        self.world: world_model.World = coordinator.world
        self.members = members
        self.agent_versions = agent_versions
        self.recorder = recorder

    def on_hello(self, hello: agent_pb2.Hello) -> None:
        """Remember the agent's version; create its MemberCluster if missing: with the labels and
        taints the World last had for it (the hub's were authoritative), else the Hello's topology
        labels (first join). Never for a decommissioned cluster (it left the federation)."""
        name = hello.cluster_name
        self.agent_versions[name] = hello.agent_version
        if name in self.members:
            return
        with self.coordinator.lock:
            if self.world.decommissioned(name):
                log.info("agent of a decommissioned cluster connected; its MemberCluster is not "
                         "created again", extra={"cluster": name})
                return
            known = self.world.member(name)
        if known is None:
            self._create_member(name, labels=dict(hello.topology_labels), taints=())
        else:
            self._create_member(name, labels=known.labels, taints=known.taints, restored=True)

    def restore(self, name: str) -> None:
        """Recreate the MemberCluster of `name` (deleted on the hub while its agent is connected)
        from what the World last had for it, unless it is back, decommissioned or disconnected."""
        with self.coordinator.lock:
            known = self.world.member(name)
            if name in self.members or known is None or self.world.decommissioned(name) \
                    or name not in self.coordinator.connected():
                return
        self._create_member(name, labels=known.labels, taints=known.taints, restored=True)

    def _create_member(self, name: str, *, labels: dict[str, str],
                       taints: Sequence[common.Taint], restored: bool = False) -> None:
        """Create MemberCluster `name` on the hub; one that exists already wins (409)."""
        spec = {"taints": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in taints]}
        body = {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": "MemberCluster",
                "metadata": {"name": name, "labels": dict(labels)}, "spec": spec if taints else {}}
        try:
            created = self._custom.create_cluster_custom_object(common.API_GROUP, common.API_VERSION,
                                                                cluster_api.PLURAL, body,
                                                                _request_timeout=HUB_CALL_TIMEOUT)
        except client.ApiException as error:
            if error.status != 409:  # 409: it exists already, the hub's copy wins
                raise
            return
        log.info("MemberCluster recreated" if restored else "MemberCluster registered",
                 extra={"cluster": name})
        if restored:
            meta = created.get("metadata") if isinstance(created, dict) else None
            uid = str(meta.get("uid") or "") if isinstance(meta, dict) else ""
            self.recorder.record(
                kube_events.ObjectRef(common.GROUP_VERSION, cluster_api.KIND, name, uid=uid),
                reason="Recreated", type=kube_events.WARNING, action="Recreate",
                note="the MemberCluster was deleted while its agent was connected; recreated with its "
                     "last labels and taints, nothing moved (set spec.decommission to remove a member)")

    # --- timer ---------------------------------------------------------------------------------
