"""The workload kind table (issue 24 §1, §3): one row of facts per kind a spread can target."""

from __future__ import annotations

import pytest

from federation.core import workload_kinds
from federation.core.workload_kinds import KindPolicy, UnsupportedKind


@pytest.mark.parametrize(
    ("api_version", "kind", "quantity", "order", "reschedule_deletes", "scale"),
    [
        ("apps/v1", "Deployment", "replicas", "deletion-cost", True, True),
        ("apps/v1", "ReplicaSet", "replicas", "deletion-cost", True, True),
        ("apps/v1", "StatefulSet", "replicas", "ordinals", False, True),
        ("batch/v1", "Job", "parallelism", "none", True, False),
    ],
)
def test_policy_of_each_kind(
    api_version: str,
    kind: str,
    quantity: workload_kinds.QuantityField,
    order: workload_kinds.ScaleDownOrder,
    reschedule_deletes: bool,
    scale: bool,
) -> None:
    policy = workload_kinds.policy_for(api_version, kind)
    assert policy == KindPolicy(
        api_version=api_version,
        kind=kind,
        quantity_field=quantity,
        scale_down_order=order,
        reschedule_deletes_pods=reschedule_deletes,
        has_scale_subresource=scale,
    )
    assert policy.uses_deletion_cost == (order == "deletion-cost")
    assert policy.reference == f"{api_version} {kind}"


def test_the_table_holds_exactly_the_four_kinds_once() -> None:
    references = [p.reference for p in workload_kinds.POLICIES]
    assert references == ["apps/v1 Deployment", "apps/v1 ReplicaSet", "apps/v1 StatefulSet", "batch/v1 Job"]


def test_policies_are_frozen() -> None:
    with pytest.raises(AttributeError):
        workload_kinds.POLICIES[0].kind = "DaemonSet"  # type: ignore[misc]


SUPPORTED = "supported: apps/v1 Deployment, apps/v1 ReplicaSet, apps/v1 StatefulSet, batch/v1 Job"


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        pytest.param(
            "apps/v1", "DaemonSet", f"unsupported workload kind apps/v1 DaemonSet; {SUPPORTED}", id="kind"
        ),
        pytest.param(
            "extensions/v1beta1",
            "Deployment",
            f"unsupported workload kind extensions/v1beta1 Deployment; {SUPPORTED} "
            "(Deployment is served as apps/v1)",
            id="old-api-version",
        ),
        pytest.param(
            "apps/v1",
            "Job",
            f"unsupported workload kind apps/v1 Job; {SUPPORTED} (Job is served as batch/v1)",
            id="job-in-apps",
        ),
        pytest.param(
            "apps/v1",
            "statefulset",
            f"unsupported workload kind apps/v1 statefulset; {SUPPORTED} (did you mean apps/v1 StatefulSet?)",
            id="kind-is-case-sensitive",
        ),
        pytest.param("", "", f"unsupported workload kind  ; {SUPPORTED}", id="empty"),
    ],
)
def test_unsupported_kind(api_version: str, kind: str, message: str) -> None:
    with pytest.raises(UnsupportedKind) as caught:
        workload_kinds.policy_for(api_version, kind)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)
    assert (caught.value.api_version, caught.value.kind) == (api_version, kind)
