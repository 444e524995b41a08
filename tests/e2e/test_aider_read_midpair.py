"""Aider's read file on the real aider, the write landing *between* the two
opens of one model request: delivered once, never typed again.

Aider 0.86.2 opens each ``--read`` file twice while it builds a request
(``choose_fence``, then the quoting ``get_read_only_files_content``); between
the two it joins its chat-history summarizer (``summarize_end``). The model
server holds that summary request, so Aider stops exactly between the opens:
the test sends the message then (the screen still says busy: no rule matches
the reply on screen), waits until the channel has written it to the file, and
lets the summary go. The request that follows quotes it; the turn then ends
with no further request, which is the case that used to give the batch back
to typing (one open after the write) and so reach the model twice.

The scripted turn: the first reply holds two SEARCH/REPLACE blocks, one that
applies and one that matches nothing, so Aider both applies an edit (which
starts the summarizer: ``--max-chat-history-tokens 1``) and reflects the
failed block to the model at once (no dialog).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession, aider_against
from .model_server import ModelServer, Plan, ToolSpec

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
HOLD_MAX_S = 60.0
HALF_EDIT = (
    "Updating the readme.\n\nREADME.md\n```\n<<<<<<< SEARCH\n# scratch project for agentwrap tests\n"
    "=======\n# scratch project for agentwrap tests (edited)\n>>>>>>> REPLACE\n```\n\n"
    "README.md\n```\n<<<<<<< SEARCH\nthis line is not in the file\n"
    "=======\nreplacement\n>>>>>>> REPLACE\n```\n"
)
SUMMARY_ASK = "summarize this partial conversation"


class MidPairServer(ModelServer):
    """``[[midpair]]``: half an edit; the summary Aider asks for meanwhile is
    held until the test says (at most ``HOLD_MAX_S``); a plain answer to the
    reflection."""

    def __init__(self) -> None:
        super().__init__()
        self.stage = 0
        self.summary_asked = threading.Event()
        self.release = threading.Event()

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        if side is None and api == "chat":
            if SUMMARY_ASK in json.dumps(body):
                self.summary_asked.set()
                self.release.wait(HOLD_MAX_S)  # aider sits between the two opens meanwhile
                return Plan(text="The user asked to update the readme.")
            if self.stage == 0 and "[[midpair]]" in turn.text:
                self.stage = 1
                return Plan(text=HALF_EDIT)
            if self.stage == 1:
                self.stage = 2
                return Plan(text="Understood; nothing else to change.")
        return super()._plan(api, body, turn, tools, side)


def _session(make_session: Make) -> AgentSession:
    return aider_against(make_session("aider"), MidPairServer(), "--max-chat-history-tokens", "1")


def _bodies(s: AgentSession) -> list[str]:
    return [json.dumps(r.body, ensure_ascii=False) for r in s.server.requests()
            if not r.side and r.body is not None and r.api == "chat"
            and SUMMARY_ASK not in json.dumps(r.body)]


def test_a_message_written_between_a_requests_two_opens_reaches_the_model_once(
        make_session: Make) -> None:
    s = _session(make_session)
    try:
        _run(s)
    except AssertionError:
        log = s._paths().supervisor_log(s.name)
        print("supervisor log:\n", log.read_text()[-6000:] if log.exists() else "(none)")
        raise
    finally:
        s.server.release.set()


def _run(s: AgentSession) -> None:
    from agentwrap.service import Service

    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "read-file" in (st.get("channels") or []), st
    live = s._paths().state_dir / "launch" / s.name / "agentwrap-messages.md"
    s.type_keys("Please fix the readme. [[midpair]]")
    time.sleep(0.5)
    s.press("Enter")
    assert s.server.summary_asked.wait(60), "aider never asked for a summary"
    # aider has opened the read file once (choose_fence) and now waits on the summary
    # (its main thread gets there in the time the summary request takes to arrive;
    # `agentwrap send` starting a process takes far longer than both)
    marker = f"MP{uuid.uuid4().hex[:8]}"
    mid = s.send_id(f"build {marker} is green")
    s.wait_until(lambda: s.message(mid)["status"] != "pending", 30, "the message taken")
    with Service.open(s._paths()) as svc:
        taken = [a.channel for a in svc.message(mid).attempts]
    assert taken == ["read-file"], (
        f"taken by {taken} while aider sat between its two opens; screen:\n{s.screen()}")
    assert s.server.stage == 1 and not s.server.release.is_set()
    s.server.release.set()
    s.wait_until(lambda: any(marker in b for b in _bodies(s)), 60, "message at the model")
    s.wait_state("ready", timeout=60)
    # settled: delivered from the file, or (the duplicate) given back to typing
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged", "pending"),
                 30, "the batch settled")
    with Service.open(s._paths()) as svc:
        entry = svc.message(mid)
    print("attempts:", [(a.channel, a.outcome, a.evidence) for a in entry.attempts])
    bodies = _bodies(s)
    for b in bodies:
        msgs = json.loads(b).get("messages") or []
        last = msgs[-1].get("content") if msgs else ""
        print("request:", marker in b, "last message:", str(last)[:160].replace("\n", " | "))
    carrying = [b for b in bodies if marker in b]
    assert len(carrying) == 1, f"{len(carrying)} requests carried it"
    assert "SEARCH" in carrying[0]  # the reflection of the failed block: the same turn
    assert entry.message.status.value in ("delivered", "acknowledged"), entry.message.status
    assert [a.channel for a in entry.attempts] == ["read-file"], entry.attempts
    assert "1 time(s)" in entry.attempts[-1].evidence, entry.attempts[-1].evidence
    assert marker not in s.screen()  # never typed into the prompt
    assert live.read_text() == ""
