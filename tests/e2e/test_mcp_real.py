"""agentwrap's MCP server on the real agents: the model server scripts a call
of ``check_input_queue`` (whatever name the agent gives the tool), the agent
calls agentwrap's server, and the queued message reaches the model in the tool
result: ``delivered`` through channel ``mcp`` with a ``session.consumed``
event (``session.input.consumed`` on the HTTP stream), never also typed or
handed over by a hook.

The message is sent while the agent waits on its first model request (held
``MCP_DELAY_S``), before any tool ran: no hook has had a chance at it, and the
engine types nothing into a busy agent whose hooks take messages.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import pytest

from .conftest import AgentSession
from .test_native_channels import MCP_DELAY_S, LoopServer, _attempts, _bodies, _repoint

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def _session(make_session: Make, agent: str) -> AgentSession:
    s = make_session(agent)
    server = LoopServer().start()
    s.server.stop()
    s.server = server
    _repoint(s, server)
    s.write_config("[run]\nmcp = true\n")
    return s


def _tool_names(s: AgentSession) -> list[str]:
    names: list[str] = []
    for r in s.server.requests():
        if r.side or not isinstance(r.body, dict):
            continue
        for t in r.body.get("tools") or []:
            if isinstance(t, dict):
                names.append(str(t.get("name") or (t.get("function") or {}).get("name")))
                for decl in t.get("functionDeclarations") or []:
                    names.append(str(decl.get("name")))
    return names


def _items_with(body: str, needle: str) -> int:
    """How many items of a request's conversation carry ``needle`` (Copilot CLI
    1.0.102 puts a tool's text and its structured content both in one tool
    result: the message is there twice, in one item)."""
    data = json.loads(body)
    items = [*(data.get("messages") or []), *(data.get("input") or []),
             *(data.get("contents") or [])]
    return sum(needle in json.dumps(item, ensure_ascii=False) for item in items)


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "copilot", "qwen"])
def test_the_agent_calls_check_input_queue_and_gets_the_message(make_session: Make, agent: str) -> None:
    s = _session(make_session, agent)
    own = {"copilot": s.home / ".copilot" / "mcp-config.json",
           "qwen": s.home / ".qwen" / "settings.json"}.get(agent)
    before = own.read_bytes() if own is not None and own.exists() else None
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "mcp" in (st.get("channels") or []), st
    s.type_keys("Anything for me? [[mcp]]")
    time.sleep(0.5)
    s.press("Enter")
    if agent == "codex":
        # On its app-server (the default) Codex's thread is idle, so the session
        # ready, at once, while its MCP servers still connect: a prompt typed that
        # early reaches a model offered no MCP tool (Codex has no tool to wait for
        # them). A person would ask again; so does this test, a few times at most.
        for asked in range(1, 4):
            s.wait_until(lambda n=asked: s.server.mcp_pending or (
                sum("[[mcp]]" in b[1] for b in _bodies(s)) >= n
                and s.state()["state"] == "ready"), 60, "the turn asked for the MCP tool")
            if s.server.mcp_pending:
                break
            s.type_keys("Anything for me? [[mcp]]")
            time.sleep(0.5)
            s.press("Enter")
    s.wait_until(lambda: s.server.mcp_pending, 60, "the scripted check_input_queue call")
    marker = f"MC{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    mid = s.send_id(f"deploy {marker} finished")
    offered = sorted({n for n in _tool_names(s) if "agentwrap" in n or "input_queue" in n})
    s.wait_until(lambda: any(marker in b[1] and b[2] for b in _bodies(s)), 60,
                 "the tool result at the model")
    s.wait_state("ready", timeout=60)
    status, channels_used = _attempts(s, mid)
    assert status in ("delivered", "acknowledged"), status
    assert channels_used == ["mcp"], channels_used
    carrying = [b for b in _bodies(s) if marker in b[1]]
    first = carrying[0]
    assert all(b[2] for b in carrying)  # only ever inside the tool result, never a user turn
    assert _items_with(_bodies(s)[-1][1], marker) == 1  # one tool result, in the last request too
    if own is not None:  # registered for the launch: the person's own file as it was
        assert (own.read_bytes() if own.exists() else None) == before, own
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        consumed = [e for e in svc.events(after_id=0) if e.kind == "session.consumed"]
    assert any(e.data.get("channel") == "mcp" and mid in e.data.get("ids", []) for e in consumed)
    print(f"{agent}: enqueue -> tool result at the model: {first[0] - t0:.2f} s"
          f" (first reply held {MCP_DELAY_S} s); tools offered: {offered}")
