"""One write transaction of the message store, and the events it appends.

Every change a reader may wait for appends its event (:mod:`agentwrap.events`)
in the same transaction as the change, so the log never says more or less
than the rows. A :class:`Write` is what the store's write transaction
(``SQLiteMessageStore._write``) hands to the code that changes rows
(:mod:`.admission`, :mod:`.transitions`): the open connection, and whether
events were appended, which the store announces to the waiting readers once
the transaction has committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import events
from ..message import Status


class Write:
    """The open write transaction ``conn``; ``recorded``: it appended events.

    ``LOCK_ROWS``: what a ``SELECT`` that picks rows to change ends with, so
    that a concurrent transaction of another process skips the rows this one
    takes (SQLite: nothing, its write lock already orders every writer; the
    PostgreSQL store's subclass: ``FOR UPDATE SKIP LOCKED``)."""

    __slots__ = ("conn", "recorded")
    LOCK_ROWS = ""

    def __init__(self, conn: events.Conn) -> None:
        self.conn = conn
        self.recorded = False

    def claiming(self, session: str) -> None:
        """Called first in a claim of ``session``'s queue: a backend whose
        writers do not all take turns makes claims of one session take turns
        here, so a batch stays in delivery order (SQLite: its write lock does)."""

    def take_turns(self, what: str) -> None:
        """Writers of ``what`` (a session name being registered, an answer
        being concluded) take turns from here to the commit, so a read and
        the write that depends on it are one step for them (SQLite: its write
        lock already orders every writer)."""

    def event(
        self, now: float, session: str, kind: str, subject: str, /, **data: Any,
    ) -> None:
        """Append an event inside the open write transaction."""
        events.record(self.conn, now, session, kind, subject, **data)
        self.recorded = True

    def ended(self, now: float, rows: Iterable[events.Row], status: Status, detail: str) -> None:
        """``message.ended`` for each row (``id``, ``session``) that reached ``status``."""
        for r in rows:
            self.event(now, r["session"], "message.ended", r["id"],
                       status=status.value, detail=detail)

    def consumed(self, now: float, rows: Iterable[events.Row], channel: str) -> None:
        """One ``session.consumed`` per session: a reader took these rows itself."""
        by_session: dict[str, list[events.Row]] = {}
        for r in rows:
            by_session.setdefault(r["session"], []).append(r)
        for session, taken in by_session.items():
            self.event(now, session, "session.consumed", "", count=len(taken),
                       sources=sorted({r["source"] for r in taken}), channel=channel,
                       ids=[r["id"] for r in taken])
