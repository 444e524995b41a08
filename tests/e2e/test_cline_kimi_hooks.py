"""Cline CLI's and Kimi Code's native hooks, end to end on the real CLIs (issue 22).

``agentwrap run`` registers them through a private config dir per launch
(agentwrap/agents/cline.py, kimi.py): Cline 3.0.65 a ``CLINE_DIR`` whose
``hooks/`` holds agentwrap's scripts, Kimi Code 2.1.0 a ``KIMI_CODE_HOME``
whose config.toml is the person's plus ``[[hooks]]``.

* the session says which channel is active (``state --explain``), and the
  person's own Cline / Kimi dir is left as it was;
* a prompt's turn: the hooks' signals (prompt submitted, turn end) reach the
  supervisor;
* Kimi: its permission dialog is told by its PermissionRequest hook; its hooks
  hand nothing over (their output never reaches the model), so a message sent
  while it works is typed after the turn, once.

(Cline's hand-over inside a tool loop is tests/e2e/test_native_channels.py's.)
Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import answer, main_requests, wait_question

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
OWN_DIR = {"cline": ".cline", "kimi": ".kimi-code"}
CHANNEL = {"cline": "hooks", "kimi": "hook-signals"}
PRIVATE = {"cline": "private CLINE_DIR", "kimi": "private KIMI_CODE_HOME"}
TURN_END = {"cline": "TaskComplete", "kimi": "Stop"}
PROMPT = {"cline": "TaskStart", "kimi": "UserPromptSubmit"}
CALL = {"cline": ("run_commands", {"commands": ["cat README.md"]}),
        "kimi": ("Read", {"path": "README.md"})}


def body(r: Any) -> str:
    return json.dumps(r.body, ensure_ascii=False)


def tree(own: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(own)), p.read_bytes() if p.is_file() else b"")
                  for p in own.rglob("*") if "config.toml" in p.name or "hooks" in str(p))


def start(make_session: Make, agent: str) -> tuple[AgentSession, list[tuple[str, bytes]]]:
    s = make_session(agent)
    (s.workdir / "README.md").write_text("# scratch project for agentwrap tests\n")
    own = s.home / OWN_DIR[agent]
    before = tree(own)
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st.get("channels") == [CHANNEL[agent]], st
    # Cline runs every tool without asking by default: the session says it has no gate
    gate = st["permission_gate"] or ""
    assert gate.startswith("none: Cline CLI runs every tool") == (agent == "cline"), st
    return s, before


@pytest.mark.parametrize("agent", ["cline", "kimi"])
def test_hooks_signal_the_turn(make_session: Make, agent: str) -> None:
    from agentwrap.sessions.signals import read_signal

    s, before = start(make_session, agent)
    explain = s.cli("state", s.name, "--explain").stdout
    assert f"typing, {CHANNEL[agent]}" in explain and PRIVATE[agent] in explain, explain
    own = s.home / OWN_DIR[agent]
    assert tree(own) == before  # nothing of agentwrap's in the person's dir
    assert not (own / "hooks").exists() or not list((own / "hooks").iterdir())
    name, args = CALL[agent]
    seen = len(main_requests(s))
    res = s.send(f"[[call: {name} {json.dumps(args)}]] look around", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: len(main_requests(s)) >= seen + 2, 60, "the tool result at the model")
    prompt = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g, 60,
                          "a signal from the hooks")
    assert prompt.agent == agent and prompt.source == "hook", prompt
    s.wait_state("ready", timeout=60)
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event ==
                       TURN_END[agent] and g, 30, "the turn end told by the hook")
    assert (sig.signal, sig.state) == ("turn_end", "ready"), sig
    log = s._paths().supervisor_log(s.name).read_text()
    assert not [ln for ln in log.splitlines() if f"hook {agent}" in ln and "failed" in ln], \
        log[-2000:]
    assert tree(own) == before


def test_kimi_permission_hook_and_a_message_typed_after_the_turn(make_session: Make) -> None:
    """Kimi's PermissionRequest hook tells the open dialog; a message sent while
    its turn runs is not handed to a hook (none reaches the model) but typed once
    the turn is over, and reaches the model once."""
    from agentwrap.sessions.signals import read_signal

    s, _ = start(make_session, "kimi")
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event ==
                       "PermissionRequest" and g, 60, "the permission hook's signal")
    assert (sig.signal, sig.state, sig.agent) == ("permission_prompt", "waiting_input", "kimi")
    q = wait_question(s)
    assert q["kind"] == "permission", q
    marker = f"KH{uuid.uuid4().hex[:8]}"
    mid = s.send_id(f"after the dialog {marker}")  # waits: the agent is not ready
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged"), 90,
                 "the message typed after the turn")
    assert not (s.workdir / TOOL_FILE).exists()
    s.wait_until(lambda: any(marker in body(r) for r in main_requests(s)), 60,
                 "the message at the model")
    carrying = [body(r) for r in main_requests(s) if marker in body(r)]
    assert carrying[-1].count(marker) == 1, carrying[-1]
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        entry = svc.message(mid)
    assert [a.channel for a in entry.attempts] == ["tmux-paste"], entry.attempts
