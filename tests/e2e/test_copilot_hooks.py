"""GitHub Copilot CLI's native hooks, end to end on the real CLI (issue 22).

``agentwrap run`` registers them as a plugin loaded for this launch only
(``--plugin-dir`` naming a dir in agentwrap's private launch dir;
agentwrap/sessions/channels.py):

* the session says which channel is active (``state --explain``), and nothing
  of agentwrap's goes into the person's Copilot dir (no hooks, no plugin installed);
* a prompt's turn: the hooks' signals (prompt submitted, turn end) reach the
  supervisor and the prompt is noted once;
* a permission dialog: the ``notification`` hook (``permission_prompt``) says
  the session waits for the person.

(The hand-over inside a tool loop is tests/e2e/test_native_channels.py's.)
Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import answer, main_requests, wait_question

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def start(make_session: Make) -> AgentSession:
    s = make_session("copilot")
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st.get("channels") == ["hooks"], st
    return s


def test_copilot_hooks_signal_the_turn(make_session: Make) -> None:
    from agentwrap.continuity.hooks import notes_file, read_json
    from agentwrap.sessions.channels import launch_dir
    from agentwrap.sessions.signals import read_signal

    s = start(make_session)
    explain = s.cli("state", s.name, "--explain").stdout
    assert "typing, hooks" in explain, explain
    plugin = launch_dir(s._paths(), s.name) / "copilot-plugin"
    assert (plugin / "hooks" / "hooks.json").is_file()
    # nothing of agentwrap's in the person's Copilot dir (Copilot rewrites its
    # config.json at every start itself, so it is read, not compared)
    own = s.home / ".copilot"
    for name in ("config.json", "settings.json"):
        assert not (own / name).exists() or "agentwrap" not in (own / name).read_text()
    assert not (own / "hooks").exists()
    assert not list((own / "installed-plugins").glob("*"))
    # a turn with a tool call: prompt submitted, then the turn's end, told by the hooks
    calls = json.dumps({"path": str(s.workdir)})
    res = s.send(f"[[call: view {calls}]] look around", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: len(main_requests(s)) >= 2, 60, "the tool result at the model")
    s.wait_state("ready", timeout=60)
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event == "agentStop"
                       and g, 30, "the turn end told by the hook")
    assert (sig.signal, sig.state, sig.agent) == ("turn_end", "ready", "copilot"), sig
    notes = s.wait_until(lambda: (n := read_json(notes_file(s._paths(), s.name))).get(
        "prompts") and n, 30, "the prompt in the handoff notes")
    assert notes["prompts"] == 1, notes
    assert "look around" in notes["goal"], notes
    log = s._paths().supervisor_log(s.name).read_text()
    assert "hook copilot" in log, log[-2000:]
    assert not [ln for ln in log.splitlines() if "hook copilot" in ln and "failed" in ln], \
        log[-2000:]


def test_copilot_permission_dialog_is_told_by_its_notification_hook(make_session: Make) -> None:
    from agentwrap.sessions.signals import read_signal

    s = start(make_session)
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event ==
                       "notification" and g, 60, "the permission notification")
    assert (sig.signal, sig.state, sig.agent) == ("permission_prompt", "waiting_input",
                                                  "copilot"), sig
    q = wait_question(s)
    assert q["kind"] == "permission", q
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_state("ready", timeout=60)
    assert not (s.workdir / TOOL_FILE).exists()
