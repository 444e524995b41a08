"""The Telegram bridge: questions out as messages with buttons, presses and commands in.

Two loops on threads, each with its own :class:`~agentwrap.service.Service`
(the person's answers and messages go through it like any surface's):

* **announce**: woken by the event bus (and every second), it reads the
  sessions; each open question is sent once to every configured chat (the
  session, its host, the exact command, the options as buttons and Deny),
  and each notice whose question closed or changed is edited to say so
  (its buttons taken away).
* **poll**: ``getUpdates`` long-polled (outbound only: no port opened);
  each update is claimed in the :mod:`.ledger` before it is acted on, so a
  redelivered one does nothing. Only the configured chat ids are heard; any
  other is logged by its id alone (never its content) and ignored.

A press answers through :meth:`Service.answer` with ``source = "chat"`` and
the question's id, so a press on a question that closed or changed is
refused by the service (and said so in the chat). Before that, a press that
would approve a command the built-in deny-list holds (or a command not read
whole) is refused here: from a chat, only Deny answers those, the terminal
decides otherwise. The person's ``[[answer_rules]]`` act in the supervisor,
before the question is ever told. A reply to a question's message answers a
free-text question. ``/send NAME text`` (or ``HOST/NAME``) queues ``text``
through :meth:`Service.send` as source ``chat`` (admission, limits, framing
as for any sender); ``/ls`` lists the sessions.

Everything shown in the chat is plain text (no ``parse_mode``): a command
or a question full of ``<b>`` or ``*`` stays what it is.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...answers.actions import AnswerStatus
from ...answers.denylist import Where, destructive, incomplete
from ...detect.question import Question
from ...detect.states import State
from ...errors import AgentwrapError, ChatTokenProblem, ChatUnreachable
from ...message import NewMessage, Source
from ...paths import Paths
from ...service import Service
from .ledger import Ledger, Notice
from .telegram_api import Button, TelegramApi

log = logging.getLogger("agentwrap.chat")

TOKEN_ENV = "AGENTWRAP_TELEGRAM_TOKEN"
#: How often the announce loop looks at the sessions without a wake-up.
RECHECK_S = 1.0
#: After a failed call to Telegram, the loops wait this long before the next.
RETRY_S = 2.0

HELP = ("Commands:\n/ls: the sessions\n/send NAME text: queue text for session NAME"
        " (or HOST/NAME)\nReply to a question's message to answer it in words.")


def read_token(token_file: str, env: dict[str, str] | None = None) -> str:
    """The bot token: ``AGENTWRAP_TELEGRAM_TOKEN``, else ``token_file``, which
    must be the person's own and readable by nobody else (0600)."""
    environ = os.environ if env is None else env
    token = environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    if not token_file:
        raise ChatTokenProblem(f"no bot token: set [chat.telegram] token_file or {TOKEN_ENV}")
    path = Path(token_file).expanduser()
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ChatTokenProblem(f"cannot read the token file {path}: "
                               f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ChatTokenProblem(f"the token file {path} is readable by others"
                               f" (mode {stat.S_IMODE(st.st_mode):o})",
                               hint=f"chmod 600 {path}")
    if not text or any(c.isspace() for c in text):
        raise ChatTokenProblem(f"the token file {path} holds no token (one line, no spaces)")
    return text


def question_text(session: str, host: str, q: Question) -> str:
    """What a notice says: the session and host, what is asked, the exact command."""
    lines = [f"{session} on {host or 'this host'} waits for you"]
    item = q.questions[0] if q.questions else None
    lines.append(item.question if item else q.title)
    if q.tool:
        lines.append(f"tool: {q.tool}")
    if q.command:
        lines.append(f"command:\n{q.command}")
    if q.description:
        lines.append(f"description: {q.description}")
    if item:
        lines.extend(f"{o.number or i}. {o.label}" for i, o in enumerate(item.options, 1))
    if q.free_text_allowed:
        lines.append("(reply to this message to answer in words)")
    return "\n".join(lines)


def buttons(notice_id: int, q: Question) -> list[list[Button]]:
    """One button per option (callback ``o:<notice>:<position>``) and Deny."""
    item = q.questions[0] if q.questions else None
    rows = [[Button(f"{o.number or i}. {o.label}", f"o:{notice_id}:{i}")]
            for i, o in enumerate(item.options if item else (), 1)]
    rows.append([Button("Deny", f"d:{notice_id}")])
    return rows


@dataclass
class Counts:
    """What the bridge did, for tests and the log."""

    sent: int = 0
    edited: int = 0
    applied: int = 0
    refused: int = 0
    redelivered: int = 0
    ignored: int = 0
    queued: int = 0
    failures: int = 0
    last_failure: str = ""


class TelegramBridge:
    """One bot, the chats it hears, the sessions of ``paths``."""

    def __init__(self, paths: Paths, api: TelegramApi, chat_ids: tuple[int, ...], *,
                 service: Callable[[], Service] | None = None) -> None:
        self.paths = paths
        self.api = api
        self.chat_ids = frozenset(chat_ids)
        self.ledger = Ledger(paths.state_dir / "chat" / "telegram.sqlite")
        self._service = service or (lambda: Service.open(paths))
        self.counts = Counts()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    # --- the loops --------------------------------------------------------------------

    def run(self) -> None:
        """Both loops until :meth:`stop` (or the process ends)."""
        announcer = threading.Thread(target=self._announce_loop, name="chat-announce", daemon=True)
        announcer.start()
        try:
            self._poll_loop()
        finally:
            self._stop.set()
            announcer.join(timeout=5)
            self.ledger.close()

    def _announce_loop(self) -> None:
        with self._service() as svc, svc.subscribe() as sub:
            while not self._stop.is_set():
                try:
                    self.announce(svc)
                except (AgentwrapError, OSError) as exc:
                    self._failed("announce", exc)
                    self._stop.wait(RETRY_S)
                sub.wait(RECHECK_S)
                sub.drain()

    def _poll_loop(self) -> None:
        with self._service() as svc:
            while not self._stop.is_set():
                try:
                    updates = self.api.get_updates(self.ledger.next_offset())
                except ChatUnreachable as exc:
                    self._failed("getUpdates", exc)
                    self._stop.wait(RETRY_S)
                    continue
                if self.counts.last_failure.startswith("getUpdates"):
                    log.warning("chat bridge: Telegram answers again")
                    self.counts.last_failure = ""
                for update in updates:
                    self.handle(svc, update)

    def _failed(self, what: str, exc: BaseException) -> None:
        """Log a failure once while it repeats (Telegram away for an hour: one line)."""
        line = f"{what}: {exc}"
        self.counts.failures += 1
        if line != self.counts.last_failure:
            log.warning("chat bridge: %s (retrying every %.0f s)", line, RETRY_S)
        self.counts.last_failure = line

    # --- out: questions ---------------------------------------------------------------

    def announce(self, svc: Service) -> None:
        """Send each open question to each chat once; close notices of questions gone."""
        open_now: dict[tuple[str, str], Question] = {}
        for view in svc.sessions():
            rec = view.record
            if rec.state is not State.WAITING_INPUT or rec.question is None:
                continue
            q = Question.from_json(rec.question)
            open_now[(rec.name, q.id)] = q
            for chat in sorted(self.chat_ids):
                text = question_text(rec.name, rec.host, q)
                notice_id = self.ledger.add_notice(rec.name, q.id, chat, text)
                if notice_id is None:
                    continue  # told this chat already
                try:
                    msg = self.api.send_message(chat, text, buttons=buttons(notice_id, q))
                except ChatUnreachable as exc:
                    self._failed("sendMessage", exc)  # recorded first: never sent twice
                    if exc.unsent:
                        self.ledger.unsend(notice_id)  # surely not there: sent on the next look
                    continue
                self.counts.sent += 1
                if isinstance(msg.get("message_id"), int):
                    self.ledger.sent(notice_id, msg["message_id"])
        for n in self.ledger.unclosed():
            if (n.session, n.question_id) in open_now:
                continue
            self._close(n, n.outcome or "the agent no longer asks this")

    def _close(self, n: Notice, why: str) -> None:
        self.ledger.close_notice(n.id)
        if n.message_id is None:
            return
        try:
            self.api.edit_message_text(n.chat_id, n.message_id, f"{n.text}\n\nclosed: {why}")
            self.counts.edited += 1
        except ChatUnreachable as exc:
            self._failed("editMessageText", exc)

    # --- in: updates ------------------------------------------------------------------

    def handle(self, svc: Service, update: dict[str, Any]) -> None:
        """Act on one update, once: a button press, a reply, a command."""
        uid = update.get("update_id")
        if not isinstance(uid, int):
            return
        if not self.ledger.claim_update(uid):
            self.counts.redelivered += 1
            log.info("chat bridge: update %d seen before, not acted on again", uid)
            return
        try:
            if isinstance(update.get("callback_query"), dict):
                self._press(svc, update["callback_query"])
            elif isinstance(update.get("message"), dict):
                self._message(svc, update["message"])
        except (AgentwrapError, OSError) as exc:  # claimed: dropped, never retried twice
            self._failed(f"update {uid}", exc)

    def _heard(self, chat: Any, what: str) -> int | None:
        """The chat's id if it is one of the configured; else logged (id only) and None."""
        if isinstance(chat, int) and not isinstance(chat, bool) and chat in self.chat_ids:
            return chat
        self.counts.ignored += 1
        log.warning("chat bridge: ignored a %s from chat %s (not in chat_ids)", what,
                    chat if isinstance(chat, int) else "?")
        return None

    def _press(self, svc: Service, cq: dict[str, Any]) -> None:
        msg = cq.get("message") if isinstance(cq.get("message"), dict) else {}
        chat = self._heard((msg.get("chat") or {}).get("id") if isinstance(msg, dict) else None,
                           "button press")
        if chat is None:
            return
        cid = str(cq.get("id", ""))
        verdict = self._apply_press(svc, chat, str(cq.get("data", "")))
        self.api.answer_callback_query(cid, verdict)

    def _apply_press(self, svc: Service, chat: int, data: str) -> str:
        kind, _, rest = data.partition(":")
        notice_id, _, pos = rest.partition(":")
        n = self.ledger.notice(int(notice_id)) if notice_id.isdigit() else None
        if n is None or n.chat_id != chat or kind not in ("o", "d"):
            self.counts.refused += 1
            return "unknown button"
        if n.state != "open":
            self.counts.refused += 1
            return f"this question is closed ({n.outcome or 'answered'})"
        try:
            rec = svc.state(n.session)
        except AgentwrapError as exc:
            self.counts.refused += 1
            return f"refused: {exc.message}"[:200]
        q = Question.from_json(rec.question) if rec.question else None
        if q is None or q.id != n.question_id or rec.state is not State.WAITING_INPUT:
            self.counts.refused += 1
            self._close(n, "the agent no longer asks this")
            return "this question closed or changed: nothing done"
        label = "Deny"
        option: int | str | None = None
        if kind == "o":
            item = q.questions[0] if q.questions else None
            if item is None or not pos.isdigit() or not 1 <= int(pos) <= len(item.options):
                self.counts.refused += 1
                return "unknown option"
            chosen = item.options[int(pos) - 1]
            label = chosen.label
            option = chosen.number if chosen.number is not None else chosen.label
            why = self._deny_listed(q, rec.cwd)
            if why:
                self.counts.refused += 1
                log.warning("chat bridge: refused an option for %s's question %s: deny-listed",
                            n.session, q.id)
                return f"refused: {why}. From the chat only Deny; decide in the terminal."[:200]
        if not self._take(svc, n, f"answered {label!r} from the chat"):
            self.counts.refused += 1
            return "this question was answered already"
        try:
            if option is None:
                done = svc.answer(n.session, deny=True, question_id=q.id, source="chat")
            else:
                done = svc.answer(n.session, option=option, question_id=q.id, source="chat")
        except AgentwrapError as exc:
            self.ledger.reopen(n.session, n.question_id)
            self.counts.refused += 1
            return f"refused: {exc.message}"[:200]
        self.ledger.answer_is(n.session, n.question_id, done.answer.id)
        self.counts.applied += 1
        return f"sent: {label}"

    def _take(self, svc: Service, n: Notice, outcome: str) -> bool:
        """Take the question for this answer; False when the chat answered it
        already, unless that answer ended without being applied (failed or
        stale while the same question is open): then it may be answered again."""
        if self.ledger.take_answer(n.session, n.question_id, outcome):
            return True
        now = self.ledger.notice(n.id)
        if now is None or now.state != "answered" or not now.answer_id:
            return False
        try:
            before = svc.answer_status(now.answer_id)
        except AgentwrapError:
            return False
        if before.status not in (AnswerStatus.FAILED, AnswerStatus.STALE):
            return False
        self.ledger.reopen(n.session, n.question_id)
        return self.ledger.take_answer(n.session, n.question_id, outcome)

    @staticmethod
    def _deny_listed(q: Question, cwd: str) -> str | None:
        """Why a press may not approve this question's command (None: it may)."""
        if q.kind != "permission" or not q.command:
            return None
        if q.command_unsure or incomplete(q.command):
            return "the command was not read whole"
        why = destructive(q.command, where=Where.of(cwd, q.cwd or None) if cwd else None)
        return f"the deny-list holds this command ({why})" if why else None

    def _message(self, svc: Service, msg: dict[str, Any]) -> None:
        chat = self._heard((msg.get("chat") or {}).get("id")
                           if isinstance(msg.get("chat"), dict) else None, "message")
        if chat is None:
            return
        text = msg.get("text")
        if not isinstance(text, str):
            return
        reply_to = msg.get("reply_to_message")
        if isinstance(reply_to, dict) and isinstance(reply_to.get("message_id"), int):
            n = self.ledger.by_message(chat, reply_to["message_id"])
            if n is not None:
                self.api.send_message(chat, self._free_text(svc, n, text),
                                      reply_to=msg.get("message_id"))
                return
        word, _, rest = text.strip().partition(" ")
        command = word.split("@", 1)[0].lower()
        if command == "/send":
            reply = self._send(svc, chat, rest)
        elif command == "/ls":
            reply = self._ls(svc)
        else:
            reply = HELP
        self.api.send_message(chat, reply, reply_to=msg.get("message_id"))

    def _free_text(self, svc: Service, n: Notice, text: str) -> str:
        if n.state != "open":
            return f"this question is closed ({n.outcome or 'answered'})"
        if not self._take(svc, n, "answered in words from the chat"):
            return "this question was answered already"
        try:
            done = svc.answer(n.session, text=text, question_id=n.question_id, source="chat")
        except AgentwrapError as exc:
            self.ledger.reopen(n.session, n.question_id)
            return f"refused: {exc.message}"
        self.ledger.answer_is(n.session, n.question_id, done.answer.id)
        self.counts.applied += 1
        return "sent your answer"

    def _send(self, svc: Service, chat: int, rest: str) -> str:
        address, _, content = rest.strip().partition(" ")
        if not address or not content.strip():
            return "usage: /send NAME text (or /send HOST/NAME text)"
        try:
            sent = svc.send(NewMessage(session=address, content=content, source=Source.CHAT,
                                       source_id=f"telegram:{chat}"))
        except AgentwrapError as exc:
            return f"not queued: {exc.message}" + (f"\n{exc.hint}" if exc.hint else "")
        self.counts.queued += 1
        return f"queued {sent.message.id} for {address}"

    @staticmethod
    def _ls(svc: Service) -> str:
        views = svc.sessions()
        if not views:
            return "no sessions"
        return "\n".join(f"{v.record.host + '/' if v.record.host else ''}{v.record.name}:"
                         f" {v.record.state} ({v.pending} queued)" for v in views)
