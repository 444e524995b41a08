"""The connection to the session's app-server: made (again) when due, subscribed to the person's thread.

The connection subscribes to the person's thread (``thread/resume``) the
moment its first turn starts (the server refuses before: the thread has no
rollout yet), from a thread of its own woken by the status change
(:meth:`Connection.wake_subscriber`), so the first turn's approval requests
reach agentwrap too; a request already open then is sent again by the server
to the new subscriber. One job: what is heard on it goes to ``heard``, and
which thread is the person's is :class:`~.threads.PersonsThread`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..codex_server.client import AppServerClient
from ..codex_server.protocol import ApprovalRequest, Notification
from ..errors import AppServerError
from .threads import PersonsThread

RECONNECT_EVERY_S = 2.0
FIND_EVERY_S = 1.0  # connected, no thread known: the loaded threads looked at this often
SUBSCRIBE_EVERY_S = 1.0  # thread/resume fails until the thread's first turn has started
SUBSCRIBE_RETRY_S = 0.05  # after a turn started: tries this often ...
SUBSCRIBE_FOR_S = 5.0  # ... for this long (then the supervisor's look retries each second)
_log = logging.getLogger("agentwrap.app_server")


class Connection:
    """agentwrap's one connection to the app-server at ``socket``; every
    message heard on it goes to ``heard`` (in the client's reader thread)."""

    def __init__(self, socket: Path, threads: PersonsThread,
                 heard: Callable[[Notification | ApprovalRequest], None]) -> None:
        self.socket = socket
        self.threads = threads
        self.heard = heard
        self._client: AppServerClient | None = None
        self._next_try = 0.0
        self.problem: str | None = None  # why the server is not read (None: it is)
        self._subscribed: AppServerClient | None = None  # the connection thread/resume took on
        self._next_subscribe = 0.0
        self._next_find = 0.0  # the next look for the person's thread while none is known
        self._refused: str | None = None  # the thread whose thread/resume was refused (logged)
        self._sub_lock = threading.Lock()  # one thread/resume at a time
        self._kick = threading.Event()  # a turn started: subscribe now (the subscriber thread)
        self._closing = threading.Event()
        self._subscriber: threading.Thread | None = None

    @property
    def subscribed(self) -> bool:
        """Whether the live connection is the one subscribed to the person's thread."""
        return self._subscribed is self._client

    def restart_subscription(self) -> None:
        """The TUI moved to another thread: it is subscribed to afresh."""
        self._subscribed = None
        self._next_subscribe = 0.0

    def client(self) -> AppServerClient | None:
        """The live connection, connecting (again) when it is due; None when the
        server cannot be reached (the screen decides meanwhile)."""
        now = time.monotonic()
        if self._client is not None and not self._client.closed:
            if self.threads.thread_id is None and now >= self._next_find:
                self._find(self._client, now)  # the look at connection time found none
            return self._client
        if now < self._next_try:
            return None
        self._next_try = now + RECONNECT_EVERY_S
        if self._client is not None:
            _log.warning("codex app-server connection lost (%s)", self._client.close_reason)
            self.problem = f"the app-server connection was lost ({self._client.close_reason})"
            self._client = None
            self.threads.approvals.forget()  # its requests went with it: the screen shows the dialog
        try:
            client = AppServerClient.connect(self.socket, timeout=2.0)
        except AppServerError as exc:
            self.problem = str(exc)
            return None
        client.on_message(self.heard)
        self._client = client
        self.problem = None
        self._refused = None
        self._find(client, now)
        if self.threads.turned:  # a thread with turns: subscribe on the new connection at once
            self.wake_subscriber()
        return client

    def _find(self, client: AppServerClient, now: float) -> None:
        """The person's thread among the server's, looked for again every
        :data:`FIND_EVERY_S` while none is known: a look that failed (a
        request timed out on a loaded machine) or came before the TUI's thread
        was loaded, whose ``thread/started`` went by before this connection
        listened, left the thread unknown for good (the session's messages
        waited for the server to be declared dead)."""
        self._next_find = now + FIND_EVERY_S
        try:
            self.threads.find(client)
        except AppServerError as exc:
            _log.info("codex app-server: no thread yet (%s)", exc)

    def subscribe(self, client: AppServerClient) -> None:
        """From the supervisor's look: ``thread/resume`` on this connection once
        the thread has had a turn (before that it has no rollout and the server
        refuses), tried again every :data:`SUBSCRIBE_EVERY_S` until it takes. The
        subscriber thread (:meth:`_follow`) usually did it already."""
        if self._subscribed is client or self.threads.thread_id is None or not self.threads.turned:
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
            thread_id = self.threads.thread_id
            if self._subscribed is client:
                return True
            if thread_id is None or client.closed:
                return False
            try:
                client.resume(thread_id)
            except AppServerError as exc:
                if self._refused != thread_id:  # once a thread: it is refused till its first turn
                    _log.info("codex app-server: not subscribed to %s yet (%s)", thread_id, exc)
                self._refused = thread_id
                return False
            if self.threads.thread_id != thread_id:  # the TUI moved meanwhile: that one next
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

    def wake_subscriber(self) -> None:
        if self._subscriber is None:
            self._subscriber = threading.Thread(
                target=self._follow, name=f"codex-subscribe-{self.socket.name}", daemon=True)
            self._subscriber.start()
        self._kick.set()

    def close(self) -> None:
        self._closing.set()
        self._kick.set()
        if self._client is not None:
            self._client.close()


__all__ = ["FIND_EVERY_S", "RECONNECT_EVERY_S", "Connection"]
