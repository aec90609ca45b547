"""A spread of a hub Job, end to end on the sandbox (issue 24 §1, Job): completions divided among
the clusters by parallelism share, the hub Job's status aggregated so `kubectl wait` returns.

A real coordinator (placements on the session's Ray) and two real `fedspread agent` processes
manage sandbox member-1 and member-2. The hub runs no Job controller: the hub Job is a template
and a status the coordinator writes. The member Jobs are run by the members' real Job controllers;
the sandbox's node simulator ends each pod after `sandbox.fedspread.io/run-seconds` with exit 0.

- Job `work` (completions 12, parallelism 6), subsets `first` (member-1, capped at 3) and `rest`
  (member-2): member Jobs of parallelism 3 and 3, completions 6 and 6 (divided by parallelism
  share when they are created); no pod on the hub.
- `kubectl patch job work -p '{"spec":{"parallelism":8}}'` on the hub (a Job has no scale
  subresource): member-2's Job gets parallelism 5; the completions stay 6 and 6 (immutable).
- `kubectl wait --for=condition=complete job/work` on the hub returns once both member Jobs have
  completed: the hub Job's status says Complete with succeeded 12, active 0, startTime and
  completionTime, and each member Job is Complete with 6.
- Job `broken` (its pods exit 1, backoffLimit 0): the hub Job is `Failed` (reason `MemberJobFailed`,
  the member's `BackoffLimitExceeded` named), with no completionTime.
- Deleting the spreads: `work` under the default `deletionPolicy: Orphan` leaves both member Jobs
  (released: our marks gone); Job `brief`'s spread under `Delete` deletes its member Job.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting
from kubernetes import client

from federation.api import names
from federation.sandbox import build, kubelet_status

MEMBERS = ("member-1", "member-2")
TIMEOUT = 120.0
RUN_SECONDS = "4"
"""Each pod runs this long: 6 completions at parallelism 3 take two rounds, time to scale."""


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of member-1's and member-2's agents."""
    cluster_names = hubside.names("job1", "job2")
    with hubside.running_coordinator(sandbox, clusters, members=cluster_names) as process:
        yield cluster_names, process


def job(name: str, *, completions: int, parallelism: int, exit_code: int = 0) -> dict[str, Any]:
    """A Job of one small container that ends with `exit_code` after RUN_SECONDS (backoffLimit 0 when
    it fails: its first failed pod fails the Job)."""
    annotations = {kubelet_status.RUN_SECONDS: RUN_SECONDS, kubelet_status.EXIT_CODE: str(exit_code)}
    pod = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [
        {"name": "app", "image": "registry.example/batch:1", "resources": {"requests": {"cpu": "10m"}}}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism,
                     "backoffLimit": 0 if exit_code else 2,
                     "template": {"metadata": {"labels": {"app": name}, "annotations": annotations},
                                  "spec": pod}}}


def member_job(clusters: conftest.Clusters, member: str, namespace: str, name: str) -> Any:
    """The member Job, or None."""
    try:
        return client.BatchV1Api(clusters.api(member)).read_namespaced_job(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def shape(clusters: conftest.Clusters, namespace: str, name: str) -> list[tuple[int, int] | None]:
    """(parallelism, completions) of each member's Job, None where there is none."""
    found = [member_job(clusters, m, namespace, name) for m in MEMBERS]
    return [None if j is None else (j.spec.parallelism, j.spec.completions) for j in found]


def complete(job_object: Any) -> bool:
    return any(c.type == "Complete" and c.status == "True" for c in job_object.status.conditions or [])


def test_a_job_divides_its_completions_completes_on_the_hub_and_is_deleted_by_policy(
        sandbox: Any, clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    (first, second), process = coordinator
    hub = hubside.Hub(clusters, namespace)
    hub_batch = client.BatchV1Api(clusters.api(hubside.HUB))
    agents = [agentside.AgentProcess(clusters, cluster=cluster, member=member,
                                     coordinator=f"127.0.0.1:{process.port}", namespace=namespace,
                                     log=tmp_path / f"agent-{member}.log")
              for cluster, member in zip((first, second), MEMBERS, strict=True)]

    def hub_status(name: str) -> dict[str, Any]:
        status = hub_batch.read_namespaced_job_status(name, namespace).status
        found: dict[str, Any] = status.to_dict() if status is not None else {}
        return found

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, interval=0.5, message=lambda: (
            f"{what}; member Jobs {shape(clusters, namespace, 'work')}, hub status {hub_status('work')}, "
            f"spread status {hub.spread_status('work')}; agent logs {[a.log for a in agents]}"))

    try:
        for agent, member in zip(agents, MEMBERS, strict=True):
            wait(lambda a=agent, m=member: agentside.webhook_live(a, clusters, m, namespace),
                 f"the apiserver of {member} never called its agent's webhook")
        custom = clusters.custom(hubside.HUB)
        wait(lambda: all(hubside.member_ready(custom, c) == "True" for c in (first, second)),
             "the MemberClusters never became Ready")
        subsets: list[dict[str, Any]] = [{"name": "first", "clusters": [first], "maxReplicas": 3},
                                         {"name": "rest", "clusters": [second]}]
        hub_batch.create_namespaced_job(namespace, job("work", completions=12, parallelism=6))  # type: ignore[arg-type]
        custom.create_namespaced_custom_object(
            hubside.GROUP, hubside.VERSION, namespace, "federatedspreads",
            hubside.spread_body("work", target="work", kind="Job", subsets=subsets, lost_seconds=600))
        hub_batch.create_namespaced_job(namespace, job("brief", completions=2, parallelism=2))  # type: ignore[arg-type]
        brief = hubside.spread_body("brief", target="brief", kind="Job", subsets=subsets[:1],
                                    lost_seconds=600)
        brief["spec"]["deletionPolicy"] = "Delete"
        custom.create_namespaced_custom_object(hubside.GROUP, hubside.VERSION, namespace, "federatedspreads",
                                               brief)
        hub_batch.create_namespaced_job(namespace, job("broken", completions=2, parallelism=2,  # type: ignore[arg-type]
                                                       exit_code=1))
        custom.create_namespaced_custom_object(
            hubside.GROUP, hubside.VERSION, namespace, "federatedspreads",
            hubside.spread_body("broken", target="broken", kind="Job", subsets=subsets, lost_seconds=600))

        # Placed: parallelism 3 and 3, completions divided by that share: 6 and 6.
        wait(lambda: shape(clusters, namespace, "work") == [(3, 6), (3, 6)],
             "the member Jobs never had parallelism 3/3 and completions 6/6")
        made = member_job(clusters, "member-1", namespace, "work")
        assert made.metadata.annotations[names.SPREAD_KEY_ANNOTATION] == f"{namespace}/work"
        assert made.spec.selector.match_labels["controller-uid"] == made.metadata.uid, \
            "the member's apiserver generated its own selector (the hub Job's was dropped)"
        assert not clusters.core(hubside.HUB).list_namespaced_pod(namespace).items, \
            "the hub runs no Job controller: no pod on the hub"

        # A Job has no /scale: `kubectl patch` of parallelism; member completions do not change.
        hub_batch.patch_namespaced_job("work", namespace, {"spec": {"parallelism": 8}})
        wait(lambda: shape(clusters, namespace, "work") == [(3, 6), (5, 6)],
             "member-2's Job never got parallelism 5 (completions kept)")

        # `kubectl wait` on the hub returns once both member Jobs have completed.
        waited = subprocess.run(
            [str(build.kubectl()), "--kubeconfig", str(sandbox.hub.kubeconfig), "-n", namespace, "wait",
             "--for=condition=complete", "job/work", f"--timeout={int(TIMEOUT)}s"],
            capture_output=True, text=True, timeout=TIMEOUT + 30, check=False)
        assert waited.returncode == 0, (waited.stdout, waited.stderr, hub_status("work"),
                                        shape(clusters, namespace, "work"))
        assert "condition met" in waited.stdout
        members = [member_job(clusters, m, namespace, "work") for m in MEMBERS]
        assert all(complete(j) and j.status.succeeded == 6 for j in members), \
            "the hub Job completed only after both member Jobs had"
        status = hub_status("work")
        assert (status["succeeded"], status["active"] or 0, status["failed"] or 0) == (12, 0, 0)
        assert status["start_time"] is not None and status["completion_time"] is not None
        assert status["start_time"] == min(j.status.start_time for j in members)
        assert status["completion_time"] == max(j.status.completion_time for j in members)
        condition = next(c for c in status["conditions"] if c["type"] == "Complete")
        assert (condition["status"], condition["reason"]) == ("True", "MemberJobsComplete")
        wait(lambda: shape(clusters, namespace, "brief")[0] is not None, "brief's member Job was never made")

        # A member Job that fails fails the hub Job (Failed wins: no Complete, no completionTime).
        failed = wait(lambda: next((c for c in hub_status("broken")["conditions"] or []
                                    if c["type"] == "Failed" and c["status"] == "True"), None),
                      "the hub Job `broken` never failed")
        assert failed["reason"] == "MemberJobFailed" and "BackoffLimitExceeded" in failed["message"]
        assert hub_status("broken")["completion_time"] is None

        # Orphan (the default): both member Jobs stay, released; Delete: brief's member Job is deleted.
        hub.delete_spread("work")
        hub.delete_spread("brief")
        wait(lambda: all(names.SPREAD_KEY_ANNOTATION not in (j.metadata.annotations or {})
                         for m in MEMBERS if (j := member_job(clusters, m, namespace, "work")) is not None)
             and None not in shape(clusters, namespace, "work"),
             "the Orphan spread's member Jobs were not released (or were deleted)")
        wait(lambda: shape(clusters, namespace, "brief") == [None, None],
             "the Delete spread's member Job was not deleted")
        assert shape(clusters, namespace, "work") == [(3, 6), (5, 6)], \
            "orphaned member Jobs are kept as they were"
    finally:
        for agent in agents:
            agent.stop()
