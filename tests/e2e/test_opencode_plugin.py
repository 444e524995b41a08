"""OpenCode's native channel, end to end on the real CLI (issue 22).

OpenCode 1.18.33 has no command hooks, only JS plugins: ``agentwrap run``
writes its own plugin into the private launch dir and names it in an extra
config given with ``OPENCODE_CONFIG`` (agentwrap/agents/opencode.py):

* the session says which channel is active (``state --explain``), and nothing
  of agentwrap's goes into the person's OpenCode config;
* a prompt's turn: the plugin's signals (prompt submitted, turn end) reach the
  supervisor and the prompt is noted once;
* a permission dialog (its ask-first mode): ``permission.asked`` says the
  session waits for the person.

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


def start(make_session: Make, config: str = "") -> AgentSession:
    s = make_session("opencode")
    if config:
        s.write_config(config)
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st.get("channels") == ["hooks"], st
    return s


def test_opencode_plugin_signals_the_turn(make_session: Make) -> None:
    from agentwrap.continuity.hooks import notes_file, read_json
    from agentwrap.sessions.channels import launch_dir
    from agentwrap.sessions.signals import read_signal

    s = start(make_session)
    explain = s.cli("state", s.name, "--explain").stdout
    assert "typing, hooks" in explain, explain
    folder = launch_dir(s._paths(), s.name) / "opencode"
    assert json.loads((folder / "opencode.json").read_text())["plugin"] == [
        (folder / "agentwrap-plugin.js").as_uri()]
    # nothing of agentwrap's in the person's OpenCode config
    own = s.home / ".config" / "opencode"
    assert "agentwrap-plugin" not in (own / "opencode.json").read_text()
    assert not (own / "plugin").exists() and not (own / "plugins").exists()
    # a turn with a tool call: prompt submitted, then the turn's end, told by the plugin
    calls = json.dumps({"pattern": "*.md"})
    res = s.send(f"[[call: glob {calls}]] look around", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: len(main_requests(s)) >= 2, 60, "the tool result at the model")
    s.wait_state("ready", timeout=60)
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event ==
                       "session.idle" and g, 30, "the turn end told by the plugin")
    assert (sig.signal, sig.state, sig.agent) == ("turn_end", "ready", "opencode"), sig
    notes = s.wait_until(lambda: (n := read_json(notes_file(s._paths(), s.name))).get(
        "prompts") and n, 30, "the prompt in the handoff notes")
    assert notes["prompts"] == 1, notes
    assert "look around" in notes["goal"], notes
    log = s._paths().supervisor_log(s.name).read_text()
    assert not [ln for ln in log.splitlines() if "hook opencode" in ln and "failed" in ln], \
        log[-2000:]


def test_opencode_permission_dialog_is_told_by_the_plugin(make_session: Make) -> None:
    from agentwrap.sessions.signals import read_signal

    s = start(make_session, "[run]\nask_first = true\n")  # its ask-first mode
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event ==
                       "permission.asked" and g, 60, "the permission signal")
    assert (sig.signal, sig.state, sig.agent) == ("permission_prompt", "waiting_input",
                                                  "opencode"), sig
    q = wait_question(s)
    assert q["kind"] == "permission", q
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_state("ready", timeout=60)
    assert not (s.workdir / TOOL_FILE).exists()
