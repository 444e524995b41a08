"""The dashboard's live terminal over a WebSocket: ``/api/ws/terminal?session=NAME``.

The socket is authenticated as ``/api/ws`` is (:mod:`.ws`: a handshake from
another origin is refused before it is accepted, then a bearer header or a
first ``{"type": "auth", "token": ...}`` frame). The server then sends
``{"type": "screen", "cols", "rows", "data"}`` frames: ``data`` is what
brings an xterm.js terminal of that size to the pane's screen
(:func:`~agentwrap.terminal.live.repaint`: the changed rows only). The pane
is looked at when it changed (the session's control-mode client says so,
:mod:`~agentwrap.terminal.control`), at most every :data:`FRAME_S`, so a page
is never more than one frame behind however fast the agent writes (a burst
between two looks is one frame: coalesced), and a still screen costs no look.

Paced by the page: a page whose auth frame says ``"acks": true`` numbers
nothing itself but is sent ``seq`` with each screen frame and answers
``{"type": "drawn", "seq": N}`` once xterm.js has taken frame N in (parsed
it: the browser draws the newest state on its next animation frame, so
drawing queues nothing; parsing does). The server keeps at most
:data:`AHEAD` frames not yet acknowledged: while the browser is behind (a
busy machine, ten sessions open) it waits, then sends the pane as it is by
then, one frame for everything that changed meanwhile. A browser that
cannot keep up gets fewer, later frames instead of a queue of stale ones
that it would parse in turn before the newest (the tail of the
change -> drawn latency was that queue). An ack missing for :data:`LOOK_S`
does not stop the stream: the next frame goes anyway.

The page is read-only until it sends ``{"type": "takeover", "on": true}``:
then ``keys`` (``{"type": "keys", "data": ...}``: what xterm.js says the
keys are), ``paste`` and ``resize`` frames go to the agent as a person's
keys (:class:`~agentwrap.service.takeover.Takeover`: audited, and queued
messages wait while the person types). The take-over ends on ``{"type":
"takeover", "on": false}``, when the page leaves (the socket closes), or
after ``[serve] takeover_idle_s`` without a key; the server says so with
``{"type": "takeover", "on": false, "reason": ...}``. Keys sent without a
take-over are refused, never typed.

Close codes as :mod:`.ws`'s, 4409 for a session whose terminal a page
cannot have (another host's on a host's own ``serve``, a pty session's, an
ended one): the reason says which, and 1013 (try again) on the hub for
another host's session whose host it cannot reach now. On the hub, another
host's session streams and types through that host's link
(:mod:`agentwrap.service.remote_terminal`), the same frames, pacing and
take-over.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...errors import AgentExited, AgentwrapError, HostUnreachable, SessionNotFound
from ...service import Service
from .pool import ServicePool
from .ws import BAD_REQUEST, NOT_FOUND, authenticated

FRAME_S = 0.02  # how often the pane is looked at at most while a page watches: the frame budget
LOOK_S = 0.5  # a look this often even when the pane says nothing changed
UNAVAILABLE = 4409
TRY_AGAIN = 1013  # another host's session whose host the hub cannot reach now: the page retries
AHEAD = 3  # screen frames a pacing page may have not yet taken in
MAX_FRAME_CHARS = 200_000  # a client frame larger than this is not a person's keys

if TYPE_CHECKING:
    from ...terminal.live import Frame, PagePane
    from ...terminal.takeover import Keyboard


async def serve(websocket: WebSocket) -> None:
    """One page's terminal: authenticate, then stream (and type, once taken over)."""
    first = await authenticated(websocket)
    if first is None:
        return
    pool: ServicePool = websocket.app.state.pool
    address = websocket.query_params.get("session") or ""
    try:
        pane = await run_in_threadpool(pool.call, Service.live_pane, address)
    except AgentwrapError as exc:
        code = NOT_FOUND if isinstance(exc, SessionNotFound) else \
            TRY_AGAIN if isinstance(exc, HostUnreachable) else UNAVAILABLE
        await websocket.close(code=code, reason=exc.message[:120])
        return
    await _Page(websocket, pool, address, pane, paced=first.get("acks") is True).run()


class _Page:
    def __init__(self, websocket: WebSocket, pool: ServicePool, address: str,
                 pane: PagePane, paced: bool = False) -> None:
        self.ws = websocket
        self.paced = paced
        self.sent = 0  # the last screen frame's seq
        self.drawn = 0  # the last seq the page says it drew
        self.acked = anyio.Event()
        self.pool = pool
        self.address = address
        self.pane = pane
        self.takeover: Keyboard | None = None
        self.idle_s: float = websocket.app.state.takeover_idle_s
        client = websocket.client
        self.client = f"{client.host}:{client.port}" if client else "?"

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                async def reader() -> None:
                    await self._read()
                    tg.cancel_scope.cancel()

                tg.start_soon(reader)
                await self._stream()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):  # the keyboard is given back, whatever ended it
                await self._end("page left")
                await run_in_threadpool(self.pane.close)

    async def _send(self, **frame: Any) -> None:
        await self.ws.send_text(json.dumps(frame))

    async def _stream(self) -> None:
        from ...terminal.live import repaint

        prev: Frame | None = None
        seen = -1
        try:
            while True:
                began = anyio.current_time()
                seen = self.pane.changes()  # before the look: a change during it brings another
                try:
                    frame = await run_in_threadpool(self.pane.capture)
                except AgentExited as exc:
                    await self._send(type="ended", reason=exc.message)
                    return
                except AgentwrapError as exc:  # another host's, through the hub: its link went
                    await self.ws.close(code=TRY_AGAIN, reason=exc.message[:120])
                    return
                out = repaint(prev, frame)
                if out:
                    self.sent += 1
                    await self._send(type="screen", cols=frame.cols, rows=frame.rows, data=out,
                                     seq=self.sent)
                    prev = frame
                    await self._until_drawn()
                if self.takeover is not None and self.takeover.idle_s() > self.idle_s:
                    await self._end("idle")
                # a look every FRAME_S at most (a burst between two is one frame), and only
                # once the pane says it changed (or LOOK_S passed: sizes, the idle take-over)
                await anyio.sleep(max(0.0, began + FRAME_S - anyio.current_time()))
                try:
                    seen = await run_in_threadpool(self.pane.wait_change, seen, LOOK_S)
                except AgentExited as exc:
                    await self._send(type="ended", reason=exc.message)
                    return
                except AgentwrapError as exc:
                    await self.ws.close(code=TRY_AGAIN, reason=exc.message[:120])
                    return
        except (WebSocketDisconnect, RuntimeError, OSError):
            return

    async def _until_drawn(self) -> None:
        """A pacing page: until it has at most AHEAD - 1 frames not yet taken in (or LOOK_S)."""
        if not self.paced:
            return
        with anyio.move_on_after(LOOK_S):
            while self.sent - self.drawn >= AHEAD:
                self.acked = anyio.Event()
                await self.acked.wait()

    async def _read(self) -> None:
        try:
            while True:
                text = await self.ws.receive_text()
                if len(text) > MAX_FRAME_CHARS:
                    await self.ws.close(code=BAD_REQUEST, reason="frame too large")
                    return
                try:
                    frame = json.loads(text)
                except ValueError:
                    frame = None
                if not isinstance(frame, dict):
                    continue
                await self._handle(frame)
        except (WebSocketDisconnect, KeyError, RuntimeError):
            return

    async def _handle(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "drawn":
            seq = frame.get("seq")
            if isinstance(seq, int) and not isinstance(seq, bool) and self.drawn < seq <= self.sent:
                self.drawn = seq
                self.acked.set()
            return
        if kind == "takeover":
            if frame.get("on") is True and self.takeover is None:
                try:
                    self.takeover = await run_in_threadpool(
                        self.pool.call, Service.take_over, self.address, by="http",
                        client=self.client, idle_s=self.idle_s)
                except AgentwrapError as exc:
                    await self._send(type="takeover", on=False, reason=exc.message)
                    return
                await self._send(type="takeover", on=True, idle_s=self.idle_s)
            elif frame.get("on") is False:
                await self._end("given back")
            return
        take = self.takeover
        if kind not in ("keys", "paste", "resize"):
            return
        if take is None:
            await self._send(type="refused", reason="read-only: take over first")
            return
        try:
            if kind == "keys" and isinstance(frame.get("data"), str):
                await run_in_threadpool(take.keys, frame["data"])
            elif kind == "paste" and isinstance(frame.get("data"), str):
                await run_in_threadpool(take.paste, frame["data"])
            elif kind == "resize" and isinstance(frame.get("cols"), int) \
                    and isinstance(frame.get("rows"), int):
                await run_in_threadpool(take.resize, frame["cols"], frame["rows"])
        except AgentwrapError as exc:
            await self._send(type="refused", reason=exc.message)

    async def _end(self, reason: str) -> None:
        take, self.takeover = self.takeover, None
        if take is None:
            return
        await run_in_threadpool(take.end, reason)
        try:
            await self._send(type="takeover", on=False, reason=reason)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
