"""Shared Kubernetes vocabulary for fedspread's API models.

Why this module exists: the FederatedSpread and MemberCluster kinds reuse Kubernetes types (node
selector terms, tolerations, taints, label selectors, conditions). We model the subset of each that
fedspread reads, with the same JSON names, so that a spread copied from a Kruise WorkloadSpread reads
the same and the CRD schema generated from these models is what the apiserver will enforce.

All models use snake_case attributes with camelCase aliases; specs forbid unknown fields so that a
typo in YAML is an error with a path, not a silently ignored line.
"""

from __future__ import annotations

import datetime
from typing import Literal

import pydantic
from pydantic import alias_generators

API_GROUP = "fedspread.io"
API_VERSION = "v1alpha1"
GROUP_VERSION = f"{API_GROUP}/{API_VERSION}"


class SpecModel(pydantic.BaseModel):
    """Base of everything a user writes: camelCase on the wire, unknown fields refused."""

    model_config = pydantic.ConfigDict(
        alias_generator=alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
    )


class StatusModel(pydantic.BaseModel):
    """Base of what controllers write: camelCase, tolerant of fields added by newer versions."""

    model_config = pydantic.ConfigDict(
        alias_generator=alias_generators.to_camel,
        populate_by_name=True,
        extra="ignore",
    )


NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeSelectorRequirement(SpecModel):
    """One node-label requirement, as in core/v1 NodeSelectorRequirement."""

    key: str = pydantic.Field(min_length=1, description="The node label key the requirement applies to.")
    operator: NodeSelectorOperator = pydantic.Field(
        description="How the key relates to the values: In, NotIn, Exists, DoesNotExist, Gt or Lt."
    )
    values: list[str] = pydantic.Field(
        default_factory=list,
        description="Values for In/NotIn (non-empty), exactly one integer for Gt/Lt, none otherwise.",
    )

    @pydantic.model_validator(mode="after")
    def _values_fit_operator(self) -> NodeSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        if self.operator in ("Gt", "Lt"):
            if len(self.values) != 1:
                raise ValueError(f"operator {self.operator} needs exactly one value")
            try:
                int(self.values[0])
            except ValueError:
                raise ValueError(
                    f"operator {self.operator} needs an integer value, got {self.values[0]!r}"
                ) from None
        return self


class NodeSelectorTerm(SpecModel):
    """A conjunction of node requirements (core/v1 NodeSelectorTerm)."""

    match_expressions: list[NodeSelectorRequirement] = pydantic.Field(
        default_factory=list, description="Requirements on node labels, all of which must hold."
    )
    match_fields: list[NodeSelectorRequirement] = pydantic.Field(
        default_factory=list,
        description="Requirements on node fields (only metadata.name is meaningful), all must hold.",
    )


class PreferredSchedulingTerm(SpecModel):
    """A weighted preference for nodes (core/v1 PreferredSchedulingTerm)."""

    weight: int = pydantic.Field(ge=1, le=100, description="Weight of this preference, 1 to 100.")
    preference: NodeSelectorTerm = pydantic.Field(description="The nodes this preference favours.")


class Toleration(SpecModel):
    """Lets pods schedule onto nodes with a matching taint (core/v1 Toleration)."""

    key: str = pydantic.Field(
        default="", description="Taint key to tolerate; empty with operator Exists tolerates all."
    )
    operator: Literal["Exists", "Equal"] = pydantic.Field(
        default="Equal", description="Equal compares the value; Exists matches any value."
    )
    value: str = pydantic.Field(default="", description="Taint value to match when operator is Equal.")
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = pydantic.Field(
        default="", description="Taint effect to match; empty matches every effect."
    )
    toleration_seconds: int | None = pydantic.Field(
        default=None, description="For NoExecute: how long the pod stays bound after the taint."
    )

    @pydantic.model_validator(mode="after")
    def _operator_rules(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("operator Exists takes no value")
        if not self.key and self.operator != "Exists":
            raise ValueError("an empty key requires operator Exists")
        return self


class Taint(SpecModel):
    """A taint on a node or, cluster-wide, on a MemberCluster (core/v1 Taint)."""

    key: str = pydantic.Field(min_length=1, description="Taint key.")
    value: str = pydantic.Field(default="", description="Taint value.")
    effect: TaintEffect = pydantic.Field(
        description="NoSchedule or NoExecute keep new replicas away; PreferNoSchedule only discourages."
    )
    time_added: datetime.datetime | None = pydantic.Field(
        default=None,
        description=(
            "When the taint was added (RFC 3339). Timed NoExecute tolerations count from here; when "
            "unset, the coordinator counts from when it first saw the taint."
        ),
    )

    @property
    def identity(self) -> tuple[str, str, str]:
        """(key, value, effect): what makes two taints the same taint, whenever added."""
        return (self.key, self.value, self.effect)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 Toleration.ToleratesTaint: effect (unless empty), key (unless empty), then value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


class LabelSelectorRequirement(SpecModel):
    """One label requirement of a label selector (meta/v1 LabelSelectorRequirement)."""

    key: str = pydantic.Field(min_length=1, description="The label key the requirement applies to.")
    operator: LabelSelectorOperator = pydantic.Field(
        description="How the key relates to the values: In, NotIn, Exists or DoesNotExist."
    )
    values: list[str] = pydantic.Field(
        default_factory=list, description="Values for In/NotIn (non-empty); none for Exists/DoesNotExist."
    )

    @pydantic.model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(SpecModel):
    """Selects objects by labels (meta/v1 LabelSelector); an empty selector selects everything."""

    match_labels: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Labels that must all be present with these values."
    )
    match_expressions: list[LabelSelectorRequirement] = pydantic.Field(
        default_factory=list, description="Label requirements that must all hold."
    )


class Condition(StatusModel):
    """A status condition in the Kubernetes convention."""

    type: str = pydantic.Field(description="Condition type, e.g. Ready, Placed, CapacityExhausted.")
    status: Literal["True", "False", "Unknown"] = pydantic.Field(description="True, False or Unknown.")
    reason: str = pydantic.Field(default="", description="Machine-readable CamelCase reason.")
    message: str = pydantic.Field(default="", description="What a person should know or do.")
    last_transition_time: datetime.datetime | None = pydantic.Field(
        default=None, description="When the status last changed."
    )
    observed_generation: int | None = pydantic.Field(
        default=None, description="The spec generation this condition was computed from."
    )


class ObjectMeta(pydantic.BaseModel):
    """The parts of metadata fedspread reads; the apiserver's other fields pass through."""

    model_config = pydantic.ConfigDict(
        alias_generator=alias_generators.to_camel, populate_by_name=True, extra="allow"
    )

    name: str = pydantic.Field(min_length=1, description="Object name.")
    namespace: str | None = pydantic.Field(default=None, description="Namespace (namespaced kinds).")
    labels: dict[str, str] = pydantic.Field(default_factory=dict, description="Object labels.")
    annotations: dict[str, str] = pydantic.Field(default_factory=dict, description="Annotations.")
    generation: int | None = pydantic.Field(default=None, description="Spec generation.")
    resource_version: str | None = pydantic.Field(default=None, description="Optimistic-lock version.")
