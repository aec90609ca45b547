"""docs/api.md is what the models render (regenerate with `fedspread crds`), and it covers them."""

from __future__ import annotations

import pathlib

from federation.api import cluster, reference, spread

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_the_committed_reference_matches_the_models() -> None:
    assert DOC.read_text() == reference.render(), "docs/api.md is stale: run `fedspread crds`"


def test_every_field_of_a_spread_is_documented_with_its_yaml_name() -> None:
    text = reference.render()
    models = (spread.FederatedSpreadSpec, spread.Subset, spread.AdaptiveStrategy, cluster.MemberClusterSpec)
    for model in models:
        assert f"## {model.__name__}\n" in text
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in text, (model.__name__, name)
    assert "`Fill` \\| `Balance` \\| `Capacity`" in text  # enum values, pipes escaped for the table
    assert "[Subset](#subset)" in text  # types link to their models
