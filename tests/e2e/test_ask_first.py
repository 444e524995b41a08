"""Issue 35: real Claude Code 2.1.332 in its ask-first mode, an allow-everything rule.

Started with ``--permission-mode default`` and a model its auto mode supports
(``claude-opus-4-6``: then each permission dialog draws ``Tip: auto mode handles
these prompts for you ...`` under ``Bash command`` and offers to switch to auto
mode), against the loopback model server. The person's config holds one rule that
approves everything. Before the fix the supervisor read the tip as the command:
the hook's request no longer paired with the dialog, the deny-list judged the tip,
and the rule typed "Yes" to ``rm -rf ~/important`` (the folder was deleted).

(a) with the agent's hooks: the question carries the exact command, never the tip,
    and the deny-list holds it; the folder is still there;
(b) without hooks (``--no-channels``), in a pane too narrow for the command: the
    screen's reading wraps, so it is a guess no rule approves, harmless or not; a
    short ``rm -rf ~/important`` is read whole (never the tip) and held;
(c) a rule added while a session started without rules runs (its PermissionRequest
    hook then runs in the background, and Claude ignores what it prints): the rule's
    answer is given on the screen and recorded applied once the dialog closed,
    never claimed through the hook.

What happened is read from the audit log, the registry's question, the answers
table and the files, never from the screen alone. Waits are deadlines.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import answer, wait_question
from .test_hook_questions import audit, call_bash, hook_question, start, stored_answers

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]

ALLOW_EVERYTHING = '[[answer_rules]]\nname = "everything"\nanswer = { option = 1 }\n'
#: A model Claude Code 2.1.332's auto mode supports: its dialogs draw the tip.
AUTO_MODEL = "claude-opus-4-6"
LONG = f"touch {TOOL_FILE} && echo " + "-".join(f"part{i:02d}" for i in range(40))


def ask_first(make_session: Make) -> AgentSession:
    """A Claude session in its ask-first mode, with the auto-mode model and a folder
    ``important`` in its HOME."""
    s = make_session("claude")
    s.env.update(ANTHROPIC_MODEL=AUTO_MODEL, ANTHROPIC_SMALL_FAST_MODEL=AUTO_MODEL)
    s.argv += ["--permission-mode", "default"]
    (s.home / "important").mkdir()
    (s.home / "important" / "notes.txt").write_text("keep me\n")
    return s


def intact(s: AgentSession) -> bool:
    return (s.home / "important" / "notes.txt").read_text() == "keep me\n"


def vetoes(s: AgentSession) -> list[dict[str, Any]]:
    return [a for a in audit(s) if a["event"] == "policy_held"]


def held(s: AgentSession, q: dict[str, Any], why: str, before: int = 0) -> None:
    """The rule's approval was vetoed (``why`` in the reason; ``before`` vetoes were
    audited earlier), nothing was answered by it, and the person refuses the call."""
    found: list[dict[str, Any]] = s.wait_until(
        lambda: vetoes(s)[before:], 30, "the policy's veto")
    assert found[0]["vetoed"] == "everything" and why in found[0]["reason"], found
    assert not [a for a in audit(s) if a["event"] == "policy_answered"], audit(s)
    assert s.state()["state"] == "waiting_input"
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_state("ready", timeout=60)


def no_tip(q: dict[str, Any]) -> None:
    assert not (q.get("command") or "").startswith("Tip:"), q
    assert "auto mode" not in (q.get("command") or ""), q


def test_with_hooks_the_tip_is_never_the_command_and_rm_rf_is_held(make_session: Make) -> None:
    s = ask_first(make_session)
    start(s, ALLOW_EVERYTHING)
    call_bash(s, "rm -rf ~/important")
    q = hook_question(s)
    assert "Tip: auto mode handles these prompts" in s.screen()  # the shape of the issue
    no_tip(q)
    assert (q["kind"], q["tool"], q["command"]) == ("permission", "Bash", "rm -rf ~/important"), q
    held(s, q, "built-in deny-list")
    assert intact(s)


def test_without_hooks_a_wrapped_reading_is_never_approved(make_session: Make) -> None:
    s = ask_first(make_session)
    s.write_config(ALLOW_EVERYTHING)
    s.start("--no-channels", "--cols", "120", "--rows", "40")  # the box wraps LONG
    s.wait_state("ready", timeout=90)
    call_bash(s, LONG)
    q = wait_question(s)
    assert "Tip: auto mode handles these prompts" in s.screen()
    no_tip(q)
    assert (q["tool"], q["source"]) == ("Bash", "screen"), q
    assert q["command"].startswith(f"touch {TOOL_FILE} && echo part00") and q["command_unsure"], q
    held(s, q, "wraps over")
    assert not (s.workdir / TOOL_FILE).exists()

    call_bash(s, "rm -rf ~/important")  # one line: read whole, and held by the deny-list
    q = s.wait_until(lambda: (st := s.state())["state"] == "waiting_input" and st["question"]
                     and st["question"]["command"] != LONG and st["question"], 90,
                     "the second dialog's question")
    no_tip(q)
    assert (q["command"], q["command_unsure"]) == ("rm -rf ~/important", ""), q
    held(s, q, "built-in deny-list", before=1)
    assert intact(s)


def test_a_rule_added_while_the_session_runs_is_given_on_the_screen(make_session: Make) -> None:
    """Started without rules, so Claude was told to run its PermissionRequest hook in
    the background (it ignores what that hook prints). A rule added now must not be
    claimed as given through the hook (before: "approved Bash touch tool_ran.txt by
    rule 'touch' (through the agent's hook)" in the log, the answer kept as applied,
    and the dialog open until a person answered); it is typed on the screen and
    recorded applied once the dialog closed."""
    s = ask_first(make_session)
    start(s)  # no rules: the hook runs in the background
    settings = json.loads((s._paths().state_dir / "launch" / s.name
                           / "claude-settings.json").read_text())
    assert settings["hooks"]["PermissionRequest"][0]["hooks"][0].get("async") is True, settings
    s.write_config('[[answer_rules]]\nname = "touch"\ncommand = "touch *"\n'
                   'answer = { option = 1 }\n')
    call_bash(s, f"touch {TOOL_FILE}")
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created by the rule")
    answered: list[dict[str, Any]] = s.wait_until(
        lambda: [a for a in audit(s) if a["event"] == "policy_answered"], 30,
        "the rule's answer in the audit log")
    assert [(a.get("via"), a["rule"], a["command"]) for a in answered] == [
        (None, "touch", f"touch {TOOL_FILE}")], answered
    kept = s.wait_until(lambda: [a for a in stored_answers(s) if a[0] != "pending"] or None, 30,
                        "the answer concluded")
    assert [(status, source) for status, source, _ in kept] == [("applied", "policy")], kept
    assert "via" not in kept[0][2], kept
    log = s._paths().supervisor_log(s.name).read_text()
    assert "(through the agent's hook)" not in log, log[-3000:]
    s.wait_state("ready", timeout=60)
