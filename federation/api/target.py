"""The workload a FederatedSpread targets: its kind, its apiVersion, and the two said together.

Why a module of its own: both the spec (`spec.targetRef`) and the status (`status.targetRef`, the
workload a placed spread carries) name the target, and the kinds a spread may target are a rule of
their own that the agent and `federation.core.workload_kinds` mirror.
"""

from __future__ import annotations

from typing import Literal

import pydantic

from federation.api import common

TargetKind = Literal["Deployment", "ReplicaSet", "StatefulSet", "Job"]
"""The workload kinds a spread can target: each has its row in `federation.core.workload_kinds`
and its strategy in the agent (`agents.controller.kinds`)."""
TargetApiVersion = Literal["apps/v1", "batch/v1"]
TARGET_API_VERSIONS: dict[str, str] = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1",
                                       "StatefulSet": "apps/v1", "Job": "batch/v1"}
"""The apiVersion each accepted kind is served as (the API cannot import the kind table,
`federation.core.workload_kinds`, which says the same; tests/unit/test_target_kinds.py checks)."""


class TargetRef(common.SpecModel):
    """The hub workload whose replicas are spread."""

    api_version: TargetApiVersion = pydantic.Field(
        default="apps/v1",
        description="API version of the target workload: apps/v1 (Deployment, ReplicaSet, StatefulSet) "
                    "or batch/v1 (Job).",
    )
    kind: TargetKind = pydantic.Field(
        default="Deployment",
        description="Kind of the target workload: Deployment, ReplicaSet, StatefulSet or Job.",
    )
    name: str = pydantic.Field(
        min_length=1, description="Name of the workload in the spread's namespace on the hub."
    )

    @pydantic.field_validator("kind")
    @classmethod
    def _served_as(cls, kind: str, info: pydantic.ValidationInfo) -> str:
        """The kind must be named with the apiVersion it is served as (`apps/v1 Job` or `batch/v1
        Deployment` names nothing the hub serves)."""
        api_version = info.data.get("api_version")
        served = TARGET_API_VERSIONS[kind]
        if api_version is not None and api_version != served:
            raise ValueError(f"{kind} is served as {served}, not {api_version}: "
                             f"set spec.targetRef.apiVersion to {served}")
        return kind

    @property
    def described(self) -> str:
        """`Kind 'name'`, as messages name the target."""
        return f"{self.kind} {self.name!r}"
