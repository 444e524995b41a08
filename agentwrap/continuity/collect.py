"""Keeping a session's handoff record up to date, from what is already at hand.

The supervisor calls :meth:`Collector.tick` whenever it publishes a state
(:meth:`~agentwrap.sessions.supervisor.Supervisor._record`); the record is
rewritten at once on a state change and otherwise at most every
``min_interval_s`` while the agent is inside a turn (so an edit made mid-turn
is on disk before a kill -9), never per screen frame. Each update reads:

* the hooks' notes (:mod:`.hooks`): first prompt, last reply, tool calls,
  transcript path;
* git: files changed since the start (``git diff --name-only BASE`` plus new
  untracked files), one ``git`` run of a few milliseconds;
* the queue: messages delivered in this session (apart: those delivered whose
  ACK was asked and never came, :data:`~agentwrap.message.UNACKNOWLEDGED`) and
  still pending for it;
* the audit log's tail: checks run for the session (feedback sources) and
  their last results;
* the screen, for the last reply, only when no hook reported one.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AgentwrapError
from ..message import Message, Status
from ..paths import Paths
from .hooks import notes_file, read_json
from .record import CheckNote, HandoffRecord, MessageNote, ToolNote, clip, newest
from .store import ContinuityStore

log = logging.getLogger("agentwrap.continuity")
GIT_TIMEOUT_S = 5.0
AUDIT_TAIL_BYTES = 256 * 1024
#: Audit fields that say a check passed or failed (feedback sources' lines).
_PASS = {"pass", "passed", "passing", "ok", "success", "recovered", "now_passing"}
_FAIL = {"fail", "failed", "failing", "error", "errors", "timeout"}
_MID_TURN = ("busy", "waiting_input")
SCREEN_REPLY_LINES = 12


def git(cwd: str, *args: str) -> str | None:
    """``git ARGS`` in ``cwd``: its output, or None (not a repository, no git)."""
    try:
        done = subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_start(cwd: str) -> tuple[str, str, list[str]]:
    """HEAD, branch and the untracked files at a session's start."""
    head = (git(cwd, "rev-parse", "HEAD") or "").strip()
    branch = (git(cwd, "rev-parse", "--abbrev-ref", "HEAD") or "").strip()
    untracked = (git(cwd, "ls-files", "--others", "--exclude-standard") or "").splitlines()
    return head, branch, untracked


def changed_files(cwd: str, base: str, untracked_before: set[str]) -> list[str] | None:
    """Files changed since ``base`` (committed or not) and files new since the start."""
    if not base:
        return None
    diff = git(cwd, "diff", "--name-only", base)
    if diff is None:
        return None
    files = diff.splitlines()
    others = git(cwd, "ls-files", "--others", "--exclude-standard") or ""
    files += [f for f in others.splitlines() if f not in untracked_before]
    return sorted(dict.fromkeys(f for f in files if f))


def checks_from_audit(path: Path, session: str, since: float) -> list[CheckNote]:
    """Check results the audit log holds for ``session`` (its tail only)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - AUDIT_TAIL_BYTES))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    out: list[CheckNote] = []
    for line in data.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict) or ev.get("session") != session:
            continue
        if float(ev.get("ts") or 0) < since or not ev.get("trigger"):
            continue
        statuses = ev.get("status")
        if ev.get("event") != "feedback" or not isinstance(statuses, dict):
            continue  # only agentwrap.feedback's lines report checks: {source name: status}
        for src, status in statuses.items():
            word = str(status).lower()
            out.append(CheckNote(
                name=str(src)[:80], ok=True if word in _PASS else False if word in _FAIL
                else None, summary=f"{word} ({', '.join(map(str, ev.get('trigger') or []))})",
                at=float(ev.get("ts") or 0)))
    return newest(out)


def _note(m: Message) -> MessageNote:
    label = m.label.strip("[]")
    return MessageNote(id=m.id, source=label, status=m.status.value,
                       preview=m.content[:400], at=m.updated)


def screen_reply(text: str) -> str:
    """The last lines of the screen with words on them: what the person saw last."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-SCREEN_REPLY_LINES:])


@dataclass
class Collector:
    """Keeps one launch's record current (see the module's docstring)."""

    paths: Paths
    store: ContinuityStore
    record: HandoffRecord
    messages: Callable[[], list[Message]] | None = None  # the session's, newest first
    # of these delivered messages' ids, those whose ACK was asked and never came
    unacknowledged: Callable[[Sequence[str]], Collection[str]] | None = None
    hooks: bool = False  # the agent reports its replies through hooks
    min_interval_s: float = 5.0
    # once, when the agent has been ready ready_grace_s: the session-start hook runs
    # while the agent starts, but may finish after its prompt is drawn
    on_ready: Callable[[], None] | None = None
    ready_grace_s: float = 5.0
    _last: float = 0.0
    _ready_at: float | None = None

    def tick(self, state: str, changed: bool, screen: Callable[[], str] | None = None) -> None:
        """A state was published: update now if it changed, else now and then mid-turn."""
        now = time.monotonic()
        if self.on_ready is not None and state == "ready":
            self._ready(now)
        if not changed and (state not in _MID_TURN or now - self._last < self.min_interval_s):
            return
        self._last = now
        self.update(state, screen)

    def update(self, state: str, screen: Callable[[], str] | None = None, *,
               pending: bool = True) -> None:
        """Rewrite the record from what is at hand now; ``pending``: read what
        still waits too (else the pending list as last seen stays)."""
        rec = self.record
        rec.state = state
        rec.writer_pid = os.getpid()
        self._from_notes(rec)
        files = changed_files(rec.project, rec.git_base, set(rec.git_untracked))
        if files is not None:
            rec.files_changed = files[:200]
        self._from_queue(rec, pending=pending)
        rec.checks = checks_from_audit(self.paths.audit_log, rec.session, rec.started)
        if not self.hooks and screen is not None and state == "ready":
            reply = screen_reply(screen())
            if reply:
                rec.last_reply, rec.reply_source = clip(reply), "screen"
        self.save()

    def _ready(self, now: float) -> None:
        if self._ready_at is None:
            self._ready_at = now
        if now - self._ready_at < self.ready_grace_s or self.on_ready is None:
            return
        once, self.on_ready = self.on_ready, None
        try:
            once()
        except (OSError, AgentwrapError) as exc:
            log.warning("handoff not queued for typing: %s", exc)

    def finish(self, exit_code: int | None) -> None:
        """The agent exited: the record's last word. The queue as last seen running
        stays: its pending messages have just been given up with the session,
        and they are what the next session should hear of. Only those the
        session's end delivered leave it (a batch whose ACK was awaited ends
        delivered, not acknowledged)."""
        rec = self.record
        self.update(rec.state, pending=False)
        rec.end_state, rec.exit_code, rec.ended = "exited", exit_code, time.time()
        self.save()

    def save(self) -> None:
        self.record.updated = time.time()
        try:
            self.store.save(self.record)
        except (OSError, AgentwrapError) as exc:  # UnsafePath among them
            log.warning("could not write the handoff record: %s", exc)

    def _from_notes(self, rec: HandoffRecord) -> None:
        notes = read_json(notes_file(self.paths, rec.session))
        if not notes:
            return
        if isinstance(notes.get("goal"), str) and not rec.goal:
            rec.goal = clip(notes["goal"])
        rec.prompts = int(notes.get("prompts") or rec.prompts)
        if isinstance(notes.get("last_reply"), str):
            rec.last_reply, rec.reply_source = clip(notes["last_reply"]), "hook"
        if isinstance(notes.get("transcript_path"), str):
            rec.transcript_path = notes["transcript_path"]
        tools: list[Any] = notes.get("tools") or []
        rec.tools = newest([ToolNote(tool=str(t.get("tool", "")), target=str(t.get("target", "")),
                                     at=float(t.get("at") or 0), ok=t.get("ok"))
                            for t in tools if isinstance(t, dict)])

    def _from_queue(self, rec: HandoffRecord, *, pending: bool = True) -> None:
        if self.messages is None:
            return
        try:
            msgs = [m for m in reversed(self.messages())  # oldest first
                    if not m.source_id.startswith("continuity:")]
            got = [m for m in msgs if m.updated >= rec.started and m.status in (
                Status.DELIVERED, Status.ACKNOWLEDGED, Status.ESCALATED)]
            unacked = set(self.unacknowledged(
                [m.id for m in got if m.status is Status.DELIVERED])) \
                if self.unacknowledged is not None else set()
        except (AgentwrapError, OSError) as exc:
            log.info("handoff record: queue not read: %s", exc)
            return
        if pending:
            rec.pending = newest([_note(m) for m in msgs
                                  if m.status in (Status.PENDING, Status.DELIVERING)])
        ended = {m.id for m in got}
        rec.pending = [n for n in rec.pending if n.id not in ended]
        rec.delivered = newest([_note(m) for m in got if m.id not in unacked])
        rec.unacknowledged = newest([_note(m) for m in got if m.id in unacked])


def settle(rec: HandoffRecord, alive: Callable[[int], bool]) -> HandoffRecord:
    """A record read back: still "running" with its writer gone means it crashed."""
    if rec.end_state == "running" and rec.ended is None and (
            not rec.writer_pid or not alive(rec.writer_pid)):
        rec.end_state = "crashed"
    return rec


__all__ = [
    "Collector",
    "changed_files",
    "checks_from_audit",
    "git",
    "git_start",
    "screen_reply",
    "settle",
]
