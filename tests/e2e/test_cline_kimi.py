"""Cline CLI and Kimi Code under agentwrap, end to end (issue 22).

One session per agent does every check, in order, against the loopback model
server (CI time is short): start -> ready with no dialog left open; a message
delivered once and acknowledged; a person's draft never overwritten; the
agent's own syntax (``@file``, ``/command``, ``!shell``) inert; a pasted probe
as its profile declares (tests/e2e/test_pasted_bytes.py's); a permission
dialog read as ``waiting_input`` with its options, approved and then denied
through ``agentwrap answer``; ``kill -9`` of the agent seen; and (Cline)
``agentwrap stop`` ending the hub daemon Cline leaves behind after it exits.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentwrap.terminal.proctree import alive, descendants, marked

from .conftest import AgentSession
from .model_server import TOOL_COMMAND, TOOL_FILE
from .test_agent_syntax import passwd_line
from .test_answering import answer, wait_question
from .test_pasted_bytes import check_pasted_probe

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]

AGENTS = ("cline", "kimi")
# Cline asks before tools only in its ask-first mode: [run] ask_first starts it so
CONFIG = {"cline": "[run]\nask_first = true\n", "kimi": ""}
GATE = {"cline": "asks first (--auto-approve false)", "kimi": None}
# The permission dialog's profile name, tool and command as read off the screen.
PERMISSION = {"cline": ("permission", "run_commands", TOOL_COMMAND),
              "kimi": ("permission", "Bash", TOOL_COMMAND)}
READY_RULE = {"cline": "empty-composer", "kimi": "empty-box"}
APPROVE = {"cline": "Approve", "kimi": "Approve once"}


def tag() -> str:
    return f"E2E{uuid.uuid4().hex[:10]}"


def daemons(s: AgentSession, pid: int | None) -> list[int]:
    """Processes of this launch outside the agent's tree (Cline's hub daemon)."""
    from agentwrap.paths import Paths

    paths = Paths.from_env(s.env)
    tree = {pid, *descendants(pid)} if pid else set()
    found = marked({"AGENTWRAP_SESSION": s.name, "AGENTWRAP_STATE_DIR": str(paths.state_dir)})
    return [p for p in found if p not in tree]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def check_delivery(s: AgentSession) -> None:
    marker = tag()
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    assert len(s.wait_received(marker)) == 1


def check_draft(s: AgentSession) -> None:
    draft, marker = f"my unsent draft {tag()}", tag()
    s.type_keys(draft)
    s.wait_state("draft", timeout=20)
    mid = s.send_id(f"queued behind the draft {marker}")
    s.wait_until(lambda: s.message(mid)["status"] == "pending" and
                 s.cli_json("queue", s.name), 20, "the message queued")
    time.sleep(2.0)  # a wrong delivery would type into the draft now
    assert draft in s.screen().replace("\n", ""), s.screen()
    assert not s.received_with(marker)
    s.press(*["BSpace"] * (len(draft) + 2))
    s.wait_until(lambda: s.received_with(marker), 60, "delivery after the draft was cleared")
    assert len(s.wait_received(marker)) == 1
    assert not s.received_with(draft)
    s.wait_state("ready", timeout=60)


def check_syntax(s: AgentSession) -> None:
    secret, marker = f"SECRET{uuid.uuid4().hex[:10]}", tag()
    (s.workdir / "secret.env").write_text(f"API_TOKEN={secret}\n")
    lines = [f"{marker} begins", "@secret.env", "@/etc/passwd",
             "mid-line @secret.env, mail ops@example.com", "/help", "!touch pwned",
             f"{marker} ends"]
    res = s.send("\n".join(lines), "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    got = s.wait_received(marker, settle=3.0)
    assert len(got) == 1, got
    want = "\n".join(line.replace("@", "＠") for line in lines)
    assert want in got[0], f"expected\n{want}\n--- got ---\n{got[0]}"
    bodies = "\n".join(s.server.request_bodies())
    assert secret not in bodies, "secret.env reached the model"
    assert passwd_line() not in bodies, "/etc/passwd reached the model"
    assert not (s.workdir / "pwned").exists()
    s.wait_state("ready", timeout=60)


def open_permission(s: AgentSession) -> dict[str, Any]:
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    wait_question(s)
    # Cline draws its dialog in steps: the question as first read may lack the
    # key line under it (its id changes with it, so an answer to that one is
    # refused as stale, never applied): wait for the dialog as it settles
    q = s.wait_until(lambda: (st := s.state())["state"] == "waiting_input" and st["question"]
                     and APPROVE[s.agent] in [o["label"] for o in
                                              st["question"]["questions"][0]["options"]]
                     and st["question"], 30, "the permission dialog's options")
    assert q["kind"] == "permission", q
    assert (q["dialog"], q["tool"], q["command"]) == PERMISSION[s.agent], q
    labels = [o["label"] for o in q["questions"][0]["options"]]
    assert APPROVE[s.agent] in labels, labels
    assert not (s.workdir / TOOL_FILE).exists(), "the tool ran before anyone answered"
    return q


def check_permission(s: AgentSession) -> None:
    q = open_permission(s)
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    s.wait_state("ready", timeout=60)
    (s.workdir / TOOL_FILE).unlink()
    q = open_permission(s)
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_state("ready", timeout=60)
    time.sleep(1.0)
    assert not (s.workdir / TOOL_FILE).exists(), "the denied tool ran"


@pytest.mark.parametrize("agent", AGENTS)
def test_more_agent_end_to_end(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    if CONFIG[agent]:
        s.write_config(CONFIG[agent])
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["rule"] == READY_RULE[agent], st  # its own profile, not the generic one
    assert st["permission_gate"] == GATE[agent], st
    check_delivery(s)
    check_draft(s)
    check_syntax(s)
    check_pasted_probe(s)  # test_pasted_bytes.py's probe, on this start
    check_permission(s)

    pid = s.agent_pid()
    assert pid
    if agent == "cline":  # the hub daemon: outside the pane's tree, in a session of its own
        s.wait_until(lambda: daemons(s, pid), 30, "Cline's hub daemon")
        assert all(os.getsid(p) != os.getsid(pid) for p in daemons(s, pid))
    os.kill(pid, signal.SIGKILL)
    s.wait_state("exited", timeout=20)
    if agent == "cline":
        # the daemon usually outlives a killed agent (then `stop` must end it);
        # now and then it follows it on its own (tests/test_proctree.py holds
        # the marker rule either way): whatever is left, `stop` ends it
        left = [p for p in daemons(s, None) if "--cline-hub-daemon" in cmdline(p)]
        res = s.cli("stop", s.name)
        assert res.returncode == 0, res.stderr
        s.wait_until(lambda: not any(alive(p) for p in left), 20, "the hub daemon gone")
        assert not [p for p in daemons(s, None) if "--cline-hub-daemon" in cmdline(p)]
