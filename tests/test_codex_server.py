"""The typed view of Codex's app-server protocol and the support probe, without
Codex (the real server is driven by tests/e2e/test_codex_server.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agentwrap.codex_server import ApprovalRequest, support_problem, thread_status, user_message
from agentwrap.codex_server.protocol import approval_request
from agentwrap.errors import AppServerError

# As Codex 0.169.0 sent it (docs/codex-app-server.md).
APPROVAL = {
    "kind": "command", "threadId": "t1", "turnId": "u1", "itemId": "call_1",
    "reason": "Create tool_ran.txt (test fixture)",
    "command": "/bin/bash -lc 'touch tool_ran.txt'", "cwd": "/w",
    "commandActions": [{"type": "unknown", "command": "touch tool_ran.txt"}],
    "availableDecisions": [
        "accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}, "cancel",
    ],
}


def test_an_approval_request_keeps_the_exact_command_cwd_and_decisions() -> None:
    req = approval_request(0, "item/commandExecution/requestApproval", APPROVAL)
    assert isinstance(req, ApprovalRequest)
    assert req.command == "/bin/bash -lc 'touch tool_ran.txt'" and req.cwd == "/w"
    assert req.actions == ("touch tool_ran.txt",)
    assert req.decisions == ("accept", "acceptWithExecpolicyAmendment", "cancel")
    assert (req.thread_id, req.turn_id, req.item_id) == ("t1", "u1", "call_1")


def test_a_request_without_its_thread_or_of_another_kind_is_refused() -> None:
    with pytest.raises(AppServerError):
        approval_request(0, "item/commandExecution/requestApproval", {"command": "x"})
    with pytest.raises(AppServerError):
        approval_request(0, "item/tool/call", APPROVAL)


def test_thread_status_and_user_message_items() -> None:
    busy = thread_status({"threadId": "t", "status": {"type": "active", "activeFlags": ["waitingOnApproval"]}})
    assert busy.busy and busy.flags == ("waitingOnApproval",)
    assert not thread_status({"threadId": "t", "status": {"type": "idle"}}).busy
    item = {"type": "userMessage", "id": "i", "clientId": "aw-1",
            "content": [{"type": "text", "text": "hi", "text_elements": []}]}
    msg = user_message(item, "u")
    assert msg is not None and (msg.client_id, msg.text, msg.turn_id) == ("aw-1", "hi", "u")
    assert user_message({"type": "agentMessage", "id": "m", "text": "x"}, None) is None


def test_a_codex_without_the_app_server_is_named_as_such(tmp_path: Path) -> None:
    old = tmp_path / "codex"
    old.write_text("#!/bin/sh\necho 'Usage: codex [OPTIONS] [PROMPT]'\n", encoding="utf-8")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    problem = support_problem(str(old))
    assert problem is not None and "app-server" in problem
    assert support_problem(str(tmp_path / "missing")) is not None


def test_a_launch_with_an_old_codex_falls_back_to_todays_and_says_why(tmp_path: Path) -> None:
    from agentwrap.app_server.launch import describe_app_server, with_app_server
    from agentwrap.config import RunConfig
    from agentwrap.detect.profiles import load_profile
    from agentwrap.paths import Paths
    from agentwrap.session_options import SessionOptions

    old = tmp_path / "codex"
    old.write_text("#!/bin/sh\necho 'Usage: codex [OPTIONS] [PROMPT]'\n", encoding="utf-8")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    paths = Paths(config_dir=tmp_path / "c", state_dir=tmp_path / "s", runtime_dir=tmp_path / "r")
    profile = load_profile("codex", paths)
    argv = [str(old), "-c", "x=1"]
    on = RunConfig(codex_app_server=True)
    got, opts = with_app_server(on, profile, paths, "cx", argv, {}, tmp_path)
    assert got == argv and "app_server" not in opts
    note = describe_app_server(SessionOptions.from_json(opts))
    assert note is not None and note.startswith("off: this Codex has no") and "typed" in note
    # the switch off: nothing probed, nothing recorded (on is the default)
    assert RunConfig().codex_app_server
    off = RunConfig(codex_app_server=False)
    assert with_app_server(off, profile, paths, "cx", argv, {}, tmp_path) == (argv, {})


def test_the_server_launch_needs_codexs_trust_decision_for_the_project(tmp_path: Path) -> None:
    """Codex's remote TUI asks no folder-trust question: without a decision in
    the person's config for the folder (or its git root) the launch stays
    Codex's own, so the person is asked as before."""
    from agentwrap.app_server.launch import trust_decided

    home, project = tmp_path / "codex-home", tmp_path / "repo"
    (project / "sub").mkdir(parents=True)
    home.mkdir()
    env = {"CODEX_HOME": str(home)}
    assert not trust_decided(env, project)  # no config at all
    config = home / "config.toml"
    config.write_text('model = "x"\n', encoding="utf-8")
    assert not trust_decided(env, project)
    config.write_text(f'[projects."{project}"]\ntrust_level = "untrusted"\n', encoding="utf-8")
    assert trust_decided(env, project)  # decided, either way: Codex asks nothing
    assert not trust_decided(env, project / "sub")  # not a git repo: the folder's own entry
    (project / ".git").mkdir()
    assert trust_decided(env, project / "sub")  # its git root's entry
    config.write_text("[projects\n", encoding="utf-8")
    assert not trust_decided(env, project)  # unreadable: as if undecided
    assert trust_decided({"HOME": str(tmp_path)}, project) is False
