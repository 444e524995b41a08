"""Answers to the question a waiting agent shows, kept until the supervisor applies them.

A surface (``agentwrap answer``, the HTTP API) checks an answer against the
question the registry holds and stores it here as ``pending``; the session's
supervisor reads the live screen again and either types it (``applied``, or
``failed`` with the evidence when the dialog did not close) or refuses it
because the agent asks something else by now (``stale``). Every row change
appends a ``session.answered`` event in the same transaction, so a waiting
surface is woken by the event bus like ``send --wait``.

The table lives in the one store, next to the messages: this machine's SQLite
file, or the PostgreSQL server every host shares when the store URL says so
(the caller passes the URL, as the message store's opener does).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import events
from ..queue import db
from ..queue.backend import open_database
from ..queue.keys import SessionKeys, host_name
from ..queue.writes import Write
from .actions import AnswerAction, AnswerStatus, from_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    question_id TEXT NOT NULL,      -- the question it answers (detect.question.Question.id)
    answer TEXT NOT NULL,           -- JSON: an AnswerAction's to_json (answers.actions)
    source TEXT NOT NULL DEFAULT '',  -- the surface it came through (cli, http)
    status TEXT NOT NULL,           -- pending | applied | stale | failed
    detail TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS answers_pending ON answers (session, status, created);
"""


@dataclass(frozen=True)
class Answer:
    id: str
    session: str
    question_id: str
    answer: AnswerAction
    source: str
    status: AnswerStatus
    detail: str
    created: float
    finished: float | None = None

    @property
    def ended(self) -> bool:
        return self.status.ended

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "session": self.session, "questionId": self.question_id,
                "answer": self.answer.to_json(), "source": self.source,
                "status": self.status.value,
                "detail": self.detail, "created": self.created, "finished": self.finished}


def _row(r: events.Row) -> Answer:
    return Answer(r["id"], r["session"], r["question_id"], from_json(json.loads(r["answer"])),
                  r["source"], AnswerStatus(r["status"]), r["detail"], float(r["created"]),
                  None if r["finished"] is None else float(r["finished"]))


class AnswerStore:
    """The ``answers`` table, on the store's :class:`~agentwrap.queue.Database`
    (the SQLite file, or the PostgreSQL server of ``url``); safe to share
    between threads."""

    def __init__(
        self, path: Path, *, events_dir: Path | None = None,
        clock: Callable[[], float] = time.time, url: str = "",
        busy_timeout_ms: int = db.BUSY_TIMEOUT_MS, host: str | None = None,
    ) -> None:
        self.path = path
        self.events_dir = events_dir
        self._clock = clock
        self.db = open_database(path, url, events_dir=events_dir, busy_timeout_ms=busy_timeout_ms)
        try:
            self.db.ensure(SCHEMA, ("answers", "answers_pending"))
        except BaseException:
            self.db.close()
            raise
        # a shared store's rows name sessions HOST/NAME (agentwrap.queue.keys)
        self.keys = SessionKeys(host_name() if host is None else host, self.db.shared)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> Sequence[events.Row]:
        return self.db.read(sql, params)

    def close(self) -> None:
        self.db.close()

    def request(
        self, session: str, question_id: str, answer: AnswerAction, source: str = "",
        rule: str | None = None,
    ) -> Answer:
        """Store a checked answer as pending (and its event); returns it. ``rule``:
        the answer rule that chose it (source ``policy``), named in the event."""
        now = self._clock()
        aid = uuid.uuid4().hex[:16]
        with self.db.write() as w:
            self._insert(w, now, aid, self.keys.key(session), question_id, answer, source, rule)
        return self.get(aid)

    def given(
        self, session: str, question_id: str, answer: AnswerAction, detail: str, *,
        source: str, rule: str | None = None,
    ) -> Answer:
        """Keep an answer that was given without the keys (a rule's, by the agent's
        hook) as ``applied``: the row and both its events (pending, applied) in one
        transaction, so it is never seen pending (for a supervisor to type) nor lost
        between the two."""
        now = self._clock()
        aid = uuid.uuid4().hex[:16]
        with self.db.write() as w:
            self._insert(w, now, aid, self.keys.key(session), question_id, answer, source, rule)
            self._end(w, now, aid, AnswerStatus.APPLIED, detail)
        return self.get(aid)

    @staticmethod
    def _insert(w: Write, now: float, aid: str, session: str, question_id: str,
                answer: AnswerAction, source: str, rule: str | None) -> None:
        data = answer.to_json()
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        w.conn.execute(
            "INSERT INTO answers (id, session, question_id, answer, source, status, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (aid, session, question_id, body, source, AnswerStatus.PENDING.value, now),
        )
        w.event(now, session, "session.answered", aid,
                status=AnswerStatus.PENDING.value, questionId=question_id, answer=data,
                source=source, by=answered_by(source), **({"rule": rule} if rule else {}))

    def get(self, answer_id: str) -> Answer:
        rows = self._read("SELECT * FROM answers WHERE id = ?", (answer_id,))
        if not rows:
            raise KeyError(answer_id)
        return _row(rows[0])

    def pending(self, session: str) -> list[Answer]:
        """The session's pending answers, oldest first."""
        return [_row(r) for r in self._read(
            "SELECT * FROM answers WHERE session = ? AND status = ? ORDER BY created, id",
            (self.keys.key(session), AnswerStatus.PENDING.value))]

    def recent(self, session: str, limit: int = 20) -> list[Answer]:
        return [_row(r) for r in self._read(
            "SELECT * FROM answers WHERE session = ? ORDER BY created DESC, id LIMIT ?",
            (self.keys.key(session), limit))]

    def conclude(self, answer_id: str, status: AnswerStatus, detail: str) -> bool:
        """End a pending answer (applied, stale or failed); False if it had ended already."""
        if not status.ended:
            raise ValueError(f"not an end status: {status!r}")
        now = self._clock()
        with self.db.write() as w:
            return self._end(w, now, answer_id, status, detail)

    @staticmethod
    def _end(w: Write, now: float, answer_id: str, status: AnswerStatus, detail: str) -> bool:
        w.take_turns(f"answer:{answer_id}")  # of two concluding it, one wins
        row = w.conn.execute("SELECT * FROM answers WHERE id = ?", (answer_id,)).fetchone()
        if row is None or row["status"] != AnswerStatus.PENDING:
            return False
        w.conn.execute("UPDATE answers SET status = ?, detail = ?, finished = ? WHERE id = ?",
                       (status.value, detail, now, answer_id))
        w.event(now, row["session"], "session.answered", answer_id,
                status=status.value, detail=detail, questionId=row["question_id"],
                answer=json.loads(row["answer"]), source=row["source"],
                by=answered_by(row["source"]))
        return True


def answered_by(source: str) -> str:
    """Who chose the answer: ``policy`` (an answer rule) or ``person`` (every surface)."""
    return "policy" if source == "policy" else "person"
