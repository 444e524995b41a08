"""Aider's live channel on the real aider: a message sent while Aider waits on
the model reaches the model in Aider's *next request of the same turn*
through the ``--read`` file agentwrap owns, exactly once, and is never typed.

The model server scripts a two-request turn: the first reply (held back
``FIRST_DELAY_S``) is an edit whose SEARCH block matches nothing in the file in
the chat, so Aider reflects the error to the model at once (no dialog), which
is the request that must carry the message.
"""

from __future__ import annotations

import json
import stat
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
FIRST_DELAY_S = 4.0
BAD_EDIT = (
    "Updating the readme.\n\nREADME.md\n```\n<<<<<<< SEARCH\nthis line is not in the file\n"
    "=======\nreplacement\n>>>>>>> REPLACE\n```\n"
)


class ReflectServer(ModelServer):
    """``[[reflect]]``: a failing edit (held back), then a plain answer to the reflection."""

    def __init__(self) -> None:
        super().__init__()
        self.stage = 0

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        if side is None and api == "chat":
            if self.stage == 0 and "[[reflect]]" in turn.text:
                self.stage = 1
                return Plan(text=BAD_EDIT, delay=FIRST_DELAY_S)
            if self.stage == 1:
                self.stage = 2
                return Plan(text="Understood; nothing else to change.")
        return super()._plan(api, body, turn, tools, side)


def _session(make_session: Make) -> AgentSession:
    from .agents import prepare_agent

    s = make_session("aider")
    server = ReflectServer().start()
    s.server.stop()
    s.server = server
    launch = prepare_agent(s.agent, s.home, s.workdir, server.url)
    keep = {k: v for k, v in s.env.items() if k.startswith(("XDG_", "PYTHONPATH", "AGENTWRAP_"))}
    s.env = {**launch.env, **keep}
    (s.workdir / "README.md").write_text("# scratch project for agentwrap tests\n")
    s.argv = [*launch.argv, "--edit-format", "diff", "README.md"]
    return s


def _bodies(s: AgentSession) -> list[tuple[float, str]]:
    return [(r.time, json.dumps(r.body, ensure_ascii=False)) for r in s.server.requests()
            if not r.side and r.body is not None and r.api == "chat"]


def test_message_sent_while_aider_waits_reaches_its_next_request_once(make_session: Make) -> None:
    s = _session(make_session)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "read-file" in (st.get("channels") or []), st
    live = s._paths().state_dir / "launch" / s.name / "agentwrap-messages.md"
    assert stat.S_IMODE(live.stat().st_mode) == 0o600
    assert stat.S_IMODE(live.parent.stat().st_mode) == 0o700
    assert not any(p.name == live.name for p in Path(s.workdir).rglob("*"))

    s.type_keys("Please fix the readme. [[reflect]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: s.server.stage >= 1, 60, "the first request at the model")
    s.wait_state("busy", timeout=30)
    marker = f"RF{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    mid = s.send_id(f"build {marker} is green")
    s.wait_until(lambda: any(marker in b for _, b in _bodies(s)), 60, "message at the model")
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged"), 30,
                 "delivered")
    s.wait_state("ready", timeout=60)
    time.sleep(1.0)
    bodies = _bodies(s)
    carrying = [i for i, (_, b) in enumerate(bodies) if marker in b]
    assert len(carrying) == 1, f"{len(carrying)} requests carried it"
    first = carrying[0]
    assert bodies[first][1].count(marker) == 1
    assert "[[reflect]]" in bodies[first - 1][1] and marker not in bodies[first - 1][1]
    assert "SEARCH" in bodies[first][1]  # the reflection of the failed edit: same turn
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        entry = svc.message(mid)
    assert [a.channel for a in entry.attempts] == ["read-file"], entry.attempts
    assert entry.attempts[0].outcome == "delivered"
    assert marker not in s.screen()  # never typed into the prompt
    assert live.read_text() == ""  # taken out once read
    print(f"aider: enqueue -> next model request carrying it: {bodies[first][0] - t0:.2f} s"
          f" (first reply held {FIRST_DELAY_S} s)")
