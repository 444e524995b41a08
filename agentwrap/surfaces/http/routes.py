"""The endpoints: each parses its request, makes a call or two into the
:class:`~agentwrap.service.Service` and shapes the answer (:mod:`.models`).

No rule of the queue lives here. Plain ``def`` endpoints run on the server's
worker threads, each with a service of its own from the pool.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response, WebSocket
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from ... import __version__
from ...answers.actions import AnswerStatus
from ...errors import InvalidMessage, StaleAnswer
from ...message import (
    Message,
    Status,
    acknowledged,
    end_outcome,
)
from ...queue.store import QueueMetrics
from ...service import HistoryEntry, Service, SessionRecord, Waiting
from . import models as m
from . import terminal_ws as terminal_ws_module
from . import ws
from .addresses import Address, session_route
from .auth import LoginCodes, require_token
from .enqueue import enqueue
from .errors import MessageNotPending, Unauthorized
from .pool import ServicePool
from .sse import now as sse_now
from .sse import parse_last_event_id, stream

MAX_WAIT_S = 3600.0


async def service(request: Request) -> AsyncIterator[Service]:
    """A service from the pool for one request. Async on purpose: leasing
    is a list pop, and a sync dependency would cost two more hand-offs to a
    worker thread per request (the endpoint itself still runs on one)."""
    pool: ServicePool = request.app.state.pool
    with pool.lease() as svc:
        yield svc


Svc = Annotated[Service, Depends(service)]
api = APIRouter(prefix="/api", dependencies=[Depends(require_token)])
public = APIRouter()

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": m.ApiError, "description": what}
    for code, what in {
        400: "invalid request (unknown field, wrong type, bad value)",
        401: "missing or wrong bearer token",
        404: "no such session or message",
    }.items()
}


# --- shaping ------------------------------------------------------------------------------


def message_out(msg: Message) -> dict[str, Any]:
    return dict(
        id=msg.id, session=msg.session, content=msg.content, source=str(msg.source),
        sourceId=msg.source_id, priority=str(msg.priority), status=str(msg.status),
        detail=msg.detail, created=msg.created, expires=msg.expires, updated=msg.updated,
        finished=msg.finished, attempts=msg.attempts,
        phase=str(msg.phase) if msg.phase else None, correlationId=msg.correlation_id,
        idempotencyKey=msg.idempotency_key, depth=msg.depth, requireAck=msg.require_ack,
        metadata=msg.metadata, kind=str(msg.kind), framing=msg.framing,
    )


def queued_out(w: Waiting, now: float) -> m.QueuedInput:
    return m.QueuedInput(**message_out(w.message), waitingBecause=w.waiting_because,
                         ageS=round(now - w.message.created, 3),
                         ttlLeftS=round(max(0.0, w.message.expires - now), 3))


def detail_out(entry: HistoryEntry) -> m.MessageDetail:
    status = entry.message.status
    return m.MessageDetail(**message_out(entry.message), attemptLog=[
        m.Attempt(number=a.number, batchId=a.batch_id, started=a.started, finished=a.finished,
                  channel=a.channel, outcome=a.outcome, evidence=a.evidence)
        for a in entry.attempts
    ], acknowledged=acknowledged(status, entry.attempts),
        outcome=end_outcome(status, entry.attempts))


def summary(rec: SessionRecord, pending: int) -> dict[str, Any]:
    return dict(name=rec.name, host=rec.host, hostLiveness=rec.host_liveness,
                unreachableSince=None if rec.seen is None else rec.seen.unreachable_since,
                profile=rec.profile, backend=rec.backend,
                liveness=rec.liveness, state=rec.state.value, pending=pending, started=rec.started,
                ended=rec.ended, exitCode=rec.exit_code,
                endReason=rec.state_reason if rec.ended is not None else None)


def metrics_out(q: QueueMetrics) -> m.Metrics:
    return m.Metrics(
        byStatus={str(k): v for k, v in q.by_status.items()}, total=q.total,
        attempted=q.attempted, succeededFirstTry=q.succeeded_first_try,
        succeededAfterRetry=q.succeeded_after_retry, escalated=q.escalated, failed=q.failed,
        meanAttempts=q.mean_attempts, meanLatencyS=q.mean_latency_s, p95LatencyS=q.p95_latency_s,
        byChannel={
            name: m.ChannelMetrics(
                attempts=c.attempts, failedAttempts=c.failed_attempts, delivered=c.delivered,
                firstTry=c.first_try, firstTryRate=c.first_try_rate,
                p50LatencyS=c.p50_latency_s, p95LatencyS=c.p95_latency_s)
            for name, c in q.by_channel.items()
        },
    )


# --- messages -----------------------------------------------------------------------------


@session_route(
    api, "POST", "/sessions/{name}/input", status_code=201, response_model=m.InputAccepted,
    responses={**ERRORS,
               200: {"model": m.InputAccepted, "description": "idempotency key: the first message"},
               403: {"model": m.ApiError, "description": "source not trusted with raw input"},
               409: {"model": m.ApiError, "description": "idempotency key reused for other content,"
                     " or the session has ended"},
               413: {"model": m.ApiError, "description": "content or body over the limit"},
               429: {"model": m.ApiError, "description": "rate limit (Retry-After header)"}},
)
async def post_input(
    name: Address, body: m.InputRequest, request: Request, response: Response,
    wait: Annotated[float | None, Query(ge=0, le=MAX_WAIT_S, description=(
        "block up to this many seconds until the message ends (like `send --wait`)"))] = None,
) -> m.InputAccepted:
    """Queue a message for the session's agent; stored durably before this answers."""
    status, answer = await enqueue(request.app.state.pool, name, body, wait)
    response.status_code = status
    return answer


@session_route(api, "GET", "/sessions/{name}/input", response_model=m.InputPeek,
               responses=ERRORS)
def peek_input(
    name: Address, svc: Svc,
    source: Annotated[str | None, Query(description="only this source")] = None,
    priority: Annotated[m.SenderPriority | None, Query(description="only this priority")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> m.InputPeek:
    """What waits for the session (never consumes): in-flight first, then
    pending, highest priority first; expired entries are never shown."""
    now = time.time()
    entries = [w for w in svc.peek(name, now).entries
               if (source is None or str(w.message.source) == source)
               and (priority is None or str(w.message.priority) == priority)]
    return m.InputPeek(inputs=[queued_out(w, now) for w in entries[:limit]], total=len(entries))


@api.get("/messages/{message_id}", response_model=m.MessageDetail, responses=ERRORS)
def get_message(message_id: str, svc: Svc) -> m.MessageDetail:
    """A message (id or unique prefix), its end state and every attempt."""
    return detail_out(svc.message(message_id))


@api.get("/messages", response_model=m.MessageList, responses=ERRORS)
def list_messages(
    svc: Svc,
    session: Annotated[str | None, Query(description="only this session's messages")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="at most this many")] = 50,
) -> m.MessageList:
    """The message history, newest first, each with every attempt and its end state."""
    entries = svc.history(session, limit=limit + 1)
    shown = [detail_out(e) for e in entries[:limit]]
    return m.MessageList(messages=shown, total=len(shown), more=len(entries) > limit)


@api.delete(
    "/messages/{message_id}", response_model=m.MessageOut,
    responses={**ERRORS, 409: {"model": m.ApiError, "description": "not pending any more"}},
)
def cancel_message(message_id: str, svc: Svc) -> m.MessageOut:
    """Cancel a message while it is pending."""
    msg = svc.get(message_id)
    try:
        return m.MessageOut(**message_out(svc.cancel(msg.id)))
    except InvalidMessage as exc:
        now = svc.get(msg.id)
        if now.status is not Status.PENDING:
            raise MessageNotPending(exc.message) from None
        raise


# --- sessions and figures -----------------------------------------------------------------


@api.get("/sessions", response_model=m.SessionList, responses=ERRORS)
def list_sessions(
    svc: Svc, all: Annotated[bool, Query(description="include ended sessions")] = False,
) -> m.SessionList:
    """Every running (and stale) session, with its pending count."""
    return m.SessionList(sessions=[m.SessionSummary(**summary(v.record, v.pending))
                                   for v in svc.sessions(include_ended=all)],
                         host=svc.registry.host)


@api.get("/hosts", response_model=m.HostList, responses=ERRORS)
def list_hosts(svc: Svc) -> m.HostList:
    """Every host the store knows (this one only on SQLite): liveness, last
    beat, running sessions, pending messages (`agentwrap hosts`)."""
    return m.HostList(hosts=[m.HostSummary.model_validate(v.to_json()) for v in svc.hosts()],
                      shared=svc.registry.db.shared)


@session_route(api, "GET", "/sessions/{name}", response_model=m.SessionDetail, responses=ERRORS)
def get_session(name: Address, svc: Svc) -> m.SessionDetail:
    """A session's state with its explanation, its queue and its delivery figures."""
    name = svc.session_name(name)  # HOST/NAME: two hosts may each have one of its name
    rec = svc.state(name)
    view = svc.peek(name)
    pending = [w.message for w in view.entries if w.message.status is Status.PENDING]
    by_priority = Counter(str(msg.priority) for msg in pending)
    return m.SessionDetail(
        **summary(rec, len(pending)),
        explanation=m.StateOut(state=rec.state.value, since=rec.state_since, reason=rec.state_reason,
                               signal=rec.state_signal, rule=rec.state_rule,
                               evidence=rec.state_evidence, quietMs=rec.quiet_ms, draft=rec.draft,
                               question=m.QuestionOut(**rec.question) if rec.question else None),
        queueDepth=len(view.entries), pendingByPriority=dict(by_priority),
        metrics=metrics_out(svc.metrics(name)),
        permissionGate=rec.options.permission_gate,
    )


@session_route(
    api, "POST", "/sessions/{name}/answer", response_model=m.AnswerOut,
    responses={**ERRORS,
               409: {"model": m.ApiError, "description": "no open question, the question named"
                     " is not the open one, the agent moved on before it was typed (stale),"
                     " or the session has ended"}},
)
def post_answer(
    name: Address, body: m.AnswerRequest, svc: Svc,
    wait: Annotated[float, Query(ge=0, le=60, description=(
        "block up to this many seconds for the outcome (0: answer once stored, pending)"))] = 10.0,
) -> m.AnswerOut:
    """Answer the question the session's agent shows: typed with its own keys while the same
    question is open, and the dialog closing checked on screen (like `agentwrap answer`)."""
    result = svc.answer(name, option=body.option, options=body.options, text=body.text,
                        deny=body.deny, question_id=body.questionId, source="http",
                        answers=body.answers)
    a = svc.wait_answer(result.answer.id, wait) if wait else result.answer
    if a.status is AnswerStatus.STALE:
        raise StaleAnswer(a.detail)
    return m.AnswerOut(**{**a.to_json(), "supervised": result.supervised,
                          "question": m.QuestionOut(**result.question.to_json())})


@api.get("/metrics", response_model=m.Metrics, responses=ERRORS)
def get_metrics(svc: Svc) -> m.Metrics:
    """Delivery figures over every session (first try, retries, escalations, latency)."""
    return metrics_out(svc.metrics())


@api.get("/debug/input-queue", response_model=m.DebugQueues, responses=ERRORS)
def debug_queues(svc: Svc) -> m.DebugQueues:
    """Every session's queue, each entry with its age and the TTL it has left."""
    now = time.time()
    out = []
    for v in svc.sessions():
        address = svc.registry.address(v.record)  # HOST/NAME: two hosts may each have a dev
        view = svc.peek(address, now)
        out.append(m.DebugQueue(session=address, liveness=v.record.liveness,
                                state=v.record.state.value,
                                entries=[queued_out(w, now) for w in view.entries]))
    return m.DebugQueues(queues=out)


#: One event as an SSE client parses it: before OpenAPI 3.2, the schema of a
#: text/event-stream describes each event (its fields), so the StreamEvent is
#: the JSON text in ``data``, not the event itself (clients and fuzzers that
#: validate the stream read it that way).
SSE_EVENT: dict[str, Any] = {
    "type": "object", "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string"},
        "event": {"type": "string", "description": "the StreamEvent's type"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": m.StreamEvent.model_json_schema()},
        "retry": {"type": "integer"},
    },
}


@api.get(
    "/events", response_class=StreamingResponse,
    responses={**ERRORS, 200: {
        "description": "Server-Sent Events: `id`, `event` (the type) and `data`, a JSON"
                       " StreamEvent; resume with the Last-Event-ID header",
        "content": {"text/event-stream": {"schema": SSE_EVENT}}}},
)
async def events(
    request: Request,
    session: Annotated[str | None, Query(description="only this session's events")] = None,
    last_event_id: Annotated[str | None, Header(description="resume after this event")] = None,
) -> StreamingResponse:
    """Every change to messages and sessions as it happens (from now on, or
    after Last-Event-ID)."""
    pool = request.app.state.pool
    cursor = parse_last_event_id(last_event_id)
    if session is not None:  # an unknown HOST/NAME: 404 before the stream starts
        session = await run_in_threadpool(pool.call, Service.session_name, session)
    return StreamingResponse(
        stream(pool, session, cursor or await sse_now(pool)), media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@public.post(
    "/api/login", response_model=m.LoginOut,
    responses={400: ERRORS[400], 401: {"model": m.ApiError,
                                       "description": "the link was used, expired or is wrong"}},
)
def login(body: m.LoginRequest, request: Request) -> m.LoginOut:
    """Trade the code of a one-time login link (``agentwrap token --link``) for
    a bearer token the dashboard keeps. No bearer token needed: this is how a
    page without one gets one. A page of another origin is refused before the
    code is looked at (it is not used up)."""
    if not ws.same_origin(request):
        raise Unauthorized("a page of another site cannot log in to this dashboard",
                           hint="open the login link itself, in the address bar")
    logins: LoginCodes = request.app.state.logins
    token = logins.redeem(body.code)
    if token is None:
        raise Unauthorized("this login link was used already, has expired or is not this"
                           " server's", hint="run `agentwrap token --link` for a new one")
    return m.LoginOut(token=token)


@public.websocket("/api/ws")
async def events_ws(websocket: WebSocket) -> None:
    """The event stream of ``GET /api/events`` over a WebSocket (see :mod:`.ws`)."""
    await ws.serve(websocket)


@public.websocket("/api/ws/terminal")
async def terminal_ws(websocket: WebSocket) -> None:
    """A session's live terminal, and taking over its keyboard (see :mod:`.terminal_ws`)."""
    await terminal_ws_module.serve(websocket)


@public.get("/healthz", response_model=m.Health)
def healthz(svc: Svc) -> m.Health:
    """The server runs and can read the store (no token needed; says nothing private)."""
    return m.Health(status="ok", version=__version__, lastEventId=svc.last_event_id())
