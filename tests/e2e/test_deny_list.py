"""Issue 25: an allow-everything rule never approves destroying what is outside the
project, end to end on real Claude Code, Codex and Gemini CLI.

The person's own config holds one ``[[answer_rules]]`` rule that approves every
question (as someone running agents unattended writes it; Codex's hooks with
``codex_hook_trust = "bypass"``). In one session per agent, the model asks to run:

1. ``rm -rf ~/important`` (a real folder in the test's throwaway HOME): held for the
   person, ``waiting_input``, the policy's veto audited; the person refuses it and
   the folder is still there;
2. ``git reset --hard`` while the project has uncommitted work: held the same way,
   the work still there;
3. one more per agent (a ``cd`` before the delete, a truncation, a move away):
   held the same way;

(Gemini CLI keeps a refused call's prompt in the next turn: the scripted model
takes the newest ``[[call]]``, so one session serves every step for every agent.)
4. ``rm -rf build`` inside the project: the rule approves it (through the agent's
   hook for Claude Code and Codex, typed for Gemini CLI) and ``build`` is gone:
   the deny-list holds what it says, not everything.

What happened is read from the audit log, the registry's question and the files,
never from the screen alone. Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import AgentSession
from .test_answering import answer
from .test_hook_questions import audit, call_bash, hook_question, start

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]

ALLOW_EVERYTHING = '[[answer_rules]]\nname = "everything"\nanswer = { option = 1 }\n'
#: The third held command, one per agent (the first two are the same for all).
EXTRA = {
    "claude": "cd ~ && rm -rf important",
    "codex": "truncate -s 0 ~/important/notes.txt",
    "gemini": "mv ~/important ../moved",
}


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def held(s: AgentSession, command: str) -> None:
    """The model asks to run ``command``: the question waits for the person, the
    policy's veto (the built-in deny-list over the rule) is audited, nothing was
    answered automatically; the person refuses it."""
    before = len([a for a in audit(s) if a["event"] == "policy_held"])
    call_bash(s, command)
    q = hook_question(s)
    assert (q["kind"], q["command"]) == ("permission", command), q
    vetoes: list[dict[str, Any]] = s.wait_until(
        lambda: (found := [a for a in audit(s) if a["event"] == "policy_held"])[before:]
        and found[before:], 30, f"the policy's veto of {command!r} in the audit log")
    assert vetoes[0]["vetoed"] == "everything" and "built-in deny-list" in vetoes[0]["reason"], \
        vetoes
    assert s.state()["state"] == "waiting_input"
    assert not [a for a in audit(s) if a["event"] == "policy_answered"], audit(s)
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_state("ready", timeout=60)


def session(make_session: Make, agent: str) -> AgentSession:
    """A started session with the allow-everything rule, a folder ``important`` in
    its HOME, uncommitted work in its project and a ``build`` folder there."""
    s = make_session(agent)
    (s.home / "important").mkdir()
    (s.home / "important" / "notes.txt").write_text("keep me\n")
    project = s.workdir
    if not (project / ".git").exists():
        git(project, "init", "-q")
    (project / "work.txt").write_text("committed\n")
    git(project, "add", "work.txt")
    git(project, "commit", "-qm", "work")
    (project / "work.txt").write_text("uncommitted work\n")
    (project / "build").mkdir()
    (project / "build" / "out.o").write_text("built\n")
    start(s, ALLOW_EVERYTHING)
    return s


def untouched(s: AgentSession) -> bool:
    return ((s.home / "important" / "notes.txt").read_text() == "keep me\n"
            and (s.workdir / "work.txt").read_text() == "uncommitted work\n")


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_an_allow_everything_rule_never_destroys_outside_the_project(
    make_session: Make, agent: str,
) -> None:
    s = session(make_session, agent)
    for command in ("rm -rf ~/important", "git reset --hard", EXTRA[agent]):
        held(s, command)
        assert untouched(s), command

    call_bash(s, "rm -rf build")  # inside the project: the rule approves it
    s.wait_until(lambda: not (s.workdir / "build").exists(), 90, "build removed by the rule")
    answered = s.wait_until(
        lambda: [a for a in audit(s) if a["event"] == "policy_answered"], 30,
        "the rule's answer in the audit log")
    assert [(a["rule"], a["command"]) for a in answered] == [("everything", "rm -rf build")], \
        answered
    assert untouched(s)
