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

Four jobs, four modules: the connection (:mod:`.connection`: made again when
due, subscribed to the person's thread), which thread is the person's
(:mod:`.threads`), the open approval requests (:mod:`.approvals`), and this
reading of them as the session's state; the replies are :mod:`.replies`'s.
While the server says the thread waits on an approval whose request has not
reached agentwrap yet, the dialog the TUI draws meanwhile is not taken as the
question (``question_due``, for at most :data:`DUE_S`): otherwise a question
read off the screen comes first and the server's, with another id, replaces
it, so an answer to the first finds it gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..codex_server.client import AppServerClient
from ..codex_server.protocol import ApprovalRequest, Notification, ThreadStatus
from ..detect.detector import StructuredReading
from ..detect.states import State
from .approvals import ServerApprovals
from .connection import Connection
from .threads import PersonsThread

#: The server's channel unusable this long (no connection, or no thread known):
#: it is dead for delivery, and the screen's typing takes over until it is back.
#: Long enough for the keeper to start a killed server again (and for a slow
#: start-up's thread to appear), short of the delivery's readiness timeout.
DEAD_AFTER_S = 20.0
#: How long a dialog on screen is not read as the question while the server says an
#: approval waits and its request has not reached agentwrap: then the screen decides.
DUE_S = 3.0
#: The thread statuses the server's channel works in: a turn can be started
#: (``idle``) or is running (``active``). Any other (``notLoaded``,
#: ``systemError``) is the server's channel unusable, as an unknown status is.
USABLE = frozenset({"idle", "active"})


class AppServerState:
    """A :class:`~agentwrap.detect.detector.StructuredSource` reading the
    thread status the app-server at ``socket`` announces: the connection
    (:class:`~.connection.Connection`), the person's thread
    (:class:`~.threads.PersonsThread`) and its approval requests
    (:class:`~.approvals.ServerApprovals`) read as one state. ``on_change`` is
    called (in the client's reader thread) when the person's thread changes
    status, so the supervisor looks again at once instead of at its next tick."""

    def __init__(self, socket: Path, on_change: Callable[[], None] = lambda: None,
                 dead_after_s: float = DEAD_AFTER_S) -> None:
        self.socket = socket
        self.dead_after_s = dead_after_s
        self.on_change = on_change
        # the approvals the thread asks (reach only a subscribed connection: thread/resume)
        self.approvals = ServerApprovals()
        self.threads = PersonsThread(self.approvals)
        self.connection = Connection(socket, self.threads, self._heard)
        # since when the thread's status is not known (monotonic; None: it is)
        self._unknown_since: float | None = time.monotonic()

    # ------------------------------------------------------------------ what the parts read

    def client(self) -> AppServerClient | None:
        """The live connection, connecting (again) when it is due; None when the
        server cannot be reached (the screen decides meanwhile)."""
        return self.connection.client()

    @property
    def thread_id(self) -> str | None:
        """The person's thread (None: not known yet)."""
        return self.threads.thread_id

    @property
    def changed_at(self) -> float | None:
        """Monotonic time the server last said the person's thread's status."""
        return self.threads.changed_at

    @property
    def problem(self) -> str | None:
        """Why the server is not read (None: it is)."""
        return self.connection.problem

    def note_turn_start(self, thread_id: str) -> None:
        """agentwrap is about to start a turn in ``thread_id`` (not a /resume)."""
        self.threads.note_turn_start(thread_id)

    def close(self) -> None:
        self.connection.close()

    def _heard(self, message: Notification | ApprovalRequest) -> None:
        if self.approvals.heard(message):
            self.on_change()
        if not isinstance(message, Notification):
            return
        heard = self.threads.heard(message)
        if heard.switched:
            self.connection.restart_subscription()
        if heard.changed and heard.kick and not self.connection.subscribed:
            self.connection.wake_subscriber()
        if heard.changed:
            self.on_change()

    # ------------------------------------------------------------------ the signal

    def status(self) -> ThreadStatus | None:
        """The person's thread's last status, or None when it is not known."""
        client = self.connection.client()
        status = None
        if client is not None:
            self.connection.subscribe(client)
            status = self.threads.status_of(self.threads.thread_id)
        if status is None or status.kind not in USABLE:
            # not known, or a status nothing can be sent on (notLoaded,
            # systemError): unusable, and dead once it lasts (typing takes over)
            self._unknown_since = self._unknown_since or time.monotonic()
        else:
            self._unknown_since = None
        return status

    def status_of(self, thread_id: str) -> ThreadStatus | None:
        """What the server last said of ``thread_id`` (a thread the TUI has left,
        say: a batch handed to it is settled once it is idle)."""
        return self.threads.status_of(thread_id)

    def dead(self) -> bool:
        """Whether the server's channel has been unusable (no connection, no
        thread known, a status other than :data:`USABLE`) for ``dead_after_s`` (:data:`DEAD_AFTER_S`): only then
        are messages typed into the TUI instead (a server merely not ready
        yet, or being started again, is waited for)."""
        self.status()
        since = self._unknown_since
        return since is not None and time.monotonic() - since >= self.dead_after_s

    def stamp(self) -> float | None:
        """None: the server's notifications wake the supervisor themselves
        (``on_change``), there is no file to watch."""
        return None

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
        since = self.threads.waiting_since
        due = since is not None and time.monotonic() - since < DUE_S \
            and not self.approvals.any_open()
        if due:
            return StructuredReading(
                State.WAITING_INPUT, f"{where} {', '.join(waiting)}; its request is on its way"
                " (the dialog on screen is not read as the question meanwhile)", question_due=True)
        return StructuredReading(State.WAITING_INPUT, f"{where} {', '.join(waiting)}")


__all__ = ["DEAD_AFTER_S", "DUE_S", "USABLE", "AppServerState"]
