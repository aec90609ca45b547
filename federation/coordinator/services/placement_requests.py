"""What a PlacementService request may carry, and what each failure answers a client.

Why a module of its own: the servicer's handlers ask the source and convert; checking their inputs
(a spread key, a FederatedSpread in YAML or JSON, a what-if's template and capacity JSON) and
turning each refusal into a status code a client can act on — NOT_FOUND, INVALID_ARGUMENT with
every problem's field path (one per line, and as JSON in the `fedspread-problems` trailer the SDK
reads), FAILED_PRECONDITION, UNAVAILABLE — is one job, the same for every handler
(`placement_service`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import grpc
import yaml

from federation.api import problems, spread
from federation.coordinator.services import authorization
from federation.coordinator.wire import inbound
from federation.core import jobs

PROBLEMS_TRAILER = "fedspread-problems"


class ServiceError(Exception):
    """A domain error with the gRPC status code it maps to."""

    def __init__(
        self, code: grpc.StatusCode, message: str, *, problem_list: Sequence[problems.Problem] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.problems = list(problem_list)


def check_key(key: str, *, field: str = "spread") -> str:
    """Validate a spread key "namespace/name" (a namespace and an object name, as Kubernetes
    spells them); INVALID_ARGUMENT naming the expected form, never echoing a huge key."""
    problem = inbound.spread_key_problem(key)
    if problem is not None:
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {problem}")
    return key


def invalid_argument(error: problems.InvalidInput) -> ServiceError:
    """INVALID_ARGUMENT with every problem of `error` (their field paths go in the trailer)."""
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(error), problem_list=error.problems)


def load_json(text: str, *, field: str) -> Any:
    """The JSON of a request field; InvalidInput naming `field` if it does not parse."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise problems.InvalidInput(field, [problems.Problem(field, f"not valid JSON ({error})")]) from None


def parse_spread(text: str) -> spread.FederatedSpreadSpec:
    """A FederatedSpread (whole object or just its spec) from YAML or JSON; InvalidInput if bad."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise problems.InvalidInput("spread", [problems.Problem(
            "", f"not valid YAML ({getattr(error, 'problem', None) or error})")]) from None
    if isinstance(doc, dict) and ("kind" in doc or "metadata" in doc):
        return problems.validate(spread.FederatedSpread, doc, what="spread").spec
    return problems.validate(spread.FederatedSpreadSpec, doc, what="spread spec")


def check_template(spec: spread.FederatedSpreadSpec, template: Any) -> None:
    """A what-if's template must be a workload of the spread's `targetRef` kind (one without `kind`
    is read as that kind), and a Job one that can be spread (not Indexed), as `fedspread simulate`
    requires; InvalidInput at `templateJson` otherwise."""
    kind = spec.target_ref.kind
    if not isinstance(template, dict):
        if template is None:
            return
        raise problems.InvalidInput("template", [problems.Problem("templateJson",
                                                                  f"expected a {kind} object")])
    given = template.get("kind")
    if given is not None and given != kind:
        raise problems.InvalidInput("template", [problems.Problem(
            "templateJson", f"expected a {kind} object (the spread's targetRef kind), got {given}")])
    body = template.get("spec")
    if kind == "Job" and isinstance(body, dict):
        refused = jobs.unsupported_job_fields(body)
        if refused:
            raise problems.InvalidInput("template", [problems.Problem("templateJson", r) for r in refused])




async def abort(
    context: grpc.aio.ServicerContext, error: ServiceError | authorization.AccessRefused,
) -> None:
    """End the call with the error's code, its problems in the trailer as JSON (or the access
    check's trailer, `federation.rpc.access`)."""
    if error.problems:
        context.set_trailing_metadata([(PROBLEMS_TRAILER, json.dumps(
            [{"path": p.path, "message": p.message} for p in error.problems]))])
    elif isinstance(error, authorization.AccessRefused) and error.trailers:
        context.set_trailing_metadata(error.trailers)
    await context.abort(error.code, str(error))
