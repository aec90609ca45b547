"""The sandbox's volumes: each member's default StorageClass and a minimal external provisioner.

Why: a StatefulSet with `volumeClaimTemplates` (and any pod naming a claim) waits for its claims to be
Bound, and the sandbox has no storage. A real cluster's CSI provisioner does two things this one does,
by the same protocol (kubernetes-csi/external-provisioner): for each claim the controller-manager's
PersistentVolume controller hands to it (annotation `volume.beta.kubernetes.io/storage-provisioner`
naming `PROVISIONER`), it creates a PersistentVolume `pvc-<claim uid>` of the claim's size, access
modes and volume mode, pre-bound to the claim, which that controller then binds; and it deletes the
volumes it made, under the `Delete` reclaim policy, once they are Released. Nothing is stored: the
volume is a hostPath no kubelet ever mounts (there is none). The launcher creates the class,
`STORAGE_CLASS`, marked default (so claims without a class get it; `DefaultStorageClass`
admission), with `Immediate` binding: a claim is bound before any pod is scheduled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from federation.sandbox import simapi

STORAGE_CLASS = "standard"
PROVISIONER = "sandbox.fedspread.io/hostpath"
PROVISIONER_ANNOTATION = "volume.beta.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PERSISTENT_VOLUMES = "/api/v1/persistentvolumes"
ATTEMPTS = 6
"""Tries to create a claim's volume (waits 1, 2, 4, ... s between): an apiserver restart outlasts a few."""
Json = dict[str, Any]


def storage_class() -> Json:
    """The member's default StorageClass, served by this provisioner."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {
        "name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}


def wants_volume(claim: Json) -> bool:
    """A claim handed to this provisioner and not bound yet."""
    annotations = claim["metadata"].get("annotations") or {}
    return (annotations.get(PROVISIONER_ANNOTATION) == PROVISIONER and not claim["spec"].get("volumeName")
            and (claim.get("status") or {}).get("phase", "Pending") == "Pending"
            and not claim["metadata"].get("deletionTimestamp"))


def volume_for(claim: Json, *, reclaim_policy: str) -> Json:
    """The PersistentVolume for a claim, pre-bound to it (the controller-manager completes the bind)."""
    meta, spec = claim["metadata"], claim["spec"]
    name = f"pvc-{meta['uid']}"
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {
        "name": name, "annotations": {PROVISIONED_BY: PROVISIONER}}, "spec": {
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")},
        "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "persistentVolumeReclaimPolicy": reclaim_policy, "storageClassName": spec.get("storageClassName"),
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                     "name": meta["name"], "uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
        "hostPath": {"path": f"/var/lib/fedspread-sandbox/volumes/{name}", "type": "DirectoryOrCreate"}}}


def deletable(volume: Json) -> bool:
    """A volume this provisioner made, Released by its claim, whose class says Delete."""
    annotations = volume["metadata"].get("annotations") or {}
    return (annotations.get(PROVISIONED_BY) == PROVISIONER
            and volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete"
            and (volume.get("status") or {}).get("phase") == "Released")


class Provisioner:
    """Watches claims and volumes of one member and provisions and deletes volumes for them."""

    def __init__(self, api: simapi.Api, *, warn: Callable[[str], None], stop: threading.Event) -> None:
        self.api, self.warn, self.stop = api, warn, stop
        self.claims = simapi.ListWatch(api, "/api/v1/persistentvolumeclaims", on_event=self._claim,
                                       warn=warn, stop=stop)
        self.volumes = simapi.ListWatch(api, PERSISTENT_VOLUMES, on_event=self._volume, warn=warn, stop=stop)

    def _reclaim_policy(self, claim: Json) -> str:
        name = claim["spec"].get("storageClassName")
        if not name:
            return "Delete"
        found = self.api.call("GET", f"/apis/storage.k8s.io/v1/storageclasses/{name}", ok=(404,))
        return str((found or {}).get("reclaimPolicy") or "Delete")

    def _claim(self, kind: str, claim: Json) -> None:
        if kind == "DELETED" or not wants_volume(claim):
            return
        for attempt in range(ATTEMPTS):  # a claim brings no new event after a failure: retry here
            try:  # 409: made already (a relist, or a new event of the same claim)
                self.api.call("POST", PERSISTENT_VOLUMES, volume_for(
                    claim, reclaim_policy=self._reclaim_policy(claim)), ok=(409,), decode=False)
                return
            except Exception as error:
                self.warn(f"provisioning a volume for claim {simapi.object_key(claim)} failed: {error}")
                if self.stop.wait(2.0 ** attempt):
                    return

    def _volume(self, kind: str, volume: Json) -> None:
        if kind == "DELETED" or not deletable(volume):
            return
        path = f"{PERSISTENT_VOLUMES}/{volume['metadata']['name']}"
        try:
            self.api.call("DELETE", path, {"preconditions": {"uid": volume["metadata"]["uid"]}},
                          ok=(404, 409), decode=False)
        except Exception as error:
            self.warn(f"deleting released volume {volume['metadata']['name']} failed: {error}")

    def threads(self) -> list[threading.Thread]:
        """The two watches, as daemon threads (not started)."""
        return [threading.Thread(target=watch.run, daemon=True, name=f"provisioner-{i}")
                for i, watch in enumerate((self.claims, self.volumes))]

    def cut(self) -> None:
        """Cut both watches' connections (at shutdown)."""
        for watch in (self.claims, self.volumes):
            watch.cut()
