"""The question a waiting agent asks, read from the real screens of the four CLIs.

Each waiting_input fixture goes through the profile's detector (the dialog it
decides on) and the question reader, at every captured size: what is asked,
the options in order with their descriptions and key hints, where the cursor
is, whether free text is possible, and the tool and command of a permission.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_profile_screens import NAME_RE, SCREENS, settled, snapshot_of

from agentwrap.answers.keys import _cursor_on
from agentwrap.detect.detector import Detector
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.question import Question, parse_question, question_id
from agentwrap.detect.states import State
from agentwrap.terminal.screen import Snapshot

# (agent, what) -> kind, question, option labels, tool, command (None: not checked)
EXPECTED: dict[tuple[str, str], tuple[str, str | None, list[str] | None, str | None, str | None]] = {
    ("claude", "permission"): ("permission", "Do you want to proceed?",
                               ["Yes", "Yes, and always allow access to project/ from this project",
                                "No"], "Bash", "touch tool_ran.txt"),
    ("claude", "ask-user-question"): ("choice", "Which database should I use?",
                                      ["SQLite", "Postgres", "Type something.", "Chat about this"],
                                      "AskUserQuestion", None),
    # AskUserQuestion with two questions (tests/e2e/test_answering.py): the first tab
    # answered, the second (multi-select) open; one box ticked; the review tab
    ("claude", "ask-two-questions"): ("choice", "Which database should I use?",
                                      ["SQLite", "Postgres", "Type something.", "Chat about this"],
                                      "AskUserQuestion", None),
    ("claude", "ask-multi-select"): ("choice", "Which features do you want?",
                                     ["Search", "Backups", "Metrics", "Type something",
                                      "Chat about this"], "AskUserQuestion", None),
    ("claude", "ask-multi-select-checked"): ("choice", "Which features do you want?",
                                             ["Search", "Backups", "Metrics", "Type something",
                                              "Chat about this"], "AskUserQuestion", None),
    ("claude", "ask-submit-review"): ("choice", "Ready to submit your answers?",
                                      ["Submit answers", "Cancel"], "AskUserQuestion", None),
    ("claude", "folder-trust"): ("trust", None, ["Yes, I trust this folder", "No, exit"], None, None),
    ("claude", "edit-file"): ("permission", "Do you want to make this edit to notes.md?",
                              ["Yes", "Yes, allow all edits during this session", "No"],
                              "Edit", "notes.md"),
    ("claude", "create-file"): ("permission", "Do you want to create hello.txt?",
                                ["Yes", "Yes, allow all edits during this session", "No"],
                                "Create", "hello.txt"),
    ("claude", "web-fetch"): ("permission", "Do you want to allow Claude to fetch this content?",
                              ["Yes", "Yes, and don't ask again for example.com",
                               "No, and tell Claude what to do differently"],
                              "Fetch", "https://example.com/"),
    ("codex", "permission"): ("permission", "Would you like to run the following command?",
                              ["Yes, proceed", "Yes, and don't ask again for commands that start"
                               " with `touch tool_ran.txt`",
                               "No, and tell Codex what to do differently"],
                              "shell", "touch tool_ran.txt"),
    ("codex", "plan-mode-question"): ("choice", "Which database should I use?",
                                      ["SQLite", "Postgres", "None of the above"],
                                      "request_user_input", None),
    ("codex", "implement-plan"): ("choice", "Implement this plan?",
                                  ["Yes, implement this plan", "Yes, clear context and implement",
                                   "No, stay in Plan mode"], None, None),
    ("codex", "folder-trust"): ("trust", None, ["Trust and continue",
                                                "Back to Agent Command Center"], None, None),
    ("gemini", "permission"): ("permission", "Allow execution of [Shell]?",
                               ["Allow once", "Allow for this session", "No, suggest changes"],
                               "Shell", "touch tool_ran.txt"),
    # a described run_shell_command (longer than 150 characters): the command, not the
    # description its dialog titles the call with
    ("gemini", "shell-described"): ("permission", "Allow execution of [Shell]?",
                                    ["Allow once", "Allow for this session",
                                     "No, suggest changes"], "Shell", None),
    ("gemini", "ask-user"): ("choice", "Which database should I use",
                             ["SQLite", "Postgres", "Enter a custom value"], "ask_user", None),
    ("gemini", "edit-file"): ("permission", "Apply this change?",
                              ["Allow once", "Allow for this session",
                               "Modify with external editor", "No, suggest changes"],
                              "Edit", None),
    ("gemini", "web-fetch"): ("permission", "Do you want to proceed?",
                              ["Allow once", "Allow for this session", "No, suggest changes"],
                              None, None),
    ("gemini", "at-file-outside-workspace"): ("permission", "Do you want to allow this read?",
                                              ["Yes", "No"], "read_file", "/etc/hostname"),
    ("gemini", "folder-trust"): ("trust", "Do you trust the files in this folder?", None, None,
                                 None),
    # (option 2 names the project's folder at 160 columns and more)
    ("copilot", "permission"): ("permission", "Do you want to run this command?", None,
                                "bash", "touch tool_ran.txt"),
    ("copilot", "create-file"): ("permission", None, None, "Create", "hello.txt"),
    ("copilot", "folder-trust"): ("trust", "Do you trust the files in this folder?",
                                  ["Yes", "Yes, and remember this folder for future sessions",
                                   "No (Esc)"], None, None),
    ("copilot", "ask-user"): ("choice", "Which database should I use?",
                              ["SQLite", "Postgres", "Other (type your answer)"], "ask_user", None),
    ("opencode", "permission"): ("permission", "△ Permission required",
                                 ["Allow once", "Allow always", "Reject"],
                                 "Shell command", "touch tool_ran.txt"),
    ("opencode", "edit-file"): ("permission", "△ Permission required",
                                ["Allow once", "Allow always", "Reject"], "Edit", "notes.md"),
    ("opencode", "web-fetch"): ("permission", "△ Permission required",
                                ["Allow once", "Allow always", "Reject"], "WebFetch",
                                "https://example.com/"),
    ("opencode", "question"): ("choice", "Which database should I use?",
                               ["SQLite", "Postgres", "Type your own answer"], "question", None),
    ("qwen", "permission"): ("permission", "Allow execution of: 'touch'?",
                             ["Yes, allow once",
                              "Always allow run 'touch *' commands in this project",
                              "Always allow run 'touch *' commands for this user",
                              "No, suggest changes"], "Shell", "touch tool_ran.txt"),
    ("qwen", "create-file"): ("permission", "Apply this change?",
                              ["Yes, allow once", "Yes, allow always", "No, suggest changes"],
                              "WriteFile", "hello.txt"),
    ("qwen", "web-fetch"): ("permission", "Do you want to proceed?",
                            ["Yes, allow once",
                             "Always allow fetch from example.com in this project",
                             "Always allow fetch from example.com for this user",
                             "No, suggest changes"], "WebFetch", "https://example.com/"),
    ("kimi", "permission"): ("permission", "▶ Run this command?",
                             ["Approve once", "Approve for this session", "Reject",
                              "Reject with feedback"], "Bash", "touch tool_ran.txt"),
    ("kimi", "ask-user-question"): ("choice", "? Which database should I use?",
                                    ["SQLite", "Postgres", "Other"], "AskUserQuestion", None),
    ("kimi", "folder-trust"): ("trust", "Trust this folder?",
                               ["Trust this folder", "Don't trust"], None, None),
    ("cline", "permission-ask-first"): ("permission", "Approve tool call?", ["Approve", "Deny"],
                                        "run_commands", "touch tool_ran.txt"),
    ("cline", "edit-file"): ("permission", "Approve tool call?", ["Approve", "Deny"], "editor",
                             None),
    ("aider", "permission"): ("permission", "Create new file?", ["Yes", "No"], "edit",
                              "tool_ran.txt"),
    ("aider", "run-shell-command"): ("permission", "Run shell command?",
                                     ["Yes", "No", "Don't ask again"], "shell", "ls -la"),
    ("aider", "add-file-to-chat"): ("confirm", "Add file to the chat?",
                                    ["Yes", "No", "Don't ask again"], "add_file", "README.md"),
    ("aider", "edit-file-not-in-chat"): ("permission",
                                         "Allow edits to file that has not been added to the chat?",
                                         ["Yes", "No"], "edit", "./README.md"),
}


# Dialogs whose options carry no numbers (Cline's ask_question and sign-in) and
# Kimi Code's and pi's no-model screens (nothing to choose): still waiting_input
# with the profile's message, but no options are read.
NOT_READ_YET = {("cline", "ask-question"), ("cline", "onboarding"), ("kimi", "onboarding"),
                ("pi", "onboarding")}
# Read, but wrongly (none now: Kimi's folder trust, whose options each have a
# description line in the same column, is read so by its profile's `described`).
MISREAD: set[tuple[str, str]] = set()


def waiting_fixtures() -> list[pytest.param]:
    out = []
    for f in sorted(SCREENS.glob("*/waiting_input__*.txt")):
        m = NAME_RE.match(f.name)
        assert m is not None
        marks = [pytest.mark.xfail(strict=True, reason="description lines read as options")] \
            if (f.parent.name, m["what"]) in MISREAD else []
        out.append(pytest.param(f, m, id=f"{f.parent.name}/{f.stem}", marks=marks))
    return out


def question_of(path: Path, m: re.Match[str]) -> Question | None:
    det = settled(path.parent.name, snapshot_of(path, m))
    assert det.reading.state is State.WAITING_INPUT
    return det.question


@pytest.mark.parametrize(("path", "m"), waiting_fixtures())
def test_every_dialog_reads_as_a_question(path: Path, m: re.Match[str]) -> None:
    q = question_of(path, m)
    if m["what"] == "onboarding-step2" or (path.parent.name, m["what"]) in NOT_READ_YET:
        assert q is None  # "Press Enter to continue": nothing to choose
        return
    assert q is not None, path
    (item,) = q.questions
    assert item.question and q.title and len(item.options) >= 2, q
    if path.parent.name == "cline" and all(o.key and o.number is None for o in item.options):
        assert q.highlighted is None, q  # "[y] Approve  [n] Deny": no cursor at all
    else:
        # where only colour marks the cursor (OpenCode), it is read off the styled screen
        here = _cursor_on(q, snapshot_of(path, m))
        assert here is not None and 1 <= here <= len(item.options), q
    assert q.dialog and q.kind in ("permission", "choice", "confirm", "trust", "text")
    want = EXPECTED.get((path.parent.name, m["what"]))
    if want is None:
        return
    kind, question, labels, tool, command = want
    assert q.kind == kind
    if question is not None:
        assert item.question == question
    if labels is not None:
        assert [o.label for o in item.options] == labels
    assert q.tool == tool
    if command is not None:
        assert q.command == command


def test_descriptions_key_hints_headers_and_free_text() -> None:
    def read(agent: str, what: str, size: str = "160x45") -> Question:
        path = SCREENS / agent / f"waiting_input__{what}__{size}.txt"
        m = NAME_RE.match(path.name)
        assert m is not None
        q = question_of(path, m)
        assert q is not None
        return q

    claude = read("claude", "ask-user-question")
    assert claude.questions[0].header == "Database"
    assert [o.description for o in claude.questions[0].options][:2] == [
        "One file, no server", "A server"]
    assert claude.free_text_allowed
    multi = read("claude", "ask-multi-select").questions[0]
    assert multi.multiSelect and [o.checked for o in multi.options] == [False] * 4 + [None]
    assert [o.description for o in multi.options][:4] == [
        "Full-text search", "Nightly copies", "Prometheus", ""]  # "Submit" is a button
    ticked = read("claude", "ask-multi-select-checked").questions[0]
    assert [o.checked for o in ticked.options][:3] == [True, False, False]
    # several questions as tabs: every header in order (the current tab shows only in
    # colour); a box ticked is the same question; one question alone has no tab bar
    tabbed = [read("claude", w) for w in ("ask-two-questions", "ask-multi-select",
                                          "ask-multi-select-checked", "ask-submit-review")]
    assert {q.tabs for q in tabbed} == {("Database", "Features")}
    assert tabbed[1].id == tabbed[2].id and len({q.id for q in tabbed}) == 3
    assert read("claude", "ask-user-question").tabs == ()
    codex = read("codex", "plan-mode-question", "80x24")
    assert [o.description for o in codex.questions[0].options][:2] == [
        "One file, no server", "A server"]
    plan = read("codex", "implement-plan", "80x24")  # a wrapped option: one label, one description
    assert plan.questions[0].options[1].description == (
        "Start a fresh thread (current context: 1% used)")
    assert [o.key for o in read("codex", "permission").questions[0].options] == ["y", "p", "esc"]
    aider = read("aider", "run-shell-command")
    assert [o.key for o in aider.questions[0].options] == ["y", "n", "d"]
    assert aider.highlighted == 1  # [Yes] is the default
    assert not read("codex", "folder-trust").free_text_allowed
    assert not read("claude", "folder-trust").free_text_allowed


@pytest.mark.parametrize(("agent", "what"), [
    ("claude", "permission"), ("codex", "permission"), ("gemini", "permission"),
    ("aider", "permission"), ("claude", "ask-user-question"),
])
def test_the_id_is_the_same_at_every_size_and_wherever_the_cursor_is(agent: str, what: str) -> None:
    ids = set()
    for path in sorted((SCREENS / agent).glob(f"waiting_input__{what}__*.txt")):
        m = NAME_RE.match(path.name)
        assert m is not None
        q = question_of(path, m)
        assert q is not None
        ids.add(q.id)
        # the cursor on option 2 instead of 1: the same question
        text = path.read_text(encoding="utf-8")
        moved = re.sub(r"^([│\s]*)[❯›●](\s*)1\.", r"\1 \g<2>1.", text, count=1, flags=re.M)
        moved = re.sub(r"^([│\s]*) (\s*)2\.", r"\1❯\g<2>2.", moved, count=1, flags=re.M)
        again = parse_question(moved, dialog=q.dialog, kind=q.kind)
        if again is not None and q.questions[0].options[0].number is not None:
            assert again.highlighted == 2
            assert question_id(q.dialog, again.questions, q.tool, q.command) == q.id
    assert len(ids) == 1, ids


# tests/e2e/model_server.py's TOOL_LONG_COMMAND and TOOL_DESCRIPTION
LONG_COMMAND = ("touch tool_ran.txt && echo 'agentwrap e2e: a command longer than 150 characters,"
                " so that Gemini CLI titles its dialog with the description' > /dev/null")


@pytest.mark.parametrize("size", ["80x24", "160x45", "200x50"])
def test_a_gemini_shell_call_with_a_description_reads_the_command_from_its_box(
        size: str) -> None:
    """Gemini titles a long command's dialog with the model's description: the command
    is read from the box below, the description kept apart; a command the box wraps
    is a guess (a wrap may have eaten a space or stood for a newline): marked unsure."""
    path = SCREENS / "gemini" / f"waiting_input__shell-described__{size}.txt"
    m = NAME_RE.match(path.name)
    assert m is not None
    q = question_of(path, m)
    assert q is not None and q.dialog == "permission" and q.tool == "Shell"
    assert q.description == "List the files in this project."
    assert q.command == LONG_COMMAND  # each wrap here ate one space
    wrapped = size != "200x50"  # 200 columns hold it on one line
    assert bool(q.command_unsure) is wrapped, q.command_unsure
    assert Question.from_json(json.loads(json.dumps(q.to_json()))) == q


@pytest.mark.parametrize("size", ["80x24", "160x45", "200x50"])
def test_a_gemini_shell_call_without_a_description_is_read_as_before(size: str) -> None:
    path = SCREENS / "gemini" / f"waiting_input__permission__{size}.txt"
    m = NAME_RE.match(path.name)
    assert m is not None
    q = question_of(path, m)
    assert q is not None
    assert (q.command, q.description, q.command_unsure) == ("touch tool_ran.txt", None, "")


def test_a_command_box_with_hidden_lines_is_unsure() -> None:
    screen = "\n".join([
        "╭────────────────────────────────────────╮",
        "│ ? Shell  Clean up the build directory  │",
        "│ ╭────────────────────────────────────╮ │",
        "│ │ ... first 4 lines hidden (ctrl+o to show) ... │ │",
        "│ │ rm -rf build                       │ │",
        "│ ╰────────────────────────────────────╯ │",
        "│ Allow execution of [Shell]?            │",
        "│                                        │",
        "│ ● 1. Allow once                        │",
        "│   2. Allow for this session            │",
        "│   3. No, suggest changes (esc)         │",
        "╰────────────────────────────────────────╯",
    ])
    from agentwrap.detect.profiles import load_profile
    dialog = next(d for d in load_profile("gemini").dialogs if d.name == "permission")
    q = parse_question(screen, dialog="permission", kind="permission", subject=dialog.subject)
    assert q is not None
    assert (q.tool, q.command, q.description) == ("Shell", "rm -rf build",
                                                   "Clean up the build directory")
    assert "hidden" in q.command_unsure


def test_a_gemini_shell_dialog_without_its_box_is_unsure() -> None:
    """Should Gemini draw the box otherwise, the title line may be the description:
    it is read, but marked unsure (no rule approves it)."""
    from agentwrap.detect.profiles import load_profile
    screen = (SCREENS / "gemini" / "waiting_input__shell-described__200x50.txt").read_text()
    screen = screen.replace("╭", "┌").replace("╰", "└")
    dialog = next(d for d in load_profile("gemini").dialogs if d.name == "permission")
    q = parse_question(screen, dialog="permission", kind="permission", subject=dialog.subject)
    assert q is not None and q.command == "List the files in this project."
    assert "box was not found" in q.command_unsure


def test_a_numbered_list_without_a_cursor_is_not_a_question() -> None:
    plan = "Plan:\n1. Add a flag\n2. Test it\n\nShall I go on?\n"
    assert parse_question(plan, dialog="x", kind="choice") is None
    assert parse_question("", dialog="x", kind="choice") is None


def test_the_lowest_list_is_read_not_a_plan_above_it() -> None:
    screen = ("  1. Add a flag\n  2. Test it\n  3. Ship it\n\n  Implement this plan?\n"
              "› 1. Yes\n  2. No\n")
    q = parse_question(screen, dialog="x", kind="choice")
    assert q is not None
    assert [o.label for o in q.questions[0].options] == ["Yes", "No"]
    assert q.questions[0].question == "Implement this plan?"


def test_checkboxes_make_a_multi_select() -> None:
    screen = ("─" * 40 + "\n ☐ Features\nWhich features?\n❯ 1. [ ] Auth\n     Logins\n"
              "  2. [✔] Search\n  3. Type something.\n")
    q = parse_question(screen, dialog="question", kind="choice")
    assert q is not None
    (item,) = q.questions
    assert item.multiSelect and item.header == "Features"
    assert [(o.label, o.checked) for o in item.options] == [
        ("Auth", False), ("Search", True), ("Type something.", None)]
    assert Question.from_json(q.to_json()) == q


#: A command wider than 200 columns: its box wraps it at both widths, each in
#: another place (read unsure at both: tests/test_command_certainty.py).
WRAPPED_AT_BOTH = {("claude", "bash-long-ask-first")}


def _wide_pairs() -> list[pytest.param]:
    out = []
    for wide in sorted(SCREENS.glob("*/waiting_input__*__200x50.txt")):
        narrow = wide.with_name(wide.name.replace("200x50", "160x45"))
        what = (wide.parent.name, wide.name.split("__")[1])
        if narrow.exists() and what not in NOT_READ_YET and what not in WRAPPED_AT_BOTH:
            out.append(pytest.param(wide, narrow, id=f"{wide.parent.name}/{wide.stem}"))
    return out


@pytest.mark.parametrize(("wide", "narrow"), _wide_pairs())
def test_200_columns_read_as_160(wide: Path, narrow: Path) -> None:
    """The same dialog captured at 200 and 160 columns is the same question (only the
    capture's temporary directory names, which carry the size, may differ)."""
    def read(path: Path) -> str:
        m = NAME_RE.match(path.name)
        assert m is not None
        q = question_of(path, m)
        assert q is not None, path
        # (a long command's box may wrap at 160 and not at 200: sure only at 200)
        text = json.dumps({**q.to_json(), "id": "", "command_unsure": ""}, ensure_ascii=False)
        text = re.sub(r"\bawcap-\w+", "awcap-DIR", text)  # sizes captured in separate runs
        return re.sub(r"\b(\w+)-(?:200x50|160x45)-\w+", r"\1-SIZE-DIR", text)

    assert read(wide) == read(narrow)


def test_options_picked_by_key_on_one_line() -> None:
    """Cline 3.0.65: "[y] Approve   [n] Deny" under the call, no cursor, no numbers;
    its footer (model, folder, mode) follows."""
    screen = (" ❯ [[tool]] Please list the files.\n ⠇ Thinking... (esc to cancel)\n"
              " Cline needs permission\n Approve tool call?\n run_commands\n"
              "   $ touch tool_ran.txt\n  [y] Approve   [n] Deny\n"
              " agentwrap-model (5,792) $0.00        ○ Plan ● Act (Tab)\n proj\n"
              " Auto-approve all disabled (Shift+Tab)\n")
    subject = re.compile(r"Approve tool call\?\s*\n\s*(?P<tool>\w+)\s*\n\s*(?:\$ )?(?P<command>\S.*?)\s*$",
                         re.MULTILINE)
    q = parse_question(screen, dialog="permission", kind="permission", subject=subject)
    assert q is not None
    (item,) = q.questions
    assert item.question == "Approve tool call?"
    assert [(o.label, o.key, o.number) for o in item.options] == [("Approve", "y", None),
                                                                 ("Deny", "n", None)]
    assert (q.tool, q.command, q.highlighted) == ("run_commands", "touch tool_ran.txt", None)
    # one bracketed key alone is not a list of options
    assert parse_question("Continue?\n [y] Approve\n", dialog="p", kind="permission") is None


@pytest.mark.parametrize(("agent", "what", "row", "cursor"), [
    ("opencode", "permission", True, 1),   # buttons; the cursor only a background colour
    ("opencode", "question", False, 1),    # a numbered list; the cursor only a colour
    ("copilot", "ask-user", False, 1),     # unnumbered, under a "❯"
    ("qwen", "permission", False, 1),
])
def test_where_the_cursor_is_and_how_it_moves(agent: str, what: str, row: bool, cursor: int) -> None:
    """What the answerer reads before it presses anything: the option under the
    cursor (off the styled screen where only colour shows it) and whether the
    options are buttons in a row (Left/Right) or a list (Up/Down)."""
    from agentwrap.answers.keys import _in_a_row

    for size in ("80x24", "160x45"):
        path = SCREENS / agent / f"waiting_input__{what}__{size}.txt"
        m = NAME_RE.match(path.name)
        assert m is not None
        q = question_of(path, m)
        assert q is not None
        snap = snapshot_of(path, m)
        assert _cursor_on(q, snap) == cursor
        assert _in_a_row(q, snap) is row


@pytest.mark.parametrize("size", ["80x24", "160x45", "200x50"])
def test_described_options_pair_each_option_with_its_description(size: str) -> None:
    """Kimi Code's folder trust draws each option with a description line under
    it, in the same column, the pairs set apart by a blank line: its profile says
    ``described``, so the descriptions are not read as options (they were: "2"
    answered "Enable project MCP servers", one down from the cursor, which is
    "Don't trust")."""
    text = (SCREENS / "kimi" / f"waiting_input__folder-trust__{size}.txt").read_text()
    q = parse_question(text, dialog="trust_folder", kind="trust", described=True)
    assert q is not None and q.highlighted == 1
    assert [(o.label, o.description) for o in q.questions[0].options] == [
        ("Trust this folder", "Enable project MCP servers. Remembered for this folder."),
        ("Don't trust", "Exit Kimi Code. Asked again next launch.")]
    plain = parse_question(text, dialog="trust_folder", kind="trust")
    assert plain is not None and len(plain.questions[0].options) == 2  # the old reading
    assert plain.questions[0].options[1].label.startswith("Enable project")


def test_a_permission_whose_command_is_not_drawn_yet_is_not_told_until_the_screen_settles() -> None:
    """OpenCode draws "Permission required" and its tool line a frame before the
    ``$ command`` on a loaded machine; the question read from that frame had no
    tool and no command, and a frame later another id, so an answer to it was
    stale (e2e test_permission_dialog_denied_then_approved[opencode] in CI)."""
    full = (SCREENS / "opencode" / "waiting_input__permission__160x45.txt").read_text(encoding="utf-8")
    head, _, dialog = full.rpartition("△ Permission required")
    half = head + "△ Permission required" + dialog.replace("$ touch tool_ran.txt", " " * 20)
    t = [1000.0]
    det = Detector(load_profile("opencode"), clock=lambda: t[0])
    det._seen_ready = True
    det.update(Snapshot.from_text("placeholder", cols=160, rows=45))
    t[0] += 5
    reading = det.update(Snapshot.from_text(half, cols=160, rows=45))
    assert reading.state is State.WAITING_INPUT and det.question is None  # still being drawn
    t[0] += 0.05
    det.update(Snapshot.from_text(full, cols=160, rows=45))  # the command came
    assert det.question is not None and det.question.command == "touch tool_ran.txt"
    assert det.question.tool == "Shell command"

    # a dialog that really shows no command is told once the screen is quiet
    det2 = Detector(load_profile("opencode"), clock=lambda: t[0])
    det2._seen_ready = True
    det2.update(Snapshot.from_text("placeholder", cols=160, rows=45))
    t[0] += 5
    det2.update(Snapshot.from_text(half, cols=160, rows=45))
    assert det2.question is None
    t[0] += det2.profile.quiet_ms / 1000 + 0.01
    det2.update(Snapshot.from_text(half, cols=160, rows=45))
    assert det2.question is not None and det2.question.command is None
