"""`fedspread simulate` on bad input: exit 2, every problem with its field path on stderr, no traceback."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from federation import cli

EXIT_INVALID = 2

SNAPSHOT = {
    "clusters": [
        {
            "name": "dc1",
            "labels": {"topology.fedspread.io/region": "eu-west"},
            "nodePools": [{"count": 3, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        },
        {
            "name": "aws-eu",
            "labels": {"topology.fedspread.io/region": "eu-west"},
            "nodePools": [{"count": 5, "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}],
        },
    ]
}


def spread_doc(**subset_changes: Any) -> dict[str, Any]:
    onprem = {"name": "onprem", "clusters": ["dc1"], "maxReplicas": 4, **subset_changes}
    return {
        "apiVersion": "fedspread.io/v1alpha1",
        "kind": "FederatedSpread",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "targetRef": {"name": "web"},
            "subsets": [onprem, {"name": "cloud", "clusters": ["aws-eu"]}],
        },
    }


def simulate(tmp_path: pathlib.Path, spread: Any, snapshot: Any = None, *extra: str) -> Result:
    spread_file = tmp_path / "spread.yaml"
    spread_file.write_text(spread if isinstance(spread, str) else yaml.safe_dump(spread))
    clusters_file = tmp_path / "clusters.yaml"
    data = SNAPSHOT if snapshot is None else snapshot
    clusters_file.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return CliRunner().invoke(
        cli.main,
        ["simulate", "-f", str(spread_file), "--clusters", str(clusters_file), *extra],
    )


def assert_invalid(result: Result, *paths: str) -> None:
    assert result.exit_code == EXIT_INVALID, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for path in paths:
        assert path in result.stderr, f"{path} not in stderr:\n{result.stderr}"


def test_a_valid_spread_simulates(tmp_path: pathlib.Path) -> None:
    result = simulate(tmp_path, spread_doc(), None, "--replicas", "6")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)


def test_every_problem_path_is_printed(tmp_path: pathlib.Path) -> None:
    doc = spread_doc(maxReplicas="150%", clusterSpread="RoundRobin")
    doc["spec"]["scheduleStrategy"] = {"type": "Random"}
    result = simulate(tmp_path, doc, None, "--replicas", "6")
    assert_invalid(
        result,
        "spec.subsets[0].maxReplicas",
        "spec.subsets[0].clusterSpread",
        "spec.scheduleStrategy.type",
    )
    assert str(tmp_path / "spread.yaml") in result.stderr
    assert result.stdout == ""


def test_cross_field_problems_are_printed(tmp_path: pathlib.Path) -> None:
    doc = spread_doc(name="cloud")
    doc["spec"]["subsets"][1]["maxReplicas"] = "50%"
    result = simulate(tmp_path, doc, None, "--replicas", "6")
    assert_invalid(result, "spec.subsets[1].name", "spec.subsets[1].maxReplicas")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("spec:\n  subsets: [onprem\n", "not valid YAML", id="yaml-syntax-error"),
        pytest.param("", "FederatedSpread", id="empty-file"),
    ],
)
def test_unreadable_spread_files(tmp_path: pathlib.Path, text: str, fragment: str) -> None:
    result = simulate(tmp_path, text, None, "--replicas", "6")
    assert_invalid(result)
    assert fragment in result.stderr


def test_missing_spread_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "clusters.yaml").write_text(yaml.safe_dump(SNAPSHOT))
    result = CliRunner().invoke(
        cli.main,
        ["simulate", "-f", str(tmp_path / "nowhere.yaml"),
         "--clusters", str(tmp_path / "clusters.yaml"), "--replicas", "6"],
    )
    assert_invalid(result)
    assert "cannot read" in result.stderr


def test_invalid_capacity_snapshot(tmp_path: pathlib.Path) -> None:
    snapshot = {"clusters": [{"name": "dc1", "nodePools": [{"allocatable": {"cpu": "lots"}}]}]}
    result = simulate(tmp_path, spread_doc(), snapshot, "--replicas", "6")
    assert_invalid(result, "clusters[0].nodePools[0].allocatable.cpu")
    assert str(tmp_path / "clusters.yaml") in result.stderr


def test_coordinator_refuses_an_election_timing_that_could_let_two_lead() -> None:
    result = CliRunner().invoke(cli.main, [
        "coordinator", "--insecure", "--no-ray", "--leader-elect",
        "--lease-duration-seconds", "5", "--renew-deadline-seconds", "10"])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "longer than the renew deadline" in result.output
    assert "Traceback" not in result.output
