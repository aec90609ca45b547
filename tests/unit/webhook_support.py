"""Shared pieces of the webhook's hostile-input tests: a real server, a keep-alive client, reviews.

Why a module: the fuzzers (`test_webhook_fuzz.py`) and the named bad-review cases
(`test_webhook_bad_reviews.py`) drive the same real HTTPS server the same way; keeping the server
setup and the assertions in one place means both files check the same contract — a bad body is
answered 400 (413 when too large) with a JSON reason, and a valid review still gets 200 after it.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from agents import bookkeeping, metrics
from agents.webhook import handler, review, server
from federation.api import names
from federation.certs import pki
from federation.kube import webhook_clients
from federation.rpc import assignment

SMALL_LIMIT = 64 * 1024
NAMESPACE = "fuzz"
JSON_HEADERS = {"Content-Type": "application/json"}


def valid_review(uid: str = "ok-1", *, name: str = "p") -> dict[str, Any]:
    """A well-formed pod CREATE review for a pod of the spread `fuzz/web`."""
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": "CREATE", "namespace": NAMESPACE, "name": name,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "dryRun": True,
            "object": {"metadata": {"name": name, "labels": {names.SPREAD_LABEL: "web"}},
                       "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        },
    }


class Client:
    """One keep-alive HTTPS connection to the server (http.client reopens it after a close)."""

    def __init__(self, port: int, ca_pem: bytes) -> None:
        context = ssl.create_default_context(cadata=ca_pem.decode())
        self.connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)

    def post(self, body: bytes, *, path: str = "/mutate?timeout=2s",
             headers: Mapping[str, str] = JSON_HEADERS) -> tuple[int, Any]:
        """Status and decoded JSON body of a POST."""
        self.connection.request("POST", path, body=body, headers=dict(headers))
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())

    def get(self, path: str) -> tuple[int, bytes]:
        """Status and raw body of a GET."""
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


class Faulty(handler.AdmissionHandler):
    """A handler with a bug for one uid (to check that a crash in it is answered 500)."""

    def handle(self, request: review.Review) -> dict[str, Any]:
        """Fail for uid `boom`, else answer normally."""
        if request.uid == "boom":
            raise RuntimeError("injected bug")
        return super().handle(request)


def serving_files(ca: pki.CertificateAuthority, directory: pathlib.Path, cn: str) -> tuple[pathlib.Path, ...]:
    """Write a serving pair for 127.0.0.1 (atomically replacing any older one)."""
    pair = ca.issue_server(cn)
    staged = pair.write(directory / "staging", "tls")
    final = (directory / "tls.crt", directory / "tls.key")
    for source, target in zip(staged, final, strict=True):
        os.replace(source, target)
    return final


def start(ca: pki.CertificateAuthority, directory: pathlib.Path, *, max_body: int,
          ready: Callable[[], bool] = lambda: True,
          client_auth: webhook_clients.ClientAuth | None = None) -> server.WebhookServer:
    """A started server whose bookkeeping knows spread fuzz/web (two subsets, one with a patch)."""
    cert, key = serving_files(ca, directory, "webhook")
    book = bookkeeping.Bookkeeping()
    rules = (
        assignment.SubsetRule(name="a", index=0, quota=1000, patch={"metadata": {"labels": {"x": "y"}}},
                              required_term={"matchExpressions": [{"key": "z", "operator": "In",
                                                                   "values": ["a"]}]},
                              tolerations=({"key": "k", "operator": "Exists"},)),
        assignment.SubsetRule(name="b", index=1, quota=1000),
    )
    book.set_assignment(assignment.Assignment(
        spread=f"{NAMESPACE}/web", generation=1, namespace=NAMESPACE, workload="web", replicas=2000,
        template={}, template_revision="", subsets=rules, subset_count=2))
    admission = Faulty(book, metrics.AgentMetrics())
    return server.WebhookServer(admission, host="127.0.0.1", port=0, cert_file=cert, key_file=key,
                                max_body=max_body, ready=ready, client_auth=client_auth).start()


def assert_rejected(status: int, answer: Any, *, allowed: tuple[int, ...] = (400,)) -> None:
    """The server answered a bad body with one of `allowed` and a reason."""
    assert status in allowed, (status, answer)
    assert isinstance(answer, dict) and answer["code"] == status
    assert isinstance(answer["reason"], str) and answer["reason"], answer


def assert_still_serving(client: Client) -> None:
    """A valid review is answered 200 with an allowed response for its uid."""
    status, answer = client.post(json.dumps(valid_review("after")).encode())
    assert status == 200, answer
    assert answer["response"]["uid"] == "after" and answer["response"]["allowed"] is True
