"""The external metrics API's answers, table by table: routes, selectors, lists, error statuses.

The pure half (`services.external_metrics`) and the handler's order (authenticate, route,
authorize, answer: `services.metrics_api.Handler`) with a stand-in `UsageSource` and authorizer;
the front-proxy rules (`services.front_proxy`) from a ConfigMap's data. Hypothesis throws random
paths, queries and selectors at them: an answer is always a `Status` or a list, never an exception.
"""

from __future__ import annotations

import pathlib
import string
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.coordinator.hub import access_review
from federation.coordinator.services import external_metrics as api
from federation.coordinator.services import front_proxy, metrics_api
from federation.coordinator.wire import access
from federation.core import usage as usage_rules
from federation.kube import webhook_roles
from tests.support import metrics_api as support

LABEL = usage_rules.SPREAD_SELECTOR_LABEL
CPU = usage_rules.CPU_UTILIZATION
ROOT = api.ROOT
SOURCE = support.StandInUsage({"demo/web": support.figures(cpu_utilization_milli=150_500),
                               "demo/api": support.figures(cpu_utilization_milli=40_000),
                               "demo/idle": usage_rules.FederationUsage(values={}, ready_pods=0,
                                                                        unmeasured_pods=0)})
CERTIFICATE = {"subject": ((("commonName", support.FRONT_PROXY_CN),),)}


@pytest.mark.parametrize(("selector", "spreads"), [
    (f"{LABEL}=web", ("web",)),
    (f"{LABEL}==web", ("web",)),
    (f" {LABEL} = web ", ("web",)),
    (f"{LABEL} in (web,api)", ("api", "web")),
    (f"{LABEL} in ( web , api )", ("api", "web")),
    (f"{LABEL} in (web,api),{LABEL}=web", ("web",)),
])
def test_selectors_name_spreads(selector: str, spreads: tuple[str, ...]) -> None:
    assert api.spreads_of(selector) == spreads


@pytest.mark.parametrize(("selector", "reason"), [
    ("", "required"),
    ("   ", "required"),
    (f"{LABEL}!=web", "cannot parse"),
    (f"{LABEL} notin (web)", "cannot parse"),
    (LABEL, "cannot parse"),
    (f"!{LABEL}", "cannot parse"),
    ("app=web", "only fedspread.io/spread"),
    (f"{LABEL}=web,app=x", "only fedspread.io/spread"),
    (f"{LABEL}=", "not a valid spread name"),
    (f"{LABEL}=-bad", "not a valid spread name"),
    (f"{LABEL} in (web", "unbalanced"),
    (f"{LABEL} in web)", "unbalanced"),
    (f"{LABEL}=web,{LABEL}=api", "names no spread"),
    (f"{LABEL}={'x' * 64}", "not a valid spread name"),
    ("x" * (api.MAX_SELECTOR + 1), "longer than"),
])
def test_selectors_we_cannot_answer(selector: str, reason: str) -> None:
    with pytest.raises(api.SelectorError, match=reason):
        api.spreads_of(selector)


@pytest.mark.parametrize(("path", "query", "expected"), [
    (ROOT, "", api.Discovery()),
    (ROOT + "/", "", api.Discovery()),
    (f"{ROOT}/namespaces/demo/{CPU}", f"labelSelector={LABEL}%3Dweb",
     api.MetricQuery("demo", CPU, f"{LABEL}=web")),
    (f"{ROOT}/namespaces/demo/{CPU}", "", api.MetricQuery("demo", CPU, "")),
])
def test_routes(path: str, query: str, expected: object) -> None:
    assert api.route(path, query) == expected


@pytest.mark.parametrize(("path", "query", "code", "says"), [
    ("/apis", "", 404, "could not find"),
    ("/openapi/v2", "", 404, "could not find"),
    ("/apis/external.metrics.k8s.io", "", 404, "could not find"),
    (f"{ROOT}/namespaces/demo", "", 404, "could not find"),
    (f"{ROOT}/namespaces/Demo_/{CPU}", "", 404, "could not find"),
    (f"{ROOT}/namespaces/demo/{CPU}/web", "", 404, "could not find"),
    (f"{ROOT}/{CPU}", "", 404, "could not find"),
    (f"{ROOT}/namespaces/demo/cpu", "", 404, ", ".join(usage_rules.SERVED_METRICS)),
    (f"{ROOT}/namespaces/demo/{CPU}", "labelSelector=a&labelSelector=b", 400, "one labelSelector"),
])
def test_paths_we_do_not_serve(path: str, query: str, code: int, says: str) -> None:
    answer = api.route(path, query)
    assert isinstance(answer, api.Answer)
    assert answer.code == code and answer.body["code"] == code
    assert answer.body["kind"] == "Status" and answer.body["status"] == "Failure"
    assert says in answer.body["message"]


def test_discovery_lists_every_metric_namespaced() -> None:
    body = api.discovery().body
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == "external.metrics.k8s.io/v1beta1"
    assert [r["name"] for r in body["resources"]] == list(usage_rules.SERVED_METRICS)
    assert all(r["namespaced"] and r["verbs"] == ["get", "list"] for r in body["resources"])


def query(selector: str, *, metric: str = CPU, namespace: str = "demo") -> api.MetricQuery:
    return api.MetricQuery(namespace=namespace, metric=metric, selector=selector)


def test_a_list_item_has_the_spread_time_window_and_quantity() -> None:
    answer = api.answer(query(f"{LABEL}=web"), SOURCE)
    assert answer.code == 200
    assert answer.body["kind"] == "ExternalMetricValueList"
    assert answer.body["apiVersion"] == "external.metrics.k8s.io/v1beta1"
    assert answer.body["items"] == [{"metricName": CPU, "metricLabels": {LABEL: "web"},
                                     "timestamp": "2027-01-15T08:00:00Z", "window": 30,
                                     "value": "150500m"}]


@pytest.mark.parametrize(("selector", "namespace", "metric", "spreads"), [
    (f"{LABEL} in (web,api)", "demo", CPU, ["api", "web"]),
    (f"{LABEL}=missing", "demo", CPU, []),                  # no such spread: an empty list
    (f"{LABEL}=web", "other", CPU, []),                     # another namespace's spread is not this one
    (f"{LABEL}=idle", "demo", CPU, []),                     # nothing measured: no value
    (f"{LABEL}=web", "demo", usage_rules.MEMORY_USAGE, []),  # this metric unmeasured
    (f"{LABEL} in (web,missing)", "demo", usage_rules.READY_REPLICAS, ["web"]),
])
def test_lists_hold_the_spreads_with_a_value(selector: str, namespace: str, metric: str,
                                             spreads: list[str]) -> None:
    answer = api.answer(query(selector, metric=metric, namespace=namespace), SOURCE)
    assert answer.code == 200
    assert [i["metricLabels"][LABEL] for i in answer.body["items"]] == spreads


def test_a_selector_we_cannot_answer_is_400_with_the_reason() -> None:
    answer = api.answer(query("app=web"), SOURCE)
    assert answer.code == 400 and answer.body["reason"] == "BadRequest"
    assert "only fedspread.io/spread" in answer.body["message"]


@pytest.mark.parametrize(("milli", "quantity"), [(0, "0"), (2000, "2"), (450, "450m"), (150_500, "150500m")])
def test_values_are_quantities(milli: int, quantity: str) -> None:
    metric = usage_rules.MetricValue(CPU, milli, 0.0, 0.0)
    assert api.item(metric, spread="web")["value"] == quantity


# --- the front proxy's settings and who they admit ---------------------------------------------

CA_PEM = "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"


def test_the_configmap_gives_the_headers_and_names() -> None:
    config = front_proxy.parse({
        "requestheader-client-ca-file": CA_PEM,
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'})
    assert config.allowed_names == {"front-proxy-client"}
    assert config.username_headers == ("x-remote-user",) and config.group_headers == ("x-remote-group",)


@pytest.mark.parametrize(("data", "says"), [
    ({}, "requestheader-client-ca-file"),
    ({"requestheader-client-ca-file": "not a pem"}, "requestheader-client-ca-file"),
    ({"requestheader-client-ca-file": CA_PEM, "requestheader-allowed-names": "front"}, "JSON list"),
    ({"requestheader-client-ca-file": CA_PEM, "requestheader-allowed-names": "[1]"}, "JSON list of strings"),
])
def test_a_configmap_we_cannot_use(data: dict[str, str], says: str) -> None:
    with pytest.raises(front_proxy.TrustUnavailable, match=says):
        front_proxy.parse(data)


CONFIG = front_proxy.RequestHeaderConfig(client_ca=CA_PEM, allowed_names=frozenset({support.FRONT_PROXY_CN}))


@pytest.mark.parametrize(("certificate", "headers", "expected"), [
    (CERTIFICATE, {"x-remote-user": ("alice",), "x-remote-group": ("dev", "system:authenticated")},
     access.User("alice", ("dev", "system:authenticated"))),
    (CERTIFICATE, {"x-remote-user": ("alice",)}, access.User("alice")),
    (None, {"x-remote-user": ("alice",)}, "client certificate"),
    ({"subject": ((("commonName", "someone"),),)}, {"x-remote-user": ("alice",)}, "allowed names"),
    (CERTIFICATE, {}, "named no user"),
    (CERTIFICATE, {"x-remote-user": ("  ",)}, "named no user"),
])
def test_who_the_front_proxy_vouches_for(certificate: dict[str, Any] | None,
                                         headers: dict[str, tuple[str, ...]], expected: object) -> None:
    found = front_proxy.identify(CONFIG, certificate=certificate, headers=headers)
    if isinstance(expected, str):
        assert isinstance(found, str) and expected in found
    else:
        assert found == expected


def test_the_front_proxys_extra_attributes_come_with_the_user_and_go_to_the_access_review() -> None:
    """`X-Remote-Extra-<key>`: the key lower-cased and percent-decoded (as the apiserver's
    requestheader authenticator reads it), each header value one value; the SubjectAccessReview
    carries them in `spec.extra`, so an authorizer that decides on them sees them."""
    headers = {"x-remote-user": ("system:serviceaccount:kube-system:hpa",),
               "x-remote-extra-authentication.kubernetes.io%2fpod-name": ("hpa-0",),
               "x-remote-extra-scopes": ("read", "write"), "x-remote-extra-empty": ("  ",),
               "x-remote-extra-": ("no key",)}
    found = front_proxy.identify(CONFIG, certificate=CERTIFICATE, headers=headers)
    assert isinstance(found, access.User)
    assert found.extra == (("authentication.kubernetes.io/pod-name", ("hpa-0",)),
                           ("scopes", ("read", "write")))
    spec = access_review.review_body(found, access.Access("list", "cpu", namespace="demo")).spec
    assert spec.extra == {"authentication.kubernetes.io/pod-name": ["hpa-0"], "scopes": ["read", "write"]}
    other = front_proxy.RequestHeaderConfig(client_ca=CA_PEM, extra_prefixes=("x-other-",))
    assert front_proxy.identify(other, certificate=CERTIFICATE, headers={
        **headers, "x-other-Team": ("a",)}) == access.User(
            "system:serviceaccount:kube-system:hpa", extra=(("team", ("a",)),)), "the hub's own prefix"
    assert access_review.review_body(access.User("alice"), access.Access("get", "x")).spec.extra is None


def test_without_allowed_names_any_certificate_of_the_ca_is_the_front_proxy() -> None:
    config = front_proxy.RequestHeaderConfig(client_ca=CA_PEM)
    found = front_proxy.identify(config, certificate={"subject": ((("commonName", "x"),),)},
                                 headers={"x-remote-user": ("bob",)})
    assert found == access.User("bob")


# --- the handler: authenticate, route, authorize, answer ---------------------------------------


@pytest.fixture
def handler(tmp_path: pathlib.Path) -> metrics_api.Handler:
    configmap = support.ConfigMapData(CA_PEM)
    trust = front_proxy.FrontProxyTrust(configmap, directory=tmp_path)
    return metrics_api.Handler(SOURCE, trust=trust, authorizer=support.Allow(frozenset({"mallory"})))


def request(path: str, query: str = "", *, user: str = "alice",
            certificate: dict[str, Any] | None = CERTIFICATE) -> webhook_roles.GetRequest:
    return webhook_roles.GetRequest(path=path, query=query, headers={"x-remote-user": (user,)},
                                    peer_certificate=certificate)


@pytest.mark.parametrize(("path", "query", "user", "certificate", "code"), [
    (ROOT, "", "alice", CERTIFICATE, 200),
    (ROOT, "", "mallory", CERTIFICATE, 200),                            # discovery: authentication only
    (ROOT, "", "alice", None, 401),
    (f"{ROOT}/namespaces/demo/{CPU}", f"labelSelector={LABEL}=web", "alice", CERTIFICATE, 200),
    (f"{ROOT}/namespaces/demo/{CPU}", f"labelSelector={LABEL}=web", "mallory", CERTIFICATE, 403),
    (f"{ROOT}/namespaces/demo/{CPU}", f"labelSelector={LABEL}=web", "alice", None, 401),
    (f"{ROOT}/namespaces/demo/{CPU}", "labelSelector=app=web", "alice", CERTIFICATE, 400),
    (f"{ROOT}/namespaces/demo/nope", "", "alice", CERTIFICATE, 404),
    ("/openapi/v2", "", "alice", CERTIFICATE, 404),
    ("/openapi/v2", "", "alice", None, 401),                            # nothing before authentication
])
def test_the_handler_answers_in_order(handler: metrics_api.Handler, path: str, query: str, user: str,
                                      certificate: dict[str, Any] | None, code: int) -> None:
    assert handler.answer(request(path, query, user=user, certificate=certificate)).code == code


def test_the_review_asks_list_of_the_metric_in_the_namespace(handler: metrics_api.Handler) -> None:
    handler(request(f"{ROOT}/namespaces/demo/{CPU}", f"labelSelector={LABEL}=web"))
    assert isinstance(handler.authorizer, support.Allow)
    assert handler.authorizer.questions == [(access.User("alice"), access.Access(
        verb="list", resource=CPU, namespace="demo", group="external.metrics.k8s.io"))]
    assert handler.answers == {200: 1}


def test_a_hub_that_cannot_say_is_503(tmp_path: pathlib.Path) -> None:
    class Unavailable:
        def allowed(self, user: access.User, question: access.Access) -> bool:
            raise access.AccessUnavailable("the hub did not answer")

    trust = front_proxy.FrontProxyTrust(support.ConfigMapData(CA_PEM), directory=tmp_path)
    answer = metrics_api.Handler(SOURCE, trust=trust, authorizer=Unavailable()).answer(
        request(f"{ROOT}/namespaces/demo/{CPU}", f"labelSelector={LABEL}=web"))
    assert answer.code == 503 and "did not answer" in answer.body["message"]


# --- fuzz --------------------------------------------------------------------------------------

SETTINGS = hypothesis.settings(max_examples=300, deadline=None)
PIECES = st.sampled_from([ROOT, "/namespaces", "/demo", f"/{CPU}", "/", "//", "/..", "/%2F", "/web",
                          "/apis", "?", "&", "=", LABEL, " in (", ")", ",", "labelSelector=", "\x00"])
TEXT = st.text(alphabet=string.printable + "é\u2028\x00", max_size=80)


@SETTINGS
@hypothesis.given(path=st.one_of(TEXT, st.lists(PIECES, max_size=8).map("".join)),
                  query=st.one_of(TEXT, st.lists(PIECES, max_size=8).map("".join)))
def test_any_path_gets_an_answer(path: str, query: str) -> None:
    routed = api.route(path, query)
    if isinstance(routed, api.MetricQuery):
        routed = api.answer(routed, SOURCE)
    if isinstance(routed, api.Answer):
        assert routed.code in (200, 400, 404)
        assert routed.body["kind"] in ("Status", "ExternalMetricValueList")


@SETTINGS
@hypothesis.given(selector=st.one_of(TEXT, st.lists(PIECES, max_size=10).map("".join)))
def test_any_selector_gets_a_list_or_a_400(selector: str) -> None:
    answer = api.answer(query(selector), SOURCE)
    assert answer.code in (200, 400)
    if answer.code == 400:
        assert answer.body["reason"] == "BadRequest" and answer.body["message"]


def test_the_port_without_a_certificate_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from federation.cli import root

    arguments = ["coordinator", "--insecure", "--no-ray", "--external-metrics-port", "6443"]
    result = CliRunner().invoke(root.main, arguments)
    assert result.exit_code == 2
    assert "--external-metrics-port needs --external-metrics-cert and --external-metrics-key" in result.output
