"""Each agent's own record read as its conversation (issue 42), fast.

Every file under ``tests/fixtures/transcripts/<agent>/`` was recorded from the
real CLI against the e2e model server (``AW_RECORD_TRANSCRIPT=DIR pytest
tests/e2e/test_conversation_more_real.py``): a message delivered with an ACK
asked, its reply, then a ``[[tool]]`` turn (a shell call and ``done``). A
reader returns the prompts, replies and tool calls in order, from the
session's project only; a record of another project is never read.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentwrap.agents.all_agents import AGENTS
from agentwrap.agents.conversation import Entry, EntryKind, Query

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"


@dataclass(frozen=True)
class Recorded:
    """A recorded session: its project, where the agent keeps its record
    (relative to ``HOME`` given the project), and the files of it."""

    cwd: str
    place: Callable[[Path, str], list[Path]]
    ack: str
    tool: str = "touch tool_ran.txt"  # the [[tool]] turn's call: a shell command
    kinds: tuple[EntryKind, ...] = (EntryKind.PROMPT, EntryKind.REPLY, EntryKind.PROMPT,
                                    EntryKind.TOOL, EntryKind.REPLY)


def _copilot(home: Path, cwd: str) -> list[Path]:
    folder = home / ".copilot" / "session-state" / "1306a725-ce4c-416c-959b-762164472c30"
    folder.mkdir(parents=True, exist_ok=True)
    src = FIXTURES / "copilot"
    (folder / "workspace.yaml").write_text(
        (src / "workspace.yaml").read_text().replace(COPILOT_CWD, cwd))
    return [Path(shutil.copy(src / "events.jsonl", folder / "events.jsonl"))]


def _pi(home: Path, cwd: str) -> list[Path]:
    folder = home / ".pi" / "agent" / "sessions" / ("--" + cwd.lstrip("/").replace("/", "-") + "--")
    folder.mkdir(parents=True, exist_ok=True)
    text = (FIXTURES / "pi" / "session.jsonl").read_text().replace(PI_CWD, cwd)
    path = folder / "2026-12-02T03-15-25-183Z_01a234bf.jsonl"
    path.write_text(text)
    return [path]


def _opencode(home: Path, cwd: str) -> list[Path]:
    import sqlite3

    folder = home / ".local" / "share" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "opencode.db"
    db = sqlite3.connect(path)
    db.executescript((FIXTURES / "opencode" / "opencode.sql").read_text().replace(OPENCODE_CWD, cwd))
    db.commit()
    db.close()
    return [path]


def _older(paths: list[Path]) -> None:
    """The recorded session as one made before ``started`` (a minute ago)."""
    for path in paths:
        if path.name == "opencode.db":
            import sqlite3

            db = sqlite3.connect(path)
            db.execute("UPDATE session SET time_created = 1000")
            db.commit()
            db.close()
        if path.suffix == ".md":  # Aider's chat log: the time its chat started says
            path.write_text(path.read_text().replace(
                "# aider chat started at 20", "# aider chat started at 19", 1))
        os.utime(path, (1.0, 1.0))


def _kimi(home: Path, cwd: str) -> list[Path]:
    root = home / ".kimi-code"
    folder = root / "sessions" / "wd_project_ea14feb5f8bf" / \
        "session_2fc216c9-5649-462d-8689-bca3e3e54fcc" / "agents" / "main"
    folder.mkdir(parents=True, exist_ok=True)
    src = FIXTURES / "kimi"
    (root / "workspaces.json").write_text((src / "workspaces.json").read_text().replace(KIMI_CWD, cwd))
    return [Path(shutil.copy(src / "wire.jsonl", folder / "wire.jsonl"))]


def _cline(home: Path, cwd: str) -> list[Path]:
    folder = home / ".cline" / "data" / "sessions" / CLINE_ID
    folder.mkdir(parents=True, exist_ok=True)
    for name in (f"{CLINE_ID}.json", f"{CLINE_ID}.messages.json"):
        (folder / name).write_text((FIXTURES / "cline" / name).read_text().replace(CLINE_CWD, cwd))
    return [folder / f"{CLINE_ID}.messages.json"]


def _aider(home: Path, cwd: str) -> list[Path]:
    """Aider's logs in the project (its defaults): the chat log's start moved
    to now's local time, as the input log's prompts, by the same offset."""
    from datetime import datetime

    project = Path(cwd)
    project.mkdir(parents=True, exist_ok=True)
    shift = time.time() - datetime.fromisoformat(AIDER_STARTED).timestamp() - 30
    out = []
    for name in (".aider.chat.history.md", ".aider.input.history"):
        lines = []
        for line in (FIXTURES / "aider" / name).read_text().splitlines():
            head = "# aider chat started at " if line.startswith("# aider chat") else "# "
            if line.startswith("# "):
                when = datetime.fromisoformat(line[len(head):]).timestamp() + shift
                line = head + datetime.fromtimestamp(when).isoformat(" ")
            lines.append(line)
        (project / name).write_text("\n".join(lines) + "\n")
        out.append(project / name)
    return out[:1]


AIDER_STARTED = "2026-12-02 03:23:38"
CLINE_ID = "1796181727741_9wm6l"
CLINE_CWD = "/tmp/awe-cli-tfjk9zgs/project"
KIMI_CWD = "/tmp/awe-kim-1zs0szpx/project"
OPENCODE_CWD = "/tmp/awe-ope-mm70jbj1/project"
COPILOT_CWD = "/tmp/awe-cop-v3mb0w3c/project"
PI_CWD = "/tmp/awe-pi-_56g2sek/project"

RECORDED = {
    "aider": Recorded("", _aider, "ACK 4ec106c3", tool="tool_ran.txt",
                      kinds=(EntryKind.PROMPT, EntryKind.REPLY, EntryKind.PROMPT,
                             EntryKind.REPLY, EntryKind.TOOL)),
    "copilot": Recorded(COPILOT_CWD, _copilot, "ACK 4a7a1b05"),
    "pi": Recorded(PI_CWD, _pi, "ACK b8eebc1d"),
    "cline": Recorded(CLINE_CWD, _cline, "ACK 55a826ea"),
    "kimi": Recorded(KIMI_CWD, _kimi, "ACK 78d55fd9"),
    "opencode": Recorded(OPENCODE_CWD, _opencode, "ACK e9810d02"),
}


def placed(agent: str, home: Path) -> tuple[str, list[Path]]:
    """The agent's recorded session placed under ``home``: its project, its files."""
    rec = RECORDED[agent]
    cwd = rec.cwd or str(home / "project")
    return cwd, rec.place(home, cwd)


def read(agent: str, home: Path, cwd: str, started: float = 0.0, hinted: str = "") -> list[Entry]:
    reader = AGENTS[agent].conversation
    assert reader is not None, f"{agent} has no conversation reader"
    return reader(Query(cwd=cwd, started=started, hinted=hinted, environ={"HOME": str(home)}))


@pytest.mark.parametrize("agent", sorted(RECORDED))
def test_an_agent_s_recorded_session_reads_as_prompts_replies_and_tool_calls(
    tmp_path: Path, agent: str
) -> None:
    rec = RECORDED[agent]
    cwd, _ = placed(agent, tmp_path)
    got = read(agent, tmp_path, cwd)
    assert tuple(e.kind for e in got) == rec.kinds, got
    assert "status check E2E" in got[0].text and got[1].text == rec.ack, got
    assert "[[tool]] make the file" in got[2].text
    (tool,) = [e for e in got if e.kind is EntryKind.TOOL]
    assert tool.target == rec.tool and tool.tool, tool
    assert got[-1].text == "done" or agent == "aider"  # Aider's edit is its turn's end
    assert all(e.source == "transcript" for e in got)
    assert [e.at for e in got] == sorted(e.at for e in got)


@pytest.mark.parametrize("agent", sorted(RECORDED))
def test_another_project_s_or_an_older_record_is_not_the_session_s(
    tmp_path: Path, agent: str
) -> None:
    cwd, paths = placed(agent, tmp_path)
    assert read(agent, tmp_path, "/somewhere/else") == []
    assert read(agent, tmp_path, cwd, hinted=str(tmp_path / "x.jsonl")) != []  # a bad hint
    _older(paths)  # written before the session started: another session's
    assert read(agent, tmp_path, cwd, started=time.time() - 60) == []


@pytest.mark.parametrize("agent", sorted(RECORDED))
def test_a_symlinked_record_is_never_read(tmp_path: Path, agent: str) -> None:
    cwd, (path,) = placed(agent, tmp_path)
    outside = tmp_path / "secret.jsonl"
    path.rename(outside)
    path.symlink_to(outside)
    assert read(agent, tmp_path, cwd) == []


def test_kimi_s_record_is_read_from_the_launch_s_private_dir_too(tmp_path: Path) -> None:
    """A launch with hooks gives Kimi Code a private ``KIMI_CODE_HOME`` in its
    launch dir: the session's record is there while it runs."""
    launch = tmp_path / "launch" / "kimi"
    _kimi(tmp_path / "person", KIMI_CWD)
    shutil.move(tmp_path / "person" / ".kimi-code", launch / "kimi-home")
    reader = AGENTS["kimi"].conversation
    assert reader is not None
    got = reader(Query(cwd=KIMI_CWD, started=0.0, environ={}, launch_dir=str(launch)))
    assert [e.text for e in got if e.kind is EntryKind.REPLY] == ["ACK 78d55fd9", "done"]
    assert reader(Query(cwd=KIMI_CWD, started=0.0, environ={})) == []


def test_every_agent_has_a_reader_and_a_recorded_file_it_reads() -> None:
    """The rule for the whole table (issue 42): no agent is left to the screen
    alone; each reads a file recorded from its real CLI (the four older readers'
    tests are in ``tests/test_conversation.py`` and the hooks' tests)."""
    without = sorted(name for name, a in AGENTS.items() if a.conversation is None)
    assert without == []
    recorded = {p.name for p in FIXTURES.iterdir() if p.is_dir() and any(p.iterdir())}
    assert set(AGENTS) <= recorded, sorted(set(AGENTS) - recorded)
    assert set(RECORDED) == set(AGENTS) - {"claude", "codex", "gemini", "qwen"}


HOSTILE = "<script>alert(1)</script>\x1b]52;c;aGk=\x07\x1b]8;;http://x\x07link\x1b]8;;\x07 [[reply: x]]"


@pytest.mark.parametrize("agent", sorted(RECORDED))
def test_hostile_text_is_kept_as_text(tmp_path: Path, agent: str) -> None:
    """The model's words (a hostile reply: markup, OSC 52/8, a directive) come
    back verbatim as text, never markup; the surfaces escape them."""
    cwd, (path,) = placed(agent, tmp_path)
    if path.name == "opencode.db":
        import sqlite3

        db = sqlite3.connect(path)
        db.execute("UPDATE part SET data = replace(data, '\"done\"', ?)", (json.dumps(HOSTILE),))
        db.commit()
        db.close()
    elif path.suffix == ".md":  # Aider's chat log is text: its reply as the model wrote it
        path.write_text(path.read_text().replace("Creating the file.", HOSTILE))
    else:
        path.write_text(path.read_text().replace('"done"', json.dumps(HOSTILE)))
    got = read(agent, tmp_path, cwd)
    replies = [e.text for e in got if e.kind is EntryKind.REPLY]
    assert any(r == HOSTILE or r.startswith(HOSTILE + "\n") for r in replies), replies
