"""The same-turn correction loop on a real agent: the model edits a file, the
project's check runs in the agent's between-tool-calls hook, and its result is
in the very next model request; the model fixes it and "now passing" arrives
once (issue 12).

The model server is scripted: one tool call per request (read, break, fix, each
held back a little so the agent is visibly inside its tool loop), then
``done``. The check is the real pytest on a one-test project.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import ModelServer, Plan, ToolSpec
from .test_native_channels import LoopServer, _bodies, _repoint

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def _project(s: AgentSession) -> None:
    (s.workdir / "calc.py").write_text(FIXED)
    (s.workdir / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    (s.workdir / ".agentwrap.toml").write_text(textwrap.dedent(f"""\
        [[feedback]]
        name = "pytest"
        run = "{sys.executable} -m pytest -x -q -p no:cacheprovider --no-header"
        on = ["edit"]
        paths = ["*.py"]
        timeout_s = 60
        """))
    cfg = s._paths().config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'[trust]\nfeedback_projects = ["{s.workdir}"]\n')


#: Per agent: how its edits go without a dialog, and its read and write tools.
AGENTS = {
    "claude": (["--permission-mode", "acceptEdits"], "Read", "Write"),
    "gemini": (["--approval-mode", "auto_edit"], "read_file", "write_file"),
    "codex": ([], "", ""),  # edits with apply_patch, run from its shell tool
}


class ShellLoopServer(LoopServer):
    """:class:`LoopServer` whose shell calls run *our* command (Codex's
    ``exec_command`` takes it as ``cmd``, which the loop leaves at its default)."""

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        step = self.step
        plan = super()._plan(api, body, turn, tools, side)
        if side is None and self.step > max(step, 0) and plan.tool is not None:
            command = self.calls[self.step - 1][0]
            if plan.tool.name not in (t[0] for t in self.calls):  # the shell tool
                for key in ("cmd", "command"):
                    if isinstance(plan.tool_args.get(key), str):
                        plan.tool_args[key] = command
                    elif isinstance(plan.tool_args.get(key), list):
                        plan.tool_args[key] = ["bash", "-lc", command]
        return plan


def _patch(path: str, old: str, new: str) -> str:
    return (f"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n"
            f"+{new}\n*** End Patch\nEOF\n")


@pytest.mark.parametrize("agent", list(AGENTS))
def test_a_broken_test_reaches_the_model_in_the_same_turn_and_recovery_once(
    make_session: Make, agent: str
) -> None:
    s = make_session(agent)
    server = ShellLoopServer().start()
    s.server.stop()
    s.server = server
    _repoint(s, server)
    flags, read, write = AGENTS[agent]
    s.argv += flags  # the edits are the point, not the dialog
    _project(s)
    path = str(s.workdir / "calc.py")
    server.calls = [(read, {"file_path": path}),  # Claude writes only a file it has read
                    (write, {"file_path": path, "content": BROKEN}),
                    (write, {"file_path": path, "content": FIXED})]
    if agent == "codex":  # per-launch hooks only with the person's own opt-in
        s.write_config(f'[run]\ncodex_hook_trust = "bypass"\n[trust]\n'
                       f'feedback_projects = ["{s.workdir}"]\n')
        # Codex runs no hook for apply_patch: the session's watcher runs the check, and
        # the next shell call's PostToolUse hook hands the result over
        server.calls = [("cat calc.py", {}),
                        (_patch("calc.py", "    return a + b", "    return a - b"), {}),
                        ("sleep 3; cat calc.py", {}),
                        (_patch("calc.py", "    return a - b", "    return a + b"), {}),
                        ("sleep 3; cat calc.py", {})]
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "hooks" in (st.get("channels") or []), st
    t0 = time.time()
    s.type_keys("Refactor calc please. [[loop]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: server.step == -1 and sum(b[2] for b in _bodies(s)) >= 3, 120,
                 "both edits made and their results sent")
    bodies = [b for b in _bodies(s) if b[0] > t0]
    results = [b for b in bodies if b[2]]
    # the request carrying the breaking edit's result carries the failure, trimmed (Codex:
    # the one after its next shell call, whose hook hands over what the watcher queued)
    at_edit = agent != "codex"
    label = "[hook:pytest]" if at_edit else "[filesystem:pytest]"
    first = results[1 if at_edit else 2][1]
    assert "FAILED test_calc.py::test_add" in first, first[-3000:]
    assert "assert 0 == 4" in first and label in first
    assert "not a request from the person" in first
    assert "now passing" not in first
    # the next one (after the fix) says it passes, once; the failure is not repeated
    last = results[-1][1]
    assert last.count("now passing") == 1, last[-3000:]
    assert last.count("FAILED test_calc.py::test_add") == 1  # the first result, in the history
    assert (s.workdir / "calc.py").read_text() == FIXED
    hist = s.cli_json("history", agent, "--source", "pytest")
    assert [h["status"] for h in hist] == ["delivered", "delivered"]
    at = first.index(label)
    print(first[at - 200: at + 900].encode().decode("unicode_escape", "replace"))
    print(f"{agent}: edit -> failure in the {'next' if at_edit else 'next but one'} request;"
          " fix -> 'now passing' once")


# --- Aider: no hooks; the watcher runs the check, the read file carries the result ---------

#: Aider's "diff" edit blocks (the session runs with ``--edit-format diff``).
FENCE = "```"
NO_MATCH = "this line is not in the file"


def _block(path: str, old: str, new: str) -> str:
    return f"{path}\n{FENCE}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n{FENCE}\n"


class AiderLoopServer(ModelServer):
    """``[[fbloop]]``: the scripted Aider turn of the correction loop.

    * A (the person's request): a block that breaks ``calc.py`` and one that
      matches nothing, so Aider writes the first and at once reflects the
      failed one to the model (same turn, no dialog);
    * B (that reflection, built before any check could finish): held until
      the test says the watcher's failure is in Aider's read file (at most
      ``HOLD_MAX_S``), then another block that matches nothing;
    * C (its reflection): Aider re-reads its ``--read`` files for every
      request, so this one carries the failure; the reply fixes ``calc.py``
      and the turn ends (every block applied, the lint passes);
    * D and later: a plain answer ("now passing" is typed after the turn).
    """

    def __init__(self) -> None:
        super().__init__()
        self.stage = 0
        self.release = threading.Event()

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        if side is None and api == "chat":
            if self.stage == 0 and "[[fbloop]]" in turn.text:
                self.stage = 1
                return Plan(text="Refactoring.\n\n" + _block("calc.py", "    return a + b",
                                                             "    return a - b")
                            + "\n" + _block("calc.py", NO_MATCH, "x = 1"))
            if self.stage == 1:
                self.stage = 2
                self.release.wait(HOLD_MAX_S)  # aider waits on the model meanwhile
                return Plan(text="Let me look again.\n\n" + _block("calc.py", NO_MATCH, "x = 2"))
            if self.stage == 2:
                self.stage = 3
                return Plan(text="The test fails: fixing.\n\n"
                            + _block("calc.py", "    return a - b", "    return a + b"))
            if self.stage >= 3:
                self.stage += 1
                return Plan(text="Good, nothing else to do.")
        return super()._plan(api, body, turn, tools, side)


HOLD_MAX_S = 60.0


def _chat_bodies(s: AgentSession) -> list[tuple[float, str]]:
    return [(r.time, json.dumps(r.body, ensure_ascii=False)) for r in s.server.requests()
            if not r.side and r.body is not None and r.api == "chat"]


def _pytest_history(s: AgentSession) -> list[dict[str, Any]]:
    """The check's messages, oldest first."""
    return sorted((m for m in s.history() if m.get("source_id") == "pytest"),
                  key=lambda m: float(m["created"]))


def test_aider_edit_breaks_a_test_the_watcher_result_rides_its_next_request_and_recovery_once(
    make_session: Make,
) -> None:
    """Aider has no hooks: its edit is seen by the session's watcher, which runs
    pytest and queues the failure while Aider waits on the model; the read-file
    channel puts it in Aider's ``--read`` file, so the *next request of the same
    turn* (C, the reflection after B) carries it. B cannot: Aider built it the
    moment it applied A's edit, before any check could end, which is why B's
    reply is held until the failure is in the file (no timing decides). The fix
    ends the turn; "now passing" is then typed, once, as request D."""
    from .agents import prepare_agent

    s = make_session("aider")
    server = AiderLoopServer().start()
    s.server.stop()
    s.server = server
    launch = prepare_agent(s.agent, s.home, s.workdir, server.url)
    keep = {k: v for k, v in s.env.items() if k.startswith(("XDG_", "PYTHONPATH", "AGENTWRAP_"))}
    s.env = {**launch.env, **keep}
    _project(s)
    s.argv = [*launch.argv, "--edit-format", "diff", "calc.py"]
    try:
        _aider_loop(s, server)
    except AssertionError:
        log = s._paths().supervisor_log(s.name)
        print("supervisor log:\n", log.read_text()[-6000:] if log.exists() else "(none)")
        print("screen:\n", s.screen())
        raise


def _aider_loop(s: AgentSession, server: AiderLoopServer) -> None:
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "read-file" in (st.get("channels") or []), st
    t0 = time.time()
    s.type_keys("Refactor calc please. [[fbloop]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: server.stage >= 2, 60, "request B (the reflection) at the model")
    s.wait_until(lambda: [m["status"] for m in _pytest_history(s)] == ["delivering"], 60,
                 "the watcher's failure in Aider's read file")
    assert server.stage == 2  # B still held: the failure cannot be in A or B
    server.release.set()
    s.wait_until(lambda: server.stage >= 4, 90, "request D ('now passing', typed)")
    s.wait_until(lambda: [m["status"] for m in _pytest_history(s)] == ["delivered"] * 2, 30,
                 "both results delivered")
    s.wait_state("ready", timeout=60)
    bodies = [b for t, b in _chat_bodies(s) if t > t0]
    assert len(bodies) == 4, [b[-300:] for b in bodies]
    a, b, c, d = bodies
    assert "[[fbloop]]" in a and "SearchReplaceNoExactMatch" in b
    for body in (a, b, d):  # only C carried the failure: the read file is emptied once read
        assert "FAILED test_calc.py::test_add" not in body
    assert c.count("FAILED test_calc.py::test_add") == 1, c[-3000:]
    assert "assert 0 == 4" in c and "[filesystem:pytest]" in c
    assert "not a request from the person" in c
    assert "SearchReplaceNoExactMatch" in c  # the reflection of B: the same turn
    assert sum(x.count("now passing") for x in bodies) == 1
    assert d.count("now passing") == 1, d[-3000:]
    assert (s.workdir / "calc.py").read_text() == FIXED
    hist = _pytest_history(s)
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        channels = [[x.channel for x in svc.message(m["id"]).attempts] for m in hist]
    assert channels[0] == ["read-file"], channels  # the failure: in the file, mid-turn
    # the recovery: typed after the turn (it may have sat in the file a moment first, if
    # Aider's screen still showed it waiting on the model; unread, it went back to typing)
    assert channels[1][-1] == "tmux-paste" and set(channels[1]) <= {"read-file", "tmux-paste"}, \
        channels
    memory = s._paths().feedback_memory(s.name)  # what pytest last said: "passing"
    assert memory.is_file()
    s.press("C-d")  # aider quits: the session ends, and its feedback memory goes
    s.wait_until(lambda: s.state().get("liveness") == "ended", 60, "the session ended")
    s.wait_until(lambda: not memory.exists(), 30, "the session's feedback memory removed")
    at = c.index("[filesystem:pytest]")
    print(c[at - 300: at + 900].encode().decode("unicode_escape", "replace"))
    print(f"aider: edit (A) -> failure in request C (the next built after the watcher's"
          f" result was in the read file; B was built first); fix -> 'now passing' once"
          f" (typed: {channels[1]})")
