"""Structured state that an agent publishes about itself.

Claude Code (>= 2.1.139) writes ``~/.claude/sessions/<pid>.json`` with a
``status`` of idle / busy / waiting (undocumented). It is the strongest signal
when present, but a file can outlive its process and pids get reused, so a
reading only counts when the file's pid is our agent (or a process below it)
and the file was written after that process started.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..terminal.proctree import descendants
from .detector import StructuredReading, StructuredSource
from .states import State

_CLAUDE_STATUS = {
    "idle": State.READY,
    "busy": State.BUSY,
    "waiting": State.WAITING_INPUT,
    "shell": State.BUSY,
}


def _proc_started_epoch(pid: int) -> float | None:
    try:
        return Path(f"/proc/{pid}").stat().st_mtime
    except OSError:
        return None


class ClaudeSessionFile:
    def __init__(self, home: Path, agent_pid: Callable[[], int | None]) -> None:
        self.dir = home / ".claude" / "sessions"
        self.agent_pid = agent_pid
        self._path: Path | None = None

    def _locate(self) -> Path | None:
        if self._path is not None and self._path.exists():
            return self._path
        root = self.agent_pid()
        if root is None or not self.dir.is_dir():
            return None
        for pid in [root, *descendants(root)]:
            candidate = self.dir / f"{pid}.json"
            if candidate.exists():
                self._path = candidate
                return candidate
        return None

    def stamp(self) -> float | None:
        """When the file found by :meth:`read` was last written (a stat), or None."""
        try:
            return self._path.stat().st_mtime if self._path is not None else None
        except OSError:
            return None

    def read(self) -> StructuredReading | None:
        path = self._locate()
        if path is None:
            return None
        try:
            data = json.loads(path.read_text())
            mtime = path.stat().st_mtime
        except (OSError, ValueError):
            return None
        pid = int(path.stem)
        started = _proc_started_epoch(pid)
        if started is None or mtime + 1.0 < started:
            return None  # written by an earlier process that had this pid
        if isinstance(data, dict) and "pid" in data and data.get("pid") != pid:
            return None
        status = data.get("status") if isinstance(data, dict) else None
        state = _CLAUDE_STATUS.get(str(status))
        if state is None:
            return None
        return StructuredReading(state, f"claude session file says {status!r}",
                                 max(0.0, time.time() - mtime))


def structured_source(
    kind: str | None, env: dict[str, str], agent_pid: Callable[[], int | None]
) -> StructuredSource | None:
    if kind == "claude-sessions":
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        return ClaudeSessionFile(home, agent_pid)
    return None
