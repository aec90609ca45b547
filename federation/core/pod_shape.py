"""The pod the scheduler will see: a template's pod spec, and the same pod after a subset's injection.

Why a module of its own: capacity fit (`fit`) asks "how many pods of this shape fit on these
nodes"; this module answers "what shape is that pod". The shape follows kube-scheduler's
NodeResourcesFit, NodeAffinity and TaintToleration inputs: effective pod requests (containers,
init and sidecar containers, overhead, limits defaulting requests), node selector, required
affinity and tolerations. Quantities are exact Fractions so "100m" times ten is exactly one cpu.

A subset changes the pod it admits (the agent's webhook: its node term ANDed in, its tolerations
appended, its strategic-merge `patch` applied). `with_subset` gives the shape of exactly that pod
by running the webhook's own pure mutation (`mutation.mutate_pod`) on the template's pod spec, so
a patch that raises requests, adds a GPU or a nodeSelector is fitted as the member will see it;
there is no second implementation of the injection to drift from the webhook's.
"""

from __future__ import annotations

import dataclasses
import fractions
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from federation.api import common, quantity, spread
from federation.core import mutation

PODS = "pods"

POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
"""Resources a pod-level `spec.resources` may set (they replace the container aggregate)."""

Resources = dict[str, fractions.Fraction]


@functools.lru_cache(maxsize=4096)
def cached_quantity(text: str) -> fractions.Fraction:
    """Pools and templates repeat the same few quantity texts; Fractions are immutable: cache."""
    return quantity.parse_quantity(text)


@dataclasses.dataclass(frozen=True)
class PodShape:
    """What the scheduler looks at when fitting one pod: requests, node constraints, tolerations."""

    requests: Mapping[str, fractions.Fraction] = dataclasses.field(default_factory=dict)
    """Per-pod effective requests, overhead included; the implicit one pod is not listed."""
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    required_terms: tuple[common.NodeSelectorTerm, ...] = ()
    """Required node-affinity terms, ORed; empty means any node."""
    tolerations: tuple[common.Toleration, ...] = ()
    pod: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)
    """The pod spec the shape was read from (read, never changed), so that a subset's patch can be
    applied to it; None for a shape built from numbers, to which a patch cannot be applied."""

    @classmethod
    def empty_shape(cls) -> PodShape:
        """A pod that requests nothing and goes anywhere untainted (an empty pod spec)."""
        return cls(pod={})


def empty_shape() -> PodShape:
    """A pod that requests nothing and goes anywhere untainted (an empty pod spec)."""
    return PodShape(pod={})


# --- pod spec -> shape ----------------------------------------------------------------------------


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _quantities(value: Any, where: str) -> Resources:
    parsed: Resources = {}
    for name, text in _mapping(value, where).items():
        try:
            parsed[str(name)] = cached_quantity(text) if type(text) is str else quantity.parse_quantity(text)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}.{name}: {err}") from None
    return parsed


def _container_requests(container: Any, where: str) -> Resources:
    """Requests of one container, each unset request defaulting to its limit (k8s defaulting)."""
    resources = _mapping(_mapping(container, where).get("resources"), f"{where}.resources")
    requests = _quantities(resources.get("requests"), f"{where}.resources.requests")
    limits = _quantities(resources.get("limits"), f"{where}.resources.limits")
    return {**limits, **requests}


def _label(container: Any, kind: str, index: int) -> str:
    name = container.get("name") if isinstance(container, Mapping) else None
    return f"{kind}[{index}]" + (f" ({name})" if name else "")


def _add(total: Resources, extra: Mapping[str, fractions.Fraction]) -> None:
    for name, amount in extra.items():
        total[name] = total.get(name, fractions.Fraction(0)) + amount


def _max_into(total: Resources, other: Mapping[str, fractions.Fraction]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, fractions.Fraction(0)):
            total[name] = amount


def _effective_requests(spec: Mapping[str, Any]) -> Resources:
    """k8s PodRequests: max(containers + sidecars, each init step), pod-level override, overhead."""
    requests: Resources = {}
    for i, container in enumerate(_list(spec.get("containers"), "containers")):
        _add(requests, _container_requests(container, _label(container, "containers", i)))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for i, container in enumerate(_list(spec.get("initContainers"), "initContainers")):
        own = _container_requests(container, _label(container, "initContainers", i))
        if _mapping(container, "initContainers").get("restartPolicy") == "Always":
            # A sidecar keeps running next to the app containers and the later init containers.
            _add(requests, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, own)
        _max_into(init_peak, step)
    _max_into(requests, init_peak)
    pod_level = _mapping(spec.get("resources"), "resources")
    pod_requests = {
        **_quantities(pod_level.get("limits"), "resources.limits"),
        **_quantities(pod_level.get("requests"), "resources.requests"),
    }
    for name, amount in pod_requests.items():
        if name in POD_LEVEL_RESOURCES:
            requests[name] = amount
    _add(requests, _quantities(spec.get("overhead"), "overhead"))
    requests.pop(PODS, None)
    return requests


def _without_nulls(value: Any) -> Any:
    """JSON from the apiserver may carry explicit nulls; the API models want the key absent."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _required_terms(spec: Mapping[str, Any]) -> tuple[common.NodeSelectorTerm, ...]:
    affinity = _mapping(spec.get("affinity"), "affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), "affinity.nodeAffinity")
    where = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), where)
    terms = []
    for i, raw in enumerate(_list(required.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")):
        try:
            terms.append(common.NodeSelectorTerm.model_validate(_without_nulls(raw)))
        except ValueError as err:
            raise ValueError(f"{where}.nodeSelectorTerms[{i}]: {err}") from None
    return tuple(terms)


def _tolerations(spec: Mapping[str, Any]) -> tuple[common.Toleration, ...]:
    tolerations = []
    for i, raw in enumerate(_list(spec.get("tolerations"), "tolerations")):
        data = dict(_without_nulls(_mapping(raw, f"tolerations[{i}]")))
        if data.get("operator") == "":
            del data["operator"]  # empty means Equal
        try:
            tolerations.append(common.Toleration.model_validate(data))
        except ValueError as err:
            raise ValueError(f"tolerations[{i}]: {err}") from None
    return tuple(tolerations)


def shape_from_pod_spec(pod_spec: Mapping[str, Any] | None) -> PodShape:
    """The shape of a pod spec (camelCase, as in spec.template.spec); ValueError if malformed."""
    spec = _mapping(pod_spec, "pod spec")
    node_selector = {str(k): str(v) for k, v in _mapping(spec.get("nodeSelector"), "nodeSelector").items()}
    return PodShape(
        requests=_effective_requests(spec),
        node_selector=node_selector,
        required_terms=_required_terms(spec),
        tolerations=_tolerations(spec),
        pod=spec,
    )


def pod_template_of(workload: Any) -> Any:
    """What `shape_from_deployment` reads of a workload (its spec.template, or what stands where a
    mapping should): two workload objects whose values are equal have the same shape, so one built
    from the first holds for the second (a hub workload scaled, its pods unchanged)."""
    if not isinstance(workload, Mapping):
        return workload
    spec = workload.get("spec")
    return spec.get("template") if isinstance(spec, Mapping) else spec


def shape_from_deployment(deployment: Mapping[str, Any] | None) -> PodShape:
    """The shape of a Deployment's pod template (spec.template.spec); empty when absent."""
    spec = _mapping(_mapping(deployment, "deployment").get("spec"), "spec")
    template = _mapping(spec.get("template"), "spec.template")
    try:
        return shape_from_pod_spec(template.get("spec"))
    except ValueError as err:
        raise ValueError(f"spec.template.spec: {err}") from None


def _as_json(model: Any) -> Any:
    """An API model as the camelCase JSON the webhook receives it in (as the wire sends it)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def injects(subset: spread.Subset) -> bool:
    """Whether the webhook changes anything fit reads in a pod it admits into the subset."""
    return subset.required_node_selector_term is not None or bool(subset.tolerations) or bool(subset.patch)


def with_subset(shape: PodShape, subset: spread.Subset) -> PodShape:
    """The shape of the pod the fedspread webhook admits into the subset.

    The template's pod spec goes through `mutation.mutate_pod` exactly as the webhook mutates a
    pod: the subset's requiredNodeSelectorTerm ANDed into every required term (or the only term),
    its tolerations appended, then its strategic-merge `patch` applied (which may replace the
    tolerations, set a nodeSelector, raise requests...); the shape is read from the result.
    Preferred terms do not affect fit. A subset injecting nothing gives the same shape object.

    A shape built from numbers (`pod` None) has no spec to patch: only the node term and the
    tolerations are added. A patch the pod cannot take (the webhook then admits the pod with no
    subset) is fitted without the patch.
    """
    if not injects(subset):
        return shape  # nothing injected: the same (immutable) shape
    if shape.pod is not None:
        term = subset.required_node_selector_term
        try:
            mutated = mutation.mutate_pod(
                {"spec": shape.pod}, subset=subset.name,
                required_term=_as_json(term) if term is not None else None, preferred_terms=(),
                tolerations=[_as_json(t) for t in subset.tolerations], patch=subset.patch,
            )
            return shape_from_pod_spec(mutated.get("spec"))
        except ValueError:
            if not subset.patch:
                raise
            return with_subset(shape, subset.model_copy(update={"patch": None}))
    return _injected(shape, subset)


def _missing(extra: Sequence[Any], have: Sequence[Any]) -> list[Any]:
    """The requirements of `extra` not in `have` (the webhook does not AND one twice)."""
    return [r for r in extra if r not in have]


def _injected(shape: PodShape, subset: spread.Subset) -> PodShape:
    """`with_subset` on the shape's models, for a shape without a pod spec (no patch)."""
    extra = subset.required_node_selector_term
    terms = shape.required_terms
    if extra is not None:
        if terms:
            terms = tuple(
                common.NodeSelectorTerm(
                    match_expressions=[
                        *t.match_expressions, *_missing(extra.match_expressions, t.match_expressions)],
                    match_fields=[*t.match_fields, *_missing(extra.match_fields, t.match_fields)],
                )
                for t in terms
            )
        else:
            terms = (extra.model_copy(deep=True),)
    added = tuple(t for t in subset.tolerations if t not in shape.tolerations)
    return dataclasses.replace(shape, required_terms=terms, tolerations=(*shape.tolerations, *added))
