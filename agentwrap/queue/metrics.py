"""The queue's delivery figures, computed from the persisted rows.

:class:`~agentwrap.queue.store.QueueMetrics` survive restarts because they are
counted from the ``messages`` and ``attempts`` tables, not kept in memory:
per status, first try against retries, mean attempts and latency, the
nearest-rank 95th percentile (sorted in SQL), and per channel what was tried
through it and what it delivered. Reads only: the store runs them under its
lock, outside any transaction.
"""

from __future__ import annotations

import math
from typing import Any

from ..events import Conn
from ..message import SECTION_REMOVED, TERMINAL_STATUSES, Status
from .schema import session_filter
from .store import ChannelMetrics, QueueMetrics

SUCCESS_STATUSES = frozenset({Status.DELIVERED, Status.ACKNOWLEDGED})


def queue_metrics(conn: Conn, session: str | None) -> QueueMetrics:
    """The figures of ``session``'s messages (None: of every session)."""
    where, params = session_filter(session)
    by_status = {s: 0 for s in Status}
    for row in conn.execute(
        f"SELECT status, COUNT(*) AS n FROM messages WHERE {where} GROUP BY status", params
    ):
        by_status[Status(row["status"])] = int(row["n"])
    success = [s.value for s in SUCCESS_STATUSES]
    terminal = [s.value for s in TERMINAL_STATUSES]
    row = conn.execute(
        "SELECT"
        " SUM(CASE WHEN attempts >= 1 THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN status IN (?, ?) AND attempts = 1 THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN status IN (?, ?) AND attempts > 1 THEN 1 ELSE 0 END),"
        f" AVG(CASE WHEN status IN ({','.join('?' * len(terminal))}) THEN attempts END),"
        " AVG(CASE WHEN status IN (?, ?) THEN finished - created END),"
        " SUM(CASE WHEN status IN (?, ?) THEN 1 ELSE 0 END)"
        f" FROM messages WHERE {where}",
        [*success, *success, *terminal, *success, *success, *params],
    ).fetchone()
    n_success = int(row[5] or 0)
    return QueueMetrics(
        by_status=by_status,
        total=sum(by_status.values()),
        attempted=int(row[0] or 0),
        succeeded_first_try=int(row[1] or 0),
        succeeded_after_retry=int(row[2] or 0),
        escalated=by_status[Status.ESCALATED],
        failed=by_status[Status.FAILED],
        mean_attempts=None if row[3] is None else float(row[3]),
        mean_latency_s=None if row[4] is None else float(row[4]),
        p95_latency_s=_p95(conn, where, params, success, n_success),
        by_channel=_by_channel(conn, where, params, success),
    )


def _by_channel(
    conn: Conn, where: str, params: list[Any], success: list[str]
) -> dict[str, ChannelMetrics]:
    """Per channel: its attempts, and the messages its attempt ended (a message
    counts for the channel of its last attempt). An attempt neither ended a
    message successfully nor is still open failed."""
    counts = conn.execute(
        "SELECT a.channel, COUNT(*),"
        " SUM(CASE WHEN a.number = m.attempts AND m.status IN (?, ?) THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN a.number = m.attempts + 1 AND m.status = ? THEN 1 ELSE 0 END)"
        # (the open attempt is counted once it ends)
        f" FROM attempts a JOIN messages m ON m.id = a.message_id WHERE a.outcome != ? AND {where}"
        " GROUP BY a.channel",
        [*success, Status.DELIVERING.value, SECTION_REMOVED.value, *params],
    ).fetchall()
    latencies: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for channel, attempts, latency in conn.execute(
        "SELECT a.channel, m.attempts, m.finished - m.created"
        " FROM messages m JOIN attempts a ON a.message_id = m.id AND a.number = m.attempts"
        f" WHERE m.status IN (?, ?) AND {where}",
        [*success, *params],
    ):
        latencies.setdefault(channel, []).append(float(latency))
        first[channel] = first.get(channel, 0) + (attempts == 1)
    out: dict[str, ChannelMetrics] = {}
    for channel, n, ok, open_ in counts:
        lat = sorted(latencies.get(channel, ()))
        done = int(ok or 0)
        out[channel] = ChannelMetrics(
            attempts=int(n), failed_attempts=int(n) - done - int(open_ or 0), delivered=done,
            first_try=first.get(channel, 0),
            first_try_rate=first.get(channel, 0) / done if done else None,
            p50_latency_s=_nearest_rank(lat, 0.50), p95_latency_s=_nearest_rank(lat, 0.95),
        )
    return dict(sorted(out.items()))


def _nearest_rank(ordered: list[float], q: float) -> float | None:
    return ordered[math.ceil(q * len(ordered)) - 1] if ordered else None


def _p95(
    conn: Conn, where: str, params: list[Any], success: list[str], n: int
) -> float | None:
    """Nearest-rank 95th percentile of created -> success, sorted in SQL."""
    if n == 0:
        return None
    rank = math.ceil(0.95 * n)
    row = conn.execute(
        f"SELECT finished - created FROM messages WHERE status IN (?, ?) AND {where}"
        " ORDER BY 1 LIMIT 1 OFFSET ?",
        [*success, *params, rank - 1],
    ).fetchone()
    return float(row[0])
