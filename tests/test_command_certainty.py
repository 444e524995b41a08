"""What every agent's permission dialogs are read as, and which readings a rule may approve.

Issue 35: Claude Code 2.1.332 draws ``Tip: auto mode handles these prompts for you
...`` under ``Bash command``; the profile's subject pattern took the tip for the
command, so the deny-list judged the tip and an allow-everything rule approved
``rm -rf ~/important``. Here, over every real dialog captured from the pinned CLIs
(tests/fixtures/screens, scripts/capture_screens.py):

* a table of what each permission dialog is read as (tool, command, and whether
  the reading is certain): a new fixture must be added to it;
* no tip, description or other prose is ever read as a command;
* an allow-everything rule approves only a certain reading that the deny-list
  passes, and the deny-list judges every text the dialog showed for the call;
* a reading the agent's own request for the dialog disagrees with, or one whose
  command box was not found, is never approved.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_profile_screens import NAME_RE, SCREENS, settled, snapshot_of

from agentwrap.answers.certainty import candidates, doubt, misfit
from agentwrap.answers.hook_questions import (
    EVERY_REQUEST,
    HookQuestion,
    HookQuestions,
    write_question,
)
from agentwrap.answers.rules import BUILTIN, decide
from agentwrap.config import AnswerRule
from agentwrap.detect.question import Item, Question
from agentwrap.detect.states import State
from agentwrap.paths import Paths
from agentwrap.terminal.screen import Snapshot

ALLOW_ALL = AnswerRule(name="everything", option=1)
TIP = 'Tip: auto mode handles these prompts for you — choose "switch to auto mode" below'
LONG = "touch tool_ran.txt && echo " + "-".join(f"part{i:02d}" for i in range(40))
GEMINI_LONG = ("touch tool_ran.txt && echo 'agentwrap e2e: a command longer than 150 characters,"
               " so that Gemini CLI titles its dialog with the description' > /dev/null")

#: (agent, what) -> (tool, command as read (None: none read), certain: a rule may approve it).
#: A command that wraps differs by size: {size: command} then.
READ: dict[tuple[str, str], tuple[str | None, str | dict[str, str] | None, bool | dict[str, bool]]] = {
    ("aider", "add-file-to-chat"): ("add_file", "README.md", True),
    ("aider", "edit-file-not-in-chat"): ("edit", "./README.md", True),
    ("aider", "permission"): ("edit", "tool_ran.txt", True),
    ("aider", "run-shell-command"): ("shell", "ls -la", True),
    ("aider", "onboarding"): (None, None, True),  # a confirm that runs nothing
    ("claude", "api-key"): (None, None, True),  # a confirm that runs nothing (2.1.332)
    # Claude Code 2.1.197 (no box; the command, then its description)
    ("claude", "permission"): ("Bash", "touch tool_ran.txt", True),
    ("claude", "create-file"): ("Create", "hello.txt", True),
    ("claude", "edit-file"): ("Edit", "notes.md", True),
    ("claude", "read-outside-project"): ("Read", "Read(/etc/hostname)", True),
    ("claude", "web-fetch"): ("Fetch", "https://example.com/", True),
    # Claude Code 2.1.332 in its ask-first mode, a model its auto mode supports: the
    # tip, the description, the command in a box between dashed lines
    ("claude", "bash-ask-first"): ("Bash", "rm -rf ~/important", True),
    ("claude", "bash-pipe-ask-first"): ("Bash", "curl -s http://127.0.0.1:9/none | sh", True),
    ("claude", "bash-long-ask-first"): ("Bash", None, False),  # wrapped in its box
    ("claude", "create-file-ask-first"): ("Create", "hello.txt", True),
    ("claude", "edit-file-ask-first"): ("Edit", "notes.md", True),
    ("claude", "read-outside-project-ask-first"): ("Read", "Read(/etc/hostname)", True),
    ("cline", "edit-file"): ("editor", None, True),  # the file's full path (the capture's)
    ("cline", "permission-ask-first"): ("run_commands", "touch tool_ran.txt", True),
    ("codex", "edit-approval"): ("shell", "/var/tmp/agentwrap-capture-never/notes.txt", True),
    ("codex", "permission"): ("shell", "touch tool_ran.txt", True),
    ("copilot", "create-file"): ("Create", "hello.txt", True),
    ("copilot", "permission"): ("bash", "touch tool_ran.txt", True),
    ("gemini", "at-file-outside-workspace"): ("read_file", "/etc/hostname", True),
    ("gemini", "create-file"): ("WriteFile", "Writing to hello.txt", True),
    ("gemini", "edit-file"): ("Edit", "notes.md: first line => second line", True),
    ("gemini", "permission"): ("Shell", "touch tool_ran.txt", True),
    # the description titles the call; the command is read from its box, exact on one line
    ("gemini", "shell-described"): ("Shell", GEMINI_LONG,
                                    {"80x24": False, "160x45": False, "200x50": True}),
    ("gemini", "web-fetch"): (None, None, False),  # nothing says what it fetches
    ("kimi", "permission"): ("Bash", "touch tool_ran.txt", True),
    ("opencode", "edit-file"): ("Edit", "notes.md", True),
    ("opencode", "permission"): ("Shell command", "touch tool_ran.txt", True),
    ("opencode", "web-fetch"): ("WebFetch", "https://example.com/", True),
    ("qwen", "create-file"): ("WriteFile", "hello.txt", True),
    ("qwen", "permission"): ("Shell", "touch tool_ran.txt", True),
    ("qwen", "web-fetch"): ("WebFetch", "https://example.com/", True),
}
#: Fixtures whose command the table does not pin (wrapped differently at each size,
#: or naming the capture's temporary folder).
UNPINNED = {("claude", "bash-long-ask-first"), ("cline", "edit-file")}
#: Certain readings the deny-list holds: outside the project, a download run, and
#: Gemini's edit line (judged as the shell would read it: "> second" is a target
#: that cannot be told).
HELD = {("claude", "bash-ask-first"), ("claude", "bash-pipe-ask-first"), ("gemini", "edit-file")}


def permission_fixtures() -> list[pytest.param]:
    out = []
    for f in sorted(SCREENS.glob("*/waiting_input__*.txt")):
        m = NAME_RE.match(f.name)
        assert m is not None
        q = settled(f.parent.name, snapshot_of(f, m)).question
        if q is not None and q.kind in ("permission", "confirm"):
            out.append(pytest.param(f, m, q, id=f"{f.parent.name}/{f.stem}"))
    return out


FIXTURES = permission_fixtures()


def _size(m: re.Match[str]) -> str:
    return f"{m['cols']}x{m['rows']}"


def _certain(key: tuple[str, str], m: re.Match[str]) -> bool:
    certain = READ[key][2]
    return certain[_size(m)] if isinstance(certain, dict) else certain


@pytest.mark.parametrize(("path", "m", "q"), FIXTURES)
def test_what_each_dialog_is_read_as(path: Path, m: re.Match[str], q: Question) -> None:
    key = (path.parent.name, m["what"])
    assert key in READ, f"add {key} to READ: read as tool {q.tool!r}, command {q.command!r}"
    tool, command, _ = READ[key]
    assert q.tool == tool, q
    if key not in UNPINNED:
        want = command[_size(m)] if isinstance(command, dict) else command
        assert q.command == want, q
    certain = _certain(key, m)
    assert (doubt(q) == "") is certain, (doubt(q), q)


@pytest.mark.parametrize(("path", "m", "q"), FIXTURES)
def test_no_prose_is_ever_read_as_the_command(path: Path, m: re.Match[str], q: Question) -> None:
    """The tip (and any sentence a dialog draws near the call) is never the command."""
    assert not (q.command or "").startswith("Tip:"), q
    assert "auto mode" not in (q.command or ""), q
    if q.command and _certain((path.parent.name, m["what"]), m):
        assert not misfit(q.tool, q.command), q


@pytest.mark.parametrize(("path", "m", "q"), FIXTURES)
def test_an_allow_everything_rule_approves_only_a_certain_harmless_reading(
    path: Path, m: re.Match[str], q: Question,
) -> None:
    d = decide(q, path.parent.name, [ALLOW_ALL])
    assert d is not None
    certain = _certain((path.parent.name, m["what"]), m)
    if certain and (path.parent.name, m["what"]) not in HELD:
        assert d.answer == {"option": 1}, d
    else:
        assert d.holds and d.rule == BUILTIN and d.vetoed == "everything", d


@pytest.mark.parametrize(("path", "m", "q"), FIXTURES)
def test_the_deny_list_judges_every_text_shown_for_the_call(
    path: Path, m: re.Match[str], q: Question,
) -> None:
    """Whichever of the dialog's texts was taken for the command, a destructive one
    among them is held: here the line it is described with."""
    q = replace(q, description="rm -rf ~/important")
    assert "rm -rf ~/important" in candidates(q)
    d = decide(q, path.parent.name, [ALLOW_ALL])
    assert d is not None and d.holds, d


@pytest.mark.parametrize(("path", "m", "q"), FIXTURES)
def test_a_tip_read_as_the_command_is_never_approved(
    path: Path, m: re.Match[str], q: Question,
) -> None:
    """The class of the bug, for every dialog shape: a reader that takes the dialog's
    tip for the command gets a reading no rule approves."""
    misread = replace(q, command=TIP)
    assert doubt(misread), misread
    d = decide(misread, path.parent.name, [ALLOW_ALL])
    assert d is not None and d.holds, d


def _hook(agent: str, tool: str, command: str) -> HookQuestion:
    import time

    return HookQuestion(agent, "PermissionRequest", "permission", tool, tool, command,
                        (Item(question="scripted"),), time.time())


@pytest.mark.parametrize(("path", "m", "q"), [p for p in FIXTURES if p.values[2].tool])
def test_a_reading_the_agents_request_disagrees_with_is_never_approved(
    tmp_path: Path, path: Path, m: re.Match[str], q: Question,
) -> None:
    """The hook's fresh request for a dialog of the same tool says another command:
    the screen's text is no certainty (the old misreading, seen from the hook's side)."""
    paths = Paths.from_env({"XDG_CONFIG_HOME": str(tmp_path / "c"),
                            "XDG_STATE_HOME": str(tmp_path / "s"),
                            "XDG_RUNTIME_DIR": str(tmp_path / "r")})
    paths.runtime_dir.mkdir(parents=True, mode=0o700)
    assert q.tool
    write_question(paths, "s", _hook(path.parent.name, q.tool, "echo another-call"))
    refined = HookQuestions(paths, "s").refine(q)
    if q.kind != "permission" or path.parent.name in EVERY_REQUEST:
        assert refined == q  # (Copilot's hook tells calls no dialog followed too)
        return
    assert refined.command_unsure and refined.id == q.id, refined
    d = decide(refined, path.parent.name, [ALLOW_ALL])
    assert d is not None and d.holds, d
    assert "hook" in d.reason or q.command_unsure, d  # (an unsure reading keeps its reason)
    # the request for this very dialog: the exact command, certain (a wrapped one too)
    exact_text = LONG if m["what"] == "bash-long-ask-first" else q.command
    if exact_text and (doubt(q) == "" or exact_text == LONG):
        write_question(paths, "s", _hook(path.parent.name, q.tool, exact_text))
        exact = HookQuestions(paths, "s").refine(q)
        assert exact.source == "hook" and exact.command == exact_text, exact
        assert doubt(exact) == "", exact


SIZES = ("80x24", "160x45", "200x50")


@pytest.mark.parametrize("size", SIZES)
def test_claude_2_1_332_without_its_command_box_is_unsure(size: str) -> None:
    """The tip says the dialog draws the command in a box; a screen where the box is
    not found (cut, redrawn, changed) gives a guess, never approved."""
    f = SCREENS / "claude" / f"waiting_input__bash-ask-first__{size}.txt"
    text = f.read_text(encoding="utf-8")
    assert "Tip:" in text
    lines = text.splitlines()
    kept = [line for line in lines if "╌" not in line and line.strip() != "rm -rf ~/important"]
    cols, rows = (int(x) for x in size.split("x"))
    det = settled("claude", Snapshot.from_text("\n".join(kept), cols=cols, rows=rows))
    assert det.reading.state is State.WAITING_INPUT
    q = det.question
    assert q is not None and q.tool == "Bash", q
    assert q.command != TIP and not (q.command or "").startswith("Tip")
    assert "box was not found" in q.command_unsure, q
    d = decide(q, "claude", [ALLOW_ALL])
    assert d is not None and d.holds, d


@pytest.mark.parametrize("text", [
    TIP, "Tip: switch to auto mode", "Remove the important folder — carefully",
    "Note: this runs a script", "“quoted” words",
])
def test_prose_is_not_a_command_line(text: str) -> None:
    assert misfit("Bash", text)


@pytest.mark.parametrize(("tool", "text"), [
    ("Bash", "touch x"), ("Bash", "FOO=1 make"), ("shell", "./run.sh --fast"),
    ("Bash", "(cd a && ls)"), ("Fetch", "https://example.com/"), ("Read", "Read(/etc/x)"),
    ("Edit", "notes.md"), ("WriteFile", "Writing to hello.txt"), ("Bash", "~/bin/x"),
])
def test_requests_look_like_their_kind(tool: str, text: str) -> None:
    assert misfit(tool, text) == ""


@pytest.mark.parametrize(("tool", "text"), [
    ("Fetch", "example dot com"), ("WebFetch", "Summarise it"), ("Edit", "the notes"),
])
def test_a_request_of_another_kind_is_a_misfit(tool: str, text: str) -> None:
    assert misfit(tool, text)


def test_an_exact_command_is_not_judged_on_its_shape() -> None:
    """The hook's (or the app-server's) text is the request itself: no shape check."""
    q = Question(id="x", kind="permission", title="Bash command", questions=(Item("ok?"),),
                 tool="Bash", command="Tip: a program named so", source="hook")
    assert doubt(q) == ""
    assert doubt(replace(q, source="screen"))


def test_the_agents_whose_hook_tells_every_request_are_the_protocols() -> None:
    from agentwrap.answers.hook_questions import EVERY_REQUEST
    from agentwrap.surfaces.hooks.protocol import TEXT_ONLY_QUESTIONS

    assert EVERY_REQUEST == TEXT_ONLY_QUESTIONS
