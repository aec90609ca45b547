"""A spread of a hub Job, part by part (the pure rules are tests/unit/test_jobs.py): the member Job
the agent renders and how it updates one, the member Job's status from the cache to the wire and
back, the hub watcher's quantity (parallelism), and the coordinator's division of completions —
held back until every cluster concerned has reported — its hub Job status and its stranded
completions. The sandbox test is tests/integration/test_job_spread.py."""

from __future__ import annotations

import datetime
import json
import pathlib
from typing import Any

import pytest
import yaml
from click import testing

from agents import outbox
from agents.cache import views
from agents.controller import kinds, rendering
from federation import cli
from federation.api import names
from federation.api import spread as spread_api
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import job_spreads, loop, world
from federation.coordinator.wire import assignments, convert
from federation.core import job_status, status
from federation.rpc import assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
KEY = "shop/work"
HUB_UID = "99999999-9999-9999-9999-999999999999"


def hub_job(*, completions: int | None = 12, parallelism: int = 6) -> dict[str, Any]:
    """A hub Job as the hub apiserver returns it: with its generated selector and template labels."""
    spec: dict[str, Any] = {
        "parallelism": parallelism, "backoffLimit": 2, "ttlSecondsAfterFinished": 60,
        "selector": {"matchLabels": {"controller-uid": HUB_UID}}, "manualSelector": False,
        "template": {"metadata": {"labels": {"app": "work", "controller-uid": HUB_UID, "job-name": "work"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "x"}]}}}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "work", "namespace": "shop"},
            "spec": spec}


def value(*, replicas: int = 3, completions: int = 6, template: dict[str, Any] | None = None,
          ) -> assignment.Assignment:
    return assignment.Assignment(
        spread=KEY, generation=1, namespace="shop", workload="work", replicas=replicas,
        template=template if template is not None else hub_job(), template_revision="r",
        subsets=(assignment.SubsetRule(name="a", index=0, quota=replicas),), subset_count=1,
        spread_uid="spread-uid", federation="prod", api_version="batch/v1", kind="Job",
        job_completions=completions)


# --- the agent -----------------------------------------------------------------------------------


def test_the_member_job_has_the_clusters_parallelism_and_completions_and_its_own_selector() -> None:
    body = rendering.render(value())
    assert (body["apiVersion"], body["kind"], body["metadata"]["name"]) == ("batch/v1", "Job", "work")
    spec = body["spec"]
    assert (spec["parallelism"], spec["completions"], spec["suspend"], spec["backoffLimit"]) == (
        3, 6, False, 2)
    assert not {"selector", "manualSelector", "ttlSecondsAfterFinished"} & set(spec)
    assert spec["template"]["metadata"]["labels"] == {"app": "work", names.SPREAD_LABEL: "work"}, \
        "the hub's generated labels are dropped: the member apiserver generates its own"
    strategy = kinds.strategy_for("batch/v1", "Job")
    assert strategy.quantity(body) == 3 and strategy.not_creatable(body) == ""
    assert rendering.is_current(annotations=body["metadata"]["annotations"], replicas=3, desired=body)
    assert not rendering.is_current(annotations=body["metadata"]["annotations"], replicas=5, desired=body)


def test_a_member_job_is_not_created_without_completions_and_a_work_queue_has_none() -> None:
    strategy = kinds.strategy_for("batch/v1", "Job")
    waiting = rendering.render(value(completions=0))
    assert "no completions" in strategy.not_creatable(waiting)
    queue = rendering.render(value(completions=0, template=hub_job(completions=None)))
    assert "completions" not in queue["spec"] and strategy.not_creatable(queue) == ""


class RecordingBatch:
    """BatchV1Api's patch, recorded."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any], str]] = []

    def patch_namespaced_job(self, name: str, namespace: str, body: dict[str, Any], **options: Any) -> None:
        self.patches.append((namespace, name, body, options["_content_type"]))


def test_a_member_job_is_updated_by_a_patch_of_parallelism_suspend_and_our_marks_only() -> None:
    batch = RecordingBatch()
    desired = rendering.render(value(replicas=5))
    live = {**rendering.render(value()), "status": {"active": 3}}
    live["spec"] = {**live["spec"], "selector": {"matchLabels": {"controller-uid": "member-uid"}}}
    kinds.strategy_for("batch/v1", "Job").replace(kinds.Apis(apps=None, batch=batch), "shop", "work",
                                                  rendering.merged(live, desired))
    ((namespace, name, patch, content_type),) = batch.patches
    assert (namespace, name, content_type) == ("shop", "work", kinds.MERGE_PATCH)
    assert patch["spec"] == {"parallelism": 5, "suspend": False}, "completions, template, selector: immutable"
    assert patch["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION] == \
        desired["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION]
    assert patch["metadata"]["annotations"][names.RELEASED_FROM_ANNOTATION] is None


def member_job_json(*, complete: bool) -> dict[str, Any]:
    body = rendering.render(value())
    body["metadata"]["uid"] = "11111111-1111-1111-1111-111111111111"
    conditions = [{"type": "Complete", "status": "True", "lastTransitionTime": "2025-01-01T00:05:00Z"}] \
        if complete else []
    body["status"] = {"active": 0 if complete else 2, "succeeded": 6 if complete else 1,
                      "startTime": "2025-01-01T00:00:00Z", "conditions": conditions,
                      **({"completionTime": "2025-01-01T00:05:00Z"} if complete else {})}
    return body


@pytest.mark.parametrize("complete", [False, True])
def test_the_member_jobs_status_goes_from_the_cache_over_the_wire_unchanged(complete: bool) -> None:
    view = views.job_view(member_job_json(complete=complete))
    assert view.replicas == 3, "a Job's quantity is its parallelism"
    found = view.status.job
    assert found is not None and found.completions == 6 and found.complete is complete
    assert found.start_time == T0
    wire = outbox.workload_status(view.status)
    back = convert.workload_from_pb(type(wire).FromString(wire.SerializeToString()))
    assert back.job == found


def test_the_hub_watcher_reads_a_jobs_parallelism_as_its_quantity() -> None:
    info = hub.parse_workload("Job", {**hub_job(parallelism=8), "status": {"active": 1}})
    assert (info.kind, info.replicas, info.template["spec"]["completions"]) == ("Job", 8, 12)
    assert "status" not in info.template


# --- the coordinator ------------------------------------------------------------------------------


def job_spread() -> spread_api.FederatedSpread:
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": "work", "namespace": "shop", "generation": 1,
                     "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"targetRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "work"},
                 "failover": {"clusterLostSeconds": 60},
                 "subsets": [{"name": "first", "clusters": ["dc1"], "maxReplicas": 3},
                             {"name": "rest", "clusters": ["aws"]}]}})


def placed(clock: ManualClock, *, parallelism: int = 6) -> world.World:
    model = world.World(clock)
    for name in ("dc1", "aws"):
        model.upsert_cluster(name, labels={})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    keys = model.upsert_spread(job_spread()) | model.set_target(
        KEY, replicas=parallelism, template=assignments.trimmed_template(hub_job(parallelism=parallelism)))
    loop.recompute(model, keys, now=clock())
    return model


def report(model: world.World, name: str, job: job_status.MemberJob | None = None) -> None:
    model.heartbeat(name)
    model.pod_counts(name, {KEY: {}}, workloads={} if job is None else {KEY: status.WorkloadStatus(job=job)},
                     assigned=[KEY])


def completions(model: world.World) -> dict[str, int] | None:
    entry = model.spread(KEY)
    assert entry is not None
    return job_spreads.completions(model, entry, model.placements[KEY])


def test_completions_are_divided_only_once_every_cluster_concerned_has_reported() -> None:
    clock = ManualClock(T0)
    model = placed(clock)
    assert model.placements[KEY].clusters == {"dc1": 3, "aws": 3}
    assert completions(model) == {}, "nobody reported: no member Job is created anywhere"
    report(model, "dc1")
    assert completions(model) == {}, "aws unheard: it may hold a member Job already"
    report(model, "aws")
    assert completions(model) == {"dc1": 6, "aws": 6}
    entry = model.spread(KEY)
    assert entry is not None
    sent = assignments.for_clusters(entry, model.placements[KEY], now=clock(),
                                    job_completions=completions(model))
    assert {name: (m.replicas, m.job_completions) for name, m in sent.items()} == {
        "dc1": (3, 6), "aws": (3, 6)}


def test_a_scale_changes_parallelism_only_and_stranded_completions_are_reported() -> None:
    clock = ManualClock(T0)
    model = placed(clock)
    report(model, "dc1", job_status.MemberJob(active=3, succeeded=1, completions=6, start_time=T0))
    report(model, "aws", job_status.MemberJob(active=3, succeeded=2, completions=6, start_time=T0))
    keys = model.set_target(KEY, replicas=8, template=assignments.trimmed_template(hub_job(parallelism=8)))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].clusters == {"dc1": 3, "aws": 5}
    assert completions(model) == {"dc1": 6, "aws": 6}, "member completions are immutable"

    clock.advance(61)
    model.heartbeat("dc1")  # aws falls silent: lost for this spread
    entry = model.spread(KEY)
    assert entry is not None
    (condition,) = job_spreads.conditions(model, entry, model.placements[KEY], previous=[], now=clock())
    assert condition.type == job_spreads.STRANDED and condition.status == "True"
    assert condition.message.startswith(
        "4 completions of member Jobs in lost clusters are unfinished: aws (4)")


def test_a_member_job_without_a_share_pauses_is_reported_and_still_sent_its_zero_quotas() -> None:
    clock = ManualClock(T0)
    model = placed(clock)
    report(model, "dc1", job_status.MemberJob(active=3, succeeded=1, completions=6, start_time=T0))
    report(model, "aws", job_status.MemberJob(active=3, succeeded=2, completions=6, start_time=T0))
    keys = model.set_target(KEY, replicas=3, template=assignments.trimmed_template(hub_job(parallelism=3)))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].clusters == {"dc1": 3, "aws": 0}
    entry = model.spread(KEY)
    assert entry is not None
    (condition,) = job_spreads.conditions(model, entry, model.placements[KEY], previous=[], now=clock())
    assert (condition.type, condition.reason) == (job_spreads.PAUSED, "NoParallelism")
    assert condition.message.startswith("4 completions of member Jobs with no parallelism share are "
                                        "unfinished: aws (4)")
    deselected = assignments.for_clusters(entry, model.placements[KEY], now=clock(),
                                          job_completions=completions(model), keep_unselected={"gcp"})
    assert {name: (m.replicas, m.job_completions) for name, m in deselected.items()} == {
        "dc1": (3, 6), "gcp": (0, 0)}, "a cluster no subset selects that holds a member Job: zero quotas"


def test_the_hub_job_completes_when_every_member_job_holding_completions_has() -> None:
    clock = ManualClock(T0)
    model = placed(clock)
    done = T0 + datetime.timedelta(minutes=5)
    report(model, "dc1", job_status.MemberJob(succeeded=6, completions=6, start_time=T0, complete=True,
                                              completion_time=done))
    report(model, "aws", job_status.MemberJob(active=1, succeeded=5, completions=6, start_time=T0))
    entry = model.spread(KEY)
    assert entry is not None
    running = job_spreads.hub_status(model, entry, model.placements[KEY])
    assert (running["active"], running["succeeded"], running["conditions"]) == (1, 11, [])
    report(model, "aws", job_status.MemberJob(succeeded=6, completions=6, start_time=T0, complete=True,
                                              completion_time=done))
    finished = job_spreads.hub_status(model, entry, model.placements[KEY])
    assert (finished["succeeded"], finished["completionTime"]) == (12, "2025-01-01T00:05:00Z")
    assert [(c["type"], c["status"]) for c in finished["conditions"]] == [("Complete", "True")]
    assert job_status.finished(json.loads(json.dumps(finished)))


# --- simulate -------------------------------------------------------------------------------------


def simulate(path: pathlib.Path) -> testing.Result:
    return testing.CliRunner().invoke(cli.main, [
        "simulate", "-f", str(path), "--clusters", str(EXAMPLES / "simulate" / "demo-federation.yaml"),
        "-o", "json"], catch_exceptions=False)


def test_simulate_places_a_jobs_parallelism() -> None:
    result = simulate(EXAMPLES / "job.yaml")
    assert result.exit_code == 0, result.output
    placed = yaml.safe_load(result.stdout)
    assert {s["name"]: s["clusters"] for s in placed["subsets"]} == {
        "ring": {"dc1": 2}, "eu": {"aws-eu": 1, "gcp-eu": 1}}, "parallelism 4, as a Deployment's 4 replicas"


@pytest.mark.parametrize(("edit", "said"), [
    pytest.param(lambda job, spread: spread["spec"]["targetRef"].update(apiVersion="apps/v1"),
                 "spec.targetRef.kind: Job is served as batch/v1, not apps/v1", id="apps/v1 Job"),
    pytest.param(lambda job, spread: job["spec"].update(completionMode="Indexed"),
                 "spec.completionMode: 'Indexed' cannot be spread", id="Indexed"),
])
def test_simulate_refuses_a_job_it_cannot_spread_with_the_field_path(
        tmp_path: pathlib.Path, edit: Any, said: str) -> None:
    job, spread = yaml.safe_load_all((EXAMPLES / "job.yaml").read_text())
    edit(job, spread)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all([job, spread]))
    result = simulate(path)
    assert result.exit_code == 2, result.output
    assert said in result.output
