"""What the chat bridge has done, kept on disk so a restart neither repeats nor forgets it.

Telegram redelivers an update until a later ``getUpdates`` confirms it (by
its offset), so an update may arrive twice: after a crash before the
offset moved, or from a proxy retrying. Each ``update_id`` is claimed here
(a primary key, in one transaction) *before* the bridge acts on it: a
second delivery finds it claimed and does nothing. At most once, never
twice: a bridge that dies between the claim and the answer loses that
press, and the person, who saw no confirmation, presses again (a new update).

A notice (one question sent to one chat) is recorded before it is sent,
for the same reason: a crash between the two leaves a question not sent
rather than sent twice. A send Telegram refused, or that never connected,
surely did not arrive: its record is dropped and the next look sends it
again; one that may have arrived (the answer lost) is not sent again.
``closed`` notices are never edited again.

One SQLite file of the bridge's own in the state dir: it is not the
message store (nothing here is a message or an answer; those go through
the service).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ...paths import create_private, private_dirs

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS updates (update_id INTEGER PRIMARY KEY, seen REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS notices (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " session TEXT NOT NULL, question_id TEXT NOT NULL, chat_id INTEGER NOT NULL,"
    " message_id INTEGER, text TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'open',"
    " outcome TEXT NOT NULL DEFAULT '', answer_id TEXT NOT NULL DEFAULT '', UNIQUE (session, question_id, chat_id))",
)
#: Update ids kept; older ones are confirmed to Telegram long before.
KEEP_UPDATES = 10_000


@dataclass(frozen=True)
class Notice:
    id: int
    session: str
    question_id: str
    chat_id: int
    message_id: int | None
    text: str
    state: str  # open (buttons live), answered (an answer sent), closed (edited, final)
    outcome: str
    answer_id: str  # the answer the chat sent ("" none yet)


class Ledger:
    """The bridge's record; every method is one transaction, safe across threads."""

    def __init__(self, path: Path) -> None:
        private_dirs(path.parent)
        create_private(path)  # 0600 before SQLite writes a byte into it
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                   timeout=10.0)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            for sql in _SCHEMA:
                self._db.execute(sql)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def claim_update(self, update_id: int) -> bool:
        """True the first time ``update_id`` is claimed, False ever after."""
        with self._lock:
            try:
                self._db.execute("INSERT INTO updates (update_id, seen) VALUES (?, ?)",
                                 (update_id, time.time()))
            except sqlite3.IntegrityError:
                return False
            self._db.execute("DELETE FROM updates WHERE update_id <= ?",
                             (update_id - KEEP_UPDATES,))
            return True

    def next_offset(self) -> int:
        """The ``getUpdates`` offset: one past the newest update claimed (0: none yet)."""
        with self._lock:
            row = self._db.execute("SELECT max(update_id) FROM updates").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def add_notice(self, session: str, question_id: str, chat_id: int, text: str) -> int | None:
        """Record a notice about to be sent; None if this chat had this question already."""
        with self._lock:
            try:
                cur = self._db.execute(
                    "INSERT INTO notices (session, question_id, chat_id, text) VALUES (?, ?, ?, ?)",
                    (session, question_id, chat_id, text))
            except sqlite3.IntegrityError:
                return None
            return cur.lastrowid

    def unsend(self, notice_id: int) -> None:
        """Forget a notice Telegram surely did not deliver: the next look sends it."""
        with self._lock:
            self._db.execute("DELETE FROM notices WHERE id = ? AND message_id IS NULL",
                             (notice_id,))

    def sent(self, notice_id: int, message_id: int) -> None:
        with self._lock:
            self._db.execute("UPDATE notices SET message_id = ? WHERE id = ?", (message_id, notice_id))

    def notice(self, notice_id: int) -> Notice | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM notices WHERE id = ?", (notice_id,)).fetchone()
        return None if row is None else Notice(*row)

    def by_message(self, chat_id: int, message_id: int) -> Notice | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM notices WHERE chat_id = ? AND message_id = ?",
                                   (chat_id, message_id)).fetchone()
        return None if row is None else Notice(*row)

    def take_answer(self, session: str, question_id: str, outcome: str) -> bool:
        """Mark the question answered from the chat (every chat's notice of it);
        False when one was already (a second press, here or in another chat)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE notices SET state = 'answered', outcome = ? WHERE session = ?"
                " AND question_id = ? AND state = 'open'", (outcome, session, question_id))
            return cur.rowcount > 0

    def answer_is(self, session: str, question_id: str, answer_id: str) -> None:
        """The answer the service stored for the press (to look at if it fails)."""
        with self._lock:
            self._db.execute("UPDATE notices SET answer_id = ? WHERE session = ?"
                             " AND question_id = ?", (answer_id, session, question_id))

    def reopen(self, session: str, question_id: str) -> None:
        """The answer was refused, or failed, after all: buttons live again."""
        with self._lock:
            self._db.execute("UPDATE notices SET state = 'open', outcome = '', answer_id = ''"
                             " WHERE session = ? AND question_id = ? AND state = 'answered'",
                             (session, question_id))

    def unclosed(self) -> list[Notice]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM notices WHERE state != 'closed'").fetchall()
        return [Notice(*r) for r in rows]

    def close_notice(self, notice_id: int) -> None:
        with self._lock:
            self._db.execute("UPDATE notices SET state = 'closed' WHERE id = ?", (notice_id,))
