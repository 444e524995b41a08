"""What each source last told a session, so the same thing is not said twice.

Every hook run is a process of its own, and the session's watcher another, so
this lives in a small JSON file per session under the state dir
(``feedback/SESSION.json``, 0600), read and written under an ``flock``.

Rules (:func:`judge`):

* a failure is reported, unless it is identical (timings aside) to the last
  failure reported for that source;
* a pass after a reported failure is reported once, as "now passing";
* a pass otherwise says nothing, except for sources whose output *is* the
  information (``start`` and scheduled runs: ``git status``), which report
  their output when it changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..paths import Paths, private_dir
from .runner import RunResult

_TIMINGS = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b")
INFORMATIONAL = frozenset({"start", "schedule"})


@dataclass(frozen=True)
class Outcome:
    """What to tell the agent about one run."""

    source: str
    status: str  # "failing" | "passing" (a recovery) | "output"
    result: RunResult
    trigger: str
    files: tuple[str, ...]
    role: str


def digest(result: RunResult) -> str:
    text = _TIMINGS.sub("T", result.output)
    raw = f"{result.exit_code}|{result.timed_out}|{result.error}|{text}"
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:32]


class ResultState:
    """One session's per-source memory, and its per-turn budget use."""

    def __init__(self, paths: Paths, session: str) -> None:
        self.path = paths.feedback_memory(session)
        private_dir(self.path.parent, repair=True)

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        """The state, read under an exclusive lock and written back on exit."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = b""
            while chunk := os.read(fd, 65536):
                raw += chunk
            try:
                data = json.loads(raw) if raw else {}
            except ValueError:
                data = {}
            if not isinstance(data, dict):
                data = {}
            data.setdefault("sources", {})
            yield data
            body = json.dumps(data, sort_keys=True).encode()
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, body)
        finally:
            os.close(fd)


def judge(data: dict[str, Any], result: RunResult, trigger: str, files: list[str],
          role: str) -> Outcome | None:
    """The outcome worth telling for ``result``, recorded in ``data``; None
    when there is nothing new to say."""
    sources: dict[str, Any] = data.setdefault("sources", {})
    last = sources.get(result.source) or {}
    now = digest(result)
    failing = not result.ok
    status: str | None
    if failing:
        status = None if last.get("failing") and last.get("digest") == now else "failing"
    elif last.get("failing"):
        status = "passing"
    elif trigger in INFORMATIONAL and result.output.strip() and last.get("digest") != now:
        status = "output"
    else:
        status = None
    sources[result.source] = {"failing": failing, "digest": now}
    if status is None:
        return None
    return Outcome(result.source, status, result, trigger, tuple(files), role)


def forget(paths: Paths, session: str) -> None:
    """Drop a session's memory (its session ended; the supervisor does the same
    through :meth:`Paths.feedback_memory`)."""
    with contextlib.suppress(OSError):
        paths.feedback_memory(session).unlink()
