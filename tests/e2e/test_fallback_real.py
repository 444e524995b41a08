"""The fallback section on a real agent (issue 25.5): Claude Code gets the
notice, opens CLAUDE.md with its Read tool, and the section is still there
when it does; its ACK of the notice then removes the section, and the
escalated message's ``history`` says so.

The model server is scripted: no ACK for the message itself (so it
escalates after one attempt), a Read of CLAUDE.md for the notice, then the
notice's ACK in the request that carries the Read's result.

Seen on Claude Code 2.1: it notices that CLAUDE.md changed during the session
and puts the new text (the section) into the next request as a
``<system-reminder>``; the Read then answers "file unchanged since your last
Read". Either way the section's text is in the request that carries the
Read's result, and it is what the file held then.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentwrap.service import Service

from .conftest import AgentSession
from .model_server import ModelServer, Plan, ToolSpec, Turn
from .test_native_channels import _repoint

pytestmark = pytest.mark.e2e

NOTICE = "Live delivery of"
ACK_ASKED = re.compile(r'Reply "ACK ([0-9a-f]{8})"')
MINE = "# My project\n\nUser rule: keep tests fast.\n"
BEGIN = "<!-- agentwrap:begin"  # the section's first line (the notice only names the marker)


class NoticeReader(ModelServer):
    """Answers the notice with a Read of ``path``, then with the notice's ACK;
    keeps what the file held when the Read's result came, and that request."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.auto_ack = False  # the message itself is never acknowledged
        self.path = path
        self.token: str | None = None
        self.on_disk: str | None = None
        self.after_read: Any = None

    def _plan(self, api: str, body: Any, turn: Turn, tools: list[ToolSpec], side: Any) -> Plan:
        if side is None and NOTICE in turn.text and not turn.tool_result:
            asked = ACK_ASKED.findall(turn.text)
            self.token = asked[-1] if asked else ""
            read = next(t for t in tools if t.name == "Read")
            return Plan(tool=read, tool_args={"file_path": str(self.path)})
        if side is None and turn.tool_result and self.token is not None:
            token, self.token = self.token, None
            self.on_disk, self.after_read = self.path.read_text(), body
            return Plan(text=f"ACK {token}" if token else "Read it.")
        return super()._plan(api, body, turn, tools, side)


def notice_reading(s: AgentSession) -> tuple[Path, NoticeReader]:
    """``s``'s CLAUDE.md holding the person's text, and ``s`` pointed at a NoticeReader
    of it (the model server it had, stopped)."""
    claude_md = s.workdir / "CLAUDE.md"
    claude_md.write_text(MINE)
    server = NoticeReader(claude_md)
    server.start()
    s.server.stop()
    s.server = server
    _repoint(s, server)
    return claude_md, server


def test_claude_reads_the_section_after_the_notice_and_its_ack_removes_it(make_session: Any) -> None:
    s: AgentSession = make_session("claude")
    claude_md, server = notice_reading(s)
    s.write_config("[delivery]\nfallback_after = 1\nack_timeout_s = 2.0\n"
                   "notify_on_failure = false\n")
    s.start()
    s.wait_state("ready", timeout=90)

    res = s.send("deploy frozen until 5pm", "--source", "webhook", "--source-id", "ci",
                 "--ack", "--wait", "--timeout", "120", timeout=150)
    assert res.returncode == 10 and res.stdout.startswith("escalated"), (res.stdout, res.stderr)
    msg = next(m for m in s.history() if m["source"] == "webhook")

    # the agent read the file after the notice: the section was there (it was
    # removed ~2 ms after the notice was typed, before issue 25.5), and its text
    # went to the model with the Read's result
    s.wait_until(lambda: server.on_disk is not None, 120, "the Read of CLAUDE.md")
    assert server.on_disk is not None and BEGIN in server.on_disk, server.on_disk
    assert "deploy frozen until 5pm" in server.on_disk
    sent = json.dumps(server.after_read["messages"], ensure_ascii=False)
    assert BEGIN in sent and msg["id"] in sent, sent[-3000:]
    # then the ACK: the section goes, the user's text stays as it was
    s.wait_until(lambda: claude_md.read_text() == MINE, 90, "the section to be removed")
    notice = next(m for m in s.history() if m["source_id"] == "fallback")
    assert notice["status"] == "acknowledged", notice

    def removal() -> Any:  # recorded right after the file is written back
        with Service.open(s._paths()) as svc:
            last = svc.message(msg["id"]).attempts[-1]
        return last if last.outcome == "section_removed" else None

    last = s.wait_until(removal, 30, "the removal recorded in the message's history")
    assert last.channel == "fallback-file", last
    assert "read by the agent (ACK" in last.evidence
