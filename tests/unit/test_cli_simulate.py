"""`fedspread simulate` end to end on files: the stable JSON shape, the table, templates, stability."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from click import testing

from federation import cli

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "simulate"
CLUSTERS = str(EXAMPLES / "clusters.yaml")


def run(*args: str) -> testing.Result:
    return testing.CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def simulate_json(*args: str) -> dict[str, object]:
    result = run("simulate", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [(7, [2, 1, 4]), (10, [2, 2, 6]), (5, [1, 1, 3])],
    ids=["20/20/60 of 7 is 2/1/4", "of 10 is 2/2/6", "of 5 is 1/1/3"],
)
def test_percentages_reproduce_design_examples(replicas: int, expected: list[int]) -> None:
    data = simulate_json("-f", str(EXAMPLES / "ratio-1-1-3.yaml"), "--clusters", CLUSTERS,
                         "--replicas", str(replicas))
    assert [s["replicas"] for s in data["subsets"]] == expected  # type: ignore[attr-defined]
    assert data["unplaced"] == 0


def test_template_in_the_same_file_gives_requests_and_replicas() -> None:
    data = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS)
    # dc1 has 2 nodes with 6 free cpus each: 12 one-cpu pods; the other 28 overflow to eu 3:1.
    assert data == {
        "replicas": 40, "unplaced": 0,
        "clusters": {"dc1": 12, "aws-eu": 21, "gcp-eu": 7},
        "subsets": [{"name": "onprem", "replicas": 12, "clusters": {"dc1": 12},
                     "reasons": ["capacity: only 12 more pods fit (dc1: 12 fit (cpu))"]},
                    {"name": "eu", "replicas": 28, "clusters": {"aws-eu": 21, "gcp-eu": 7}, "reasons": []}],
    }


def test_separate_template_file_overrides(tmp_path: pathlib.Path) -> None:
    template = tmp_path / "deploy.yaml"
    template.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 6\n"
        "  template:\n    spec:\n      containers:\n      - name: main\n"
        "        resources: {requests: {cpu: '3'}}\n"
    )
    data = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS,
                         "--template", str(template))
    # 3-cpu pods: two per dc1 node (6 free cpus), so dc1 takes 4 and eu the remaining 2.
    assert data["clusters"] == {"dc1": 4, "aws-eu": 2, "gcp-eu": 0}


def test_without_template_only_the_pods_limit_binds() -> None:
    data = simulate_json("-f", str(EXAMPLES / "ratio-1-1-3.yaml"), "--clusters", CLUSTERS, "--replicas", "3")
    assert data["replicas"] == 3


def test_current_placement_is_kept(tmp_path: pathlib.Path) -> None:
    first = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS)
    current = tmp_path / "current.json"
    current.write_text(json.dumps(first))
    down = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS,
                         "--current", str(current), "--replicas", "20")
    # Scale-down takes from the last subset first: eu loses 20, on-prem keeps its 12.
    assert down["clusters"] == {"dc1": 12, "aws-eu": 6, "gcp-eu": 2}


def test_a_noschedule_cordon_keeps_the_current_replicas(tmp_path: pathlib.Path) -> None:
    first = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS)
    assert first["clusters"] == {"dc1": 12, "aws-eu": 21, "gcp-eu": 7}
    current = tmp_path / "current.json"
    current.write_text(json.dumps(first))
    snapshot = yaml.safe_load((EXAMPLES / "clusters.yaml").read_text())
    (aws,) = [c for c in snapshot["clusters"] if c["name"] == "aws-eu"]
    aws["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
    cordoned = tmp_path / "clusters.yaml"
    cordoned.write_text(yaml.safe_dump(snapshot))
    args = ("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", str(cordoned),
            "--current", str(current), "--replicas", "44")
    up = simulate_json(*args)
    # aws-eu keeps its 21 and takes none of the 4 new replicas; they go to dc1, first in order (the
    # snapshot's requests do not include the spread's own 12 there, so it shows room for 4 more).
    assert up["clusters"] == {"dc1": 16, "aws-eu": 21, "gcp-eu": 7}
    down = simulate_json(*args[:-1], "30")
    # Scale-down follows the spread's order, cordon or not: eu (the last subset) gives up 10.
    assert down["clusters"]["dc1"] == 12 and down["clusters"]["aws-eu"] < 21
    table = testing.CliRunner(env={"COLUMNS": "400"}).invoke(cli.main, ["simulate", *args, "-o", "table"])
    assert table.exit_code == 0, table.output
    assert "aws-eu: cordoned (NoSchedule): keeps its 21 running, takes no new replicas" in table.stdout


def test_the_failover_brake_keeps_replicas_when_most_clusters_are_unready(tmp_path: pathlib.Path) -> None:
    first = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS)
    current = tmp_path / "current.json"
    current.write_text(json.dumps(first))
    snapshot = yaml.safe_load((EXAMPLES / "clusters.yaml").read_text())

    def unready(*names: str) -> str:
        for entry in snapshot["clusters"]:
            entry["ready"] = entry["name"] not in names
        path = tmp_path / f"unready-{'-'.join(names)}.yaml"
        path.write_text(yaml.safe_dump(snapshot))
        return str(path)

    args = ("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--current", str(current), "--replicas", "40")
    # Two of three silent: the fault is probably the coordinator's; nothing moves.
    assert simulate_json(*args, "--clusters", unready("dc1", "aws-eu"))["clusters"] == first["clusters"]
    # One of three is a real loss: its replicas go to the others.
    moved = simulate_json(*args, "--clusters", unready("aws-eu"))["clusters"]
    assert isinstance(moved, dict) and moved["aws-eu"] == 0 and sum(moved.values()) == 40, moved


def test_a_fixed_spread_with_adaptive_settings_is_refused(tmp_path: pathlib.Path) -> None:
    documents = list(yaml.safe_load_all((EXAMPLES / "prefer-onprem.yaml").read_text()))
    documents[-1]["spec"]["scheduleStrategy"]["type"] = "Fixed"
    spread = tmp_path / "fixed.yaml"
    spread.write_text(yaml.safe_dump_all(documents))
    result = run("simulate", "-f", str(spread), "--clusters", CLUSTERS)
    assert result.exit_code == 2, result.output
    assert "spec.scheduleStrategy.adaptive: adaptive settings apply only to type Adaptive" in result.output


def test_table_output_names_caps_and_reasons() -> None:
    result = run("simulate", "-f", str(EXAMPLES / "ratio-1-1-3.yaml"), "--clusters", CLUSTERS,
                 "--replicas", "7", "-o", "table")
    assert result.exit_code == 0, result.output
    assert "2 (20%)" in result.stdout
    assert "cap 4 reached" in result.stdout
    assert "placed 7, unplaced 0" in result.stdout


def test_missing_replicas_is_a_usage_error() -> None:
    result = run("simulate", "-f", str(EXAMPLES / "ratio-1-1-3.yaml"), "--clusters", CLUSTERS)
    assert result.exit_code == 2
    assert "--replicas" in result.output


@pytest.mark.parametrize("command", [[], ["simulate"], ["crds"]], ids=["top", "simulate", "crds"])
def test_every_command_has_help(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.output and len(result.output.splitlines()) > 5


def test_a_subset_patch_is_fitted() -> None:
    """examples/simulate/patched-onprem.yaml: dc1's pods are patched to 4 cpus, so dc1's 2 nodes
    with 6 free cpus take 2 of them, not the 12 one-cpu pods the template alone would give."""
    data = simulate_json("-f", str(EXAMPLES / "patched-onprem.yaml"), "--clusters", CLUSTERS)
    assert data["clusters"] == {"dc1": 2, "aws-eu": 14, "gcp-eu": 4}
    result = testing.CliRunner(env={"COLUMNS": "200"}).invoke(
        cli.main, ["simulate", "-f", str(EXAMPLES / "patched-onprem.yaml"), "--clusters", CLUSTERS,
                   "-o", "table"])
    assert result.exit_code == 0, result.output
    assert "dc1: 2 fit (cpu)" in " ".join(result.output.replace("│", " ").split())


def test_the_per_arch_example_gives_its_documented_answer() -> None:
    """examples/per-arch-patches.yaml (two subsets, each pinned to its architecture and patched):
    the answer its header documents for the demo's federation, arm64 2 on aws-eu, amd64 2 on gcp-eu."""
    data = simulate_json("-f", str(EXAMPLES.parent / "per-arch-patches.yaml"), "--clusters", CLUSTERS)
    assert data["clusters"] == {"aws-eu": 2, "dc1": 0, "gcp-eu": 2}
    assert {s["name"]: s["clusters"] for s in data["subsets"]} == {"arm64": {"aws-eu": 2},
                                                                  "amd64": {"gcp-eu": 2}}


@pytest.mark.parametrize("policy", ["Never", "WhenRoom"])
def test_a_possible_failback_is_shown_with_current(tmp_path: pathlib.Path, policy: str) -> None:
    """dc1 had room for 4 when the 40 replicas were placed; now it has room for 12. `--current`
    shows the failback `spec.rebalance` would make: under Never the placement stays (nothing moves
    by itself) and the entry says what `fedspread rebalance` would move; under WhenRoom the
    placement shown is the one the moves lead to."""
    docs = list(yaml.safe_load_all((EXAMPLES / "prefer-onprem.yaml").read_text()))
    for doc in docs:
        if doc.get("kind") == "FederatedSpread":
            doc["spec"]["rebalance"] = {"policy": policy, "maxSurge": 2}
    spread_file = tmp_path / "spread.yaml"
    spread_file.write_text(yaml.safe_dump_all(docs))
    current = tmp_path / "current.json"
    current.write_text(json.dumps({"subsets": [{"name": "onprem", "clusters": {"dc1": 4}},
                                               {"name": "eu", "clusters": {"aws-eu": 27, "gcp-eu": 9}}]}))
    data = simulate_json("-f", str(spread_file), "--clusters", CLUSTERS, "--current", str(current))
    moves = data["rebalance"]["moves"]  # type: ignore[index]
    assert data["rebalance"]["policy"] == policy  # type: ignore[index]
    assert {m["to"] for m in moves} == {"dc1"} and sum(m["replicas"] for m in moves) == 8, moves
    if policy == "Never":
        assert data["clusters"] == {"dc1": 4, "aws-eu": 27, "gcp-eu": 9}
    else:
        assert data["clusters"]["dc1"] == 12 and sum(data["clusters"].values()) == 40  # type: ignore[attr-defined]
    table = run("simulate", "-f", str(spread_file), "--clusters", CLUSTERS, "--current", str(current),
                "-o", "table")
    assert table.exit_code == 0 and f"rebalance ({policy})" in table.output, table.output


def test_no_rebalance_entry_when_nothing_would_move(tmp_path: pathlib.Path) -> None:
    first = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS)
    current = tmp_path / "current.json"
    current.write_text(json.dumps(first))
    again = simulate_json("-f", str(EXAMPLES / "prefer-onprem.yaml"), "--clusters", CLUSTERS,
                          "--current", str(current))
    assert "rebalance" not in again and again["clusters"] == first["clusters"]
