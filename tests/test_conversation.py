"""The conversation's readers and merge, and ended sessions kept (issue 42), fast.

Claude Code's reader runs on a transcript recorded from the real CLI against
the e2e model server (``tests/fixtures/transcripts/claude/session.jsonl``,
by ``AW_RECORD_TRANSCRIPT=DIR pytest tests/e2e/test_conversation_real.py``,
kept to its user/assistant records and one record of each other kind). A
transcript is hostile input: a path outside Claude's own folder for the
project, a symlink out of it, a huge line, a file bigger than the bound.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from agentwrap.agents import conversation as conv
from agentwrap.agents.all_agents import AGENTS
from agentwrap.agents.claude import project_slug, read_conversation
from agentwrap.agents.conversation import Entry, EntryKind, Query, tail_lines
from agentwrap.config import ConfigError, load_config
from agentwrap.errors import SessionNotEnded
from agentwrap.message import Message, Priority, Source, Status
from agentwrap.paths import Paths
from agentwrap.service.conversation import merge, message_entry
from agentwrap.sessions.registry import Registry, SessionRecord, exit_reason

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "transcripts" / "claude" / "session.jsonl"
CWD = "/tmp/awe-cla-fy241pyh/project"  # the recorded session's project


def placed(root: Path, cwd: str = CWD, name: str = "s.jsonl") -> Path:
    folder = root / ".claude" / "projects" / project_slug(cwd)
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(FIXTURE, folder / name))


def test_claude_s_transcript_reads_as_prompts_replies_and_tool_calls(tmp_path: Path) -> None:
    path = placed(tmp_path)
    got = read_conversation(Query(cwd=CWD, started=0.0, hinted=str(path)))
    kinds = [(e.kind, e.tool) for e in got]
    assert kinds == [(EntryKind.PROMPT, ""), (EntryKind.REPLY, ""), (EntryKind.PROMPT, ""),
                     (EntryKind.TOOL, "Read"), (EntryKind.REPLY, "")], got
    assert "status check E2E35ad0309" in got[0].text and got[1].text == "ACK af065491"
    assert got[3].target == "notes.txt" and got[4].text == "done"
    assert all(e.source == "transcript" for e in got)
    assert [e.at for e in got] == sorted(e.at for e in got)


def test_without_a_hint_the_newest_transcript_of_the_project_since_the_start(
    tmp_path: Path
) -> None:
    path = placed(tmp_path)
    env = {"HOME": str(tmp_path)}
    assert read_conversation(Query(cwd=CWD, started=0.0, environ=env))
    os.utime(path, (1.0, 1.0))  # written before the session started: another session's
    assert read_conversation(Query(cwd=CWD, started=time.time() - 60, environ=env)) == []


@pytest.mark.parametrize("where", ["other-project", "not-projects", "symlink-out", "not-jsonl"])
def test_a_transcript_outside_claude_s_folder_for_the_project_is_never_read(
    tmp_path: Path, where: str
) -> None:
    if where == "other-project":
        hinted = placed(tmp_path, cwd="/somewhere/else")
    elif where == "not-projects":
        (tmp_path / "x" / project_slug(CWD)).mkdir(parents=True)
        hinted = Path(shutil.copy(FIXTURE, tmp_path / "x" / project_slug(CWD) / "s.jsonl"))
    elif where == "symlink-out":
        outside = Path(shutil.copy(FIXTURE, tmp_path / "secret.jsonl"))
        folder = tmp_path / ".claude" / "projects" / project_slug(CWD)
        folder.mkdir(parents=True)
        hinted = folder / "s.jsonl"
        hinted.symlink_to(outside)
    else:
        hinted = placed(tmp_path, name="s.json")
    assert read_conversation(Query(cwd=CWD, started=0.0, hinted=str(hinted))) == []


def test_a_transcript_is_read_within_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"first": 1}\n' + b"x" * 200 + b"\n" + b'{"last": 2}\n')
    monkeypatch.setattr(conv, "MAX_TRANSCRIPT_BYTES", 30)
    assert tail_lines(path) == [b'{"last": 2}']  # from the end; the partial line dropped
    monkeypatch.setattr(conv, "MAX_TRANSCRIPT_BYTES", 10_000)
    monkeypatch.setattr(conv, "MAX_LINE_BYTES", 100)
    assert tail_lines(path) == [b'{"first": 1}', b'{"last": 2}']  # the huge line skipped
    assert tail_lines(tmp_path) is None  # not a regular file
    (tmp_path / "link.jsonl").symlink_to(path)
    assert tail_lines(tmp_path / "link.jsonl") is None  # O_NOFOLLOW
    long = conv.cut("y" * (conv.MAX_ENTRY_CHARS + 10))
    assert len(long) < conv.MAX_ENTRY_CHARS + 10 and long.endswith("[...]")


def message(mid: str, content: str, status: Status, batch: str = "") -> Message:
    return Message(id=mid, session="s", content=content, source=Source.USER, source_id="",
                   priority=Priority.NORMAL, created=1.0, expires=0.0, metadata={},
                   correlation_id=None, depth=0, idempotency_key=None, require_ack=True,
                   status=status, attempts=1, updated=2.0, finished=2.0, detail="",
                   batch_id=batch or None, phase=None, next_attempt_at=0.0)


def test_a_delivered_message_takes_the_place_of_the_prompt_that_carried_it() -> None:
    acked = message("m1", "status check", Status.ACKNOWLEDGED)
    later = message("m2", "never in the transcript", Status.DELIVERED)
    said = [Entry(EntryKind.PROMPT, 10.0, "[agentwrap context t1]\nstatus check\n", "transcript"),
            Entry(EntryKind.REPLY, 11.0, "ACK t1", "transcript"),
            Entry(EntryKind.PROMPT, 12.0, "my own words", "transcript")]
    got = merge(said, [message_entry(acked, 9.5), message_entry(later, 20.0)], [acked, later])
    assert [(e.kind, e.at, e.message_id) for e in got] == [
        (EntryKind.MESSAGE, 10.0, "m1"), (EntryKind.REPLY, 11.0, ""),
        (EntryKind.PROMPT, 12.0, ""), (EntryKind.MESSAGE, 20.0, "m2")]
    assert (got[0].acked, got[3].acked) == (True, False)


def test_every_agent_s_reader_keeps_the_one_protocol() -> None:
    """Every agent of the table either has a reader or leaves its side to its
    hooks and the screen; a reader given nothing of its own returns nothing."""
    readers = {name: a.conversation for name, a in AGENTS.items()}
    assert readers["claude"] is read_conversation
    for name, reader in readers.items():
        if reader is not None:
            assert reader(Query(cwd="/nonexistent", started=0.0, environ={})) == [], name


# --- ended sessions ---------------------------------------------------------------------


@pytest.mark.parametrize(("code", "said"), [
    (0, "agent exited with code 0"), (3, "agent exited with code 3"),
    (-9, "agent exited with code -9 (killed by SIGKILL)"),
    (137, "agent exited with code 137 (killed by SIGKILL)"),
    (143, "agent exited with code 143 (killed by SIGTERM)"),
    (None, "agent ended (exit code not known)"),
])
def test_why_a_session_ended_is_said_from_its_exit_code(code: int | None, said: str) -> None:
    assert exit_reason(code) == said


def record(name: str) -> SessionRecord:
    return SessionRecord(name=name, profile="standin", backend="tmux", command=["x"], cwd="/",
                         started=time.time())


def test_an_ended_session_is_kept_until_dismissed_or_past_its_retention(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "db.sqlite")
    try:
        for name in ("old", "new", "live"):
            reg.register(record(name))
        with pytest.raises(SessionNotEnded):
            reg.dismiss("live")  # a running one: stop it first
        reg.mark_ended("old", 137)
        reg.mark_ended("new", None, "stopped by `agentwrap stop`")
        assert reg.get("old").state_reason == "agent exited with code 137 (killed by SIGKILL)"
        assert reg.get("new").state_reason == "stopped by `agentwrap stop`"
        assert {r.name for r in reg.list(include_ended=True)} == {"old", "new", "live"}
        assert reg.prune_ended(reg.get("new").ended or 0.0) == ["old"]  # ended before: gone
        assert {r.name for r in reg.list(include_ended=True)} == {"new", "live"}
        assert reg.dismiss("new").name == "new"
        assert [r.name for r in reg.list(include_ended=True)] == ["live"]
        assert reg.transitions("new") == []
    finally:
        reg.close()


def test_the_retention_is_the_user_s_to_set(tmp_path: Path) -> None:
    paths = Paths.from_env({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"),
                            "XDG_RUNTIME_DIR": str(tmp_path / "r")})
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text("[sessions]\nkeep_ended_s = 60\n")
    assert load_config(paths).sessions.keep_ended_s == 60.0
    assert load_config(paths, cwd=tmp_path).sessions.keep_ended_s == 60.0
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".agentwrap.toml").write_text("[sessions]\nkeep_ended_s = 1\n")
    with pytest.raises(ConfigError):
        load_config(paths, cwd=tmp_path / "p")  # a project must not forget others' sessions


def test_a_question_and_the_answer_given_through_agentwrap_sit_in_place(tmp_path: Path) -> None:
    """Issue 42: the answers table's applied answers are merged by the time
    they were typed (a stale or failed one typed nothing: not shown); one the
    agent's own record shows already (Claude's AskUserQuestion result) is
    shown once; the question still asked is the last entry, with its options."""
    from agentwrap.agents.conversation import Entry, EntryKind
    from agentwrap.answers.actions import AnswerStatus, OptionAnswer
    from agentwrap.answers.store import AnswerStore
    from agentwrap.detect.question import Item, Option, Question
    from agentwrap.service.conversation import question_entry, with_answers

    now = [1000.0]
    store = AnswerStore(tmp_path / "store.db", clock=lambda: now[0])
    try:
        yes = store.request("s", "q1", OptionAnswer(1, 1, "Yes, allow once"), source="http")
        store.conclude(yes.id, AnswerStatus.APPLIED, "typed 1")
        now[0] = 1010.0
        stale = store.request("s", "q2", OptionAnswer(2, 2, "No"), source="cli")
        store.conclude(stale.id, AnswerStatus.STALE, "asks something else")
        now[0] = 1020.0
        theirs = store.request("s", "q3", OptionAnswer(1, 1, "Postgres"), source="http")
        store.conclude(theirs.id, AnswerStatus.APPLIED, "typed 1")
        answers = store.recent("s")
    finally:
        store.close()
    said = [Entry(EntryKind.TOOL, 999.0, "rm -rf build", "transcript", tool="Bash"),
            Entry(EntryKind.REPLY, 1005.0, "removed", "transcript"),
            Entry(EntryKind.ANSWER, 1021.0, '{"Which db?": "Postgres"}', "transcript")]
    got = with_answers(said, answers)
    assert [(e.kind.value, e.text) for e in got] == [
        ("tool", "rm -rf build"), ("answer", "Yes, allow once"), ("reply", "removed"),
        ("answer", '{"Which db?": "Postgres"}')]
    assert got[1].target == "q1" and got[1].channel == "http" and got[1].status == "applied"
    q = Question("q4", "permission", "Run this command?",
                 (Item("Run this command?", options=(Option(number=1, label="Yes"),
                                                     Option(number=2, label="No"))),))
    asked = question_entry(q.to_json(), 1030.0)
    assert (asked.kind, asked.text, asked.target) == \
        (EntryKind.QUESTION, "Run this command?\n- Yes\n- No", "q4")


def test_a_past_question_the_agent_keeps_none_of_is_the_one_agentwrap_saw() -> None:
    """Issue 42: an agent whose record keeps no question (Copilot's permission
    dialog, recorded: the transition's evidence is its screen line) still shows
    it, in place, from the registry's transitions; a repeat of one dialog, one
    the record shows itself, and the one asked now (its own entry) are not doubled."""
    from agentwrap.service.conversation import with_past_questions
    from agentwrap.sessions.registry import Transition

    def went(at: float, state: str, evidence: str = "", reason: str = "") -> Transition:
        return Transition(id=int(at), session="s", at=at, state=state, signal="screen",
                          rule="dialog:permission", reason=reason, evidence=evidence,
                          quiet_ms=0, draft=False)

    box = "│ Do you want to run this command?" + " " * 40 + "│"
    seen = [went(1.0, "working"), went(2.0, "waiting_input", box),
            went(2.5, "waiting_input", box), went(3.0, "working"),
            went(4.0, "dialog", "", "asks which database"), went(5.0, "ready"),
            went(6.0, "waiting_input", "Allow it?"), went(9.0, "waiting_input", "Now?")]
    said = [Entry(EntryKind.REPLY, 1.5, "I will run it", "transcript"),
            Entry(EntryKind.QUESTION, 6.5, "Allow it? (its own record)", "transcript")]
    got = with_past_questions(said, seen, asking_since=9.0)
    assert [(e.kind.value, e.at, e.text) for e in got] == [
        ("reply", 1.5, "I will run it"),
        ("question", 2.0, "Do you want to run this command?"),
        ("question", 4.0, "asks which database"),
        ("question", 6.5, "Allow it? (its own record)")]
    assert got[1].source == "screen" and got[1].target == "dialog:permission"
