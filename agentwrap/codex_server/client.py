"""A JSON-RPC client of Codex's app-server on its unix socket.

Why a client of our own: agentwrap owns the server the person's TUI runs on
(``codex --remote unix://PATH``), so what the TUI sees (turns, items,
approval requests) reaches agentwrap as data instead of being read off the
screen, and a message can be started, steered or queued without typing
(docs/codex-app-server.md). The socket speaks WebSocket, one JSON-RPC message a
text frame; the ``websockets`` library (already a dependency for the HTTP API)
does the framing.

One reader thread per client reads every frame: answers complete the request
waiting for them, server requests (approvals) and notifications go to the
handlers given to :meth:`AppServerClient.on_message`, in the reader thread, in
the server's order. A handler must be quick and must not call the client's
request methods (that would wait on the thread that reads the answer); it hands
the work to another thread. When the server closes or dies every waiting
request fails with :class:`~agentwrap.errors.AppServerError` and
:attr:`AppServerClient.closed` is set: the caller falls back to the screen.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosedOK, WebSocketException
from websockets.sync.client import ClientConnection, unix_connect

from ..errors import AppServerError, AppServerRefused
from .protocol import (
    APPROVAL_METHODS,
    JSON,
    AgentMessage,
    ApprovalRequest,
    Notification,
    UserMessage,
    agent_message,
    approval_request,
    text_input,
    turn_in_progress,
    user_message,
)

#: What a handler of :meth:`AppServerClient.on_message` is given.
Message = Notification | ApprovalRequest
Handler = Callable[[Message], None]

CLIENT_NAME = "agentwrap"
_MAX_FRAME = 64 * 1024 * 1024  # thread/items/list pages of a long thread are large
_SINCE_SLACK_S = 60.0  # clocks: the item's start (server) against the send (agentwrap)


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: str | None = None
    refused: bool = False  # the error is the server's answer, not a lost connection


class AppServerClient:
    """A connection to one app-server. Make it with :meth:`connect`."""

    def __init__(self, conn: ClientConnection, path: Path) -> None:
        self._scope = contextlib.ExitStack()  # the connection's own context: closes it
        self._conn = self._scope.enter_context(conn)
        self.path = path
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._handlers: list[Handler] = []
        self._closed = threading.Event()
        self.close_reason = ""
        self._reader = threading.Thread(
            target=self._read, name=f"codex-app-server-{path.name}", daemon=True
        )

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def connect(cls, path: Path, *, timeout: float = 10.0, version: str = "0") -> AppServerClient:
        """Connect to the server listening on ``path`` and do the handshake
        (``initialize`` with the experimental API, then ``initialized``)."""
        try:
            conn = unix_connect(
                str(path), uri="ws://localhost/", open_timeout=timeout, max_size=_MAX_FRAME
            )
        except (OSError, WebSocketException, TimeoutError) as exc:
            raise AppServerError(f"cannot connect to Codex's app-server at {path}: {exc}") from exc
        client = cls(conn, path)
        client._reader.start()
        try:
            client.request(
                "initialize",
                {
                    "clientInfo": {"name": CLIENT_NAME, "version": version},
                    "capabilities": {"experimentalApi": True},
                },
                timeout=timeout,
            )
            client._send({"method": "initialized"})
        except AppServerError:
            client.close()
            raise
        return client

    @property
    def closed(self) -> bool:
        """True once the connection is gone (closed by either side, or the server died)."""
        return self._closed.is_set()

    def wait_closed(self, timeout: float) -> bool:
        return self._closed.wait(timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError, WebSocketException):
            self._scope.close()
        if self._reader.is_alive() and threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)
        self._finish("closed by agentwrap")

    def __enter__(self) -> AppServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_message(self, handler: Handler) -> None:
        """Call ``handler`` with every notification and server request from now on."""
        with self._lock:
            self._handlers.append(handler)

    # ------------------------------------------------------------------ raw JSON-RPC

    def _send(self, message: JSON) -> None:
        if self.closed:
            raise AppServerError(f"Codex's app-server connection is closed ({self.close_reason})")
        try:
            self._conn.send(json.dumps(message))
        except (OSError, WebSocketException) as exc:
            raise AppServerError(f"Codex's app-server connection failed: {exc}") from exc

    def request(self, method: str, params: JSON, *, timeout: float = 30.0) -> Any:
        """Send a request and wait for its result; an error answer raises
        AppServerRefused (the server did not do it), a closed connection or no
        answer within ``timeout`` AppServerError (it may have)."""
        pending = _Pending()
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            self._pending[rid] = pending
        try:
            self._send({"id": rid, "method": method, "params": params})
            if not pending.done.wait(timeout):
                raise AppServerError(f"Codex's app-server did not answer {method} in {timeout:g} s")
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        if pending.error is not None:
            if pending.refused:
                raise AppServerRefused(f"Codex's app-server refused {method}: {pending.error}")
            raise AppServerError(f"Codex's app-server did not answer {method}: {pending.error}")
        return pending.result

    def respond(self, request_id: int | str, result: JSON) -> None:
        """Answer a server request (an approval) with ``result``."""
        self._send({"id": request_id, "result": result})

    def _read(self) -> None:
        reason = "closed by the server"
        try:
            while True:
                self._dispatch(json.loads(self._conn.recv()))
        except ConnectionClosedOK:
            pass
        except (OSError, WebSocketException, ValueError) as exc:
            reason = f"connection lost: {exc}"
        self._finish(reason)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if not isinstance(method, str):  # an answer to one of our requests
            rid = message.get("id")
            with self._lock:
                pending = self._pending.get(rid) if isinstance(rid, int) else None
            if pending is None:
                return
            error = message.get("error")
            if error is not None:
                pending.error = str(error.get("message", error)) if isinstance(error, dict) else str(error)
                pending.refused = True
            pending.result = message.get("result")
            pending.done.set()
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        rid = message.get("id")
        delivered: Message
        if isinstance(rid, (int, str)) and method in APPROVAL_METHODS:
            try:
                delivered = approval_request(rid, method, params)
            except AppServerError:
                return  # malformed: the TUI still shows its dialog; the screen reads it
        else:
            delivered = Notification(method=method, params=params)
        with self._lock:
            handlers = list(self._handlers)
        for handler in handlers:
            handler(delivered)

    def _finish(self, reason: str) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self.close_reason = reason
            self._closed.set()
            waiting = list(self._pending.values())
        for pending in waiting:
            if not pending.done.is_set():  # an answer that came first stands
                pending.error = f"connection closed ({reason})"
                pending.done.set()

    # ------------------------------------------------------------------ typed methods

    def loaded_threads(self) -> list[str]:
        """Ids of the threads the server has loaded (the TUI's among them)."""
        result = self.request("thread/loaded/list", {})
        return [t for t in (result or {}).get("data", []) if isinstance(t, str)]

    def read_thread(self, thread_id: str) -> JSON:
        """The thread's metadata (``ephemeral``, ``cwd``, ``status``...), without turns."""
        result = self.request("thread/read", {"threadId": thread_id, "includeTurns": False})
        thread = (result or {}).get("thread")
        if not isinstance(thread, dict):
            raise AppServerError(f"Codex's app-server: thread/read of {thread_id} without a thread")
        return thread

    def start_thread(self, cwd: Path) -> str:
        """Start a thread of our own (the tests; the TUI starts the person's)."""
        result = self.request("thread/start", {"cwd": str(cwd)})
        return str(result["thread"]["id"])

    def resume(self, thread_id: str) -> None:
        """Subscribe to the thread's turn and item notifications and its approval
        requests. Fails until the thread's first turn has started (no rollout yet)."""
        self.request("thread/resume", {"threadId": thread_id, "excludeTurns": True})

    def start_turn(self, thread_id: str, text: str, client_id: str) -> str:
        """Start a turn with ``text`` as the person's input (the TUI shows it as
        typed); returns the turn's id. ``client_id`` comes back as the user
        message item's ``clientId``."""
        result = self.request(
            "turn/start",
            {"threadId": thread_id, "input": text_input(text), "clientUserMessageId": client_id},
        )
        return str(result["turn"]["id"])

    def steer(self, thread_id: str, turn_id: str, text: str, client_id: str) -> str:
        """Add ``text`` to the running turn ``turn_id`` (refused when another turn
        runs or none); returns the turn's id."""
        result = self.request(
            "turn/steer",
            {
                "threadId": thread_id,
                "expectedTurnId": turn_id,
                "input": text_input(text),
                "clientUserMessageId": client_id,
            },
        )
        return str(result["turnId"])

    def running_turn(self, thread_id: str) -> str | None:
        """The id of the thread's running turn, None when it is idle: what a
        steer must name (``thread/turns/list``, readable without subscribing)."""
        result = self.request(
            "thread/turns/list",
            {"threadId": thread_id, "limit": 1, "sortDirection": "desc", "itemsView": "notLoaded"},
        )
        return turn_in_progress(result if isinstance(result, dict) else None)

    def interrupt(self, thread_id: str, turn_id: str) -> None:
        self.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id})

    def queue(self, thread_id: str, text: str, client_id: str) -> str:
        """Put ``text`` on Codex's own queue: the server starts it as the next
        turn when the running one ends. Returns the queued submission's id."""
        result = self.request(
            "thread/queue/add",
            {"threadId": thread_id, "input": text_input(text), "clientUserMessageId": client_id},
        )
        return str(result["queuedSubmission"]["id"])

    def _page(self, thread_id: str, limit: int,
              cursor: str | None = None) -> tuple[list[tuple[JSON, str | None]], str | None]:
        """One page of the thread's items, newest first, and the cursor to the next."""
        params: JSON = {"threadId": thread_id, "limit": limit, "sortDirection": "desc"}
        if cursor is not None:
            params["cursor"] = cursor
        result = self.request("thread/items/list", params) or {}
        found: list[tuple[JSON, str | None]] = []
        for entry in result.get("data", []):
            if isinstance(entry, dict) and isinstance(entry.get("item"), dict):
                turn_id = entry.get("turnId")
                found.append((entry["item"], turn_id if isinstance(turn_id, str) else None))
        after = result.get("nextCursor")
        return found, after if isinstance(after, str) and after else None

    def _items(self, thread_id: str, limit: int) -> list[tuple[JSON, str | None]]:
        return self._page(thread_id, limit)[0]

    def user_messages(self, thread_id: str, *, limit: int = 50) -> list[UserMessage]:
        """The thread's last ``limit`` items' user messages, newest first (readable
        without subscribing)."""
        return [m for item, turn in self._items(thread_id, limit)
                if (m := user_message(item, turn)) is not None]

    def agent_messages(self, thread_id: str, *, limit: int = 50) -> list[AgentMessage]:
        """The thread's last ``limit`` items' agent messages, newest first: what
        the model said (an ACK), readable without subscribing."""
        return [m for item, turn in self._items(thread_id, limit)
                if (m := agent_message(item, turn)) is not None]

    def find_message(self, thread_id: str, client_id: str, *, since: float | None = None,
                     page: int = 50, max_items: int = 5000) -> UserMessage | None:
        """The user message we sent as ``client_id``, if it reached the thread:
        after a crash between sending and recording, this says whether to send again.
        The items are read back page by page, newest first, down to the first one
        started before ``since`` (when it was sent, epoch seconds; a minute of
        slack): a long turn after a steer pushes its item far back."""
        floor = (since - _SINCE_SLACK_S) * 1000 if since is not None else None
        cursor: str | None = None
        seen = 0
        while True:
            items, cursor = self._page(thread_id, page, cursor)
            for item, turn in items:
                msg = user_message(item, turn)
                if msg is not None and msg.client_id == client_id:
                    return msg
                started = item.get("startedAtMs")
                if floor is not None and isinstance(started, (int, float)) and started < floor:
                    return None  # older than the send: it is not further back
            seen += len(items)
            if cursor is None or not items or seen >= max_items:
                return None

    def answer(self, request: ApprovalRequest, decision: str) -> None:
        """Answer an approval request with one of its decisions (``accept``,
        ``decline``, ``cancel``...); the TUI's dialog closes by itself."""
        self.respond(request.request_id, {"decision": decision})
