"""The demo's webhooks answer only their apiservers: the command lines `Federation` builds.

Why: `fedspread demo` is the first federation a user runs; it must turn on every protection the
sandbox allows. Every sandbox apiserver presents a client certificate of the sandbox CA to webhooks
(`federation.sandbox.admission`), so each agent and the coordinator are started with
`--webhook-client-ca` (that CA) and `--webhook-allowed-cn` (its name); the coordinator also serves
its validating webhook (with its loopback certificate) and the hub is pointed at it with
deploy/coordinator/webhook.yaml's registration. That a forged review then gets 401 is checked on
the running demo (tests/integration/test_e2e_demo.py) and, per flag, by test_webhook_client_auth*.
"""

from __future__ import annotations

import base64
import pathlib

import click
import pytest

from federation.cli import root
from federation.demo import environment
from federation.sandbox import admission, hubsetup, state


@pytest.fixture
def demo(tmp_path: pathlib.Path) -> environment.Federation:
    """A demo Federation with a recorded sandbox (nothing started)."""
    federation = environment.Federation(tmp_path, members=2)
    records = [state.ClusterRecord(name=name, role=role, port=6443 + i, kubeconfig=f"/k/{name}")
               for i, (name, role) in enumerate([("hub", "hub"), ("dc1", "member"), ("aws-eu", "member")])]
    federation.sandbox = state.SandboxState(directory=str(tmp_path / "sandbox"), etcd_port=2379,
                                            clusters=records, ca_file=str(tmp_path / "sandbox/pki/ca.crt"))
    return federation


def flag(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, f"{name} given {argv.count(name)} times in {argv}"
    return argv[argv.index(name) + 1]


def test_every_agent_takes_reviews_from_its_apiserver_only(demo: environment.Federation) -> None:
    assert demo.sandbox is not None
    for member in ("dc1", "aws-eu"):
        argv = demo.agent_argv(member)
        assert flag(argv, "--webhook-client-ca") == demo.sandbox.ca_file
        assert flag(argv, "--webhook-allowed-cn") == admission.WEBHOOK_CLIENT_CN
        assert flag(argv, "--cluster") == member


def test_the_coordinator_serves_its_webhook_to_the_hub_apiserver_only(demo: environment.Federation) -> None:
    assert demo.sandbox is not None
    argv = demo.coordinator_argv()
    assert flag(argv, "--webhook-client-ca") == demo.sandbox.ca_file
    assert flag(argv, "--webhook-allowed-cn") == admission.WEBHOOK_CLIENT_CN
    assert flag(argv, "--webhook-port") == str(demo.webhook_port)
    served = demo.tls(environment.COORDINATOR)
    assert (flag(argv, "--webhook-cert"), flag(argv, "--webhook-key")) == (str(served.cert), str(served.key))


def test_the_commands_accept_the_demo_s_command_lines(demo: environment.Federation,
                                                     tmp_path: pathlib.Path) -> None:
    """Each command line parses (a renamed flag or a bad value would only show when the demo runs)."""
    assert demo.sandbox is not None
    pathlib.Path(demo.sandbox.ca_file).parent.mkdir(parents=True)
    pathlib.Path(demo.sandbox.ca_file).write_text("ca")
    for name in (environment.COORDINATOR, "dc1"):
        files = demo.tls(name)
        files.cert.parent.mkdir(parents=True, exist_ok=True)
        for path in (files.cert, files.key, files.ca):
            path.write_text(name)
    for argv in (demo.coordinator_argv(), demo.agent_argv("dc1")):
        assert argv[1:3] == ["-m", "federation.cli"]
        group = root.main
        command = group.get_command(click.Context(group), argv[3])
        assert command is not None
        parsed = command.make_context(argv[3], argv[4:]).params
        assert parsed["webhook_client_ca"] == pathlib.Path(demo.sandbox.ca_file)
        assert parsed["webhook_allowed_cns"] == (admission.WEBHOOK_CLIENT_CN,)


def test_the_hub_is_pointed_at_the_coordinator_with_the_shipped_registration() -> None:
    config = hubsetup.coordinator_webhook("https://127.0.0.1:9555", ca_pem=b"PEM")
    assert config["kind"] == "ValidatingWebhookConfiguration"
    assert [hook["clientConfig"] for hook in config["webhooks"]] == [
        {"url": "https://127.0.0.1:9555/validate", "caBundle": base64.b64encode(b"PEM").decode()}] * 3
    assert {hook["failurePolicy"] for hook in config["webhooks"]} == {"Ignore"}


def test_the_agents_read_usage_at_the_interval_asked_for_and_at_their_default_otherwise(
        demo: environment.Federation) -> None:
    """The tests' federation asks for a shorter `--usage-interval`; the demo leaves the agent's own."""
    assert "--usage-interval" not in demo.agent_argv("dc1")
    demo.usage_interval = 5
    assert flag(demo.agent_argv("dc1"), "--usage-interval") == "5"
