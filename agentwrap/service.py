"""The application service: the one path from every surface to the store.

Surfaces (the CLI today; the HTTP API, MCP tools, hooks and watchers next) are
thin adapters over :class:`Service`: they parse, call one method and print.
Whatever must hold for every surface is decided here, once: the store
validates content, applies limits and honours idempotency keys; the service
adds what needs the *session* (does it exist and still run, how will the
message be typed, may this source have text typed as is), the audit line of
every accepted or cancelled message, and waking the session's supervisor once
the message is stored. Readers get typed answers (the queue with why each
message waits, history with attempts, sessions with their pending counts) and
the event bus (:mod:`agentwrap.events`): what happened, in order, and a way to
wait for the next thing without polling.

:meth:`Service.open` builds the store and registry from :class:`Paths` and the
user's config; the plain constructor takes them ready-made (tests, a server
holding its own).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .audit import AuditLog
from .config import Config, ConfigCache, load_config
from .datagram import notify
from .delivery import handover
from .delivery.choice import busy_channel_of, busy_reason
from .delivery.handover import CONSUMABLE_KINDS, MAX_TAKE
from .detect.states import State
from .errors import (
    AgentwrapError,
    FlowLimit,
    InvalidAnswer,
    InvalidMessage,
    MessageNotFound,
    SessionNotRunning,
    UntrustedSource,
)
from .events import Event, Subscription
from .message import (
    Attempt,
    Kind,
    Message,
    NewMessage,
    Phase,
    Priority,
    QueueLimits,
    Source,
    Status,
)
from .paths import Paths
from .queue.sanitize import check_text, sanitize
from .queue.store import MessageStore, QueueMetrics, SenderLimit
from .sessions.registry import Registry, SessionRecord, Transition

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast
    from .answers.intake import AnswerIntake, AnswerResult
    from .answers.store import Answer, AnswerStore
    from .config import LaunchChoice
    from .detect.profiles import Profile
    from .terminal.styles import Screen

__all__ = [
    "RECHECK_S", "HistoryEntry", "QueueView", "Sent", "Service", "SessionRecord", "SessionView",
    "Transition", "Waiting",
]

#: How often a waiter looks again although no announcement came: a datagram
#: can be lost (a full socket queue, a writer without an events dir), never
#: the row itself.
RECHECK_S = 1.5
#: What an agent may send other agents (:meth:`Service.send_as_agent`): a flow
#: (the messages sharing a correlation id) ends after this many hops ...
AGENT_MAX_DEPTH = 5
#: ... or this long after its first message; and each agent sends at most
#: AGENT_SENDS per AGENT_SEND_WINDOW_S, to all sessions together.
AGENT_FLOW_MAX_AGE_S = 300.0
AGENT_SENDS = 20
AGENT_SEND_WINDOW_S = 60.0
#: How an agent may acknowledge a message it got (:meth:`Service.acknowledge`).
ACK_STATUSES = ("done", "seen", "rejected")
MAX_NOTE_CHARS = 500


@dataclass(frozen=True)
class Sent:
    """What :meth:`Service.send` did."""

    message: Message
    created: bool  # False: an idempotency key returned the first message
    supervised: bool  # False: no supervisor runs; the message waits for `adopt`


@dataclass(frozen=True)
class Waiting:
    """A message not yet delivered, and why it waits (shown by ``queue``)."""

    message: Message
    waiting_because: str


@dataclass(frozen=True)
class QueueView:
    """One session's queue: in-flight messages first, then pending in
    delivery order; the session record says why nothing moves."""

    session: SessionRecord
    entries: list[Waiting]


@dataclass(frozen=True)
class HistoryEntry:
    """A message and every attempt at it (its evidence)."""

    message: Message
    attempts: list[Attempt]

    @property
    def channel(self) -> str:
        """How the last attempt went in (paste, keys, fallback), or '-'."""
        return self.attempts[-1].channel if self.attempts else "-"


@dataclass(frozen=True)
class SessionView:
    """A session as ``ls`` shows it: its record and how many messages wait."""

    record: SessionRecord
    pending: int


def _check_channel(channel: str) -> None:
    if not channel or not channel.replace("-", "").replace("_", "").isalnum():
        raise InvalidMessage(f"channel must be a short word, got {channel!r}")


def _selection(
    source: str | None, contains: str | None, limit: int | None
) -> tuple[list[Source] | None, str | None, int | None]:
    """The filters of :meth:`Service.inbox` and :meth:`Service.consume`, checked."""
    sources = None
    if source is not None:
        try:
            sources = [Source(source)]
        except ValueError:
            names = ", ".join(s.value for s in Source)
            raise InvalidMessage(f"unknown source {source!r} (one of: {names})") from None
    if contains is not None:
        check_text(contains)
        contains = contains.strip() or None
        if contains is not None and len(contains) > 200:
            raise InvalidMessage("a filter is at most 200 characters")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or not 1 <= limit <= MAX_TAKE):
        raise InvalidMessage(f"limit must be 1..{MAX_TAKE}, not {limit!r}")
    return sources, contains, limit


def _queued_line(message: Message) -> dict[str, Any]:
    """The audit line of an accepted message: ids and sizes, never content."""
    return dict(event="queued", session=message.session, message=message.id,
                source=str(message.source), source_id=message.source_id,
                priority=str(message.priority), kind=str(message.kind.value),
                bytes=len(message.content.encode("utf-8")))


class _Lookups:
    """What :meth:`Service.send` looks up about a message's session (its
    record, profile, config), remembered for one call: one message, or the
    messages :meth:`Service.send_many` takes at one instant."""

    def __init__(self, svc: Service) -> None:
        self._svc = svc
        self._records: dict[str, SessionRecord] = {}
        self._profiles: dict[str, Profile] = {}
        self._configs: dict[str, Config] = {}

    def record(self, session: str) -> SessionRecord:
        if session not in self._records:
            self._records[session] = self._svc.registry.get(session)
        return self._records[session]

    def profile(self, name: str) -> Profile:
        if name not in self._profiles:
            self._profiles[name] = self._svc._profile(name)
        return self._profiles[name]

    def config(self, cwd: str) -> Config:
        if cwd not in self._configs:
            self._configs[cwd] = self._svc._configs.load(Path(cwd))
        return self._configs[cwd]


class Service:
    """The operations every surface offers, with one set of rules."""

    def __init__(
        self, paths: Paths, store: MessageStore, registry: Registry, *,
        audit: AuditLog | None = None,
    ) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.audit = audit if audit is not None else AuditLog(paths.audit_log)
        self.recheck_s = RECHECK_S
        self._profiles: dict[str, tuple[tuple[str, int], Profile]] = {}
        self._files: tuple[tuple[int, ...], dict[str, Path]] | None = None
        self._configs = ConfigCache(paths)  # [sources] and [trust] as they are now, per send
        self._answers: AnswerStore | None = None
        self._answers_lock = threading.Lock()

    def _profile(self, name: str) -> Profile:
        """The session's profile, parsed once per version of its file: a
        long-lived service (the HTTP server) sends many messages, and parsing
        a profile costs more than storing one."""
        from .detect.profiles import load_profile

        path = self._profile_files().get(name)
        try:
            key = (str(path), path.stat().st_mtime_ns) if path is not None else ("", 0)
        except OSError:
            key = (str(path), 0)
        cached = self._profiles.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        profile = load_profile(name, self.paths)
        self._profiles[name] = (key, profile)
        return profile

    def _profile_files(self) -> dict[str, Path]:
        """:func:`profile_files`, listed again only when a profile directory
        changed (a file added, removed or renamed changes its mtime; an edit
        in place is seen by :meth:`_profile` through the file's own)."""
        from .detect.profiles import builtin_patterns_dir, profile_files

        key = []
        for d in (builtin_patterns_dir(), self.paths.user_patterns_dir):
            try:
                key.append(d.stat().st_mtime_ns)
            except OSError:
                key.append(0)
        if self._files is None or self._files[0] != tuple(key):
            self._files = (tuple(key), profile_files(self.paths))
        return self._files[1]

    @classmethod
    def open(
        cls, paths: Paths, *, limits: QueueLimits | None = None,
        busy_timeout_ms: int | None = None,
    ) -> Service:
        """Store and registry of ``paths`` (its dirs made and checked first).

        ``limits``: the queue limits to enforce; by default those of the
        user's config, so a config error is reported here. A caller that only
        reads (``doctor``) passes its own and does not depend on the config.
        ``busy_timeout_ms``: how long a locked database is waited for before
        :class:`~agentwrap.errors.StoreLocked` (a hook, which must answer at
        once, waits ~100 ms; by default the store's own timeout).
        """
        from .queue import db
        from .queue.sqlite import SQLiteMessageStore

        paths.ensure()
        if limits is None:
            limits = load_config(paths).limits
        wait = db.BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
        registry = Registry(paths.db_path, events_dir=paths.events_dir, busy_timeout_ms=wait)
        try:
            store = SQLiteMessageStore(paths.db_path, limits, events_dir=paths.events_dir,
                                       busy_timeout_ms=wait)
        except BaseException:
            registry.close()
            raise
        return cls(paths, store, registry)

    def close(self) -> None:
        self.store.close()
        self.registry.close()
        if self._answers is not None:
            self._answers.close()

    @property
    def answers(self) -> AnswerStore:
        """The answers table (opened on first use: most commands never need it)."""
        from .answers.store import AnswerStore

        with self._answers_lock:
            if self._answers is None:
                self._answers = AnswerStore(self.paths.db_path, events_dir=self.paths.events_dir)
            return self._answers

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- messages ---------------------------------------------------------------------

    def send(self, new: NewMessage, *, raw: bool = False,
             sender_limit: SenderLimit | None = None) -> Sent:
        """Store ``new`` durably for its session and wake the session's supervisor.

        ``raw``: type the text as is instead of quoting it (an agent's own
        command, a REPL's input). Into a shell every message is raw. Raw text
        is refused unless the user's config trusts ``new.source`` with it, and
        cannot ask for an ACK (nothing would answer). Nothing is stored when a
        check fails. An accepted message leaves an audit line (ids and sizes,
        never content), whichever surface sent it. ``sender_limit``: the
        sender's own limit across sessions (an agent's sends), counted by the
        store in the transaction that stores the message.
        """
        rec, kind = self._admit(new, raw, _Lookups(self))
        message, created = self.store.enqueue(new, kind=kind, sender_limit=sender_limit)
        if created:
            self.audit.write(**_queued_line(message))
        notify(self.paths, new.session)
        return Sent(message, created, supervised=rec.liveness != "stale")

    def send_many(self, news: Sequence[NewMessage]) -> list[Sent | AgentwrapError]:
        """:meth:`send` for several senders at once, stored in one transaction
        (:meth:`MessageStore.enqueue_many`: one commit for all; the HTTP
        server's writer thread calls this with what arrived meanwhile).

        Each message gets exactly :meth:`send`'s checks, limits, audit line
        and wake-up; one that is refused gets its error in its place and
        changes nothing. The session, its profile and the config are looked
        up once per call: the messages of one call are taken at one instant.
        Returns after the commit only. A store error raises for all.
        """
        look = _Lookups(self)
        out: list[Sent | AgentwrapError | None] = [None] * len(news)
        admitted: list[tuple[int, SessionRecord, NewMessage, Kind]] = []
        for i, new in enumerate(news):
            try:
                rec, kind = self._admit(new, False, look)
            except AgentwrapError as exc:
                out[i] = exc
                continue
            admitted.append((i, rec, new, kind))
        results = self.store.enqueue_many([(new, kind) for _, _, new, kind in admitted])
        stored: dict[str, None] = {}  # the sessions to wake, each once
        lines: list[dict[str, Any]] = []
        for (i, rec, new, _), result in zip(admitted, results, strict=True):
            if isinstance(result, AgentwrapError):
                out[i] = result
                continue
            message, created = result
            if created:
                lines.append(_queued_line(message))
            stored[new.session] = None
            out[i] = Sent(message, created, supervised=rec.liveness != "stale")
        self.audit.write_many(lines)
        for session in stored:
            notify(self.paths, session)
        return [r for r in out if r is not None]  # every slot was filled above

    def _admit(self, new: NewMessage, raw: bool, look: _Lookups) -> tuple[SessionRecord, Kind]:
        """What :meth:`send` checks before storing: the session runs, the
        source may send as this id (and, raw, as is); the message's kind."""
        rec = look.record(new.session)
        if rec.ended is not None:
            raise SessionNotRunning(
                f"session {new.session!r} has ended; nothing would deliver this",
                hint="`agentwrap ls` shows running sessions",
            )
        profile = look.profile(rec.profile)
        cfg = look.config(rec.cwd).for_profile(rec.profile)
        allowed = cfg.source_ids.get(str(new.source))
        if allowed is not None and new.source_id not in allowed:
            raise UntrustedSource(
                f"source {str(new.source)!r} may send only as {', '.join(allowed)}"
                f" (not {new.source_id!r})",
                hint="[sources] in ~/.config/agentwrap/config.toml lists the ids each source"
                " may use",
            )
        # Whose words: the person's own (typed as theirs) or data from outside,
        # decided here from the source and the user's own [trust] config only.
        kind = Kind.INSTRUCTION if cfg.trust.speaks_for_user(str(new.source), new.source_id) \
            else Kind.CONTENT
        if raw or profile.raw:
            trusted = cfg.trust
            what = "runs a shell: messages are commands there" if profile.shell else (
                "takes messages as typed" if profile.raw else "would get this text as typed (--raw)"
            )
            if str(new.source) not in trusted.raw_sources:
                raise UntrustedSource(
                    f"session {new.session!r} {what}; source {str(new.source)!r} is not trusted"
                    f" with that (trusted: {', '.join(trusted.raw_sources) or 'none'})"
                )
            if new.require_ack:
                raise InvalidMessage(
                    f"session {new.session!r} {what}; nothing would acknowledge it",
                    hint="leave out --ack",
                )
            kind = Kind.COMMAND
        return rec, kind

    def send_as_agent(
        self, caller: str, target: str, content: str, *,
        priority: Priority | str = Priority.NORMAL, metadata: dict[str, Any] | None = None,
    ) -> Sent:
        """A message from the agent of session ``caller`` to session ``target``:
        source ``agent``, source id the caller's session name.

        It carries the caller's flow on: the correlation id of the last message
        delivered to the caller in the last :data:`AGENT_FLOW_MAX_AGE_S` (that
        message's own id when it had none), one hop deeper than it; with no
        such message it starts a new flow at depth 1. Refused before storing
        (:class:`FlowLimit`) when the flow would go deeper than
        :data:`AGENT_MAX_DEPTH` or began more than :data:`AGENT_FLOW_MAX_AGE_S`
        ago, (:class:`RateLimited`) past :data:`AGENT_SENDS` messages from the
        caller in :data:`AGENT_SEND_WINDOW_S` (to all sessions together), and
        by everything :meth:`send` checks.
        """
        rec = self.registry.get(caller)
        if rec.ended is not None:
            raise SessionNotRunning(f"session {caller!r} (the sender) has ended")
        if target == caller:
            raise InvalidMessage("an agent cannot send a message to its own session",
                                 hint="list_sessions shows the other sessions")
        try:
            prio = Priority.parse(priority) if isinstance(priority, str) else Priority(priority)
        except ValueError as exc:
            raise InvalidMessage(str(exc)) from None
        now = time.time()
        correlation_id, depth, started = self._flow_of(caller, now)
        if depth > AGENT_MAX_DEPTH:
            raise FlowLimit(
                f"this message would be hop {depth} of flow {correlation_id}; agent-to-agent"
                f" flows end after {AGENT_MAX_DEPTH} hops"
            )
        if now - started > AGENT_FLOW_MAX_AGE_S:
            raise FlowLimit(
                f"flow {correlation_id} began {now - started:.0f} s ago; agent-to-agent flows"
                f" end after {AGENT_FLOW_MAX_AGE_S:.0f} s"
            )
        # counted by the store in the transaction that stores it: every
        # process of the caller (one per MCP server) shares the one limit
        return self.send(NewMessage(
            session=target, content=content, source=Source.AGENT, source_id=caller,
            priority=prio, metadata=metadata if metadata is not None else {},
            correlation_id=correlation_id, depth=depth,
        ), sender_limit=SenderLimit(AGENT_SENDS, AGENT_SEND_WINDOW_S, f"session {caller!r}"))

    def _flow_of(self, session: str, now: float) -> tuple[str, int, float]:
        """The flow an agent's message continues: (correlation id, depth, when
        the flow began), from the last message delivered to ``session`` in
        the last :data:`AGENT_FLOW_MAX_AGE_S`; a new flow if there is none."""
        recent = [
            m for m in self.store.history(
                session, limit=MAX_TAKE, statuses=(Status.DELIVERED, Status.ACKNOWLEDGED))
            if m.finished is not None and now - m.finished <= AGENT_FLOW_MAX_AGE_S
        ]
        if not recent:
            return str(uuid.uuid4()), 1, now
        last = max(recent, key=lambda m: (m.finished or 0.0, m.created))
        correlation_id = last.correlation_id or last.id
        started = self.store.flow_started(correlation_id)
        return correlation_id, last.depth + 1, last.created if started is None else started

    def get(self, message_id: str) -> Message:
        """A message by its full id or a unique prefix a person typed (4+ characters)."""
        return self.store.get_by_prefix(message_id)

    def message(self, message_id: str) -> HistoryEntry:
        """One message (id or unique prefix) with every attempt at it: what the
        HTTP API's ``GET /api/messages/{id}`` shows, without paging ``history``."""
        m = self.get(message_id)
        return HistoryEntry(m, self.store.attempts(m.id))

    def cancel(self, message_id: str) -> Message:
        """Cancel a pending message (id or unique prefix); anything later is past
        recall and raises. Audited like a send, since it changes what an agent gets."""
        msg = self.store.cancel(self.get(message_id).id)
        self.audit.write(event="cancelled", session=msg.session, message=msg.id)
        return msg

    def consume(
        self, session: str, *, channel: str, max_bytes: int = 10 * 1024,
        source: str | None = None, contains: str | None = None, limit: int | None = None,
    ) -> list[Message]:
        """Hand the due messages to a reader that delivers them itself (an MCP
        tool the agent calls, a hook whose output the agent reads) instead of
        typing them: claimed and recorded ``delivered`` through ``channel`` in
        one step, so the supervisor can never type them as well. Highest
        priority first, up to ``max_bytes`` (at least one). COMMAND messages are
        left for the terminal: they mean something only when typed.
        ``source``, ``contains`` and ``limit``: see :meth:`inbox`; only what
        matches is claimed, the rest stays queued.
        """
        rec = self.registry.get(session)
        if rec.ended is not None:
            raise SessionNotRunning(f"session {session!r} has ended")
        _check_channel(channel)
        sources, contains, limit = _selection(source, contains, limit)
        got = handover.take(self.store, session, channel=channel, max_bytes=max_bytes,
                            sources=sources, contains=contains, limit=limit)
        return got.delivered(self.audit) if got is not None else []

    def hand_over(self, session: str, *, channel: str, limit_chars: int, at_start: bool = False,
                  log: Callable[[str], None] = lambda _: None) -> str:
        """The session's due messages that fit in ``limit_chars``, framed as
        the typed block frames them, for a reader that shows the text to the
        model itself (a hook's additional context), recorded ``delivered``
        through ``channel``: "" when none is due, the session has ended, or the
        first alone is too long (that one stays queued for typing). The
        session's supervisor does the same when a hook asks it
        (:mod:`agentwrap.sessions.handover`).

        ``at_start``: a SessionStart hook's context, which reaches the model
        with the session's first prompt (the agent does not start a turn for
        it): the batch stays in flight (never typed) until :meth:`first_turn`
        records it delivered, or the session's end fails it. Only start-up
        context rides there (``run --context`` files, priority ``startup``):
        a message someone sent for the agent to act on must start a turn of
        its own, so it waits for the supervisor to type it once the agent is
        ready; with nobody at the keyboard there may never be a first prompt
        (issue 25)."""
        _check_channel(channel)
        rec = self.registry.get(session)
        if rec.ended is not None:
            return ""
        got = handover.claim(self.store, session, channel=channel, limit_chars=limit_chars,
                             ack_for=self._ack_rule(rec), log=log,
                             priorities=(Priority.STARTUP,) if at_start else None)
        if got is None:
            return ""
        if at_start:
            got.handed("handed at the session start; it goes to the model in the first turn")
            handover.note_started(self.paths.started_batches(session), got.token)
        else:
            got.delivered(self.audit)
        log(f"handed {len(got.messages)} message(s) (batch {got.token}); {got.left} still wait")
        return got.text

    def claim_hand_over(self, session: str, *, channel: str, limit_chars: int,
                        log: Callable[[str], None] = lambda _: None) -> handover.Claimed | None:
        """What :meth:`hand_over` hands over, claimed but not yet recorded: the
        caller records it ``delivered`` once the text reached the agent's hook,
        or releases it (the supervisor's hook server, issue 27). None when
        nothing is due or the session has ended."""
        _check_channel(channel)
        rec = self.registry.get(session)
        if rec.ended is not None:
            return None
        return handover.claim(self.store, session, channel=channel, limit_chars=limit_chars,
                              ack_for=self._ack_rule(rec), log=log)

    def first_turn(self, session: str, channel: str) -> list[str]:
        """A model turn has run since the session started (a prompt, a tool
        call, a turn's end, as the agent's hooks tell it): what its
        SessionStart hook handed over went to the model in it (ids of the
        messages now ``delivered``)."""
        _check_channel(channel)
        return handover.deliver_started(self.store, self.audit, session,
                                        self.paths.started_batches(session), channel,
                                        "went to the model in the session's first turn")

    def _ack_rule(self, rec: SessionRecord) -> handover.AckRule:
        """As the session's supervisor decides it: the run option, else the config."""
        cfg = load_config(self.paths, Path(rec.cwd)).for_profile(rec.profile).delivery
        option = rec.options.require_ack
        return handover.ack_rule(cfg.require_ack if option is None else option, cfg.ack_wording)

    def inbox(
        self, session: str, *, source: str | None = None, contains: str | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """What :meth:`consume` with the same filters would hand over now (by
        count, not bytes), changing nothing: due content messages, highest
        priority first, never an expired one.

        ``source``: only messages from that source (webhook, agent, ...);
        ``contains``: only those with this text in their content or their
        ``source:source_id`` label (ASCII letters in any case); ``limit``: at
        most this many (1..:data:`MAX_TAKE`).
        """
        self.registry.get(session)
        sources, contains, limit = _selection(source, contains, limit)
        return self.store.peek(session, kinds=CONSUMABLE_KINDS, sources=sources,
                               contains=contains, due=True, limit=limit)

    def acknowledge(
        self, session: str, message_id: str, status: str, note: str | None = None, *,
        channel: str,
    ) -> Message:
        """The agent of ``session`` acknowledges a message it got, through
        ``channel`` (an MCP tool): ``status`` is one of :data:`ACK_STATUSES`,
        ``note`` an optional line kept in the message's detail.

        The message must be the session's and delivered (or typed and
        submitted, its ACK awaited); it moves to ACKNOWLEDGED exactly once,
        and a second acknowledgement is an error.
        """
        self.registry.get(session)
        if status not in ACK_STATUSES:
            raise InvalidMessage(
                f"status must be one of {', '.join(ACK_STATUSES)}, not {status!r}"
            )
        _check_channel(channel)
        text = ""
        if note is not None:
            check_text(note)
            text = " ".join(sanitize(note).text.split())  # one line, no controls
            if len(text) > MAX_NOTE_CHARS:
                raise InvalidMessage(
                    f"note is {len(text)} characters; the limit is {MAX_NOTE_CHARS}",
                    hint="keep the note to a line; send a message for more",
                )
        m = self.get(message_id)
        if m.session != session:
            raise MessageNotFound(
                f"message {m.id} was not sent to session {session!r}",
                hint="acknowledge only messages this session received",
            )
        if m.status is Status.ACKNOWLEDGED:
            raise InvalidMessage(f"message {m.id} is already acknowledged ({m.detail})",
                                 hint="each message is acknowledged once")
        if not (m.status is Status.DELIVERED
                or (m.status is Status.DELIVERING and m.phase is Phase.SUBMITTED)):
            raise InvalidMessage(
                f"message {m.id} is {m.status}: only a message delivered to the agent can be"
                " acknowledged",
                hint="take it first (check_input_queue), then acknowledge it",
            )
        detail = f"acknowledged ({status}) through {channel}" + (f": {text}" if text else "")
        if not self.store.acknowledge(m.id, detail):
            raise InvalidMessage(f"message {m.id} was acknowledged or ended meanwhile",
                                 hint="each message is acknowledged once")
        self.audit.write(event="acknowledged", session=session, message=m.id, channel=channel,
                         status=status)
        return self.store.get(m.id)

    def peek(self, session: str, now: float | None = None) -> QueueView:
        """What waits for ``session``, never consuming anything: in-flight
        messages (with their write-ahead phase), then pending ones in delivery
        order, each with the reason it is not typed yet (retry back-off, no
        supervisor, a draft in the box, the agent busy or waiting)."""
        rec = self.registry.get(session)
        pending = self.store.peek(session)
        flight = self.store.in_flight(session)
        now = time.time() if now is None else now

        def why(m: Message) -> str:
            if m.next_attempt_at > now:
                return f"retry in {m.next_attempt_at - now:.0f} s ({m.detail})"
            if rec.liveness != "running":
                return "supervisor not running (`agentwrap adopt`)"
            if rec.draft or rec.state is State.DRAFT:
                return "draft in input box"
            if rec.state is State.READY:
                return "due now"
            if rec.state is State.BUSY and (channel := busy_channel_of(rec.options)):
                return busy_reason(channel)
            return {State.BUSY: "agent busy", State.WAITING_INPUT: "agent is waiting for an answer",
                    State.STARTING: "agent starting", State.EXITED: "agent exited",
                    }.get(rec.state, str(rec.state))

        at_start = set(handover.started(self.paths.started_batches(session)))

        def going(m: Message) -> str:
            if m.batch_id in at_start:
                return "handed at the session start: goes to the model in the first turn"
            return "delivering" + (f" ({m.phase})" if m.phase else "")

        entries = [Waiting(m, going(m)) for m in flight]
        entries += [Waiting(m, why(m)) for m in pending]
        return QueueView(rec, entries)

    def history(self, session: str | None = None, limit: int = 200) -> list[HistoryEntry]:
        """Messages newest first (of one session, or all), each with its attempts.
        An unknown session is an error, not an empty history."""
        if session is not None:
            self.registry.get(session)
        return [HistoryEntry(m, self.store.attempts(m.id))
                for m in self.store.history(session, limit=limit)]

    def metrics(self, session: str | None = None) -> QueueMetrics:
        """Delivery figures from the persisted rows (one session, or all)."""
        return self.store.metrics(session)

    def wait_for_end_state(self, message_id: str, timeout: float) -> Message | None:
        """Block until the message reaches a terminal status; None after ``timeout``.

        Woken by the event bus (the store announces every commit that recorded
        events), so it returns as soon as the supervisor finishes the message;
        it looks again every :attr:`recheck_s` in case an announcement was lost.
        Subscribed before the first look, so an end between the two is not missed.
        """
        deadline = time.monotonic() + timeout
        with self.subscribe() as sub:
            while True:
                m = self.store.get(message_id)
                if m.status.terminal:
                    return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                sub.wait(min(left, self.recheck_s))

    # --- answering the question a waiting agent shows ------------------------------------

    def answer(
        self, session: str, *, option: int | str | None = None,
        options: Sequence[int | str] | None = None, text: str | None = None,
        deny: bool = False, question_id: str | None = None, source: str = "cli",
        answers: Mapping[str, Any] | None = None,
    ) -> AnswerResult:
        """Store an answer to the question ``session``'s agent shows, and wake its
        supervisor, which types it with the agent's own keys only while the same
        question is open (:mod:`agentwrap.answers.keys`).

        The rules are :meth:`AnswerIntake.answer
        <agentwrap.answers.intake.AnswerIntake.answer>`'s, which the
        answer folder and the answer policy inside the supervisor use too.
        """
        return self.intake.answer(session, option=option, options=options, text=text,
                                  deny=deny, question_id=question_id, source=source,
                                  answers=answers)

    @property
    def intake(self) -> AnswerIntake:
        from .answers.intake import AnswerIntake

        return AnswerIntake(self.paths, self.registry, lambda: self.answers, self.audit,
                            self._profile)

    def answer_status(self, answer_id: str) -> Answer:
        try:
            return self.answers.get(answer_id)
        except KeyError:
            raise InvalidAnswer(f"no answer {answer_id!r}") from None

    def wait_answer(self, answer_id: str, timeout: float) -> Answer:
        """Block until the answer is applied, stale or failed, or ``timeout``
        passed (then it is returned still pending); woken by the event bus."""
        deadline = time.monotonic() + timeout
        with self.subscribe() as sub:
            while True:
                a = self.answer_status(answer_id)
                left = deadline - time.monotonic()
                if a.ended or left <= 0:
                    return a
                sub.wait(min(left, self.recheck_s))

    # --- sessions ---------------------------------------------------------------------

    def sessions(self, include_ended: bool = False) -> list[SessionView]:
        """Every session (running and stale; ended ones too if asked), oldest
        first, with its pending count."""
        return [SessionView(r, self.store.pending_count(r.name))
                for r in self.registry.list(include_ended=include_ended)]

    def state(self, name: str) -> SessionRecord:
        """One session's record: state, and the signal, rule and evidence that
        decided it; ``liveness`` is checked now, never stored."""
        return self.registry.get(name)

    def transitions(self, name: str, after_id: int = 0) -> list[Transition]:
        """The session's state changes after ``after_id``, oldest first (bounded
        log), so a state shorter than a reader's wake-up is still seen."""
        return self.registry.transitions(name, after_id)

    def screen(self, name: str) -> str:
        """The screen the session's last verdict was based on (to debug a profile)."""
        self.registry.get(name)
        path = self.paths.runtime_dir / f"{name}.screen"
        if not path.exists():
            raise SessionNotRunning(f"no screen recorded for {name!r} yet")
        return path.read_text(encoding="utf-8")

    def screen_view(self, name: str) -> Screen:
        """The same screen with its colours, for a person watching (the
        dashboard, ``GET /api/sessions/NAME/screen``): rows of styled runs,
        every value checked as it is read (:mod:`agentwrap.terminal.styles`),
        no escape sequence in it. A session whose supervisor kept only the
        plain screen gets that, uncoloured."""
        from .terminal.styles import DOCUMENT_SUFFIX, Screen, read_document, rows_from_text

        self.registry.get(name)
        try:
            got = read_document((self.paths.runtime_dir / f"{name}{DOCUMENT_SUFFIX}").read_bytes())
        except FileNotFoundError:
            got = None
        if got is not None:
            return got
        text = self.screen(name)
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        return Screen(digest="", at=0.0, cols=max((len(x) for x in lines), default=0),
                      cursor=(0, 0), title="", lines=rows_from_text(lines), styled=False)

    def screen_stamps(self, session: str | None = None) -> dict[str, int]:
        """When each session's styled screen was last saved (ns), cheaply (one
        ``stat`` each): how the event stream notices a new screen to announce."""
        from .terminal.styles import DOCUMENT_SUFFIX

        if session is not None:
            candidates = [self.paths.runtime_dir / f"{session}{DOCUMENT_SUFFIX}"]
        else:
            try:
                candidates = [p for p in self.paths.runtime_dir.iterdir()
                              if p.name.endswith(DOCUMENT_SUFFIX)]
            except OSError:
                return {}
        out: dict[str, int] = {}
        for path in candidates:
            try:
                out[path.name[:-len(DOCUMENT_SUFFIX)]] = path.stat().st_mtime_ns
            except OSError:
                continue
        return out

    def launch_choices(self) -> tuple[LaunchChoice, ...]:
        """The sessions the person listed for the dashboard to start
        (``[[dashboard.launch]]``, their own config file only)."""
        return load_config(self.paths).launch

    def start(self, choice: str, name: str | None = None, *, by: str) -> SessionRecord:
        """Start the listed session ``choice`` as ``run --detach`` does (tmux,
        a supervisor of its own or the host's); ``name`` overrides its session
        name. Nothing but a listed entry can be started this way: the caller
        names an entry, never a command or a folder."""
        from .sessions.lifecycle import RunOptions, start_tmux

        choices = {c.name: c for c in self.launch_choices()}
        picked = choices.get(choice)
        if picked is None:
            raise InvalidMessage(
                f"no launch entry named {choice!r}",
                hint=("listed: " + ", ".join(choices)) if choices else
                "list what may be started in [[dashboard.launch]] of"
                " ~/.config/agentwrap/config.toml")
        if not picked.folder.is_dir():
            raise InvalidMessage(f"launch entry {choice!r}: folder not found: {picked.folder}",
                                 hint="fix its cwd in ~/.config/agentwrap/config.toml")
        command = picked.command
        if command is None:
            command = self._profile(str(picked.profile)).commands[0]
        rec = start_tmux(self.paths, RunOptions(
            argv=[command, *picked.args], name=name or picked.session, profile=picked.profile,
            backend="tmux", cwd=picked.folder.resolve(), detach=True))
        self.audit.write(event="started", session=rec.name, launch=picked.name, by=by)
        return rec

    def stop(self, name: str, *, by: str) -> SessionRecord:
        """Stop a running session's agent (its whole process tree), as
        ``agentwrap stop`` does; the record with its exit code."""
        from .sessions.lifecycle import stop_many

        if self.registry.get(name).ended is not None:
            raise SessionNotRunning(f"session {name!r} has ended already")
        (rec,) = stop_many(self.paths, [name])
        self.audit.write(event="stopped", session=name, by=by)
        return rec

    def check_store(self) -> None:
        """Raise :class:`StoreCorrupt` unless the store's integrity check passes."""
        self.store.check_integrity()

    # --- events -----------------------------------------------------------------------

    def events(
        self, after_id: int = 0, session: str | None = None, *,
        kinds: Iterable[str] | None = None, subject: str | None = None, limit: int = 1000,
    ) -> list[Event]:
        """Events with ids above ``after_id``, oldest first (see :data:`agentwrap.events.KINDS`)."""
        return self.store.events(after_id, session=session, kinds=kinds, subject=subject,
                                 limit=limit)

    def last_event_id(self) -> int:
        """The newest event's id (0 if none): follow from here for only new ones."""
        return self.store.last_event_id()

    def subscribe(self) -> Subscription:
        """A wake-up for every commit that records events, from any process.
        Close it (or use it as a context manager) when done."""
        return Subscription(self.paths.events_dir)

    def follow_events(
        self, after_id: int = 0, session: str | None = None, *,
        kinds: Iterable[str] | None = None,
    ) -> Iterator[Event]:
        """Every event after ``after_id``, then each new one as it is committed,
        forever (stop by closing the generator, or Ctrl-C). Waits on the bus,
        looking again every :attr:`recheck_s` for a lost announcement."""
        wanted = list(kinds or ())
        with self.subscribe() as sub:
            last = after_id
            while True:
                batch = self.events(last, session, kinds=wanted)
                for ev in batch:
                    last = ev.id
                    yield ev
                if len(batch) < 1000:
                    sub.wait(self.recheck_s)
