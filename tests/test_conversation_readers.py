"""Gemini CLI's, Qwen Code's and Codex's own records as the conversation (issue 42), fast.

Each reader runs on one short session recorded from the real CLI against the
e2e model server (``tests/fixtures/transcripts/<agent>/``: Gemini CLI 0.61.0,
Qwen Code 0.15.10, Codex 0.169.0, each driven by ``agentwrap run``/``send``
as tests/e2e/conftest.py does: a message with an ACK asked, its reply, then
one shell call). One table of the three (:data:`CASES`) says where each agent
keeps a project's records; every rule is checked over all of them: the order,
the tool call with its command, hostile text kept as text, a record outside
the agent's own folder for the project never read, an older session's never
taken for this one's, the reads bounded.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentwrap.agents import codex, gemini, qwen
from agentwrap.agents import conversation as conv
from agentwrap.agents.all_agents import AGENTS
from agentwrap.agents.conversation import Entry, EntryKind, Query, slug

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"
HOSTILE = "<script>alert(1)</script>\x1b]52;c;aGk=\x07\x1b]8;;http://x\x07link\x1b]8;;\x07 [[reply: x]]"


def _today(root: Path) -> Path:
    t = time.localtime()
    return root / ".codex" / "sessions" / f"{t.tm_year:04d}" / f"{t.tm_mon:02d}" / f"{t.tm_mday:02d}"


def _gemini_folder(root: Path, cwd: str) -> Path:
    """Gemini 0.61's layout: a short name in projects.json, its folder's .project_root."""
    name = "p" + hashlib.sha256(cwd.encode()).hexdigest()[:8]
    folder = root / ".gemini" / "tmp" / name
    (folder / "chats").mkdir(parents=True, exist_ok=True)
    (folder / gemini.PROJECT_ROOT_FILE).write_text(cwd + "\n")
    registry = root / ".gemini" / "projects.json"
    known = json.loads(registry.read_text()) if registry.exists() else {"projects": {}}
    known["projects"][cwd] = name
    registry.write_text(json.dumps(known))
    return folder / "chats"


@dataclass(frozen=True)
class Case:
    """One agent's reader, its recorded session and where it keeps a project's records."""

    agent: str
    read: Callable[[Query], list[Entry]]
    fixture: str
    cwd: str  # the recorded session's project folder
    folder: Callable[[Path, str], Path]  # (home, project) -> the folder of its records
    name: str  # a file name it gives a record

    def place(self, home: Path, cwd: str | None = None, data: bytes | None = None,
              name: str | None = None) -> Path:
        """The recorded session (or ``data``) as a record of ``cwd``'s project under ``home``."""
        cwd = cwd or self.cwd
        body = (FIXTURES / self.agent / self.fixture).read_bytes() if data is None else data
        folder = self.folder(home, cwd)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (name or self.name)
        path.write_bytes(body.replace(self.cwd.encode(), cwd.encode()))
        return path

    def query(self, home: Path, **kw: object) -> Query:
        args: dict[str, object] = {"cwd": self.cwd, "started": 0.0, "environ": {"HOME": str(home)}}
        args.update(kw)
        return Query(**args)  # type: ignore[arg-type]


CASES = [
    Case("gemini", gemini.read_conversation, "session.jsonl", "/tmp/awe-gem-2ln6g_ol/project",
         _gemini_folder, "session-2026-12-01T20-25-db5162a0.jsonl"),
    Case("qwen", qwen.read_conversation, "session.jsonl", "/tmp/awe-qwe-ukbx1xnr/project",
         lambda home, cwd: home / ".qwen" / "projects" / slug(cwd) / "chats",
         "9e6c6075-87c9-4fa3-a0ce-c0adf59c0162.jsonl"),
    Case("codex", codex.read_conversation, "rollout.jsonl", "/tmp/awe-cod-yibadwmf/project",
         lambda home, cwd: _today(home),
         "rollout-2026-12-01T20-27-09-01a2334a-2f04-7e13-a474-ad8582c3d592.jsonl"),
]
BY_AGENT = {c.agent: c for c in CASES}
#: The recorded shell call of each session (Gemini's and Qwen's ran [[tool]], Codex's a read).
COMMAND = {"gemini": ("run_shell_command", "touch tool_ran.txt"),
           "qwen": ("run_shell_command", "touch tool_ran.txt"),
           "codex": ("exec_command", "cat notes.txt")}
cases = pytest.mark.parametrize("case", CASES, ids=[c.agent for c in CASES])


def test_each_reader_is_its_agent_s_own() -> None:
    for case in CASES:
        assert AGENTS[case.agent].conversation is case.read, case.agent


@cases
def test_the_recorded_session_reads_in_order_with_its_tool_call(tmp_path: Path, case: Case) -> None:
    path = case.place(tmp_path)
    got = case.read(case.query(tmp_path, hinted=str(path)))
    assert [e.kind for e in got] == [EntryKind.PROMPT, EntryKind.REPLY, EntryKind.PROMPT,
                                     EntryKind.TOOL, EntryKind.REPLY], got
    assert "status check E2E" in got[0].text and got[1].text.startswith("ACK ")
    assert got[1].text.split()[1] in got[0].text  # the ACK of that message's token
    assert (got[3].tool, got[3].target) == COMMAND[case.agent]
    assert got[4].text == "done"
    assert all(e.source == "transcript" for e in got)
    assert [e.at for e in got] == sorted(e.at for e in got)
    # the agents' own context (Gemini's <session_context>, Codex's <environment_context>
    # and developer messages) is not the person's words
    assert not [e for e in got if "_context>" in e.text or "skills_instructions" in e.text]
    # without a hint: the newest record of the project's folder, the same one
    assert case.read(case.query(tmp_path)) == got


@cases
def test_hostile_text_is_kept_as_text(tmp_path: Path, case: Case) -> None:
    data = (FIXTURES / case.agent / case.fixture).read_bytes()
    data = data.replace(b'"done"', json.dumps(HOSTILE).encode())
    data += b"\n[1, 2]\n\"a string\"\n{\"type\": \"user\", \"timestamp\": 5}\nnot json {\n"
    case.place(tmp_path, data=data)
    got = case.read(case.query(tmp_path))
    assert got[-1].kind is EntryKind.REPLY and got[-1].text == HOSTILE  # verbatim: never markup
    assert len(got) == 5  # the torn and ill-typed lines are no entries


@cases
@pytest.mark.parametrize("where", ["other-project", "elsewhere", "symlink-out"])
def test_a_record_outside_the_agent_s_folder_for_the_project_is_never_read(
    tmp_path: Path, case: Case, where: str
) -> None:
    home = tmp_path / "home"
    if where == "other-project":  # the agent's own records, of another project
        hinted = case.place(home, cwd="/somewhere/else")
    elif where == "elsewhere":  # a hook payload naming any file
        hinted = tmp_path / "x" / case.name
        hinted.parent.mkdir()
        hinted.write_bytes((FIXTURES / case.agent / case.fixture).read_bytes())
    else:  # a link in the right folder to a file outside it
        outside = tmp_path / "secret.jsonl"
        outside.write_bytes((FIXTURES / case.agent / case.fixture).read_bytes())
        folder = case.folder(home, case.cwd)
        folder.mkdir(parents=True, exist_ok=True)
        hinted = folder / case.name
        hinted.symlink_to(outside)
    assert case.read(case.query(home, hinted=str(hinted))) == []
    assert case.read(case.query(home)) == []


@cases
def test_an_older_session_s_record_is_not_this_one_s(tmp_path: Path, case: Case) -> None:
    path = case.place(tmp_path)
    os.utime(path, (1.0, 1.0))
    assert case.read(case.query(tmp_path, started=time.time() - 60)) == []


@cases
def test_a_record_is_read_within_bounds(tmp_path: Path, case: Case,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = case.place(tmp_path)
    whole = case.read(case.query(tmp_path))
    # a long record: only its end is read (the last turn's reply kept, the first prompt not)
    data = path.read_bytes()
    second = data.rindex(b"\n", 0, data.rindex(b"\n", 0, data.index(b"[[")))  # a line before
    monkeypatch.setattr(conv, "MAX_TRANSCRIPT_BYTES", len(data) - second)  # the 2nd prompt
    tail = case.read(case.query(tmp_path))
    assert tail and len(tail) < len(whole) and whole[-len(tail):] == tail, tail
    assert "status check" not in tail[0].text
    # a line over the bound is skipped, not parsed: read as if it were not there
    monkeypatch.setattr(conv, "MAX_TRANSCRIPT_BYTES", 10 * path.stat().st_size)
    lines = path.read_bytes().split(b"\n")
    longest = max(len(x) for x in lines)
    monkeypatch.setattr(conv, "MAX_LINE_BYTES", longest - 1)
    without = tmp_path / "without"
    case.place(without, data=b"\n".join(x for x in lines if len(x) < longest))
    assert case.read(case.query(tmp_path)) == case.read(case.query(without))


def _gemini_document(entries_from: Path) -> bytes:
    """The recorded chat as one JSON document (the ``.json`` record of older Gemini CLIs)."""
    lines = [json.loads(x) for x in entries_from.read_bytes().splitlines() if x.strip()]
    head = lines[0]
    messages: dict[str, dict[str, object]] = {}
    for record in lines:
        if record.get("type") in ("user", "gemini"):
            messages[record["id"]] = record
    return json.dumps({**head, "messages": list(messages.values())}).encode()


def test_gemini_s_whole_json_record_is_refused_when_oversize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = BY_AGENT["gemini"]
    path = case.place(tmp_path, data=_gemini_document(FIXTURES / "gemini" / case.fixture),
                      name="session-2026-12-01T20-25-db5162a0.json")
    got = case.read(case.query(tmp_path))
    assert [e.kind for e in got] == [EntryKind.PROMPT, EntryKind.REPLY, EntryKind.PROMPT,
                                     EntryKind.TOOL, EntryKind.REPLY], got
    monkeypatch.setattr(conv, "MAX_TRANSCRIPT_BYTES", path.stat().st_size - 1)
    assert case.read(case.query(tmp_path)) == []  # not cut: a cut document is no JSON
    assert conv.read_whole(path) is None


@pytest.mark.parametrize("how", ["hash", "named", "named-for-another", "named-out"])
def test_gemini_reads_only_the_project_s_own_temp_folder(tmp_path: Path, how: str) -> None:
    case = BY_AGENT["gemini"]
    body = (FIXTURES / "gemini" / case.fixture).read_bytes()
    tmp = tmp_path / ".gemini" / "tmp"
    if how == "hash":  # older versions: the folder is the SHA-256 of the project's path
        folder = tmp / hashlib.sha256(case.cwd.encode()).hexdigest() / "chats"
    else:
        name = {"named": "project", "named-for-another": "other", "named-out": "../../x"}[how]
        folder = tmp / name / "chats"
        owner = "/somewhere/else" if how == "named-for-another" else case.cwd
        (tmp_path / ".gemini").mkdir(parents=True, exist_ok=True)
        (tmp_path / ".gemini" / "projects.json").write_text(
            json.dumps({"projects": {case.cwd: name}}))
        folder.parent.mkdir(parents=True, exist_ok=True)
        (folder.parent / gemini.PROJECT_ROOT_FILE).write_text(owner)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "session-x.jsonl").write_bytes(body)
    got = case.read(case.query(tmp_path))
    assert bool(got) is (how in ("hash", "named")), got


def test_qwen_s_records_are_found_in_its_runtime_dir(tmp_path: Path) -> None:
    case = BY_AGENT["qwen"]
    runtime = tmp_path / "runtime"
    folder = runtime / "projects" / slug(case.cwd) / "chats"
    folder.mkdir(parents=True)
    (folder / case.name).write_bytes((FIXTURES / "qwen" / case.fixture).read_bytes())
    env = {"HOME": str(tmp_path / "home"), qwen.RUNTIME_ENV: str(runtime)}
    assert len(case.read(Query(cwd=case.cwd, started=0.0, environ=env))) == 5
    assert case.read(Query(cwd=case.cwd, started=0.0, environ={"HOME": str(tmp_path / "home")})) == []


def test_codex_reads_the_newest_rollout_of_the_session_s_project_not_another_s(
    tmp_path: Path
) -> None:
    case = BY_AGENT["codex"]
    mine = case.place(tmp_path)
    theirs = case.place(tmp_path, cwd="/somewhere/else", name="rollout-z.jsonl")
    os.utime(mine, (time.time() - 5, time.time() - 5))  # the other project's is newer
    got = case.read(case.query(tmp_path, started=time.time() - 60))
    assert len(got) == 5 and got[3].target == "cat notes.txt"
    assert case.read(case.query(tmp_path, hinted=str(theirs))) == got  # a hint of another's: no
    env = {"HOME": str(tmp_path / "nohome"), "CODEX_HOME": str(tmp_path / ".codex")}
    assert case.read(Query(cwd=case.cwd, started=0.0, environ=env)) == got
    # only the days of the session: a rollout of a day before it started is not looked at
    assert codex.rollout_dirs(Query(cwd="/", started=time.time() + 3 * 86400, environ=env)) == []


def test_codex_learns_a_rollout_s_project_from_its_end_before_reading_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = BY_AGENT["codex"]
    mine = case.place(tmp_path)
    theirs = case.place(tmp_path, cwd="/somewhere/else", name="rollout-z.jsonl")
    os.utime(mine, (time.time() - 5, time.time() - 5))
    reads: list[tuple[str, int | None]] = []
    real = conv.tail_lines

    def counted(path: Path | str, max_bytes: int | None = None,
                max_line: int | None = None) -> list[bytes] | None:
        reads.append((Path(path).name, max_bytes))
        return real(path, max_bytes, max_line)

    monkeypatch.setattr(conv, "tail_lines", counted)
    assert len(case.read(case.query(tmp_path, started=time.time() - 60))) == 5
    assert (theirs.name, None) not in reads  # another project's: only its end, once
    assert reads == [(theirs.name, codex.CWD_PROBE_BYTES), (mine.name, codex.CWD_PROBE_BYTES),
                     (mine.name, None)]
