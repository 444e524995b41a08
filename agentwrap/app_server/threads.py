"""Which of the app-server's threads is the person's, and what the server said of each.

Codex also runs *ephemeral* side threads (the session title): only the
person's thread counts: the first non-ephemeral one, then the one the TUI
moves to (:meth:`PersonsThread._switch`). What a third connection hears of
that on Codex 0.169.0 (tests/e2e/test_codex_threads.py): ``/new`` starts a
thread, ``thread/started`` with ``ephemeral: false``, to every connection;
``/resume`` of a loaded thread sends only ``thread/goal/cleared`` of that
thread (also sent when a client starts a turn in a thread, so it counts
only for a thread not running a turn and not just given one by agentwrap:
:meth:`PersonsThread.note_turn_start`). Sub-agent threads (a
``parentThreadId``) are not the person's. The old thread's notifications are
ignored from then on; a batch already handed to it is settled from its own
items (:mod:`.delivery`). One job: no connection is made here (the
notifications are handed in, :meth:`PersonsThread.heard`; a reconnection's
look is :meth:`PersonsThread.find`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

from ..codex_server.client import AppServerClient
from ..codex_server.protocol import Notification, ThreadStatus, thread_status
from ..errors import AppServerError
from .approvals import ServerApprovals

#: A ``thread/goal/cleared`` this soon after agentwrap's own turn/start into that
#: thread is the turn's, not the person resuming it.
OWN_TURN_S = 5.0
_log = logging.getLogger("agentwrap.app_server")


@dataclass(frozen=True)
class Heard:
    """What one notification changed: the person's thread's status (``changed``),
    the thread followed (``switched``: its subscription starts again), and
    whether it now runs a turn or was resumed (``kick``: subscribe at once)."""

    changed: bool = False
    switched: bool = False
    kick: bool = False


class PersonsThread:
    """The person's thread (``thread_id``) and the last status of each thread,
    fed the server's notifications in the client's reader thread. Thread-safe."""

    def __init__(self, approvals: ServerApprovals) -> None:
        self._lock = threading.Lock()
        self.approvals = approvals  # they follow the person's thread
        self.thread_id: str | None = None
        self._ephemeral: set[str] = set()
        self._persons: set[str] = set()  # the non-ephemeral threads (the TUI's, now or before)
        self._own_turns: dict[str, float] = {}  # thread -> our last turn/start into it (monotonic)
        self._status: dict[str, ThreadStatus] = {}
        self.changed_at: float | None = None  # monotonic time of the last status of the thread
        self._turned = False  # the thread has had a turn (so it has a rollout to resume)
        self.waiting_since: float | None = None  # when the thread began waiting on the person

    @property
    def turned(self) -> bool:
        """Whether the person's thread has had a turn (``thread/resume`` takes it)."""
        return self._turned

    def find(self, client: AppServerClient) -> None:
        """After a (re)connection: the person's thread among the loaded ones, and
        its status now (the notifications say only what changes). A thread known
        from before gets its status read again: what a dead server last said of
        it (waiting on an approval, say) is not true of the new one."""
        if self.thread_id is not None:
            with self._lock:
                self._status.pop(self.thread_id, None)  # unknown: the screen decides
            status = client.read_thread(self.thread_id).get("status")
            if isinstance(status, dict):
                with self._lock:
                    self._status.setdefault(self.thread_id, thread_status(
                        {"threadId": self.thread_id, "status": status}))
            return
        newest: tuple[float, str, object] | None = None
        for tid in client.loaded_threads():
            thread = client.read_thread(tid)
            if thread.get("ephemeral") or not _persons_thread(thread):
                self._ephemeral.add(tid)
                continue
            self._persons.add(tid)
            if isinstance(thread.get("status"), dict) and tid not in self._status:
                with self._lock, contextlib.suppress(AppServerError):
                    self._status[tid] = thread_status({"threadId": tid, "status": thread["status"]})
            updated = thread.get("updatedAt")
            when = float(updated) if isinstance(updated, (int, float)) else 0.0
            if newest is None or when >= newest[0]:  # several (/new): the last one used
                newest = (when, tid, thread.get("status"))
        if newest is None:
            return
        _when, tid, status = newest
        with self._lock:
            if self.thread_id is None:
                self.thread_id = self.approvals.thread_id = tid
                self._turned = True  # it may have had turns: thread/resume will say
            if isinstance(status, dict) and tid not in self._status:
                self._status[tid] = thread_status({"threadId": tid, "status": status})

    def heard(self, message: Notification) -> Heard:
        """Take one notification: what it changed."""
        changed = kick = switched = False
        with self._lock:
            if message.method == "thread/started":
                thread = message.params.get("thread")
                if isinstance(thread, dict) and isinstance(thread.get("id"), str):
                    if thread.get("ephemeral") or not _persons_thread(thread):
                        self._ephemeral.add(thread["id"])
                    elif thread["id"] != self.thread_id:  # the first, or the person's /new
                        self._persons.add(thread["id"])
                        self._switch(thread["id"], turned=False)
                        switched = True
                        status = thread.get("status")
                        if isinstance(status, dict):  # no status change comes before a turn
                            with contextlib.suppress(AppServerError):
                                self._status[thread["id"]] = thread_status(
                                    {"threadId": thread["id"], "status": status})
                        changed = True
            elif message.method == "thread/goal/cleared":  # the person's /resume
                tid = message.params.get("threadId")
                if isinstance(tid, str) and self._resumed(tid):
                    self._switch(tid, turned=True)
                    switched = True
                    # a resumed thread is idle (what it said last, if anything, is older)
                    self._status[tid] = ThreadStatus(tid, "idle", ())
                    changed = kick = True  # it has a rollout: subscribe at once
            elif message.method == "thread/status/changed":
                try:
                    status = thread_status(message.params)
                except AppServerError:
                    return Heard()
                self._status[status.thread_id] = status
                changed = status.thread_id == self.thread_id
                self._turned = self._turned or (changed and status.busy)
                if changed:
                    self.changed_at = time.monotonic()
                    waiting = any(f.startswith("waitingOn") for f in status.flags)
                    if not waiting:
                        self.waiting_since = None
                    elif self.waiting_since is None:
                        self.waiting_since = self.changed_at
                kick = changed and status.busy
        return Heard(changed, switched, changed and kick)

    def _switch(self, thread_id: str, *, turned: bool) -> None:
        """Follow ``thread_id`` from now on (under ``_lock``): its status, its
        approvals (the old thread's open requests are dropped: its dialog is no
        longer on screen); the caller starts its subscription again
        (``thread/resume``, once it has had a turn: ``turned``, or its first turns active)."""
        if self.thread_id is not None:
            _log.info("codex app-server: the TUI moved from thread %s to %s",
                      self.thread_id, thread_id)
        self.thread_id = thread_id
        self.approvals.follow(thread_id)
        self._turned = turned
        self.changed_at = time.monotonic()  # an idle said of the old thread is stale
        self.waiting_since = None

    def _resumed(self, thread_id: str) -> bool:
        """Whether a ``thread/goal/cleared`` of ``thread_id`` is the person
        resuming it (under ``_lock``): a thread of theirs other than the one
        followed, not running a turn, and not just given one by agentwrap (a
        turn/start clears the goal too)."""
        if thread_id == self.thread_id or thread_id not in self._persons:
            return False
        status = self._status.get(thread_id)
        own = self._own_turns.get(thread_id)
        return not (status is not None and status.busy) \
            and not (own is not None and time.monotonic() - own < OWN_TURN_S)

    def note_turn_start(self, thread_id: str) -> None:
        """agentwrap is about to start a turn in ``thread_id``: the
        ``thread/goal/cleared`` that comes with it is not a /resume."""
        with self._lock:
            self._own_turns[thread_id] = time.monotonic()

    def status_of(self, thread_id: str | None) -> ThreadStatus | None:
        """What the server last said of ``thread_id`` (None: nothing, or no thread)."""
        if thread_id is None:
            return None
        with self._lock:
            return self._status.get(thread_id)


def _persons_thread(thread: dict[str, object]) -> bool:
    """Whether a non-ephemeral thread can be the one the TUI shows: not a
    sub-agent's (``parentThreadId``) nor one attached to another."""
    return not thread.get("parentThreadId") and not thread.get("attachedToThreadId")


__all__ = ["OWN_TURN_S", "Heard", "PersonsThread"]
