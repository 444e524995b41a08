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
person's thread, the first non-ephemeral one, counts.
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
from .detector import StructuredReading
from .states import State

RECONNECT_EVERY_S = 2.0
_log = logging.getLogger("agentwrap.app_server")


class AppServerState:
    """A :class:`~agentwrap.detect.detector.StructuredSource` reading the
    thread status the app-server at ``socket`` announces. ``on_change`` is
    called (in the client's reader thread) when the person's thread changes
    status, so the supervisor looks again at once instead of at its next tick."""

    def __init__(self, socket: Path, on_change: Callable[[], None] = lambda: None) -> None:
        self.socket = socket
        self.on_change = on_change
        self._lock = threading.Lock()
        self._client: AppServerClient | None = None
        self._next_try = 0.0
        self.thread_id: str | None = None
        self._ephemeral: set[str] = set()
        self._status: dict[str, ThreadStatus] = {}
        self.changed_at: float | None = None  # monotonic time of the last status of the thread
        self.problem: str | None = None  # why the server is not read (None: it is)

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
        return client

    def _find_thread(self, client: AppServerClient) -> None:
        """After a (re)connection: the person's thread among the loaded ones, and
        its status now (the notifications say only what changes)."""
        if self.thread_id is not None:
            return
        for tid in client.loaded_threads():
            thread = client.read_thread(tid)
            if thread.get("ephemeral"):
                continue
            status = thread.get("status")
            with self._lock:
                if self.thread_id is None:
                    self.thread_id = tid
                if isinstance(status, dict) and tid not in self._status:
                    self._status[tid] = thread_status({"threadId": tid, "status": status})
            return

    def _heard(self, message: Notification | ApprovalRequest) -> None:
        if not isinstance(message, Notification):
            return
        changed = False
        with self._lock:
            if message.method == "thread/started":
                thread = message.params.get("thread")
                if isinstance(thread, dict) and isinstance(thread.get("id"), str):
                    if thread.get("ephemeral"):
                        self._ephemeral.add(thread["id"])
                    elif self.thread_id is None:
                        self.thread_id = thread["id"]
                        status = thread.get("status")
                        if isinstance(status, dict):  # no status change comes before a turn
                            with contextlib.suppress(AppServerError):
                                self._status[thread["id"]] = thread_status(
                                    {"threadId": thread["id"], "status": status})
                                changed = True
                                self.changed_at = time.monotonic()
            elif message.method == "thread/status/changed":
                try:
                    status = thread_status(message.params)
                except AppServerError:
                    return
                self._status[status.thread_id] = status
                changed = status.thread_id == self.thread_id
                if changed:
                    self.changed_at = time.monotonic()
        if changed:
            self.on_change()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # ------------------------------------------------------------------ the signal

    def status(self) -> ThreadStatus | None:
        """The person's thread's last status, or None when it is not known."""
        if self.client() is None:
            return None
        with self._lock:
            return self._status.get(self.thread_id) if self.thread_id else None

    def stamp(self) -> float | None:
        """None: the server's notifications wake the supervisor themselves
        (``on_change``), there is no file to watch."""
        return None

    def read(self) -> StructuredReading | None:
        status = self.status()
        if status is None:
            return None
        where = "Codex's app-server says the thread is"
        if status.kind == "idle":
            return StructuredReading(State.READY, f"{where} idle (thread/status/changed)")
        if status.kind != "active":
            return None  # notLoaded, systemError: the screen says more
        waiting = [f for f in status.flags if f.startswith("waitingOn")]
        if waiting:
            return StructuredReading(State.WAITING_INPUT, f"{where} {', '.join(waiting)}")
        return StructuredReading(State.BUSY, f"{where} active (a turn runs)")
