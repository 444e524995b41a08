"""Continuity on a real agent: a session killed with SIGKILL mid-turn leaves its
handoff record, and the model's first request of the next ``agentwrap run`` in
the same project carries the handoff with the right facts: the goal (the first
prompt), the file the killed session changed, and the message still queued
(typed once the new agent is ready: it starts that first turn, nobody typing).

The model server scripts the turn: on the prompt carrying ``EDIT_MARK`` the
model calls the agent's file-writing tool on ``calc.py``; the request that
brings the tool result is held (the agent stays busy), and the session is
killed then: its agent and its supervisor, ``kill -9``, and its tmux server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import ModelServer, Plan, ToolSpec

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
EDIT_MARK = "please-edit-now"
HOLD_S = 600.0  # the request after the edit is never answered: the session is killed first
#: The tool that writes a file, and its arguments, per agent.
WRITE: dict[str, tuple[str, Callable[[Path], dict[str, Any]]]] = {
    "claude": ("Write", lambda f: {"file_path": str(f), "content": "def add(a, b):\n"
                                   "    return a + b\n"}),
    "gemini": ("write_file", lambda f: {"file_path": str(f), "content": "def add(a, b):\n"
                                        "    return a + b\n"}),
}


class EditThenHold(ModelServer):
    """Once: a file write on the prompt with ``EDIT_MARK``, then the tool result's
    request held ``HOLD_S``. Everything else: the stock server's answers."""

    def __init__(self, agent: str, target: Path) -> None:
        super().__init__()
        self.agent, self.target = agent, target
        self.stage = "armed"  # -> ("read" ->) "edited" -> "held"

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        if side is None and self.stage == "armed" and EDIT_MARK in turn.text \
                and not turn.tool_result and self.agent == "claude":
            # Claude Code's Write refuses a file it has not read in this session
            tool = next((t for t in tools if t.name == "Read"), None)
            assert tool is not None, [t.name for t in tools]
            self.stage = "read"
            return Plan(tool=tool, tool_args={"file_path": str(self.target)})
        if side is None and (
                (self.stage == "armed" and EDIT_MARK in turn.text and not turn.tool_result)
                or (self.stage == "read" and turn.tool_result)):
            name, args = WRITE[self.agent]
            tool = next((t for t in tools if t.name == name), None)
            assert tool is not None, [t.name for t in tools]
            self.stage = "edited"
            return Plan(tool=tool, tool_args=args(self.target))
        if side is None and self.stage == "edited" and turn.tool_result:
            self.stage = "held"
            return Plan(text="done", delay=HOLD_S)
        return super()._plan(api, body, turn, tools, side)


def _bodies(s: AgentSession, after: float) -> list[str]:
    """The main model requests made after ``after``, as JSON text, oldest first."""
    return [json.dumps(r.body, ensure_ascii=False) for r in s.server.requests()
            if not r.side and r.body is not None and r.time > after
            and r.api in ("anthropic", "responses", "gemini", "chat")]


def _prepare(make_session: Make, agent: str) -> tuple[AgentSession, EditThenHold]:
    from .agents import prepare_agent

    s = make_session(agent)
    target = s.workdir / "calc.py"
    server = EditThenHold(agent, target).start()
    s.server.stop()
    s.server = server
    launch = prepare_agent(s.agent, s.home, s.workdir, server.url)
    keep = {k: v for k, v in s.env.items() if k.startswith(("XDG_", "PYTHONPATH", "AGENTWRAP_"))}
    s.env = {**launch.env, **keep}
    s.argv = list(launch.argv)
    if agent == "claude":  # the write is allowed without a dialog
        settings = s.home / ".claude" / "settings.json"
        data = json.loads(settings.read_text())
        data["permissions"] = {"allow": ["Write", "Edit"]}
        settings.write_text(json.dumps(data))
    git = ["git", "-C", str(s.workdir)]
    if not (s.workdir / ".git").exists():
        subprocess.run([*git, "init", "-q"], check=True, env=s.env)
    target.write_text("def add(a, b):\n    return a - b\n")
    subprocess.run([*git, "add", "calc.py"], check=True, env=s.env)
    subprocess.run([*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "calc"],
                   check=True, env=s.env)
    return s, server


def _record(s: AgentSession) -> dict[str, Any] | None:
    from agentwrap.continuity.store import ContinuityStore, project_path

    recs = ContinuityStore(s._paths()).records(project_path(s.workdir))
    return recs[-1].to_json() if recs else None


def _kill_everything(s: AgentSession) -> None:
    """kill -9 the supervisor, then the agent's process tree; then the tmux server:
    nothing of agentwrap's gets to write another word."""
    from agentwrap.sessions.registry import Registry
    from agentwrap.terminal.proctree import descendants

    reg = Registry(s._paths().db_path)
    try:
        sup = reg.get(s.name).supervisor_pid
    finally:
        reg.close()
    pid = s.agent_pid()
    assert pid and sup
    for p in [sup, pid, *descendants(pid)]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    s.tmux("kill-server")


@pytest.mark.parametrize("agent", ["claude"])
def test_a_killed_session_hands_over_to_the_next_run(make_session: Make, agent: str) -> None:
    s, server = _prepare(make_session, agent)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "hooks" in (st.get("channels") or []), st
    goal = f"Fix the add function in calc.py, it subtracts. {EDIT_MARK}"
    s.type_keys(goal)
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: server.stage == "held", 90, "the edit made, the next request held")
    assert "return a + b" in (s.workdir / "calc.py").read_text()
    marker = f"PENDING{uuid.uuid4().hex[:8]}"
    mid = s.send_id(f"{marker}: the CI job on main is red too")

    def written() -> dict[str, Any] | None:
        rec = _record(s)
        ok = rec is not None and rec["goal"].startswith("Fix the add function") \
            and rec["files_changed"] == ["calc.py"] \
            and any(marker in m["preview"] for m in rec["pending"])
        return rec if ok else None

    rec = s.wait_until(written, 60, "the handoff record written mid-turn")
    assert rec["state"] == "busy", rec["state"]
    assert s.message(mid)["status"] == "pending"
    _kill_everything(s)
    time.sleep(0.5)
    assert written() is not None  # the record outlived the kill as it was

    # the next run in the same project, same session name
    restart = time.time()
    s.start()
    st = s.wait_state("ready", "busy", timeout=90)
    assert "hooks" in (st.get("channels") or []), st
    # The handoff is handed over by the SessionStart hook; the message still
    # queued was sent for the agent to act on, so it is typed once the agent
    # is ready and starts the first turn of its own (issue 25: nobody may be
    # at the keyboard), which carries the handoff to the model with it.
    s.wait_until(lambda: _bodies(s, restart), 90, "the first model request of the new session")
    first = _bodies(s, restart)[0]
    assert "handoff from the previous session" in first, first[:3000]
    assert "Fix the add function in calc.py" in first
    assert "calc.py" in first and marker in first
    assert first.count(marker) == 1  # as itself, not also quoted in the handoff
    assert "middle of a turn" in first or "without a clean exit" in first
    handed = json.loads((s._paths().state_dir / "continuity" / "handoff" /
                         f"{s.name}.json").read_text())
    assert handed["channel"] == "hook" and handed["handed_at"], handed
    s.wait_until(lambda: json.loads((s._paths().state_dir / "continuity" / "handoff" /
                                     f"{s.name}.json").read_text()).get("delivered_at"),
                 30, "the handoff counted delivered at the first prompt")
    from agentwrap.audit import AuditLog

    events = [(e["event"], e["channel"]) for e in AuditLog(s._paths().audit_log).read()
              if e["event"].startswith("continuity_") and e["ts"] >= restart]
    assert events == [("continuity_prepared", "hook"), ("continuity_handed", "hook"),
                      ("continuity_delivered", "hook")], events
    assert first.count("handoff from the previous session") == 1  # never also typed
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged"), 60,
                 "the pending message delivered")
    time.sleep(1.0)
    assert _bodies(s, restart)[-1].count(marker) == 1
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(s._paths().db_path)
    try:  # typed once, as the first turn
        assert [a.channel for a in store.attempts(mid)] == ["tmux-paste"]
    finally:
        store.close()
    print(f"{agent}: handoff {len(handed['text'].encode())} bytes, in the first request")
