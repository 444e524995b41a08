"""Waiting on the event bus: for one row to change, or for every new event.

The store announces every commit that recorded events (a datagram into the
events dir, :mod:`agentwrap.events`), so a waiter wakes as soon as the
supervisor, a hook or another surface changed something, without polling.
A datagram can be lost (a full socket queue, a writer without an events
dir), never the row itself: each waiter also looks again every
``recheck_s``, and subscribes before its first look, so a change between the
two is not missed. Waiting for a message and waiting for an answer are the
same loop (:func:`wait_for`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from ..events import Event, Subscription
from ..paths import Paths
from ..queue.store import MessageStore

#: How often a waiter looks again although no announcement came: a datagram
#: can be lost (a full socket queue, a writer without an events dir), never
#: the row itself.
RECHECK_S = 1.5
#: Events read at once by :func:`follow`: a shorter batch means it caught up.
FOLLOW_BATCH = 1000

T = TypeVar("T")


def subscribe(paths: Paths, store: MessageStore | None = None) -> Subscription:
    """A wake-up for every commit that records events, from any process
    (``store``: and from any host, when it is shared: :meth:`MessageStore.listen`).
    Close it (or use it as a context manager) when done."""
    if store is not None:
        store.listen()
    return Subscription(paths.events_dir)


def wait_for(paths: Paths, look: Callable[[], T], done: Callable[[T], bool], timeout: float,
             recheck_s: Callable[[], float], store: MessageStore | None = None) -> T:
    """``look()`` again at each wake-up until ``done`` says so or ``timeout``
    passed; the last look either way. Subscribed before the first look, so a
    change between the two is not missed; looks again every ``recheck_s()``
    seconds (asked at each wait: the service's may change meanwhile) in case
    an announcement was lost."""
    deadline = time.monotonic() + timeout
    with subscribe(paths, store) as sub:
        while True:
            got = look()
            left = deadline - time.monotonic()
            if done(got) or left <= 0:
                return got
            sub.wait(min(left, recheck_s()))


def follow(
    store: MessageStore, paths: Paths, after_id: int, session: str | None,
    kinds: Iterable[str] | None, recheck_s: Callable[[], float],
) -> Iterator[Event]:
    """Every event after ``after_id``, then each new one as it is committed,
    forever (stop by closing the generator, or Ctrl-C). Waits on the bus,
    looking again every ``recheck_s()`` seconds for a lost announcement."""
    wanted = list(kinds or ())
    with subscribe(paths, store) as sub:
        last = after_id
        while True:
            batch = store.events(last, session=session, kinds=wanted, subject=None,
                                 limit=FOLLOW_BATCH)
            for ev in batch:
                last = ev.id
                yield ev
            if len(batch) < FOLLOW_BATCH:
                sub.wait(recheck_s())
