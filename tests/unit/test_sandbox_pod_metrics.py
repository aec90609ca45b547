"""The node simulator's resource metrics API, pure: usage annotations, label selectors, documents.

Why: `kubectl top`, the hub's HPA (through the agents) and every autoscaling test read pod usage
from this API; a wrong split, a selector that matches too much or a path answered with the wrong
kind would show up far away as a wrong replica count. The server's transport and its refusal of
callers other than the aggregator are tested in test_sandbox_metrics_server.py.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from federation.sandbox import label_selector, pod_metrics

NOW = datetime.datetime(2026, 11, 29, 8, 0, 5, tzinfo=datetime.UTC)
MI = 2**20


def _pod(name: str, *, namespace: str = "web", node: str = "n-0", phase: str = "Running",
         usage: str | None = None, labels: dict[str, str] | None = None,
         requests: list[dict[str, str]] | None = None) -> dict[str, Any]:
    annotations = {} if usage is None else {pod_metrics.USAGE_ANNOTATION: usage}
    containers = [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(requests or [{}])]
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name},
                         "annotations": annotations},
            "spec": {"nodeName": node, "containers": containers}, "status": {"phase": phase}}


# --------------------------------------------------------------------------------------------
# the usage annotation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("annotation", "expected"), [
    ('{"cpu": "450m", "memory": "64Mi"}', {"cpu": 450_000_000, "memory": 64 * MI}),
    ('{"cpu": "2"}', {"cpu": 2_000_000_000, "memory": 0}),
    ('{"cpu": 0.25, "memory": 1000}', {"cpu": 250_000_000, "memory": 1000}),
    ('{"cpu": "1500n", "memory": "1.5Ki"}', {"cpu": 1500, "memory": 1536}),
    ('{"cpu": "lots", "memory": "64Mi"}', {"cpu": 0, "memory": 64 * MI}),  # a bad quantity: zero
    ('{"cpu": "-100m"}', {"cpu": 0, "memory": 0}),  # negative: zero
    ('{"cpu": null}', {"cpu": 0, "memory": 0}),
    ('{"cpu": true}', {"cpu": 0, "memory": 0}),
    ("not json", {"cpu": 0, "memory": 0}),
    ('["450m"]', {"cpu": 0, "memory": 0}),
    ("", {"cpu": 0, "memory": 0}),
    (None, {"cpu": 0, "memory": 0}),  # no annotation
])
def test_parse_usage_reads_the_annotation_and_counts_anything_wrong_as_zero(
        annotation: str | None, expected: dict[str, int]) -> None:
    annotations = None if annotation is None else {pod_metrics.USAGE_ANNOTATION: annotation}
    assert pod_metrics.parse_usage(annotations) == expected


@pytest.mark.parametrize(("requests", "usage", "expected"), [
    # one container gets it all
    ([{"cpu": "100m"}], '{"cpu": "450m", "memory": "64Mi"}', [{"cpu": 450_000_000, "memory": 64 * MI}]),
    # in proportion to requests, per resource
    ([{"cpu": "300m", "memory": "48Mi"}, {"cpu": "100m", "memory": "16Mi"}],
     '{"cpu": "400m", "memory": "64Mi"}',
     [{"cpu": 300_000_000, "memory": 48 * MI}, {"cpu": 100_000_000, "memory": 16 * MI}]),
    # no container requests memory: all of it to the first
    ([{"cpu": "100m"}, {"cpu": "100m"}], '{"cpu": "200m", "memory": "10Mi"}',
     [{"cpu": 100_000_000, "memory": 10 * MI}, {"cpu": 100_000_000, "memory": 0}]),
    # no requests at all: the first container
    ([{}, {}], '{"cpu": "1"}', [{"cpu": 1_000_000_000, "memory": 0}, {"cpu": 0, "memory": 0}]),
    # a remainder the split cannot divide goes to the first container: the shares add up
    ([{"cpu": "1"}, {"cpu": "1"}, {"cpu": "1"}], '{"cpu": "100n"}',
     [{"cpu": 34, "memory": 0}, {"cpu": 33, "memory": 0}, {"cpu": 33, "memory": 0}]),
    # a container without requests gets none while another has them
    ([{}, {"cpu": "100m"}], '{"cpu": "100m"}', [{"cpu": 0, "memory": 0}, {"cpu": 100_000_000, "memory": 0}]),
])
def test_container_usage_divides_the_pod_usage_in_proportion_to_requests(
        requests: list[dict[str, str]], usage: str, expected: list[dict[str, int]]) -> None:
    shares = pod_metrics.container_usage(_pod("p", usage=usage, requests=requests))
    assert [name for name, _ in shares] == [f"c{i}" for i in range(len(requests))]
    assert [share for _, share in shares] == expected


def test_pod_metrics_is_a_fresh_scrape_with_quantities_kubectl_reads() -> None:
    document = pod_metrics.pod_metrics(
        _pod("api-1", usage='{"cpu": "450m", "memory": "64Mi"}', requests=[{"cpu": "200m"}],
             labels={"app": "api"}), now=NOW)
    assert document == {
        "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": "api-1", "namespace": "web", "creationTimestamp": "2026-11-29T08:00:05Z",
                     "labels": {"app": "api"}},
        "timestamp": "2026-11-29T08:00:05Z", "window": "15s",
        "containers": [{"name": "c0", "usage": {"cpu": "450m", "memory": "64Mi"}}]}


# --------------------------------------------------------------------------------------------
# label selectors
# --------------------------------------------------------------------------------------------

LABELS = {"app": "web", "tier": "front", "env": "prod", "rank": "3"}


@pytest.mark.parametrize(("selector", "matches"), [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=api", False),
    ("app!=api", True),
    ("app!=web", False),
    ("missing!=x", True),
    ("app=web,tier!=back", True),
    ("app=web,tier!=front", False),
    ("env in (prod,staging)", True),
    ("env in (staging, dev)", False),
    ("env notin (staging,dev)", True),
    ("env notin (prod)", False),
    ("missing notin (x)", True),
    ("missing in (x)", False),
    ("app", True),
    ("missing", False),
    ("!missing", True),
    ("!app", False),
    ("rank>2", True),
    ("rank<3", False),
    ("app=web, env in (prod), !gone, tier", True),
    ("app=", False),  # an empty value matches only an empty (or, with !=, a missing) label
    ("example.com/team!=x", True),
])
def test_label_selector_matches_like_apimachinery(selector: str, matches: bool) -> None:
    assert label_selector.matches(label_selector.parse(selector), LABELS) is matches


@pytest.mark.parametrize("selector", [
    "app=web,", ",app=web", "app=web,,tier=front", "env in prod", "env in (prod", "env in ()", "=web",
    "app=we b", "-app=web", "app=web)", "rank>two", "app web", "!", "app=(web)", "a" * 64 + "=x",
])
def test_a_malformed_label_selector_is_a_selector_error(selector: str) -> None:
    with pytest.raises(label_selector.SelectorError):
        label_selector.parse(selector)


def test_parse_returns_the_requirements_in_order() -> None:
    assert label_selector.parse("a=b,c!=d,e in (x,y)") == [
        label_selector.Requirement("a", "=", ("b",)), label_selector.Requirement("c", "!=", ("d",)),
        label_selector.Requirement("e", "in", ("x", "y"))]


# --------------------------------------------------------------------------------------------
# the paths the API answers
# --------------------------------------------------------------------------------------------

PODS = [
    _pod("web-1", usage='{"cpu": "100m", "memory": "10Mi"}', labels={"app": "web"}),
    _pod("web-2", node="n-1", usage='{"cpu": "200m", "memory": "20Mi"}', labels={"app": "web"}),
    _pod("api-1", usage='{"cpu": "1"}', labels={"app": "api"}),
    _pod("pending", phase="Pending", usage='{"cpu": "5"}', labels={"app": "web"}),
    _pod("done", phase="Succeeded", usage='{"cpu": "5"}', labels={"app": "web"}),
    _pod("other-ns", namespace="batch", usage='{"cpu": "300m"}', labels={"app": "web"}),
]
NODES = {"n-0": {"zone": "a"}, "n-1": {"zone": "b"}}


def _get(target: str) -> tuple[int, dict[str, Any]]:
    code, document = pod_metrics.respond(target, pods=PODS, nodes=NODES, now=NOW)
    json.dumps(document)  # every answer is JSON
    return code, document


def _names(document: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in document["items"]]


@pytest.mark.parametrize(("target", "kind", "names"), [
    ("/apis/metrics.k8s.io/v1beta1/pods", "PodMetricsList", ["other-ns", "api-1", "web-1", "web-2"]),
    ("/apis/metrics.k8s.io/v1beta1/namespaces/web/pods", "PodMetricsList", ["api-1", "web-1", "web-2"]),
    ("/apis/metrics.k8s.io/v1beta1/namespaces/web/pods?labelSelector=app%3Dweb", "PodMetricsList",
     ["web-1", "web-2"]),
    ("/apis/metrics.k8s.io/v1beta1/namespaces/web/pods?labelSelector=app+in+%28api%2Cdb%29", "PodMetricsList",
     ["api-1"]),
    ("/apis/metrics.k8s.io/v1beta1/pods?labelSelector=app!%3Dweb", "PodMetricsList", ["api-1"]),
    ("/apis/metrics.k8s.io/v1beta1/namespaces/empty/pods", "PodMetricsList", []),
    ("/apis/metrics.k8s.io/v1beta1/nodes", "NodeMetricsList", ["n-0", "n-1"]),
    ("/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=zone%3Db", "NodeMetricsList", ["n-1"]),
])
def test_lists_hold_only_running_pods_matching_the_namespace_and_selector(
        target: str, kind: str, names: list[str]) -> None:
    code, document = _get(target)
    assert (code, document["kind"], _names(document)) == (200, kind, names)


def test_one_pod_and_one_node_by_name() -> None:
    code, pod = _get("/apis/metrics.k8s.io/v1beta1/namespaces/web/pods/web-2")
    assert (code, pod["kind"], pod["containers"][0]["usage"]) == (200, "PodMetrics", {"cpu": "200m",
                                                                                      "memory": "20Mi"})
    code, node = _get("/apis/metrics.k8s.io/v1beta1/nodes/n-0")  # web-1, api-1, other-ns; not pending
    assert (code, node["kind"], node["usage"], node["window"]) == (
        200, "NodeMetrics", {"cpu": "1400m", "memory": "10Mi"}, "15s")


@pytest.mark.parametrize(("target", "code", "reason"), [
    ("/apis/metrics.k8s.io/v1beta1/namespaces/web/pods/pending", 404, "NotFound"),  # not Running
    ("/apis/metrics.k8s.io/v1beta1/namespaces/web/pods/nobody", 404, "NotFound"),
    ("/apis/metrics.k8s.io/v1beta1/nodes/n-9", 404, "NotFound"),
    ("/apis/metrics.k8s.io/v1beta1/services", 404, "NotFound"),
    ("/openapi/v2", 404, "NotFound"),
    ("/", 404, "NotFound"),
    ("/apis/metrics.k8s.io/v1beta1/pods?labelSelector=app%3D%3D%3D", 400, "BadRequest"),
])
def test_unknown_paths_and_bad_selectors_get_a_status(target: str, code: int, reason: str) -> None:
    answered, document = _get(target)
    assert (answered, document["kind"], document["code"], document["reason"]) == (
        code, "Status", code, reason)


def test_discovery_documents_name_the_group_and_its_two_resources() -> None:
    assert _get("/apis")[1]["groups"][0]["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
    assert _get("/apis/metrics.k8s.io")[1]["kind"] == "APIGroup"
    code, resources = _get("/apis/metrics.k8s.io/v1beta1/")
    assert code == 200 and resources["kind"] == "APIResourceList"
    assert {(r["name"], r["kind"], r["namespaced"]) for r in resources["resources"]} == {
        ("pods", "PodMetrics", True), ("nodes", "NodeMetrics", False)}
