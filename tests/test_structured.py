"""Claude Code's session file as a state signal, with real processes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.waiting import wait_for

from agentwrap.detect.states import State
from agentwrap.detect.structured import ClaudeSessionFile
from agentwrap.terminal.proctree import descendants


@pytest.fixture
def agent() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in agent process with a child (like a launcher and the real CLI)."""
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    try:
        yield proc
    finally:
        for pid in [*descendants(proc.pid), proc.pid]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.wait()


def write_session(home: Path, pid: int, **data: object) -> Path:
    path = home / ".claude" / "sessions" / f"{pid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, **data}))
    return path


@pytest.mark.parametrize(
    ("status", "state"),
    [("idle", State.READY), ("busy", State.BUSY), ("waiting", State.WAITING_INPUT)],
)
def test_status_maps_to_state(
    tmp_path: Path, agent: subprocess.Popen[bytes], status: str, state: State
) -> None:
    write_session(tmp_path, agent.pid, status=status)
    got = ClaudeSessionFile(tmp_path, lambda: agent.pid).read()
    assert got is not None and got.state is state and status in got.reason


def test_file_of_a_descendant_is_found(tmp_path: Path, agent: subprocess.Popen[bytes]) -> None:
    child = wait_for(lambda: descendants(agent.pid), what="the child process")[0]
    write_session(tmp_path, child, status="busy")
    got = ClaudeSessionFile(tmp_path, lambda: agent.pid).read()
    assert got is not None and got.state is State.BUSY


def test_file_older_than_the_process_is_a_reused_pid(
    tmp_path: Path, agent: subprocess.Popen[bytes]
) -> None:
    path = write_session(tmp_path, agent.pid, status="idle")
    old = time.time() - 3600
    os.utime(path, (old, old))  # written by an earlier process with this pid
    assert ClaudeSessionFile(tmp_path, lambda: agent.pid).read() is None


@pytest.mark.parametrize("data", [{"status": "busy", "pid": 1}, {"status": "dreaming"}, {}])
def test_mismatched_or_unknown_content_is_ignored(
    tmp_path: Path, agent: subprocess.Popen[bytes], data: dict[str, object]
) -> None:
    path = tmp_path / ".claude" / "sessions" / f"{agent.pid}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    assert ClaudeSessionFile(tmp_path, lambda: agent.pid).read() is None


def test_no_file_or_no_agent_means_no_reading(tmp_path: Path) -> None:
    assert ClaudeSessionFile(tmp_path, lambda: None).read() is None
    assert ClaudeSessionFile(tmp_path, lambda: os.getpid()).read() is None


def test_a_reading_carries_the_files_age(tmp_path: Path, agent: subprocess.Popen[bytes]) -> None:
    """Its age is the file's (when Claude wrote it), so the detector can tell
    it from a hook's signal that came before or after (issue 27)."""
    before = time.time()
    path = write_session(tmp_path, agent.pid, status="idle")
    got = ClaudeSessionFile(tmp_path, lambda: agent.pid).read()
    assert got is not None and got.age_s is not None
    assert 0.0 <= got.age_s <= time.time() - before + 0.01
    os.utime(path, (before - 0.5, before - 0.5))  # as if written half a second earlier
    later = ClaudeSessionFile(tmp_path, lambda: agent.pid).read()
    assert later is not None and later.age_s is not None
    assert abs((time.time() - later.age_s) - (before - 0.5)) < 0.05


def test_its_stamp_follows_the_files_writes(tmp_path: Path, agent: subprocess.Popen[bytes]) -> None:
    """The supervisor checks the stamp while the agent is busy (a stat, no
    parse): a write shows there, output or not (issue 27)."""
    source = ClaudeSessionFile(tmp_path, lambda: agent.pid)
    assert source.stamp() is None  # not found yet
    path = write_session(tmp_path, agent.pid, status="busy")
    assert source.read() is not None
    first = source.stamp()
    assert first == path.stat().st_mtime
    os.utime(path, (first + 1, first + 1))  # written again (mtime set: no sleep)
    assert source.stamp() == first + 1
