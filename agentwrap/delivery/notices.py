"""What a person hears of, wherever they are: one seam for every notifier.

Four kinds of event are worth a person's attention away from the terminal
(:class:`Event`): an agent waits for an answer, a message was escalated to the
instruction file or failed, an agent exited unexpectedly, a host of a shared
store went silent. Whoever sees one builds a :class:`Notice` (which session on
which host, what it is about, since when, a key that names the thing: a
question's id, a message's) and hands it to :class:`Notices`, the one place
that knows the channels:

* a desktop notification (``notify-send``), where there is one;
* the push services of ``[notify] urls`` (Apprise's URL scheme: ntfy,
  Telegram, Slack, e-mail, ... :mod:`.push`), for the kinds of ``[notify]
  events``, sent from a worker thread so the supervisor's loop never waits.

A URL holds its service's secrets (a bot token, a password, a webhook path), so
it is never printed: :func:`redact` is what config errors, ``doctor`` and the
logs show instead. A notice for a question carries the links that answer it
when an :class:`AnswerLinks` is wired in (the one-tap links); by default none.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..config import NotifyConfig
from ..detect.question import Question
from .fallback import notify_desktop

log = logging.getLogger("agentwrap.notices")


class Event(str, Enum):
    """The kinds of event a notice tells of (``[notify] events`` selects them)."""

    WAITING = "waiting"  # an agent waits for an answer
    FAILED = "failed"  # a message was escalated to the instruction file, or failed
    EXITED = "exited"  # an agent exited unexpectedly
    UNREACHABLE = "unreachable"  # a host of the shared store went silent


EVENTS = tuple(e.value for e in Event)


@dataclass(frozen=True)
class Notice:
    """One thing to tell, with everything a person needs to act on it from a phone."""

    event: Event
    session: str
    host: str
    title: str  # one line: who and what
    body: str  # the detail: what is asked, the exact command, the options, since when
    key: str  # what it is about (a question id, message ids): one notice per key
    since: float  # wall-clock time the thing began (the question appeared, ...)
    again: bool = False  # a reminder of one told before (``renotify_after_s``)
    links: tuple[tuple[str, str], ...] = field(default=())  # (label, url): answers in one tap


class AnswerLinks(Protocol):
    """Makes the links that answer a question in one tap (each option, and Deny).
    The real one signs them (single use, bound to the question and the session,
    expiring); :data:`NO_LINKS` makes none."""

    def links_for(self, session: str, host: str, question_id: str,
                  options: Sequence[Any]) -> list[tuple[str, str]]: ...


class _NoLinks:
    def links_for(self, session: str, host: str, question_id: str,
                  options: Sequence[Any]) -> list[tuple[str, str]]:
        return []


NO_LINKS: AnswerLinks = _NoLinks()


class Sender(Protocol):
    """A channel that takes a notice without waiting for its service (:mod:`.push`)."""

    def send(self, notice: Notice) -> bool: ...


def redact(url: str) -> str:
    """A notification URL as it may be shown: its scheme only. Apprise puts
    secrets in every part of a URL (``tgram://TOKEN/CHAT``, ``slack://A/B/C``,
    ``mailto://user:PASSWORD@host``, ``ntfy://host/topic?token=T``), so no
    part but the scheme is safe to print."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    return f"{scheme}://***" if scheme.isidentifier() or scheme.replace("+", "").isalnum() \
        else "***"


def secrets_of(url: str) -> list[str]:
    """The parts of ``url`` that may be secret, longest first: what a log line
    must never show (:class:`Scrub`)."""
    parts = {url}
    rest = url.split("://", 1)[-1]
    try:
        split = urlsplit(url)
        for piece in (split.username, split.password, split.hostname):
            if piece:
                parts.add(piece)
    except ValueError:
        pass
    for sep in "/?&#;@:=":
        rest = rest.replace(sep, " ")
    parts.update(p for p in rest.split() if len(p) >= 6)
    return sorted(parts, key=len, reverse=True)


class Scrub(logging.Filter):
    """Takes the secrets of the configured URLs out of every record of the
    loggers it is attached to (ours and Apprise's own), whatever the message."""

    def __init__(self, urls: Sequence[str]) -> None:
        super().__init__()
        self.secrets = sorted({s for u in urls for s in secrets_of(u)}, key=len, reverse=True)

    def clean(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            record.msg = self.clean(record.getMessage())
            record.args = None
        return True


def when(ts: float) -> str:
    """A time as a person reads it on a phone: UTC, to the second."""
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def waiting_notice(session: str, host: str, q: Question, since: float, *, again: bool = False,
                   note: str = "", links: AnswerLinks = NO_LINKS) -> Notice:
    """The notice of a question: what is asked, the exact command, the options."""
    asked = q.questions[0].question if q.questions else q.title
    lines = [f"Session {session} on host {host} asks: {asked}"]
    if q.tool:
        lines.append(f"Tool: {q.tool}")
    if q.command:
        lines.append(f"Command: {q.command}")
    if q.cwd:
        lines.append(f"In: {q.cwd}")
    options = [o for item in q.questions for o in item.options]
    if options:
        lines.append("Options: " + "; ".join(
            f"{o.number}. {o.label}" if o.number is not None else o.label for o in options))
    lines.append(f"Waiting since {when(since)}")
    if note:
        lines.append(f"Not answered by a rule: {note}")
    made = tuple(links.links_for(session, host, q.id, list(options)))  # numbered: a tap names the option
    lines.extend(f"{label}: {url}" for label, url in made)
    title = f"{'Still waiting' if again else 'Waiting'}: {session} on {host}"
    return Notice(Event.WAITING, session, host, title, "\n".join(lines), q.id, since,
                  again=again, links=made)


def event_notice(event: Event, session: str, host: str, what: str, key: str,
                 since: float) -> Notice:
    """The notice of anything but a question (a failure, an exit, a silent host)."""
    heads = {Event.FAILED: "Delivery failed", Event.EXITED: "Agent exited",
             Event.UNREACHABLE: "Host unreachable", Event.WAITING: "Waiting"}
    who = f"{session} on {host}" if session else host
    body = f"{'Session ' if session else 'Host '}{who}: {what}\nSince {when(since)}"
    return Notice(event, session, host, f"{heads[event]}: {who}", body, key, since)


class Notices:
    """The channels of one process (desktop, the push services): where every
    notice goes, whoever made it. ``tell`` never blocks on a service."""

    def __init__(self, cfg: NotifyConfig, *, desktop: bool | None = None,
                 push: Sender | None = None) -> None:
        self.cfg = cfg
        self.desktop = cfg.desktop if desktop is None else desktop
        self.push = push

    def tell(self, notice: Notice) -> list[str]:
        """Send ``notice`` everywhere it belongs; the channels it went to."""
        channels: list[str] = []
        if self.desktop and notify_desktop(notice.title, notice.body):
            channels.append("desktop")
        if self.push is not None and notice.event.value in self.cfg.events \
                and self.push.send(notice):
            channels.append("push")
        return channels


__all__ = ["EVENTS", "NO_LINKS", "AnswerLinks", "Event", "Notice", "Notices", "Scrub", "Sender",
           "event_notice", "redact", "secrets_of", "waiting_notice", "when"]
