"""The event stream: the store's events under the API's names, as Server-Sent Events.

The store and the supervisors write events in the same transaction as each
change (:mod:`agentwrap.events`), so a message sent with the CLI shows up here
too. :func:`public_events` is the one place their kinds are renamed to the
names of issue 10; a client never sees the internal ones:

============================  =============================================
store event                   API event(s), with ``data``
============================  =============================================
``message.queued``            ``session.input.queued`` {priority, source, kind}
``message.phase``             ``message.phase`` {phase, batch}
``message.retry``             ``message.retry`` {nextAttemptAt, detail, attempts, held}
``message.ended`` (status S)  ``message.S``: delivered, acknowledged, escalated,
                              expired, evicted, cancelled, failed {detail}
``session.state``             ``session.state`` {state, reason, signal, rule,
                              question}, and ``session.waiting_input`` {reason,
                              rule, question} when the state is waiting_input
                              (question: what it asks, or null)
``session.ended``             ``session.exited`` {exitCode}
``session.consumed``          ``session.input.consumed`` {count, sources, channel}
``session.answered``          ``session.answered`` {answerId, status, detail, questionId,
                              answer, source, by (person|policy), rule?}
``host.silent`` (a hub's)     ``host.silent`` {host, reason, since}: a host's link
                              closed or it passed its deadline (session "")
``host.linked`` (a hub's)     ``host.linked`` {host}: it linked again (session "")
(a screen saved)              ``session.screen`` {digest, at}: the session's screen
                              changed (``GET /api/sessions/{name}/screen``)
============================  =============================================

``session.screen`` is no stored event: a spinner would push everything else
out of the bounded log. The supervisor saves the screen as it records a
verdict (on a change of state, else at most once per heartbeat) and nudges
the event bus; each stream then looks at when the screens were saved (a
``stat`` each) and says which changed. It carries the id of the last stored
event sent (resuming there misses nothing stored), and it is not replayed:
a client that reconnects fetches the screen it shows once.

Every API event carries the store event's id, so a client that reconnects with
``Last-Event-ID`` gets exactly what it missed (as far back as the store keeps
events: the last 20,000). When one store event N becomes two API events the
first is ``N.0`` and the last ``N``: a client cut off between them resumes at
the second. Waiting is the event bus's (:meth:`Service.subscribe`): asleep on
its socket until a writer announces a commit, looking again every
:data:`KEEPALIVE_S` (and writing a comment, so a dead client is noticed).
Not :meth:`Service.follow_events`: that generator blocks a thread until the
next event, and a stream whose client left must end at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool

from ...errors import AgentwrapError
from ...events import Event
from ...service import Service
from .pool import ServicePool

KEEPALIVE_S = 15.0
_BATCH = 1000


@dataclass(frozen=True)
class PublicEvent:
    """One event as the API shows it."""

    id: str
    type: str
    at: float
    session: str
    messageId: str | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "at": self.at, "session": self.session,
                "messageId": self.messageId, "data": self.data}


def public_events(ev: Event) -> list[PublicEvent]:
    """The API events for one store event (see the table in this module's doc)."""
    d = dict(ev.data)
    named: list[tuple[str, dict[str, Any]]]
    if ev.kind == "message.queued":
        named = [("session.input.queued", {k: d.get(k) for k in ("priority", "source", "kind")})]
    elif ev.kind == "message.phase":
        named = [("message.phase", {"phase": d.get("phase"), "batch": d.get("batch")})]
    elif ev.kind == "message.retry":
        named = [("message.retry", {"nextAttemptAt": d.get("next_attempt_at"),
                                    "detail": d.get("detail"), "attempts": d.get("attempts"),
                                    "held": d.get("held")})]
    elif ev.kind == "message.ended":
        named = [(f"message.{d.get('status')}", {"detail": d.get("detail")})]
    elif ev.kind == "session.state":
        explained = {k: d.get(k) for k in ("state", "reason", "signal", "rule")}
        explained["question"] = d.get("question")
        named = [("session.state", explained)]
        if d.get("state") == "waiting_input":
            named.append(("session.waiting_input", {"reason": d.get("reason"),
                                                    "rule": d.get("rule"),
                                                    "question": d.get("question")}))
    elif ev.kind == "session.ended":
        named = [("session.exited", {"exitCode": d.get("exit_code")})]
    elif ev.kind == "session.consumed":
        named = [("session.input.consumed", {k: d.get(k) for k in ("count", "sources", "channel")})]
    elif ev.kind == "session.answered":
        named = [("session.answered", {"answerId": ev.subject, **{
            k: d.get(k) for k in ("status", "detail", "questionId", "answer", "source", "by")},
            **({"rule": d["rule"]} if d.get("rule") else {})})]
    else:  # a kind newer than this mapping: shown under its own name, not dropped
        named = [(ev.kind, d)]
    last = len(named) - 1
    return [
        PublicEvent(str(ev.id) if i == last else f"{ev.id}.{i}", kind, ev.at, ev.session,
                    ev.subject or None, data)
        for i, (kind, data) in enumerate(named)
    ]


@dataclass(frozen=True)
class Cursor:
    """Where a stream resumes: after store event ``after``, or (``part`` set)
    inside event ``after + 1`` after its API event number ``part``."""

    after: int
    part: int | None = None


def parse_last_event_id(value: str | None) -> Cursor | None:
    """``N`` or ``N.i`` as sent in ``id:``; None for a missing or foreign value."""
    if not value:
        return None
    head, _, tail = value.strip().partition(".")
    try:
        n = int(head)
        part = int(tail) if tail else None
    except ValueError:
        return None
    if n < 0:
        return None
    return Cursor(n - 1, part) if part is not None else Cursor(n)


def format_sse(ev: PublicEvent) -> str:
    return f"id: {ev.id}\nevent: {ev.type}\ndata: {json.dumps(ev.to_json())}\n\n"


async def now(pool: ServicePool) -> Cursor:
    """The store's position now: a stream "from now on" takes it before the
    client can see the stream open (its WebSocket accepted, its response
    started), so an event the client causes at once is on it."""
    return Cursor(await run_in_threadpool(pool.call, Service.last_event_id))


async def follow(
    pool: ServicePool, session: str | None, cursor: Cursor,
    opened: Callable[[str], Awaitable[None]] | None = None,
) -> AsyncIterator[PublicEvent | None]:
    """Every API event after ``cursor`` (:func:`now`: from now on), then each new one as
    it is committed, forever; ``None`` after each :data:`KEEPALIVE_S` without
    one (a chance to see whether the client is still there). The SSE stream
    and the WebSocket (:mod:`.ws`) are both this, framed differently.
    ``opened`` is awaited once subscribed, with the id the stream resumes
    after: whatever a client reads from then on, it misses no event."""
    # subscribed before the first read; a service is lent for each read only (an idle
    # stream holds no database handle)
    if session is not None:  # NAME or HOST/NAME: the name the events carry
        session = await run_in_threadpool(pool.call, Service.session_name, session)
    with pool.subscribe() as sub:
        after, skip_in = cursor.after, cursor.part
        if opened is not None:
            await opened(str(after))
        stamps = await run_in_threadpool(pool.call, Service.screen_stamps, session)
        while True:
            batch = await run_in_threadpool(pool.call, _read, after, session)
            for ev in batch:
                parts = public_events(ev)
                if skip_in is not None and ev.id == cursor.after + 1:
                    parts = parts[skip_in + 1:]
                for pub in parts:
                    yield pub
                after = ev.id
            skip_in = None
            if len(batch) == _BATCH:
                continue
            for pub in await run_in_threadpool(pool.call, _screens, session, stamps, after):
                yield pub
            woke = False
            with anyio.move_on_after(KEEPALIVE_S):
                await anyio.wait_readable(sub.sock)
                woke = True
            sub.drain()
            if not woke:
                yield None


async def stream(pool: ServicePool, session: str | None, cursor: Cursor) -> AsyncIterator[str]:
    """:func:`follow` as Server-Sent Events, with a comment line for each idle tick."""
    yield "retry: 2000\n\n"
    async for pub in follow(pool, session, cursor):
        yield format_sse(pub) if pub is not None else ": keepalive\n\n"


def _read(svc: Service, after: int, session: str | None) -> list[Event]:
    return svc.events(after, session, limit=_BATCH)


def _screens(
    svc: Service, session: str | None, stamps: dict[str, int], after: int
) -> list[PublicEvent]:
    """A ``session.screen`` event for each screen saved since ``stamps`` (updated)."""
    out = []
    now = svc.screen_stamps(session)
    for name, stamp in now.items():
        if stamps.get(name) == stamp:
            continue
        try:
            shown = svc.screen_view(name)
        except AgentwrapError:  # its session is gone meanwhile
            continue
        out.append(PublicEvent(str(after), "session.screen", time.time(), name, None,
                               {"digest": shown.digest, "at": shown.at}))
    stamps.clear()
    stamps.update(now)
    return out
