"""The coordinator keeps a Secret's data only while a spread references it (model/hub_objects.py).

Why: the hub watch reports every Secret; the coordinator needs the data only of those it must copy
to members. Each case drives the World as the hub watch and the event loop do, and checks what is
held, what is only known to exist, and which Secrets the coordinator is asked to read.
"""

from __future__ import annotations

from typing import Any

from test_dependency_assignments import SUBSETS, T0, app_deployment, hub_object, placed_world

from federation.api import names
from federation.coordinator.model import hub_objects, world
from tests.support import builders
from tests.support.clock import ManualClock


def _secret(name: str) -> dict[str, Any]:
    return hub_object("Secret", name, type="Opaque", data={"k": "c2VjcmV0"})


def test_a_secret_no_spread_references_is_known_to_exist_without_its_data() -> None:
    model, _ = placed_world()
    assert model.hub_object("Secret", "shop/unrelated", _secret("unrelated")) == set()
    objects = model.hub_objects
    assert objects.get("shop", "Secret", "unrelated") is None
    assert objects.exists("shop", "Secret", "unrelated")
    assert objects.take_wanted() == []
    model.hub_object("Secret", "shop/unrelated", None)  # deleted on the hub
    assert not objects.exists("shop", "Secret", "unrelated")


def test_a_referenced_secret_is_held_and_its_changes_reach_the_spread() -> None:
    model, _ = placed_world()
    assert model.hub_object("Secret", "shop/web-credentials", _secret("web-credentials")) == {"shop/web"}
    assert model.hub_objects.get("shop", "Secret", "web-credentials") is not None
    assert model.hub_objects.missing("shop/web", app_deployment(), ()) != ()  # registry is absent


def _world_with_secrets_first() -> world.World:
    """The hub listed its Secrets before the spread existed (a coordinator's start, a new spread)."""
    model = world.World(ManualClock(T0))
    for name in ("web-credentials", "registry", "unrelated"):
        model.hub_object("Secret", f"shop/{name}", _secret(name))
    model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"})
    return model


def test_a_spread_that_comes_to_reference_a_secret_asks_for_it_and_holds_it_once_read() -> None:
    model = _world_with_secrets_first()
    objects = model.hub_objects
    assert all(objects.get("shop", "Secret", n) is None for n in ("web-credentials", "registry"))
    template = app_deployment()
    assert objects.unheld_secrets("shop", template) == ["registry", "web-credentials"]
    model.upsert_spread(builders.federated_spread(subsets=SUBSETS))
    model.set_target("shop/web", replicas=2, template=template)
    assert objects.take_wanted() == [("shop", "registry"), ("shop", "web-credentials")]
    assert objects.take_wanted() == []  # once each
    objects.want_again([("shop", "registry")])  # its read failed: asked again
    assert objects.take_wanted() == [("shop", "registry")]
    assert model.hub_object("Secret", "shop/registry", _secret("registry")) == {"shop/web"}
    assert objects.get("shop", "Secret", "registry") is not None
    assert objects.get("shop", "Secret", "unrelated") is None
    missing = objects.missing("shop/web", template, ())  # unheld still counts as present
    assert {ref.kind for ref in missing} == {"ConfigMap", "ServiceAccount"}


def test_read_ahead_of_an_event_is_held_then_settled() -> None:
    model = _world_with_secrets_first()
    objects = model.hub_objects
    objects.put("shop", "Secret", "web-credentials", _secret("web-credentials"), hold=True)
    objects.put("shop", "Secret", "unrelated", _secret("unrelated"), hold=True)
    model.upsert_spread(builders.federated_spread(subsets=SUBSETS))
    model.set_target("shop/web", replicas=2, template=app_deployment())
    objects.settle([("shop", "web-credentials"), ("shop", "unrelated")])
    assert objects.get("shop", "Secret", "web-credentials") is not None  # the spread took it
    assert objects.get("shop", "Secret", "unrelated") is None  # nothing did
    assert objects.exists("shop", "Secret", "unrelated")
    assert objects.take_wanted() == [("shop", "registry")]  # not read ahead: asked for


def test_a_secret_loses_its_data_when_the_last_spread_stops_referencing_it() -> None:
    model, _ = placed_world()
    model.hub_object("Secret", "shop/web-credentials", _secret("web-credentials"))
    edited = app_deployment()
    edited["spec"]["template"]["spec"]["containers"][0]["envFrom"] = []
    model.set_target("shop/web", replicas=3, template=edited)  # the template no longer uses it
    assert model.hub_objects.get("shop", "Secret", "web-credentials") is None
    assert model.hub_objects.exists("shop", "Secret", "web-credentials")
    model.set_target("shop/web", replicas=3, template=app_deployment())  # and back: read it again
    assert ("shop", "web-credentials") in model.hub_objects.take_wanted()
    model.hub_object("Secret", "shop/web-credentials", _secret("web-credentials"))
    model.delete_spread("shop/web")  # the spread is gone
    assert model.hub_objects.get("shop", "Secret", "web-credentials") is None


def test_a_spread_that_does_not_propagate_holds_no_secret() -> None:
    model, _ = placed_world(propagate=False)
    model.hub_object("Secret", "shop/web-credentials", _secret("web-credentials"))
    assert model.hub_objects.get("shop", "Secret", "web-credentials") is None
    assert model.hub_objects.take_wanted() == []


def test_other_kinds_are_kept_as_before() -> None:
    objects = hub_objects.HubObjects()
    objects.put("shop", "ConfigMap", "cfg", hub_object("ConfigMap", "cfg", data={"a": "1"}))
    assert objects.get("shop", "ConfigMap", "cfg") is not None
