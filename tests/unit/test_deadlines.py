"""No Kubernetes call in federation/ or agents/ without a deadline; the deadline values hold together.

Why a static scan: a call without `_request_timeout` waits forever on an apiserver that stops
answering without closing the connection, and nothing at run time shows it until a loop freezes.
The scan finds every call that is a Kubernetes API call — a method name of the generated client's
API classes (taken from the installed client, so it follows its version), or a call passing the
client's own keywords (`_preload_content`, `_content_type`, `watch=True`) as our reflector's
`lister` does — and requires `_request_timeout` on it (and `timeout_seconds` on a watch).
"""

from __future__ import annotations

import ast
import inspect
import pathlib

from kubernetes.client import api as kube_api

from federation.kube import clients, deadlines

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCANNED = ("federation", "agents")
CLIENT_KEYWORDS = frozenset({"_preload_content", "_content_type"})


def api_method_names() -> frozenset[str]:
    """Every operation of the generated client's API classes (CoreV1Api, CustomObjectsApi...)."""
    found = set()
    for _, cls in inspect.getmembers(kube_api, inspect.isclass):
        if cls.__name__.endswith("Api"):
            methods = {name for name, _ in inspect.getmembers(cls, inspect.isfunction)}
            found |= {name for name in methods if f"{name}_with_http_info" in methods}  # operations
    return frozenset(found)


API_METHODS = api_method_names()


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def undeadlined(source: str, *, where: str = "<source>") -> list[str]:
    """`where:line name` of each Kubernetes call in `source` without a deadline."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        if None in keywords:  # **kwargs: what it holds is not visible here
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else (
            node.func.id if isinstance(node.func, ast.Name) else "")
        watching = "watch" in keywords and _is_true(keywords["watch"])
        if not (name in API_METHODS or watching or CLIENT_KEYWORDS & set(keywords)):
            continue
        if "_request_timeout" not in keywords:
            missing.append(f"{where}:{node.lineno} {name} without _request_timeout")
        if watching and "timeout_seconds" not in keywords:
            missing.append(f"{where}:{node.lineno} {name} watch without timeout_seconds")
    return missing


def test_every_kubernetes_call_in_the_code_has_a_deadline() -> None:
    files = [p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py"))
             if not p.name.endswith(("_pb2.py", "_pb2_grpc.py"))]
    assert len(files) > 100  # the scan really ran over the code
    missing = [m for p in files for m in undeadlined(p.read_text(), where=str(p.relative_to(ROOT)))]
    assert missing == []


def test_the_scan_sees_calls_without_a_deadline() -> None:
    source = """
core.list_namespaced_pod("ns")
self._apps.patch_namespaced_deployment(name, ns, body, _request_timeout=deadlines.CALL)
self._lister(limit=5, _preload_content=False)
lister(watch=True, _request_timeout=deadlines.watch())
world.delete_spread(key)
send(**options)
"""
    assert undeadlined(source) == [
        "<source>:2 list_namespaced_pod without _request_timeout",
        "<source>:4 _lister without _request_timeout",
        "<source>:5 lister watch without timeout_seconds",
    ]


def test_the_method_names_come_from_the_client() -> None:
    assert {"list_namespaced_pod", "patch_namespaced_custom_object_status",
            "read_namespaced_deployment_status", "create_mutating_webhook_configuration"} <= API_METHODS
    assert not {"delete_spread", "close"} & API_METHODS


def test_deadline_values_hold_together() -> None:
    assert 0 < deadlines.CONNECT < deadlines.READ < deadlines.LIST_READ
    assert deadlines.READ < 60  # under the apiserver's own request timeout: we give up first
    assert deadlines.watch(10) == (deadlines.CONNECT, 10 + deadlines.WATCH_SLACK)
    assert deadlines.watch()[1] > deadlines.WATCH_SECONDS  # the server ends a watch before we do



def test_clients_built_here_retry_a_read_error_once(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    retries = clients.api_client(kubeconfig).configuration.retries
    assert retries is deadlines.URLLIB3_RETRIES
    assert (retries.read, retries.total) == (1, 3)
