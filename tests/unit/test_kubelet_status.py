"""The node simulator's pods that run to completion, and its provisioner's volumes, as pure rules.

Why: a Job on the sandbox completes or fails only through what `kubelet_status` writes (phase,
terminated container states, restart counts), and a StatefulSet's claims bind only through the
volumes `provisioner` makes; the sandbox tests (tests/integration/test_sandbox_workloads.py) show the
real controllers accepting them, these pin each rule's edges without a cluster.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from federation.sandbox import kubelet_status, provisioner

START = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def job_pod(*, policy: str = "Never", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"uid": "u-9", "annotations": annotations or {}},
            "spec": {"restartPolicy": policy, "containers": [{"name": "work", "image": "busybox"}]},
            "status": {"phase": "Pending"}}


def at(pod: dict[str, Any], seconds: float) -> tuple[dict[str, Any], float | None]:
    """The status `seconds` after the pod started, as the simulator computes it then."""
    status, _ = kubelet_status.pod_status(pod, now=START, pod_ip="10.244.0.9", host_ip="127.1.0.1")
    pod = {**pod, "status": status}  # written at the start: Running since START
    return kubelet_status.pod_status(pod, now=START + datetime.timedelta(seconds=seconds),
                                     pod_ip="10.244.0.9", host_ip="127.1.0.1")


def test_a_pod_that_is_not_restarted_runs_three_seconds_then_succeeds() -> None:
    status, wake = at(job_pod(), 1)
    assert status["phase"] == "Running" and wake == 2
    assert status["containerStatuses"][0]["state"] == {"running": {"startedAt": "2030-01-02T03:04:05Z"}}

    status, wake = at(job_pod(), 3)
    assert status["phase"] == "Succeeded" and wake is None
    (container,) = status["containerStatuses"]
    assert (container["ready"], container["started"], container["restartCount"]) == (False, False, 0)
    assert container["state"]["terminated"] == {
        "exitCode": 0, "reason": "Completed", "startedAt": "2030-01-02T03:04:05Z",
        "finishedAt": "2030-01-02T03:04:08Z", "containerID": "sim://u-9-work"}
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["Ready"] == conditions["ContainersReady"] == ("False", "PodCompleted")


def test_the_annotations_set_the_run_time_and_a_failing_exit_code() -> None:
    pod = job_pod(annotations={kubelet_status.RUN_SECONDS: "0.5", kubelet_status.EXIT_CODE: "3"})
    status, _ = at(pod, 0.5)
    assert status["phase"] == "Failed"
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Ready"] == "ContainersNotReady"


def test_on_failure_a_failing_container_restarts_and_the_pod_stays_running() -> None:
    failing = {kubelet_status.RUN_SECONDS: "2", kubelet_status.EXIT_CODE: "1"}
    status, wake = at(job_pod(policy="OnFailure", annotations=failing), 5)
    assert status["phase"] == "Running" and wake == 1  # the third run ends at 6 s
    (container,) = status["containerStatuses"]
    assert container["restartCount"] == 2
    assert container["state"] == {"running": {"startedAt": "2030-01-02T03:04:09Z"}}
    assert container["lastState"]["terminated"]["exitCode"] == 1
    assert container["lastState"]["terminated"]["finishedAt"] == "2030-01-02T03:04:09Z"


def test_on_failure_a_container_that_succeeds_completes_the_pod() -> None:
    status, _ = at(job_pod(policy="OnFailure"), 3)
    assert status["phase"] == "Succeeded"


@pytest.mark.parametrize("seconds,code", [("soon", "1x"), ("-1", "256"), ("nan", "-2")])
def test_values_that_are_not_numbers_fall_back_to_the_defaults(seconds: str, code: str) -> None:
    pod = job_pod(annotations={kubelet_status.RUN_SECONDS: seconds, kubelet_status.EXIT_CODE: code})
    defaults = kubelet_status.Completion(seconds=3.0, exit_code=0, restarts=False)
    assert kubelet_status.completion(pod) == defaults


def test_a_pod_restarted_for_ever_never_finishes() -> None:
    pod = job_pod(policy="Always", annotations={kubelet_status.RUN_SECONDS: "1"})
    assert kubelet_status.completion(pod) is None
    status, wake = at(pod, 3600)
    assert status["phase"] == "Running" and wake is None
    assert status["containerStatuses"][0]["ready"] is True


def test_a_restart_or_a_finish_is_a_change_worth_writing() -> None:
    pod = job_pod(policy="OnFailure", annotations={kubelet_status.EXIT_CODE: "1",
                                                   kubelet_status.RUN_SECONDS: "2"})
    first, second, done = at(pod, 1)[0], at(pod, 3)[0], at(job_pod(), 3)[0]
    assert kubelet_status.signature(first) != kubelet_status.signature(second)  # restartCount 0 -> 1
    assert kubelet_status.signature(at(job_pod(), 1)[0]) != kubelet_status.signature(done)


def claim(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "data-web-0", "namespace": "ns", "uid": "c-1", "resourceVersion": "42",
                         "annotations": {provisioner.PROVISIONER_ANNOTATION: provisioner.PROVISIONER}},
            "spec": {"storageClassName": "standard", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "2Gi"}}, **spec},
            "status": {"phase": "Pending"}}


def test_a_volume_is_made_for_a_claim_handed_to_the_provisioner_and_pre_bound_to_it() -> None:
    assert provisioner.wants_volume(claim())
    volume = provisioner.volume_for(claim(), reclaim_policy="Delete")
    assert volume["metadata"]["name"] == "pvc-c-1"
    assert volume["metadata"]["annotations"] == {provisioner.PROVISIONED_BY: provisioner.PROVISIONER}
    spec = volume["spec"]
    assert spec["capacity"] == {"storage": "2Gi"} and spec["accessModes"] == ["ReadWriteOnce"]
    assert (spec["storageClassName"], spec["persistentVolumeReclaimPolicy"]) == ("standard", "Delete")
    assert spec["claimRef"]["uid"] == "c-1" and spec["claimRef"]["name"] == "data-web-0"


def test_claims_of_other_provisioners_or_bound_ones_get_nothing() -> None:
    other = claim()
    other["metadata"]["annotations"] = {provisioner.PROVISIONER_ANNOTATION: "ebs.csi.aws.com"}
    assert not provisioner.wants_volume(other)
    assert not provisioner.wants_volume(claim(volumeName="pv-1"))
    assert not provisioner.wants_volume({**claim(), "status": {"phase": "Bound"}})


def test_only_released_volumes_it_made_under_delete_are_deleted() -> None:
    volume = provisioner.volume_for(claim(), reclaim_policy="Delete")
    assert not provisioner.deletable({**volume, "status": {"phase": "Bound"}})
    assert provisioner.deletable({**volume, "status": {"phase": "Released"}})
    kept = provisioner.volume_for(claim(), reclaim_policy="Retain")
    assert not provisioner.deletable({**kept, "status": {"phase": "Released"}})
    foreign = {**volume, "metadata": {"name": "pv-x", "annotations": {}}, "status": {"phase": "Released"}}
    assert not provisioner.deletable(foreign)


def test_the_default_storage_class_is_served_by_the_provisioner() -> None:
    cls = provisioner.storage_class()
    assert cls["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert (cls["provisioner"], cls["volumeBindingMode"]) == (provisioner.PROVISIONER, "Immediate")
