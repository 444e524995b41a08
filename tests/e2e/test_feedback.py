"""The same-turn correction loop on a real agent: the model edits a file, the
project's check runs in the agent's between-tool-calls hook, and its result is
in the very next model request; the model fixes it and "now passing" arrives
once (issue 12).

The model server is scripted: one tool call per request (read, break, fix, each
held back a little so the agent is visibly inside its tool loop), then
``done``. The check is the real pytest on a one-test project.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import Plan, ToolSpec
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
