"""Services for the server's threads, and its one writer of new messages.

A :class:`~agentwrap.service.Service` holds SQLite connections and is used by
one thread at a time; the server runs a request's reads on a worker thread.
The pool lends an idle service (opening another when all are lent) and
keeps at most :data:`MAX_IDLE` of them once they are given back. An event
stream takes one only for each read (:meth:`ServicePool.call`), not for its
whole life: 200 streams used to hold 200 services, about 6 descriptors each
while open, and kept them all afterwards. What remains of a peak: SQLite
keeps a closed connection's database descriptor (not its WAL's) while other
connections of the process are open, and reuses it for the next one, so
the server holds about two per service it ever had lent at once, which the
worker threads (anyio's 40) and the writer bound.

New messages are not stored by the request's thread but by the pool's
writer (:class:`Writer`): one thread that takes every message that arrived
while it was busy and stores them together (:meth:`Service.send_many`: each
with every check of ``send``, one transaction, one commit). Each sender is
answered only after the commit that holds its message, so "stored durably
before the call returns" holds; what changes is that N senders at once cost
one fsync instead of N, taken in turn. The request itself waits on the event
loop, without a worker thread.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from ...events import Event, Subscription
from ...message import NewMessage, QueueLimits, Status
from ...paths import Paths
from ...service import Sent, Service

#: Services kept open while nobody uses them; more are opened when needed
#: and closed when given back.
MAX_IDLE = 4
#: Messages stored in one transaction at most: a longer one would hold the
#: store's write lock (and the supervisors waiting for it) for longer.
MAX_BATCH = 64

T = TypeVar("T")
P = ParamSpec("P")
#: What a sender has computed for it on the writer thread after the commit,
#: with the writer's service and what the batch's commit ended.
Then = Callable[[Service, Sent, "BatchEnded"], T]


class ServicePool:
    def __init__(self, paths: Paths, limits: QueueLimits,
                 opener: Callable[[], Service] | None = None) -> None:
        self.paths = paths
        self.limits = limits
        #: how a service is opened: the hub's over its store and every host's sessions
        #: (``agentwrap hub``), else this host's (:meth:`Service.open`)
        self.opener = opener
        self._idle: list[Service] = []
        self._lock = threading.Lock()
        self._closed = False
        self.writer = Writer(self)

    @contextmanager
    def lease(self) -> Iterator[Service]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            svc = self._idle.pop() if self._idle else None
        if svc is None:
            svc = (self.opener() if self.opener is not None
                   else Service.open(self.paths, limits=self.limits))
            svc.registry.keep_host_alive()  # a serving host is up (a shared store's hosts)
        try:
            yield svc
        finally:
            with self._lock:
                keep = not self._closed and len(self._idle) < MAX_IDLE
                if keep:
                    self._idle.append(svc)
            if not keep:
                svc.close()

    def call(self, fn: Callable[Concatenate[Service, P], T], *args: P.args,
             **kwargs: P.kwargs) -> T:
        """``fn(service, ...)`` with a service lent for that call only."""
        with self.lease() as svc:
            return fn(svc, *args, **kwargs)

    def subscribe(self) -> Subscription:
        """A wake-up for every commit (:meth:`Service.subscribe`); it holds no
        database handle, so a stream keeps it for its whole life."""
        return self.call(Service.subscribe)

    def close(self) -> None:
        """Stop the writer (after the messages it was given) and close every service."""
        self.writer.close()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for svc in idle:
            svc.close()


class BatchEnded:
    """The messages a batch's commit ended (evicted to make room), read once
    for the whole batch when a sender first asks: a query per message was the
    largest cost after the commit."""

    def __init__(self, svc: Service, before: int) -> None:
        self._svc = svc
        self._before = before  # the last event id before the batch
        self._ended: list[Event] | None = None

    def evicted_by(self, message_id: str) -> list[Event]:
        """The ``message.ended`` events of messages evicted for ``message_id``
        (their detail says ``evicted by <id>``)."""
        if self._ended is None:
            self._ended = [
                ev for ev in self._svc.events(self._before, kinds=["message.ended"],
                                              limit=1_000_000)
                if ev.data.get("status") == Status.EVICTED.value]
        return [ev for ev in self._ended
                if str(ev.data.get("detail", "")).startswith(f"evicted by {message_id}")]


@dataclass
class _Job(Generic[T]):
    new: NewMessage
    then: Then[T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]


class Writer:
    """The thread that stores new messages for the whole server (group commit)."""

    def __init__(self, pool: ServicePool) -> None:
        self._pool = pool
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    async def send(self, new: NewMessage, then: Then[T]) -> T:
        """Store ``new`` (:meth:`Service.send`'s rules) and return ``then(...)``
        of the result, computed on the writer thread once it is committed;
        the service's error if it was refused."""
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(new, then, loop, loop.create_future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentwrap-writer",
                                                daemon=True)
                self._thread.start()
            self._jobs.put(job)
        return await job.future

    def close(self) -> None:
        """Store what was handed in, then stop the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._jobs.put(None)
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._jobs.get()
            if first is None:
                return
            jobs = [first]
            while len(jobs) < MAX_BATCH:  # whatever arrived meanwhile joins this commit
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                jobs.append(more)
            self._store(jobs)

    def _store(self, jobs: list[_Job[Any]]) -> None:
        answers: list[_Answer] = []
        try:
            with self._pool.lease() as svc:
                ended = BatchEnded(svc, svc.last_event_id())
                results = svc.send_many([job.new for job in jobs])
                for job, result in zip(jobs, results, strict=True):
                    answers.append(_then(svc, job, result, ended))
        except Exception as exc:  # noqa: BLE001 - a store error: every unanswered sender gets it
            answers += [(job, None, exc) for job in jobs[len(answers):]]
        by_loop: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
        for answer in answers:
            by_loop.setdefault(answer[0].loop, []).append(answer)
        for loop, some in by_loop.items():  # one wake-up of each loop for the batch
            try:
                loop.call_soon_threadsafe(_settle, some)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass


_Answer = tuple[_Job[Any], Any, BaseException | None]


def _then(svc: Service, job: _Job[Any], result: Sent | Exception,
          ended: BatchEnded) -> _Answer:
    if not isinstance(result, Sent):
        return job, None, result
    try:
        return job, job.then(svc, result, ended), None
    except Exception as exc:  # noqa: BLE001 - the sender's request reports it
        return job, None, exc


def _settle(answers: list[_Answer]) -> None:
    """Answer senders, on their event loop (a request may have gone meanwhile:
    its message is stored all the same)."""
    for job, value, error in answers:
        if job.future.done():
            continue
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(value)
