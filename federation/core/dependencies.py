"""The objects a spread's pods need in a member cluster, and which clusters need each.

Why: a pod template that mounts a ConfigMap, reads a Secret, pulls with an image pull secret, runs
under its own ServiceAccount or claims a PersistentVolumeClaim fails in a member cluster
(`CreateContainerConfigError`, `ErrImagePull`, refused by the ServiceAccount admission, Pending)
unless those objects exist there. `references` reads them out of a pod template's spec, as
Kubernetes' own `VisitPodSecretNames`/`VisitPodConfigmapNames` and Karmada's dependencies
distributor do; `missing` names the ones the hub lacks (`DependencyMissing`); `needed_copies` says,
per member cluster, which objects must be there and which spreads need each — one ConfigMap can
serve several spreads, and its member copy may go only when none of them needs it there any more
(`releasable`).

A reference is `optional` only when every place that names the object says `optional: true`: one
required use is enough for the pod to fail without it. Pod specs are read as the apiserver returns
them (camelCase JSON); a missing or ill-typed field is skipped, never an error, so one odd template
cannot stop the propagation of everything else.

Pure: no Kubernetes client, no I/O; inputs are never mutated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

CONFIG_MAP = "ConfigMap"
SECRET = "Secret"
SERVICE_ACCOUNT = "ServiceAccount"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
DEFAULT_SERVICE_ACCOUNT = "default"
"""Every namespace of every cluster has it (the ServiceAccount controller creates it): never copied."""

_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

# Volume sources of in-tree plugins that name a Secret of the pod's namespace by a
# LocalObjectReference (`secretRef.name`), as Kubernetes' VisitPodSecretNames visits them.
_VOLUME_SECRET_REFS = ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos")

_Use = tuple[str, str, bool]  # one place naming an object: kind, name, whether that place says optional


@dataclasses.dataclass(frozen=True, order=True)
class Reference:
    """One namespaced object a pod template needs, in the spread's namespace."""

    api_version: str
    kind: str
    name: str
    optional: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        """The object itself, whatever its uses say about optionality."""
        return (self.api_version, self.kind, self.name)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> Iterator[Mapping[str, Any]]:
    """The mappings of a JSON list; anything else (a string, a number, None) is no list."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for item in value:
            if isinstance(item, Mapping):
                yield item


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_optional(source: Mapping[str, Any]) -> bool:
    return source.get("optional") is True


def _use(kind: str, source: object, field: str = "name", *, may_be_optional: bool = True) -> Iterator[_Use]:
    source_map = _mapping(source)
    name = _name(source_map.get(field))
    if name is not None:
        yield kind, name, may_be_optional and _is_optional(source_map)


def _volume_uses(volume: Mapping[str, Any]) -> Iterator[_Use]:
    yield from _use(CONFIG_MAP, volume.get("configMap"))
    yield from _use(SECRET, volume.get("secret"), "secretName")
    for source in _items(_mapping(volume.get("projected")).get("sources")):
        yield from _use(CONFIG_MAP, source.get("configMap"))
        yield from _use(SECRET, source.get("secret"))
    yield from _use(PERSISTENT_VOLUME_CLAIM, volume.get("persistentVolumeClaim"), "claimName",
                    may_be_optional=False)
    for plugin in _VOLUME_SECRET_REFS:
        yield from _use(SECRET, _mapping(volume.get(plugin)).get("secretRef"), may_be_optional=False)
    yield from _use(SECRET, volume.get("azureFile"), "secretName", may_be_optional=False)
    yield from _use(SECRET, _mapping(volume.get("csi")).get("nodePublishSecretRef"), may_be_optional=False)


def _container_uses(container: Mapping[str, Any]) -> Iterator[_Use]:
    for variable in _items(container.get("env")):
        value_from = _mapping(variable.get("valueFrom"))
        yield from _use(CONFIG_MAP, value_from.get("configMapKeyRef"))
        yield from _use(SECRET, value_from.get("secretKeyRef"))
    for source in _items(container.get("envFrom")):
        yield from _use(CONFIG_MAP, source.get("configMapRef"))
        yield from _use(SECRET, source.get("secretRef"))


def _service_account(pod_spec: Mapping[str, Any]) -> str | None:
    """`serviceAccountName`, else the deprecated `serviceAccount` (the apiserver's own fallback)."""
    name = _name(pod_spec.get("serviceAccountName")) or _name(pod_spec.get("serviceAccount"))
    return None if name == DEFAULT_SERVICE_ACCOUNT else name


def _uses(pod_spec: Mapping[str, Any]) -> Iterator[_Use]:
    for volume in _items(pod_spec.get("volumes")):
        yield from _volume_uses(volume)
    for field in _CONTAINER_LISTS:
        for container in _items(pod_spec.get(field)):
            yield from _container_uses(container)
    for pull_secret in _items(pod_spec.get("imagePullSecrets")):
        yield from _use(SECRET, pull_secret, may_be_optional=False)
    account = _service_account(pod_spec)
    if account is not None:
        yield SERVICE_ACCOUNT, account, False


def references(pod_spec: Mapping[str, Any]) -> tuple[Reference, ...]:
    """Every object `pod_spec` (a pod template's `spec`) names, once each, sorted by kind and name.

    An object is optional only when every use of it says `optional: true`; image pull secrets,
    the ServiceAccount, PersistentVolumeClaims and volume plugins' secrets are never optional.
    """
    optional: dict[tuple[str, str], bool] = {}
    for kind, name, is_optional in _uses(_mapping(pod_spec)):
        optional[kind, name] = optional.get((kind, name), True) and is_optional
    return tuple(sorted(Reference("v1", kind, name, flag) for (kind, name), flag in optional.items()))


def missing(refs: Collection[Reference], present: Collection[tuple[str, str]]) -> tuple[Reference, ...]:
    """The required references whose `(kind, name)` is not among `present` (the hub's objects in
    the spread's namespace), sorted: what the `DependencyMissing` condition lists."""
    there = set(present)
    return tuple(sorted({ref for ref in refs if not ref.optional and (ref.kind, ref.name) not in there}))


def needed_copies(
    per_spread: Mapping[str, tuple[Collection[Reference], Collection[str]]],
) -> dict[str, dict[Reference, frozenset[str]]]:
    """Per member cluster, each object to copy there and the spreads that need it there.

    `per_spread` maps a spread's key to its references (and `spec.propagate` entries, as
    References) and the clusters where it has replicas. A cluster with no replicas of a spread
    needs none of its objects. One object named by several spreads appears once per cluster, as a
    Reference that is optional only if every spread needing it there has it optional. Clusters and
    objects come out sorted, so the same inputs give the same mapping, in the same order.
    """
    needers: dict[str, dict[tuple[str, str, str], set[str]]] = {}
    optional: dict[tuple[str, tuple[str, str, str]], bool] = {}
    for spread_key, (refs, clusters) in per_spread.items():
        for cluster in set(clusters):
            here = needers.setdefault(cluster, {})
            for ref in refs:
                here.setdefault(ref.key, set()).add(spread_key)
                optional[cluster, ref.key] = optional.get((cluster, ref.key), True) and ref.optional
    result: dict[str, dict[Reference, frozenset[str]]] = {}
    for cluster in sorted(needers):
        objects = {Reference(*key, optional[cluster, key]): frozenset(spreads)
                   for key, spreads in needers[cluster].items()}
        if objects:
            result[cluster] = dict(sorted(objects.items()))
    return result


def releasable(copy_needers: frozenset[str], *, still_needing: Collection[str],
               orphaned: Collection[str] = ()) -> bool:
    """Whether a member copy fedspread made may be deleted from its cluster.

    `copy_needers` are the spreads recorded on the copy; `still_needing` the spreads that need it
    in that cluster now (`needed_copies`); `orphaned` spreads deleted with `deletionPolicy:
    Orphan`, whose member workloads keep running and may still use the copy. The copy goes only
    when no spread needs it any more and none of its recorded spreads left it orphaned.
    """
    return not still_needing and copy_needers.isdisjoint(orphaned)
