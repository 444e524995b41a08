"""``POST /api/sessions/{name}/input`` after its request is parsed: store the
message, shape the answer. One function for both ways a request gets here:
the route (:mod:`.routes`) and the hot path (:mod:`.fast_input`)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from ...message import Attempt, Message, NewMessage, Priority, acknowledged, end_outcome
from ...service import Sent, Service
from . import models as m
from .pool import BatchEnded, ServicePool


async def enqueue(pool: ServicePool, name: str, body: m.InputRequest,
                  wait: float | None) -> tuple[int, m.InputAccepted]:
    """Store ``body`` for session ``name``: the HTTP status (201 stored, 200
    the first message of a repeated idempotency key) and the answer.

    Stored by the pool's writer with whatever else arrived meanwhile (one
    commit); the request waits on the event loop, no worker thread, unless it
    waits for the end (``wait``) or its message has ended already (an
    idempotent repeat): those reads run on a worker thread."""
    sent, evicted = await pool.writer.send(_new_message(name, body), _evicted_of)
    status = 201 if sent.created else 200
    if wait or sent.message.status.terminal:
        return status, await run_in_threadpool(pool.call, _accepted, sent, evicted, wait)
    return status, _accepted_as(sent, sent.message, [], evicted)


def _new_message(name: str, body: m.InputRequest) -> NewMessage:
    return NewMessage(
        session=name, content=body.content, source=body.source, source_id=body.sourceId,
        priority=Priority.parse(body.priority), ttl_s=body.ttl, metadata=body.metadata,
        correlation_id=body.correlationId, depth=body.depth,
        idempotency_key=body.idempotencyKey, require_ack=body.ack,
    )


def _evicted_of(svc: Service, sent: Sent, ended: BatchEnded) -> tuple[Sent, list[m.Evicted]]:
    """Run by the writer after the commit: what the new message evicted."""
    if not sent.created:
        return sent, []
    return sent, [m.Evicted(id=ev.subject, source=str(svc.get(ev.subject).source))
                  for ev in ended.evicted_by(sent.message.id)]


def _accepted(svc: Service, sent: Sent, evicted: list[m.Evicted],
              wait: float | None) -> m.InputAccepted:
    msg = sent.message
    if wait:
        msg = svc.wait_for_end_state(msg.id, wait) or svc.get(msg.id)
    attempts = []
    if msg.status.terminal:  # the message and its attempts read together
        entry = svc.message(msg.id)
        msg, attempts = entry.message, entry.attempts
    return _accepted_as(sent, msg, attempts, evicted)


def _accepted_as(sent: Sent, msg: Message, attempts: list[Attempt],
                 evicted: list[m.Evicted]) -> m.InputAccepted:
    return m.InputAccepted(id=msg.id, created=sent.created, supervised=sent.supervised,
                           evicted=evicted or None, status=str(msg.status), detail=msg.detail,
                           final=msg.status.terminal,
                           acknowledged=acknowledged(msg.status, attempts),
                           outcome=end_outcome(msg.status, attempts))
