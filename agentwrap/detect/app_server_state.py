"""Codex's state from its app-server, as a structured signal (issue 24).

When the session's Codex TUI runs on agentwrap's private app-server, the
server tells every connection each change of the thread's status
(``thread/status/changed``: ``active``, ``active`` waiting on an approval or a
question, ``idle``), at the moment the turn starts and ends. The screen hides
Codex's busy line while text streams, so from the screen alone a reply is
believed finished only after a quiet window (about 2 s from reply to ready);
the server says it in the same millisecond. This is the strongest signal after
the agent's own dialogs; the screen stays the fallback: until the TUI's thread
is known, and whenever the server is gone (then a reconnection is tried now
and then).

Codex also runs *ephemeral* side threads (the session title): only the
person's thread counts: the first non-ephemeral one, then the one the TUI
moves to (:meth:`AppServerState._switch`). What a third connection hears of
that on Codex 0.169.0 (tests/e2e/test_codex_threads.py): ``/new`` starts a
thread, ``thread/started`` with ``ephemeral: false``, to every connection;
``/resume`` of a loaded thread sends only ``thread/goal/cleared`` of that
thread (also sent when a client starts a turn in a thread, so it counts
only for a thread not running a turn and not just given one by agentwrap:
:meth:`AppServerState.note_turn_start`). Sub-agent threads (a
``parentThreadId``) are not the person's. The old thread's notifications are
ignored from then on; a batch already handed to it is settled from its own
items (:mod:`agentwrap.sessions.app_server_delivery`).

The connection subscribes to that thread (``thread/resume``) the moment its
first turn starts (the server refuses before: the thread has no rollout yet),
from a thread of its own woken by the status change, so the first turn's
approval requests reach agentwrap too; a request already open then is sent
again by the server to the new subscriber. The one open is the session's
question, exact (:mod:`.app_server_approvals`). While the server says the
thread waits on an approval whose request has not reached agentwrap yet, the
dialog the TUI draws meanwhile is not taken as the question
(``question_due``, for at most :data:`DUE_S`): otherwise a question read off
the screen comes first and the server's, with another id, replaces it, so an
answer to the first finds it gone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..codex_server.client import AppServerClient
from ..codex_server.protocol import ApprovalRequest, Notification, ThreadStatus, thread_status
from ..errors import AppServerError
from .app_server_approvals import ServerApprovals, ServerQuestion
from .detector import StructuredReading
from .states import State

RECONNECT_EVERY_S = 2.0
#: The server's channel unusable this long (no connection, or no thread known):
#: it is dead for delivery, and the screen's typing takes over until it is back.
#: Long enough for the keeper to start a killed server again (and for a slow
#: start-up's thread to appear), short of the delivery's readiness timeout.
DEAD_AFTER_S = 20.0
SUBSCRIBE_EVERY_S = 1.0  # thread/resume fails until the thread's first turn has started
SUBSCRIBE_RETRY_S = 0.05  # after a turn started: tries this often ...
SUBSCRIBE_FOR_S = 5.0  # ... for this long (then the supervisor's look retries each second)
#: How long a dialog on screen is not read as the question while the server says an
#: approval waits and its request has not reached agentwrap: then the screen decides.
DUE_S = 3.0
#: A ``thread/goal/cleared`` this soon after agentwrap's own turn/start into that
#: thread is the turn's, not the person resuming it.
OWN_TURN_S = 5.0
_log = logging.getLogger("agentwrap.app_server")


class AppServerState:
    """A :class:`~agentwrap.detect.detector.StructuredSource` reading the
    thread status the app-server at ``socket`` announces. ``on_change`` is
    called (in the client's reader thread) when the person's thread changes
    status, so the supervisor looks again at once instead of at its next tick."""

    def __init__(self, socket: Path, on_change: Callable[[], None] = lambda: None,
                 dead_after_s: float = DEAD_AFTER_S) -> None:
        self.socket = socket
        self.dead_after_s = dead_after_s
        self.on_change = on_change
        self._lock = threading.Lock()
        self._client: AppServerClient | None = None
        self._next_try = 0.0
        self.thread_id: str | None = None
        self._ephemeral: set[str] = set()
        self._persons: set[str] = set()  # the non-ephemeral threads (the TUI's, now or before)
        self._own_turns: dict[str, float] = {}  # thread -> our last turn/start into it (monotonic)
        self._status: dict[str, ThreadStatus] = {}
        self.changed_at: float | None = None  # monotonic time of the last status of the thread
        self.problem: str | None = None  # why the server is not read (None: it is)
        # the approvals the thread asks (reach only a subscribed connection: thread/resume)
        self.approvals = ServerApprovals()
        self._subscribed: AppServerClient | None = None  # the connection thread/resume took on
        self._next_subscribe = 0.0
        self._turned = False  # the thread has had a turn (so it has a rollout to resume)
        self._sub_lock = threading.Lock()  # one thread/resume at a time
        self._kick = threading.Event()  # a turn started: subscribe now (the subscriber thread)
        self._closing = threading.Event()
        self._subscriber: threading.Thread | None = None
        self.waiting_since: float | None = None  # when the thread began waiting on the person
        # since when the thread's status is not known (monotonic; None: it is)
        self._unknown_since: float | None = time.monotonic()

    # ------------------------------------------------------------------ connection

    def client(self) -> AppServerClient | None:
        """The live connection, connecting (again) when it is due; None when the
        server cannot be reached (the screen decides meanwhile)."""
        if self._client is not None and not self._client.closed:
            return self._client
        now = time.monotonic()
        if now < self._next_try:
            return None
        self._next_try = now + RECONNECT_EVERY_S
        if self._client is not None:
            _log.warning("codex app-server connection lost (%s)", self._client.close_reason)
            self.problem = f"the app-server connection was lost ({self._client.close_reason})"
            self._client = None
            self.approvals.forget()  # its requests went with it: the screen shows the dialog
        try:
            client = AppServerClient.connect(self.socket, timeout=2.0)
        except AppServerError as exc:
            self.problem = str(exc)
            return None
        client.on_message(self._heard)
        self._client = client
        self.problem = None
        try:
            self._find_thread(client)
        except AppServerError as exc:
            _log.info("codex app-server: no thread yet (%s)", exc)
        if self._turned:  # a thread with turns: subscribe on the new connection at once
            self._wake_subscriber()
        return client

    def _subscribe(self, client: AppServerClient) -> None:
        """From the supervisor's look: ``thread/resume`` on this connection once
        the thread has had a turn (before that it has no rollout and the server
        refuses), tried again every :data:`SUBSCRIBE_EVERY_S` until it takes. The
        subscriber thread (:meth:`_follow`) usually did it already."""
        if self._subscribed is client or self.thread_id is None or not self._turned:
            return
        now = time.monotonic()
        if now < self._next_subscribe:
            return
        self._next_subscribe = now + SUBSCRIBE_EVERY_S
        self._resume(client)

    def _resume(self, client: AppServerClient) -> bool:
        """``thread/resume`` of the person's thread on ``client``, so its turn
        notifications and approval requests reach agentwrap too (one already open
        is sent again); True once subscribed."""
        with self._sub_lock:
            thread_id = self.thread_id
            if self._subscribed is client:
                return True
            if thread_id is None or client.closed:
                return False
            try:
                client.resume(thread_id)
            except AppServerError as exc:
                _log.info("codex app-server: not subscribed to %s yet (%s)", thread_id, exc)
                return False
            if self.thread_id != thread_id:  # the TUI moved meanwhile: that one next
                return False
            self._subscribed = client
        _log.info("codex app-server: subscribed to thread %s (its approvals)", thread_id)
        return True

    def _follow(self) -> None:
        """The subscriber thread: woken when the person's thread turns active and
        this connection is not subscribed yet (a handler may not call the client:
        the reader thread would wait on itself), it subscribes at once, trying
        every :data:`SUBSCRIBE_RETRY_S` for :data:`SUBSCRIBE_FOR_S`."""
        while not self._closing.is_set():
            self._kick.wait()
            self._kick.clear()
            deadline = time.monotonic() + SUBSCRIBE_FOR_S
            while not self._closing.is_set() and time.monotonic() < deadline:
                client = self._client
                if client is None or client.closed or self._resume(client):
                    break
                self._closing.wait(SUBSCRIBE_RETRY_S)

    def _wake_subscriber(self) -> None:
        if self._subscriber is None:
            self._subscriber = threading.Thread(
                target=self._follow, name=f"codex-subscribe-{self.socket.name}", daemon=True)
            self._subscriber.start()
        self._kick.set()

    def _find_thread(self, client: AppServerClient) -> None:
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

    def _heard(self, message: Notification | ApprovalRequest) -> None:
        if self.approvals.heard(message):
            self.on_change()
        if not isinstance(message, Notification):
            return
        changed = kick = False
        with self._lock:
            if message.method == "thread/started":
                thread = message.params.get("thread")
                if isinstance(thread, dict) and isinstance(thread.get("id"), str):
                    if thread.get("ephemeral") or not _persons_thread(thread):
                        self._ephemeral.add(thread["id"])
                    elif thread["id"] != self.thread_id:  # the first, or the person's /new
                        self._persons.add(thread["id"])
                        self._switch(thread["id"], turned=False)
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
                    # a resumed thread is idle (what it said last, if anything, is older)
                    self._status[tid] = ThreadStatus(tid, "idle", ())
                    changed = kick = True  # it has a rollout: subscribe at once
            elif message.method == "thread/status/changed":
                try:
                    status = thread_status(message.params)
                except AppServerError:
                    return
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
                kick = changed and status.busy and self._subscribed is not self._client
        if changed and kick:
            self._wake_subscriber()
        if changed:
            self.on_change()

    def _switch(self, thread_id: str, *, turned: bool) -> None:
        """Follow ``thread_id`` from now on (under ``_lock``): its status, its
        approvals (the old thread's open requests are dropped: its dialog is no
        longer on screen), and a subscription of its own (``thread/resume``, once
        it has had a turn: ``turned``, or its first turns active)."""
        if self.thread_id is not None:
            _log.info("codex app-server: the TUI moved from thread %s to %s",
                      self.thread_id, thread_id)
        self.thread_id = thread_id
        self.approvals.follow(thread_id)
        self._turned = turned
        self._subscribed = None
        self._next_subscribe = 0.0
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

    def close(self) -> None:
        self._closing.set()
        self._kick.set()
        if self._client is not None:
            self._client.close()

    # ------------------------------------------------------------------ the signal

    def status(self) -> ThreadStatus | None:
        """The person's thread's last status, or None when it is not known."""
        client = self.client()
        status = None
        if client is not None:
            self._subscribe(client)
            with self._lock:
                status = self._status.get(self.thread_id) if self.thread_id else None
        if status is None:
            self._unknown_since = self._unknown_since or time.monotonic()
        else:
            self._unknown_since = None
        return status

    def status_of(self, thread_id: str) -> ThreadStatus | None:
        """What the server last said of ``thread_id`` (a thread the TUI has left,
        say: a batch handed to it is settled once it is idle)."""
        with self._lock:
            return self._status.get(thread_id)

    def dead(self) -> bool:
        """Whether the server's channel has been unusable (no connection, no
        thread known) for ``dead_after_s`` (:data:`DEAD_AFTER_S`): only then
        are messages typed into the TUI instead (a server merely not ready
        yet, or being started again, is waited for)."""
        self.status()
        since = self._unknown_since
        return since is not None and time.monotonic() - since >= self.dead_after_s

    def stamp(self) -> float | None:
        """None: the server's notifications wake the supervisor themselves
        (``on_change``), there is no file to watch."""
        return None

    def reply(self, asked: ServerQuestion, decision: str) -> None:
        """Answer the request with ``decision`` (one of its question's, or
        ``decline``); AppServerError when it cannot be sent."""
        client = self.client()
        if client is None:
            raise AppServerError(f"Codex's app-server cannot be reached ({self.problem})")
        if self.approvals.get(asked.question.id) is None:  # gone with a lost connection
            raise AppServerError("the request went with the connection it came on")
        client.respond(asked.request.request_id, asked.result(decision))

    def read(self) -> StructuredReading | None:
        status = self.status()
        if status is None:
            return None
        asked = self.approvals.open()
        if asked is not None:
            q = asked.question
            return StructuredReading(
                State.WAITING_INPUT, f"Codex's app-server asks to approve {q.command or q.title}"
                f" ({asked.request.method})", question=q)
        where = "Codex's app-server says the thread is"
        if status.kind == "idle":
            return StructuredReading(State.READY, f"{where} idle (thread/status/changed)")
        if status.kind != "active":
            return None  # notLoaded, systemError: the screen says more
        waiting = [f for f in status.flags if f.startswith("waitingOn")]
        if not waiting:
            return StructuredReading(State.BUSY, f"{where} active (a turn runs)")
        elsewhere = self.approvals.elsewhere()
        if elsewhere is not None:
            return StructuredReading(State.WAITING_INPUT, f"Codex's app-server asks {elsewhere},"
                                     " which agentwrap leaves to the terminal: answer it there")
        since = self.waiting_since
        due = since is not None and time.monotonic() - since < DUE_S \
            and not self.approvals.any_open()
        if due:
            return StructuredReading(
                State.WAITING_INPUT, f"{where} {', '.join(waiting)}; its request is on its way"
                " (the dialog on screen is not read as the question meanwhile)", question_due=True)
        return StructuredReading(State.WAITING_INPUT, f"{where} {', '.join(waiting)}")


def _persons_thread(thread: dict[str, object]) -> bool:
    """Whether a non-ephemeral thread can be the one the TUI shows: not a
    sub-agent's (``parentThreadId``) nor one attached to another."""
    return not thread.get("parentThreadId") and not thread.get("attachedToThreadId")
