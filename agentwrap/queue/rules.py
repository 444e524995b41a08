"""The queue's limits and its batching, as rules over figures: no SQL here.

What a store counts (messages in a rate window, pending messages, what one
sender sent) is its business; what the counts allow is decided here, once,
with the refusal each limit gives: the rate limit per (session, source), the
sender's own limit across sessions, the pending limits with the eviction of
the oldest ordinary messages, and how many due messages one batch takes.
:mod:`.admission` and :mod:`.transitions` run the queries and call these, so
another backend would run its own queries and keep the same rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from ..errors import QueueFull, RateLimited
from ..message import Priority, QueueLimits, Source
from .store import SenderLimit
from .validate import Checked

RATE_WINDOW_S = 60.0

T = TypeVar("T")


def due_run(queued: Iterable[T], t: float, due_at: Callable[[T], float]) -> Iterator[T]:
    """Of a session's queue in delivery order, the run at its head that may be tried
    at ``t``: it stops at the first message still waiting out its backoff, so a later
    message never overtakes it (three commands to a shell ran 0, 2, 1 when the
    second's attempt went back to the queue and the third was claimed past it)."""
    return itertools.takewhile(lambda m: due_at(m) <= t, queued)


def rate_exempt(checked: Checked) -> bool:
    """SYSTEM messages and STARTUP context are exempt from the rate limit
    (agentwrap's own, and needed to start a session) and are not counted
    either; only internal callers can enqueue them (see :func:`validate`)."""
    if checked.source is Source.SYSTEM or checked.priority is Priority.STARTUP:
        assert checked.internal, "reserved sources are refused in validate"
        return True
    return False


def check_rate(checked: Checked, created: Sequence[float], rate: int, now: float) -> None:
    """:class:`RateLimited` when ``created`` (oldest first: the rate-counted
    messages of the session and source in the window) holds ``rate`` or more."""
    if len(created) < rate:
        return
    # Once this many have left the window there is room for one more.
    must_leave = len(created) - rate + 1
    retry_after = max(0.0, created[must_leave - 1] + RATE_WINDOW_S - now)
    raise RateLimited(
        f"rate limit: {len(created)} messages from {checked.source} to session"
        f" {checked.new.session!r} in the last {RATE_WINDOW_S:.0f} s (limit {rate})",
        retry_after=retry_after,
    )


def check_sender(limit: SenderLimit, created: Sequence[float], now: float) -> None:
    """:class:`RateLimited` when ``created`` (newest first, at most
    ``limit.count``: the sender's messages to any session in the last
    ``limit.window_s``) reached the sender's limit."""
    if len(created) < limit.count:
        return
    retry = max(0.0, created[-1] + limit.window_s - now)
    raise RateLimited(
        f"{limit.what} sent {len(created)} messages to other agents in the last"
        f" {limit.window_s:.0f} s (limit {limit.count})",
        retry_after=retry, hint=f"wait {retry:.0f} s; send fewer, fuller messages",
    )


def evictions(limits: QueueLimits, in_session: int, total: int) -> int:
    """How many pending messages of a session holding ``in_session`` must make
    way for a new one; :class:`QueueFull` when all sessions together (``total``)
    are full, which no eviction in one session may relieve beyond its own."""
    n_evict = max(0, in_session - limits.max_pending_per_session + 1)
    if total - n_evict >= limits.max_pending_total:
        raise QueueFull(
            f"the queue holds {total} pending messages in all sessions"
            f" (limit {limits.max_pending_total})"
        )
    return n_evict


#: Fresh context is worth more than stale context, so the oldest ordinary
#: message makes way; HIGH/CRITICAL/STARTUP are never dropped silently: the
#: producer gets QueueFull instead. Evictable: a priority below this one.
EVICTABLE_BELOW = Priority.HIGH


def check_victims(found: int, needed: int, session: str, in_session: int,
                  limits: QueueLimits) -> None:
    """:class:`QueueFull` when fewer evictable messages were ``found`` than ``needed``."""
    if found < needed:
        raise QueueFull(
            f"session {session!r} has {in_session} pending messages"
            f" (limit {limits.max_pending_per_session}) and none can be evicted:"
            " all are high, critical or startup priority"
        )


def fit(rows: Iterable[tuple[str, int, bool]], max_bytes: int) -> list[str]:
    """Ids of the leading ``(id, size, is_command)`` rows whose sizes sum to at
    most max_bytes (at least one).

    A COMMAND is typed as is, on its own: it never shares a batch.
    """
    ids: list[str] = []
    total = 0
    for row_id, size, command in rows:
        if ids and (command or total + size > max_bytes):
            break
        if command:
            return [row_id]
        ids.append(row_id)
        total += size
    return ids
