"""Is anything due for a session? One read, for callers that must be quick.

An agent runs its between-tool-calls hook after every tool call, and waits for
it; nearly always nothing is queued for the session. Opening the store
through :class:`agentwrap.service.Service` costs the import of most of
agentwrap (~50 ms of a hook's ~130); this asks SQLite alone, read-only, the
question :meth:`agentwrap.service.Service.inbox` answers (a pending message a
reader may take, not waiting for a retry, not expired), so only a hook that has
something to hand over pays for the service. Any doubt (no database, a lock, a
damaged file) answers True: the full path then decides, and says why; so
does a queue on a PostgreSQL server (AGENTWRAP_STORE_URL: the local file does
not hold it).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

#: Kept equal to the store's words (tests/test_queue_due.py compares this with
#: Service.inbox on the same rows): the kinds a reader may take are
#: delivery.handover.CONSUMABLE_KINDS (data, and the person's own words).
_SQL = (
    "SELECT 1 FROM (SELECT next_attempt_at FROM messages WHERE session = ?"
    " AND status = 'pending' AND kind IN ('content', 'instruction') AND +expires > ?"
    " ORDER BY priority DESC, created ASC, seq ASC LIMIT 1) WHERE next_attempt_at <= ?"
)


#: :data:`agentwrap.queue.backend.ENV`, not imported: that module loads the stores.
STORE_URL_ENV = "AGENTWRAP_STORE_URL"


def anything_due(db_path: Path, session: str, now: float | None = None,
                 busy_timeout_ms: int = 100) -> bool:
    """Whether a reader of ``session``'s queue would get something now."""
    t = time.time() if now is None else now
    if os.environ.get(STORE_URL_ENV):  # the queue is on a server: the full path asks it
        return True
    if not db_path.is_file():  # connecting would make an empty one
        return True
    try:
        conn = sqlite3.connect(db_path, timeout=busy_timeout_ms / 1000, isolation_level=None)
    except sqlite3.Error:
        return True
    try:
        return conn.execute(_SQL, (session, t, t)).fetchone() is not None
    except sqlite3.Error:
        return True
    finally:
        conn.close()


__all__ = ["STORE_URL_ENV", "anything_due"]
