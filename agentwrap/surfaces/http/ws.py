"""The event stream over a WebSocket: ``/api/ws``, the same events as ``/api/events``.

For clients that keep one socket open both ways (a browser tab, a bot), with
the same event ids, so ``lastEventId`` resumes exactly like SSE's
``Last-Event-ID``. Each event is one text frame, the JSON ``StreamEvent`` the
SSE ``data:`` line carries.

A browser cannot set headers on a WebSocket, so a client proves itself either
with ``Authorization: Bearer`` on the handshake (scripts) or with its first
frame, ``{"type": "auth", "token": "...", "lastEventId": "..."}``, within
:data:`AUTH_TIMEOUT_S` (pages). ``?session=`` and ``?lastEventId=`` may
also be given on the URL. A handshake whose ``Origin`` is not this server's
own is refused before it is accepted: no page of another site, or of another
port of this host, can open the stream with a token it found.

A client whose auth frame says ``"ready": true`` (the page) is sent one frame
first, ``{"type": "stream.ready", "lastEventId": "N"}``, once the server has
subscribed: what it fetches after that frame, plus the events that follow,
misses nothing (SSE's first line, ``retry:``, says the same). ``N`` is where
the stream resumed: a client that has no event id yet resumes there after a
drop. One socket per page carries its events: Chromium keeps six HTTP/1.1
connections per host, and a page that held one for an event stream per
window left the fifth window's requests queued behind them.

Close codes: 4401 missing or wrong token, 4400 a first frame that is not the
auth frame, 4404 no such session (``?session=`` takes NAME or HOST/NAME), 1011
the server failed; a normal 1000 when the server stops.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...errors import SessionNotFound
from ...service import Service
from .auth import token_accepted
from .pool import ServicePool
from .sse import Cursor, follow, now, parse_last_event_id

AUTH_TIMEOUT_S = 10.0
UNAUTHORIZED = 4401
BAD_REQUEST = 4400
NOT_FOUND = 4404
READY = "stream.ready"  # the frame a page asks for: subscribed, nothing after it is missed


def same_origin(conn: HTTPConnection) -> bool:
    """No ``Origin`` (not a browser), or one naming the host the client connected
    to (a WebSocket's handshake, the login: :func:`~.routes.login`)."""
    origin = conn.headers.get("origin")
    if origin is None:
        return True
    host = conn.headers.get("host", "")
    try:
        return urlsplit(origin).netloc.lower() == host.lower() and bool(host)
    except ValueError:
        return False


def _bearer(websocket: WebSocket) -> str | None:
    scheme, _, value = websocket.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def authenticated(websocket: WebSocket) -> dict[str, Any] | None:
    """The client's proof, checked: a handshake of another origin refused, then
    the bearer header or the auth frame. The auth frame (``{}`` for a bearer
    header) once the client is in, None once its socket was closed. Every
    WebSocket of the server (:mod:`.terminal_ws` too) comes in this way."""
    if not same_origin(websocket):
        await websocket.close(code=UNAUTHORIZED, reason="another origin")
        return None
    await websocket.accept()
    given = _bearer(websocket)
    first: dict[str, Any] | None = {}
    if given is None:
        first = await _first_frame(websocket)
        if first is None:
            return None
        given = str(first.get("token") or "")
    if not token_accepted(given, websocket.app.state.tokens.current()):
        await websocket.close(code=UNAUTHORIZED, reason="missing or wrong token")
        return None
    return first


async def serve(websocket: WebSocket) -> None:
    """One client: authenticate, then stream until either side leaves. A
    client that names no event to resume after gets every event from its
    socket's accept on: the store's last event is read before the accept (a
    client that sends the moment it is connected, without asking for the
    ready frame, missed the event of its own send when the stream started
    after it: seen at load 25)."""
    accepted = await now(websocket.app.state.pool)
    first = await authenticated(websocket)
    if first is None:
        return
    resume = websocket.query_params.get("lastEventId")
    resume = str(first["lastEventId"]) if first.get("lastEventId") else resume
    cursor = (parse_last_event_id(resume) if resume else None) or accepted
    session = websocket.query_params.get("session") or None
    if session is not None:  # NAME or HOST/NAME, resolved once: the name events carry
        try:
            session = await run_in_threadpool(websocket.app.state.pool.call,
                                              Service.session_name, session)
        except SessionNotFound as exc:
            await websocket.close(code=NOT_FOUND, reason=exc.message[:120])
            return
    await _stream(websocket, session, cursor, bool(first.get("ready")))


async def _first_frame(websocket: WebSocket) -> dict[str, Any] | None:
    """The auth frame, or None once the socket was closed for its absence."""
    frame: dict[str, Any] | None = None
    with anyio.move_on_after(AUTH_TIMEOUT_S):
        try:
            text = await websocket.receive_text()
        except (WebSocketDisconnect, KeyError, RuntimeError):
            return None
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict) and loaded.get("type") == "auth":
            frame = loaded
        else:
            await websocket.close(code=BAD_REQUEST, reason='first frame must be {"type": "auth"}')
            return None
    if frame is None:
        await websocket.close(code=UNAUTHORIZED, reason="no auth frame in time")
    return frame


async def _stream(
    websocket: WebSocket, session: str | None, cursor: Cursor, ready: bool
) -> None:
    pool: ServicePool = websocket.app.state.pool

    async def opened(after: str) -> None:
        await websocket.send_text(json.dumps({"type": READY, "lastEventId": after}))

    async with anyio.create_task_group() as tg:

        async def until_client_leaves() -> None:
            try:
                while True:  # frames from the client after auth mean nothing; a close ends it
                    await websocket.receive_text()
            except (WebSocketDisconnect, KeyError, RuntimeError):
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(until_client_leaves)
        try:
            async for pub in follow(pool, session, cursor, opened if ready else None):
                if pub is not None:
                    await websocket.send_text(json.dumps(pub.to_json()))
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        tg.cancel_scope.cancel()
