"""pi (@mariozechner/pi-coding-agent) under agentwrap, end to end (issue 36).

One session does every check, in order, against the loopback model server
(Chat Completions; CI time is short): start -> ready by pi's own profile,
with no permission gate said; a message delivered once and acknowledged; a
person's draft never overwritten; pi's own syntax inert (``/`` commands and
prompt templates, ``!`` / ``!!`` bash at the start, ``@`` file mentions) with
nothing run and no file attached; a pasted probe as its profile declares
(tests/e2e/test_pasted_bytes.py's); a tool call run without a dialog (pi has
none: the session never reads ``waiting_input``); ``kill -9`` seen as
``exited``.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable

import pytest

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_agent_syntax import passwd_line
from .test_cline_kimi import check_delivery, check_draft, tag
from .test_pasted_bytes import check_pasted_probe

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def plant_template(s: AgentSession, secret: str) -> None:
    """A prompt template ``/review`` and a skill: read as commands, either would
    put its text (the secret) in the request."""
    agent = s.home / ".pi" / "agent"
    (agent / "prompts").mkdir(parents=True, exist_ok=True)
    (agent / "prompts" / "review.md").write_text(f"Review everything. {secret}\n")
    skill = agent / "skills" / "deploy"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: deploy\ndescription: Deploys things.\n---\n# Deploy\nSay {secret}.\n")


def check_syntax(s: AgentSession, template_secret: str) -> None:
    secret, marker = f"SECRET{uuid.uuid4().hex[:10]}", tag()
    (s.workdir / "secret.env").write_text(f"API_TOKEN={secret}\n")
    # each first, as a message of its own: what pi acts on only at the start
    for first in ("/review the code", "!touch pwned", "!!touch pwned2", "/skill:deploy now",
                  "@secret.env"):
        mark = tag()
        res = s.send(f"{first} {mark}", "--wait", "--timeout", "90")
        assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
        got = s.wait_received(mark, settle=1.0)
        assert len(got) == 1 and f"{first} {mark}" in got[0], got
        s.wait_state("ready", timeout=60)
    lines = [f"{marker} begins", "@secret.env", "@/etc/passwd",
             "mid-line @secret.env, mail ops@example.com", "/help", "!touch pwned3",
             "/review", f"{marker} ends"]
    res = s.send("\n".join(lines), "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    got = s.wait_received(marker, settle=3.0)
    assert len(got) == 1, got
    want = "\n".join(lines)  # pi parses nothing inside the text: it arrives as typed
    assert want in got[0], f"expected\n{want}\n--- got ---\n{got[0]}"
    bodies = "\n".join(s.server.request_bodies())
    assert secret not in bodies, "secret.env reached the model"
    assert passwd_line() not in bodies, "/etc/passwd reached the model"
    assert template_secret not in bodies, "a prompt template or skill was expanded"
    for name in ("pwned", "pwned2", "pwned3"):
        assert not (s.workdir / name).exists(), f"a bash command ran ({name})"
    s.wait_state("ready", timeout=60)


def check_tool_runs_unasked(s: AgentSession) -> None:
    """pi has no permission dialog: the tool runs, the session never waits."""
    seen: list[str] = []
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr

    def done() -> bool:
        seen.append(s.state()["state"])
        return (s.workdir / TOOL_FILE).exists()

    s.wait_until(done, 60, f"{TOOL_FILE} created")
    st = s.wait_state("ready", timeout=60)
    assert "waiting_input" not in seen and not st.get("question"), (seen, st)


def test_pi_end_to_end(make_session: Make) -> None:
    s = make_session("pi")
    template_secret = f"TEMPLATE{uuid.uuid4().hex[:10]}"
    plant_template(s, template_secret)
    s.start()
    st = s.wait_state("ready", timeout=90)
    print(f"pi: ready after {st['since'] - s.started_at:.2f}s ({st['explain']})")
    assert st["rule"] == "empty-editor", st  # its own profile, not the generic one
    assert (st["permission_gate"] or "").startswith("none: "), st
    assert "no ask-first mode" in st["permission_gate"], st
    check_delivery(s)
    check_draft(s)
    check_syntax(s, template_secret)
    check_pasted_probe(s)  # test_pasted_bytes.py's probe, on this start
    check_tool_runs_unasked(s)

    pid = s.agent_pid()
    assert pid
    os.kill(pid, signal.SIGKILL)
    s.wait_state("exited", timeout=20)
