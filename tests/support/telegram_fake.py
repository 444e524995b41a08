"""A Telegram Bot API fake on loopback: real HTTP, the methods the bridge calls.

``POST /bot<token>/<method>`` with a JSON body, answered ``{"ok": true,
"result": ...}`` as Telegram does (a wrong token: 401 ``Unauthorized``, an
unknown method: 404). ``getUpdates`` is a real long poll: it returns the
updates from ``offset`` on at once, or waits up to ``timeout`` seconds for
one to be injected; updates below ``offset`` are confirmed and dropped, as
Telegram drops them. The test plays the person: :meth:`press` (a button of
a message the bot sent), :meth:`say` (a text message, optionally a reply),
and :meth:`redeliver` (an update handed out again whatever the offset, as
after a lost confirmation). What the bot did is kept per method in
:attr:`calls`, and the chat as it stands in :attr:`messages`.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TelegramFake:
    def __init__(self, token: str) -> None:
        self.token = token
        self._cond = threading.Condition()
        self._updates: list[dict[str, Any]] = []  # not yet confirmed
        self._forced: list[dict[str, Any]] = []  # handed out once more, whatever the offset
        self._next_update = 1000
        self._next_message = 1
        self.calls: dict[str, list[dict[str, Any]]] = {}
        self.messages: dict[int, dict[str, Any]] = {}  # message_id -> the bot's message
        self.paths_seen: list[str] = []
        self.failing: dict[str, int] = {}  # method -> how many more calls to refuse (429)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_a: object) -> None:
                pass

            def do_POST(self) -> None:
                fake.paths_seen.append(self.path)
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, answer = fake.dispatch(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went (a long poll cut by the bridge stopping)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # --- the API ------------------------------------------------------------------

    def dispatch(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prefix, _, method = path.lstrip("/").partition("/")
        if prefix != f"bot{self.token}":
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        with self._cond:
            if self.failing.get(method, 0) > 0:  # Telegram refusing for a while
                self.failing[method] -= 1
                self.calls.setdefault(f"{method}:refused", []).append(body)
                return 429, {"ok": False, "error_code": 429,
                             "description": "Too Many Requests: retry after 1"}
        with self._cond:
            self.calls.setdefault(method, []).append(body)
            self._cond.notify_all()
        return 200, {"ok": True, "result": handler(body)}

    def _m_getUpdates(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(body.get("offset") or 0)
        deadline = time.monotonic() + float(body.get("timeout") or 0)
        with self._cond:
            while True:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
                out = self._forced + self._updates
                self._forced = []
                left = deadline - time.monotonic()
                if out or left <= 0 or getattr(self, "_closed", False):
                    return out
                self._cond.wait(left)

    def _m_sendMessage(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            mid = self._next_message
            self._next_message += 1
            msg = {"message_id": mid, "at": time.time(), "chat": {"id": body["chat_id"], "type": "private"},
                   "date": int(time.time()), "text": body["text"],
                   "reply_markup": body.get("reply_markup"), "parse_mode": body.get("parse_mode"),
                   "reply_parameters": body.get("reply_parameters")}
            self.messages[mid] = msg
            return {k: v for k, v in msg.items() if k != "at" and (k != "reply_markup" or v)}

    def _m_editMessageText(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            msg = self.messages[int(body["message_id"])]
            msg.update(text=body["text"], reply_markup=body.get("reply_markup"),
                       parse_mode=body.get("parse_mode"), edited=msg.get("edited", 0) + 1)
            return dict(msg)

    def _m_answerCallbackQuery(self, body: dict[str, Any]) -> bool:
        return True

    # --- the person ---------------------------------------------------------------

    def _add(self, update: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            update = {"update_id": self._next_update, **update}
            self._next_update += 1
            self._updates.append(update)
            self._cond.notify_all()
            return update

    def press(self, chat_id: int, message_id: int, data: str, *, user: int | None = None
              ) -> dict[str, Any]:
        """A press on a button of the bot's message ``message_id`` (``data``: its callback data)."""
        msg = self.messages.get(message_id, {"message_id": message_id, "chat": {"id": chat_id}})
        with self._cond:
            cq_id = f"cq{self._next_update}"
        return self._add({"callback_query": {
            "id": cq_id, "from": {"id": user or chat_id, "is_bot": False, "first_name": "P"},
            "message": {**msg, "chat": {"id": chat_id, "type": "private"}},
            "chat_instance": "1", "data": data}})

    def say(self, chat_id: int, text: str, *, reply_to: int | None = None) -> dict[str, Any]:
        with self._cond:
            mid = self._next_message
            self._next_message += 1
        message: dict[str, Any] = {"message_id": mid, "chat": {"id": chat_id, "type": "private"},
                                   "from": {"id": chat_id, "is_bot": False, "first_name": "P"},
                                   "date": int(time.time()), "text": text}
        if reply_to is not None:
            message["reply_to_message"] = dict(self.messages[reply_to])
        return self._add({"message": message})

    def redeliver(self, update: dict[str, Any]) -> None:
        """Hand ``update`` out again on the next ``getUpdates``, whatever its offset."""
        with self._cond:
            self._forced.append(update)
            self._cond.notify_all()

    # --- what the bot did ---------------------------------------------------------

    def called(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.calls.get(method, ()))

    def sent_to(self, chat_id: int) -> list[dict[str, Any]]:
        with self._cond:
            return [dict(m) for m in self.messages.values() if m["chat"]["id"] == chat_id]

    def buttons(self, message_id: int) -> list[tuple[str, str]]:
        """(text, callback data) of each button the message shows now."""
        with self._cond:
            markup = self.messages[message_id].get("reply_markup") or {}
        return [(b["text"], b["callback_data"]) for row in markup.get("inline_keyboard", ())
                for b in row]
