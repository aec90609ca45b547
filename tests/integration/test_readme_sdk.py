"""The README's SDK examples (synchronous and asyncio) run as written against a live coordinator.

Why: an example that drifted from the SDK is worse than none. The test takes the python blocks
that follow `<!-- sdk-example -->` and `<!-- sdk-aio-example -->` in README.md, substitutes only
the coordinator's address and the spread's namespace (the sandbox hub is shared, so each test has
its own namespace) and the directory of the certificates, runs them, and checks what they printed.
The coordinator serves mTLS with certificates from `fedspread certs`' own code
(`federation.certs.bundles`), as the README says.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
from typing import Any

import conftest
import hubside
import waiting

from federation.certs import bundles, transport
from federation.sandbox import hubsetup
from tests.support import builders, standin_agent

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- sdk-example -->"
AIO_MARKER = "<!-- sdk-aio-example -->"


def sdk_example(marker: str = MARKER) -> str:
    text = README.read_text()
    assert marker in text, f"README.md lost its SDK example marker {marker}"
    found = re.search(r"```python\n(.*?)```", text[text.index(marker):], re.DOTALL)
    assert found, f"no python block after the SDK example marker {marker}"
    return found.group(1)


def test_the_readme_sdk_example_runs_as_written(
        sandbox: Any, clusters: conftest.Clusters, namespace: str, local_ray: str,
        tmp_path: pathlib.Path) -> None:
    members = [f"readme-{i}" for i in (1, 2)]
    pki = tmp_path / "pki"
    bundles.make_ca(pki / "ca")
    bundles.make_coordinator(pki / "ca", pki / "coordinator")
    bundles.make_client(pki / "ca", pki / "alice", name="alice")
    for name in members:
        bundles.make_agent(pki / "ca", pki / name, cluster=name)
    tls = transport.TLSFiles.in_directory(pki / "coordinator")
    hubsetup.grant_placement_reader(sandbox.hub.kubeconfig, "alice")  # as deploy/README.md says
    with hubside.running_coordinator(sandbox, clusters, members=members, tls=tls) as process:
        target = f"127.0.0.1:{process.port}"
        agents = [standin_agent.StandInAgent(target, name=name, credentials=transport.channel_credentials(
            transport.TLSFiles.in_directory(pki / name))).start() for name in members]
        try:
            for agent in agents:
                waiting.wait_for(agent.link.synced.is_set, timeout=60, message=f"{agent.name} not synced")
            hub = hubside.Hub(clusters, namespace)
            key = hub.create(builders.deployment("web", 4, cpu="100m"), hubside.spread_body(
                "web", target="web", subsets=[{"name": "first", "clusters": [members[0]], "maxReplicas": 3},
                                              {"name": "rest", "clusters": [members[1]]}]))
            waiting.wait_for(lambda: [a.replicas(key) for a in agents] == [3, 1], timeout=30,
                             message=lambda: f"agents hold {[a.replicas(key) for a in agents]}")

            printed, printed_aio = io.StringIO(), io.StringIO()
            for marker, output in ((MARKER, printed), (AIO_MARKER, printed_aio)):
                code = (sdk_example(marker).replace("127.0.0.1:7443", target)
                        .replace('"shop/', f'"{namespace}/').replace('"pki/', f'"{pki}/'))
                uses_certificates = f'"{pki}/alice/tls.key"' in code
                assert uses_certificates, "the examples use the certificates of `fedspread certs`"
                with contextlib.redirect_stdout(output):
                    exec(compile(code, f"README.md ({marker})", "exec"), {"__name__": "readme"})
        finally:
            for agent in agents:
                agent.stop()
    lines = printed.getvalue().splitlines()
    assert lines[0] == f"{key}: 4 replicas {{'{members[0]}': 3, '{members[1]}': 1}}"
    assert lines[1].startswith("first 3 3 ") and lines[3].startswith("rest no cap 1 ")
    # 3 nodes x 40 pods of 100m cpu, less the 3 placed there and not running yet
    assert f"    {members[0]} free capacity: 117" in lines
    assert f"{members[0]} ready 3 nodes" in lines and f"{members[1]} ready 3 nodes" in lines
    assert any(line.startswith("12 replicas over every cluster:") for line in lines)
    assert f"now: {{'{members[0]}': 3, '{members[1]}': 1}}" in lines
    assert lines[-1].startswith("not found:") and f"{namespace}/missing" in lines[-1]
    assert printed_aio.getvalue().splitlines() == [
        f"async {key}: 4 replicas over 2 clusters", f"async now: {{'{members[0]}': 3, '{members[1]}': 1}}"]
