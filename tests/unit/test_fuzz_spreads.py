"""FederatedSpread documents fuzzed: valid ones accepted and placed, broken ones refused with a path.

Why beyond `test_validation.py` (one hand-written change per case): users write YAML we did not
imagine. Hypothesis writes it here, through every entry point a spread takes — `problems.validate`
(the CLI, the SDK's simulate), `hub.parse_spread` (the coordinator's watcher) and
`spread_status.invalid_spread_status` (the `Valid=False` condition a person reads):

* a valid document (unicode cluster names, label expressions, patches, huge integers) is accepted,
  survives a round trip through its own JSON, and is placed by `placement.place` on random
  capacity without an exception: every replica placed or unplaced, no subset above its cap, and a
  status can be written for it;
* a document broken on purpose (`spread_documents.MUTATIONS`) is refused with a problem at the
  exact field path the breakage names, and the `Valid=False` message names it too;
* a valid document with any one value replaced by arbitrary JSON is either still valid (and then
  placed as above) or refused with a problem at, above or below the replaced field.
"""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

import hypothesis
import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import spread_documents as docs
import strategies as fs
from hypothesis import strategies as st

from federation.api import problems, spread
from federation.coordinator.hub import watcher as hub
from federation.core import placement, placement_view, spread_status

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
SETTINGS = hypothesis.settings(
    max_examples=150, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large,
                           hypothesis.HealthCheck.filter_too_much])
REPLICAS = st.integers(0, 60) | st.sampled_from([2**31 - 1, 10**6])
CROSS_FIELD = ("duplicate subset name", "mixes cap kinds", "percentage maxReplicas sum to",
               "set exactly one of clusters or clusterSelector")
ADAPTIVE_UNDER_FIXED = "adaptive settings apply only to type Adaptive"


def refused(doc: Any) -> list[problems.Problem]:
    """The problems validation reports; it must refuse, with a usable message for each."""
    with pytest.raises(problems.InvalidInput) as caught:
        problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    found = caught.value.problems
    assert found, "refused without a problem"
    for problem in found:
        assert problem.message, problem
        for leak in ("Value error,", "errors.pydantic.dev", "Traceback", "ValidationError"):
            assert leak not in problem.message, problem
        assert str(problem).startswith(problem.path), problem
    return found


def assert_placeable(parsed: spread.FederatedSpread, data: st.DataObject) -> None:
    """Placed on random capacity without an exception, within caps, every replica accounted for."""
    spec = parsed.spec
    snapshot = data.draw(fs.snapshots(), label="snapshot")
    replicas = data.draw(REPLICAS, label="replicas")
    result = placement.place(spec, replicas=replicas, snapshot=snapshot, shape=data.draw(fs.shapes()))
    assert result.replicas == replicas and result.unplaced >= 0
    assert result.placed + result.unplaced == replicas, result
    assert sum(result.clusters.values()) == result.placed
    assert [s.name for s in result.subsets] == [s.name for s in spec.subsets]
    percent_total = sum(s.percent or 0 for s in spec.subsets)
    for subset, placed in zip(spec.subsets, result.subsets, strict=True):
        assert min(placed.clusters.values(), default=0) >= 0
        assert sum(placed.clusters.values()) == placed.replicas
        assert set(placed.clusters) == set(placement_view.selected_clusters(subset, snapshot)), placed
        if isinstance(subset.max_replicas, int):
            assert placed.replicas <= subset.max_replicas
        elif subset.percent is not None:  # largest remainder: at most one above the exact share
            assert placed.replicas * 100 <= subset.percent * replicas + 100, (subset, placed)
    percent_placed = sum(p.replicas for s, p in zip(spec.subsets, result.subsets, strict=True) if s.percent)
    assert percent_placed * 100 <= percent_total * replicas + 50
    written = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=(),
                                          previous=None, now=T0)
    assert [c.type for c in written.conditions][:1] == ["Valid"]
    assert written.unplaced_replicas == result.unplaced
    written.model_dump(by_alias=True, mode="json")


@SETTINGS
@hypothesis.given(doc=docs.documents(), data=st.data())
def test_a_valid_document_is_accepted_round_trips_and_is_placed(doc: docs.Doc, data: st.DataObject) -> None:
    parsed = problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    again = problems.validate(spread.FederatedSpread, parsed.model_dump(by_alias=True, mode="json",
                                                                        exclude_none=True), what="again")
    assert again == parsed
    from_hub, found = hub.parse_spread(doc)
    assert found == () and from_hub == parsed
    hypothesis.event(f"{len(parsed.spec.subsets)} subsets, {parsed.spec.schedule_strategy.type}")
    assert_placeable(parsed, data)


@SETTINGS
@hypothesis.given(case=docs.broken_documents())
def test_a_broken_document_is_refused_at_the_broken_field(case: tuple[str, docs.Doc, str]) -> None:
    mutation, doc, path = case
    hypothesis.event(mutation)
    found = refused(doc)
    paths = [p.path for p in found]
    assert path in paths, f"{mutation}: expected a problem at {path!r}, got {[str(p) for p in found]}"
    from_hub, hub_found = hub.parse_spread(doc)
    assert from_hub is None and list(hub_found) == found
    invalid = spread_status.invalid_spread_status(
        None, generation=7, problems=[str(p) for p in found], now=T0)
    (valid,) = [c for c in invalid.conditions if c.type == "Valid"]
    assert (valid.status, valid.reason, valid.observed_generation) == ("False", "InvalidSpec", 7)
    if paths.index(path) < spread_status.MAX_PROBLEMS_SHOWN:
        assert f"{path}: " in valid.message, valid.message


@pytest.mark.parametrize("mutation", sorted(docs.MUTATIONS))
def test_every_mutation_is_exercised(mutation: str) -> None:
    """The catalogue itself: each mutation breaks valid documents at the path it names (one run per
    mutation: drawing the mutation among many left one unexercised now and then)."""
    seen: Counter[str] = Counter()

    @hypothesis.settings(max_examples=25, deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(case=docs.broken_documents(mutation))
    def run(case: tuple[str, docs.Doc, str]) -> None:
        name, doc, path = case
        assert path in [p.path for p in refused(doc)]
        seen[name] += 1

    run()
    assert seen[mutation] >= 1, f"{mutation} never broke a document"


Steps = tuple[str | int, ...]


def _paths(value: Any, here: str = "", steps: Steps = ()) -> list[tuple[str, Steps]]:
    """Every path into a document: in the notation of problem paths, and as the keys to follow
    (label keys may hold '.' or '[', so the notation alone cannot be parsed back)."""
    found = [(here, steps)] if here else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, f"{here}.{key}" if here else str(key), (*steps, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, f"{here}[{index}]", (*steps, index))
    return found


def _replace(doc: docs.Doc, steps: Steps, value: Any) -> None:
    node: Any = doc
    for step in steps[:-1]:
        node = node[step]
    if value is _DELETE:
        del node[steps[-1]]
    else:
        node[steps[-1]] = value


_DELETE = object()


def related(problem: str, changed: str) -> bool:
    """A problem at, above or below the changed field."""
    def within(inner: str, outer: str) -> bool:
        return outer == "" or inner == outer or inner.startswith((outer + ".", outer + "["))
    return within(problem, changed) or within(changed, problem)


@SETTINGS
@hypothesis.given(doc=docs.documents(), data=st.data())
def test_any_one_value_replaced_is_placed_or_refused_near_it(doc: docs.Doc, data: st.DataObject) -> None:
    candidates = [(p, steps) for p, steps in _paths(doc) if len(steps) > 1 or p in doc]
    changed, steps = data.draw(st.sampled_from(candidates), label="path")
    hypothesis.assume(not changed.startswith("metadata.") and not changed.endswith(".patch"))
    _replace(doc, steps, data.draw(st.just(_DELETE) | docs.JSON, label="value"))
    try:
        parsed = problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    except problems.InvalidInput:
        found = refused(doc)
        cross = [p for p in found if p.path.startswith("spec.subsets") and p.message.startswith(CROSS_FIELD)]
        # Dropping or changing the strategy type can leave an adaptive block under Fixed (a sibling).
        cross += [p for p in found if changed.startswith("spec.scheduleStrategy")
                  and p.path == "spec.scheduleStrategy.adaptive"
                  and p.message.startswith(ADAPTIVE_UNDER_FIXED)]
        # A toleration's key and operator are judged together: an emptied key is refused on its operator.
        cross += [p for p in found if changed.endswith(".key")
                  and p.path == changed.removesuffix(".key") + ".operator"]
        assert any(related(p.path, changed) for p in found) or cross, (changed, [str(p) for p in found])
        hypothesis.event("refused")
        return
    hypothesis.event("still valid")
    assert_placeable(parsed, data)
