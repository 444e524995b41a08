"""Issue 40: a real agent asks a permission and the person's push service gets
the exact command, through Apprise, at an ntfy-compatible stand-in server on
loopback (tests/support/notify_sinks.py). One notice for the question however
often the agent repaints it; answering it (here with ``agentwrap answer``, as a
one-tap link or the chat does) runs the tool. Waits are deadlines only."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support.notify_sinks import NtfyStandIn

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import PERMISSION, answer, open_permission

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


@pytest.fixture
def ntfy() -> Iterator[NtfyStandIn]:
    server = NtfyStandIn()
    yield server
    server.close()


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_real_agents_permission_reaches_the_push_service_with_its_command(
        make_session: Make, agent: str, ntfy: NtfyStandIn) -> None:
    s = make_session(agent)
    s.write_config('[delivery]\nnotify_on_failure = false\n\n'
                   f'[notify]\ndesktop = false\nurls = ["{ntfy.url(token="tk_e2eSECRET")}"]\n'
                   '\n[host]\nname = "e2ebox"\n')
    q, _ = open_permission(s)
    _, tool, command = PERMISSION[agent]
    (got,) = s.wait_until(lambda: ntfy.arrived, 30, "the notice at the ntfy stand-in")
    print(f"{agent}: notice:\n{got.text}")
    assert f"Waiting: {s.name} on e2ebox" in got.text
    assert f"Command: {command}" in got.text
    labels = [o["label"] for item in q["questions"] for o in item["options"]]
    assert labels and all(label in got.text for label in labels), (labels, got.text)
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    assert len(ntfy.arrived) == 1, [a.text for a in ntfy.arrived]  # one per question
    assert tool
