"""The four Telegram Bot API methods the bridge uses, over httpx.

Why not python-telegram-bot: the bridge needs four documented JSON methods
(``getUpdates`` long-polled, ``sendMessage``, ``editMessageText``,
``answerCallbackQuery``) and must keep its own durable record of which updates
it has acted on (:mod:`.ledger`); the library brings an asyncio application
framework, its own update queue and persistence around those same four calls.
httpx is already installed with the MCP SDK, so this costs no dependency.

The token is part of every URL Telegram serves (``/bot<token>/method``), so
it must never reach a log, an error or a traceback: httpx's own request log
is silenced, and every failure is re-raised as :class:`ChatUnreachable` with
a message built here from the method's name and Telegram's ``description``,
the token cut out of anything quoted (``from None``: the original exception,
which holds the URL, is not chained).

Text is always sent without ``parse_mode``: what an agent or a session
prints is shown as plain text, never read as Markdown or HTML.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from ...errors import ChatUnreachable

#: Telegram's limit for a message's text (characters).
MAX_TEXT = 4096
#: Telegram's limit for a button's callback data (bytes).
MAX_CALLBACK_DATA = 64

logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs each request's URL at INFO
logging.getLogger("httpcore").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Button:
    text: str
    data: str  # callback data, at most MAX_CALLBACK_DATA bytes


def clip(text: str) -> str:
    """``text`` within Telegram's limit (the end cut, marked)."""
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 2] + " …"


class TelegramApi:
    """A client of one bot. ``base_url``: ``https://api.telegram.org`` (or a
    test's fake); ``token``: the bot's, kept only in this object's URL."""

    def __init__(self, base_url: str, token: str, *, poll_timeout_s: float = 25.0) -> None:
        self._token = token
        self.poll_timeout_s = poll_timeout_s
        self._client = httpx.Client(
            base_url=f"{base_url.rstrip('/')}/bot{token}/",
            timeout=httpx.Timeout(10.0, read=poll_timeout_s + 10.0),
        )

    def close(self) -> None:
        self._client.close()

    def _redact(self, text: str) -> str:
        return text.replace(self._token, "<token>") if self._token else text

    def call(self, method: str, **params: Any) -> Any:
        """One method's ``result``; :class:`ChatUnreachable` on any failure."""
        try:
            resp = self._client.post(method, json={k: v for k, v in params.items()
                                                   if v is not None})
            body = resp.json()
        except httpx.HTTPError as exc:  # never connected: surely not sent; else: maybe
            raise ChatUnreachable(
                f"telegram {method}: {type(exc).__name__}: {self._redact(str(exc))}",
                unsent=isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))) from None
        except ValueError:
            raise ChatUnreachable(f"telegram {method}: HTTP {resp.status_code}, not JSON") from None
        if not isinstance(body, dict) or not body.get("ok"):  # Telegram said no: not sent
            why = body.get("description", "") if isinstance(body, dict) else ""
            raise ChatUnreachable(
                f"telegram {method}: HTTP {resp.status_code} {self._redact(str(why))[:200]}",
                unsent=isinstance(body, dict))
        return body.get("result")

    def get_updates(self, offset: int) -> list[dict[str, Any]]:
        """Updates from ``offset`` on, held open up to :attr:`poll_timeout_s`."""
        result = self.call("getUpdates", offset=offset, timeout=int(self.poll_timeout_s),
                           allowed_updates=["message", "callback_query"])
        return [u for u in result or () if isinstance(u, dict)]

    def send_message(self, chat_id: int, text: str, *, buttons: list[list[Button]] | None = None,
                     reply_to: int | None = None) -> dict[str, Any]:
        result = self.call(
            "sendMessage", chat_id=chat_id, text=clip(text), reply_markup=_keyboard(buttons),
            link_preview_options={"is_disabled": True},
            reply_parameters={"message_id": reply_to, "allow_sending_without_reply": True}
            if reply_to is not None else None)
        return result if isinstance(result, dict) else {}

    def edit_message_text(self, chat_id: int, message_id: int, text: str) -> None:
        """Replace the message's text, and take its buttons away."""
        self.call("editMessageText", chat_id=chat_id, message_id=message_id, text=clip(text),
                  reply_markup={"inline_keyboard": []},
                  link_preview_options={"is_disabled": True})

    def answer_callback_query(self, callback_id: str, text: str) -> None:
        self.call("answerCallbackQuery", callback_query_id=callback_id, text=text[:200])


def _keyboard(buttons: list[list[Button]] | None) -> dict[str, Any] | None:
    if buttons is None:
        return None
    return {"inline_keyboard": [[{"text": b.text[:64], "callback_data": b.data} for b in row]
                                for row in buttons]}
