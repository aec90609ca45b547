"""`federation.rpc.assignment`: the one encoding of an assignment, shared by coordinator and agent.

Property: every Assignment the coordinator can describe comes back equal from its SpreadAssignment,
through the serialized bytes as an agent receives them; and re-encoding a decoded message gives the
same bytes (the encoding has a single form per value).
"""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from federation.rpc import agent_pb2, assignment

INT32 = st.integers(min_value=0, max_value=2**31 - 1)
NAME = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
SCALAR = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
JSON: st.SearchStrategy[Any] = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
OBJECT = st.dictionaries(st.text(max_size=6), JSON, max_size=3)
WHEN = st.datetimes(
    min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2100, 1, 1),
    timezones=st.just(datetime.UTC))


@st.composite
def rules(draw: st.DrawFn) -> tuple[assignment.SubsetRule, ...]:
    """Subset rules with distinct names, in index order (as the agent keeps them)."""
    subset_names = draw(st.lists(NAME, max_size=4, unique=True))
    return tuple(
        assignment.SubsetRule(
            name=name, index=index, quota=draw(INT32),
            required_term=draw(st.none() | OBJECT),
            preferred_terms=tuple(draw(st.lists(OBJECT, max_size=2))),
            tolerations=tuple(draw(st.lists(OBJECT, max_size=2))),
            patch=draw(st.none() | OBJECT),
            unschedulable_until=draw(st.none() | WHEN),
        )
        for index, name in enumerate(subset_names)
    )


@st.composite
def assignments(draw: st.DrawFn) -> assignment.Assignment:
    """Assignments as the coordinator sends them: target, strategy and subset count always set."""
    namespace, name = draw(NAME), draw(NAME)
    subsets = draw(rules())
    return assignment.Assignment(
        spread=assignment.spread_key(namespace, name),
        generation=draw(st.integers(min_value=0, max_value=2**63 - 1)),
        namespace=namespace, workload=draw(NAME), replicas=draw(INT32), template=draw(OBJECT),
        template_revision=draw(st.text(max_size=16)), subsets=subsets,
        subset_count=draw(st.integers(min_value=max(len(subsets), 1), max_value=8)),
        strategy=assignment.Strategy(
            type=draw(st.sampled_from(["Fixed", "Adaptive"])),
            reschedule_critical_seconds=draw(st.integers(min_value=1, max_value=2**31 - 1)),
            unschedulable_seconds=draw(st.integers(min_value=1, max_value=2**31 - 1)),
        ),
        spread_uid=draw(st.uuids().map(str) | st.just("")),
    )


@given(assignments())
def test_assignment_round_trips_through_the_wire(value: assignment.Assignment) -> None:
    data = value.to_proto().SerializeToString(deterministic=True)
    received = agent_pb2.SpreadAssignment.FromString(data)
    assert assignment.Assignment.from_proto(received) == value
    assert assignment.Assignment.from_proto(received).to_proto().SerializeToString(deterministic=True) == data


@given(assignments(), st.data())
def test_with_shares_fills_one_clusters_quotas(value: assignment.Assignment, data: st.DataObject) -> None:
    quotas = [data.draw(st.integers(min_value=0, max_value=1000)) for _ in value.subsets]
    ends = [data.draw(st.none() | WHEN) for _ in value.subsets]
    shared = [assignment.SubsetRule(name=r.name, index=r.index, quota=0, required_term=r.required_term,
                                    preferred_terms=r.preferred_terms, tolerations=r.tolerations,
                                    patch=r.patch) for r in value.subsets]
    base = assignment.Assignment(**{**vars(value), "subsets": tuple(shared), "replicas": 0}).to_proto()
    message = assignment.with_shares(base, quotas, until=ends)
    decoded = assignment.Assignment.from_proto(message)
    assert decoded.replicas == sum(quotas)
    assert [r.quota for r in decoded.subsets] == quotas
    assert [r.unschedulable_until for r in decoded.subsets] == ends
    assert not any(item.quota for item in base.subsets), "the shared encoding is not modified"


def test_unset_fields_decode_to_their_defaults() -> None:
    decoded = assignment.Assignment.from_proto(agent_pb2.SpreadAssignment(spread="shop/web"))
    assert (decoded.namespace, decoded.workload, decoded.template) == ("shop", "web", {})
    assert decoded.subset_count == 0
    assert decoded.strategy == assignment.Strategy()
    assert (decoded.api_version, decoded.kind) == ("apps/v1", "Deployment")
    assert (decoded.spread_uid, decoded.federation) == ("", "")


def test_spread_uid_travels_and_federation_comes_from_the_stream() -> None:
    """The spread's uid is on the wire; the federation is the stream's (Welcome), never the message's."""
    sent = assignment.Assignment(
        spread="shop/web", generation=3, namespace="shop", workload="web", replicas=2, template={},
        template_revision="r", subsets=(), subset_count=0, spread_uid="0b6c-uid", federation="ignored")
    message = sent.to_proto()
    assert message.spread_uid == "0b6c-uid"
    decoded = assignment.Assignment.from_proto(message, federation="prod")
    assert (decoded.spread_uid, decoded.federation) == ("0b6c-uid", "prod")
