"""GitHub Copilot CLI's native hooks, end to end on the real CLI (issue 22).

``agentwrap run`` registers them as a plugin loaded for this launch only
(``--plugin-dir`` naming a dir in agentwrap's private launch dir;
agentwrap/agents/copilot.py):

* the session says which channel is active (``state --explain``), nothing of
  agentwrap's goes into the person's Copilot dir (no hooks, no plugin
  installed), a prompt's turn is told by the hooks (prompt submitted, turn end)
  and noted once, and a permission dialog is told by the ``notification`` hook
  (``permission_prompt``): these ride Copilot's one start in
  tests/e2e/test_copilot_opencode_qwen.py (``check_native_turn``,
  ``check_permission_told``);
* a read-only command Copilot runs unasked: its ``permissionRequest`` hook
  fires all the same; the exact request is kept, and the session never reads
  waiting (the dialog with the hook's exact command is
  tests/e2e/test_hook_questions.py's).

* a message handed over between tool calls with ``--ack``: the model's ACK is
  read from the transcript the ``agentStop`` hook names (its payload carries no
  reply), and the message ends acknowledged through the hook.

(The hand-over inside a tool loop is tests/e2e/test_native_channels.py's.)
Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import _RE_ACK, Plan, ToolSpec
from .test_native_channels import CALLS, LoopServer, _bodies, _repoint

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def start(make_session: Make) -> AgentSession:
    s = make_session("copilot")
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st.get("channels") == ["hooks"], st
    return s


class AckingLoopServer(LoopServer):
    """The tool loop of :class:`LoopServer`; at its end the model answers the
    ACK a hook asked for inside a tool result (the stock server reads only the
    person's text, and Copilot puts the hook's context in the tool message)."""

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        plan = super()._plan(api, body, turn, tools, side)
        if side is None and plan.tool is None and turn.tool_result:
            said = json.dumps(body, ensure_ascii=False).replace('\\"', '"')
            asked = _RE_ACK.findall(said)
            if asked:
                plan.text = f"Noted.\n\nACK {asked[-1]}"
        return plan


# native: the supervisor reads the transcript after the hook let the agent go;
# python: the Python hook does, while Copilot waits for it
@pytest.mark.parametrize("client", ["native", "python"])
def test_copilot_ack_to_a_hook_hand_over_is_read_from_the_transcript(
    make_session: Make, client: str,
) -> None:
    s = make_session("copilot")
    server = AckingLoopServer().start()
    s.server.stop()
    s.server = server
    _repoint(s, server)
    if client == "python":
        s.env["AGENTWRAP_HOOK_CLIENT"] = "python"
    server.calls = [(n, {k: str(s.workdir) if v == "{workdir}" else v for k, v in a.items()})
                    for n, a in CALLS["copilot"]]
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st.get("channels") == ["hooks"], st
    s.type_keys("Look around please. [[loop]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: sum(b[2] for b in _bodies(s)) >= 1, 60, "first tool result")
    mid = s.send_id("deploy finished: confirm please", "--ack")
    s.wait_until(lambda: s.message(mid)["status"] == "acknowledged", 90,
                 "the message acknowledged")
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        entry = svc.message(mid)
    token = entry.message.batch_id
    handed = [b for b in _bodies(s) if f'Reply \\"ACK {token}\\"' in b[1]]
    assert handed and all(b[2] for b in handed), "not handed over in a tool result"
    assert any(re.search(rf"ACK {token}\b", r.reply or "") for r in s.server.requests())
    assert [a.channel for a in entry.attempts] == ["hook"], entry.attempts
    assert entry.message.detail == "acknowledged (seen) through hook", entry.message.detail


def test_copilot_a_read_only_commands_permission_request_asks_nobody(make_session: Make) -> None:
    from agentwrap.answers.hook_questions import read_question
    from agentwrap.service import Service

    s = start(make_session)
    (s.workdir / "notes.txt").write_text("hello from notes\n")
    call = json.dumps({"command": "cat notes.txt", "description": "read the notes"})
    sent = s.send(f"[[call: bash {call}]] read it", "--wait", "--timeout", "90")
    assert sent.returncode == 0, sent.stderr
    hq = s.wait_until(lambda: read_question(s._paths(), s.name), 60, "the hook's request")
    assert (hq.tool, hq.command, hq.decision) == ("bash", "cat notes.txt", ""), hq
    s.wait_until(lambda: any("hello from notes" in b[1] and b[2] for b in _bodies(s)), 60,
                 "the command's output at the model")
    st = s.wait_state("ready", timeout=60)
    assert st.get("question") is None, st
    with Service.open(s._paths()) as svc:
        seen = [e.data.get("state") for e in svc.events(after_id=0, session=s.name,
                                                         kinds=["session.state"])]
    assert "waiting_input" not in seen, seen
