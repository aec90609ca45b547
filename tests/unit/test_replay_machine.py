"""The soak replay tool reads a printed state-machine failure as pytest and hypothesis print it.

`tests/support/replay_machine.py` turns a `make soak` failure into the steps a regression test
replays; a parse that drops a step or a drawn value would replay a different interleaving.
"""

from __future__ import annotations

from tests.support import replay_machine

PRINTED = """\
E       Failing test case: <state machine>
E       state = FederationMachine()
E       Draw 1 (caps): [3]
E       state.start(items=[{'name': 's0',
E         'clusterSpread': 'Fill',
E         'clusters': ['dc1']}], data=data(...), strategy='Fixed', replicas=2, nodes=[0, 1, 0])
E       state.connected_agents_enforce_exactly_the_placement()
E       state.agent_disconnects(name='dc1')
E       Draw 2 (new caps): [None]
E       state.edit_subsets(data=data(...), items=[{'name': 's0', 'clusterSpread': 'Fill',
E         'clusters': ['aws']}])
E       state.teardown()
"""


def test_a_printed_failure_gives_its_steps_and_draws_in_order() -> None:
    steps = replay_machine.parse(PRINTED)
    assert [name for name, _ in steps] == ["start", "agent_disconnects", "edit_subsets", "teardown"]
    assert steps[0][1]["data"] == [3] and steps[0][1]["replicas"] == 2
    assert steps[2][1]["data"] == [None] and steps[2][1]["items"][0]["clusters"] == ["aws"]


def test_hypothesis_prefixes_read_the_same() -> None:
    hypothesis_form = PRINTED.replace("E       ", "    | ")
    assert replay_machine.parse(hypothesis_form) == replay_machine.parse(PRINTED)


def test_the_steps_replay_on_the_state_machine() -> None:
    assert replay_machine.replay(replay_machine.parse(PRINTED)) is None
