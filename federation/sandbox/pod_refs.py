"""What a sandbox kubelet checks before it starts a pod's containers: the objects the pod needs.

Why: a real kubelet does not start a container whose ConfigMap or Secret is missing (volumes wait
in `ContainerCreating`, env and envFrom fail with `CreateContainerConfigError`), a private image
without its pull secret fails with `ErrImagePull`, and the apiserver's ServiceAccount admission
refuses a pod whose ServiceAccount does not exist. The sandbox's node simulator used to report
every bound pod Running and Ready, so a test could not tell whether fedspread copied the objects a
spread's pods need into a member. `blocking` names the first required object a pod
references (`federation.core.dependencies.references`) that its namespace lacks, with the waiting
reason a kubelet would report: `ErrImagePull` for an image pull secret (every image a pod pulls
with a pull secret stands for a private one), `CreateContainerConfigError` for the rest (a
ServiceAccount included: the sandbox's apiserver runs without that admission plugin, so the
kubelet stands in for it). The simulator checks only pods not yet Running, as a kubelet checks at
container creation, and looks again every `RECHECK_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from federation.core import dependencies

RECHECK_SECONDS = 1.0
"""How soon a pod waiting for an object is looked at again."""

_PATHS = {dependencies.CONFIG_MAP: "configmaps", dependencies.SECRET: "secrets",
          dependencies.SERVICE_ACCOUNT: "serviceaccounts",
          dependencies.PERSISTENT_VOLUME_CLAIM: "persistentvolumeclaims"}

Exists = Callable[[str], bool]
"""Whether the object at this API path exists."""


def blocking(pod: Mapping[str, Any], *, exists: Exists) -> tuple[str, str] | None:
    """(reason, message) of the first required object the pod needs and its namespace lacks, or
    None when the pod may start."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    spec = pod.get("spec") or {}
    pull_secrets = {item.get("name") for item in spec.get("imagePullSecrets") or [] if isinstance(item, dict)}
    for ref in dependencies.references(spec):
        if ref.optional:
            continue
        if not exists(f"/api/v1/namespaces/{namespace}/{_PATHS[ref.kind]}/{ref.name}"):
            if ref.kind == dependencies.SECRET and ref.name in pull_secrets:
                return "ErrImagePull", f"image pull secret {ref.name!r} not found: the registry refused"
            return "CreateContainerConfigError", f"{ref.kind.lower()} {ref.name!r} not found"
    return None


def waiting_status(pod: Mapping[str, Any], *, reason: str, message: str, host_ip: str) -> dict[str, Any]:
    """A kubelet's status for a pod whose containers cannot be created yet: Pending, not Ready,
    every container waiting with `reason`."""
    spec = pod.get("spec") or {}
    waiting = {"waiting": {"reason": reason, "message": message}}
    containers = [{"name": c["name"], "image": c.get("image") or "sim", "imageID": "", "restartCount": 0,
                   "ready": False, "started": False, "state": waiting} for c in spec.get("containers") or []]
    return {"phase": "Pending", "hostIP": host_ip,
            "conditions": [{"type": "PodScheduled", "status": "True"},
                           {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                           {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": containers}
