"""Admission: what decides whether a message is stored, and how it will be typed.

Every surface's message comes through here (``send``, the HTTP server's
batches through ``send_many``, an agent's through ``send_as_agent``). The
store validates content, applies limits and honours idempotency keys; what
needs the *session* is decided here, once: does it exist and still run, how
will the message be typed (the person's instruction, content from outside,
or a command typed as is), may this source send as this id and have text
typed as is (the user's ``[sources]`` and ``[trust]`` config only); an
agent's flow of messages to other agents is bounded. An accepted message
leaves an audit line and wakes the session's supervisor.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..audit import AuditLog
from ..config import Config, ConfigCache
from ..datagram import wake
from ..delivery.handover import MAX_TAKE
from ..errors import (
    AgentwrapError,
    FlowLimit,
    InvalidMessage,
    SessionNotRunning,
    UntrustedSource,
)
from ..message import Kind, Message, NewMessage, Priority, Source, Status
from ..paths import Paths
from ..queue.store import MessageStore, SenderLimit
from ..sessions.registry import Registry, SessionRecord
from .profiles import ProfileCache
from .views import Sent

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast
    from ..detect.profiles import Profile

#: What an agent may send other agents (:meth:`Service.send_as_agent`): a flow
#: (the messages sharing a correlation id) ends after this many hops ...
AGENT_MAX_DEPTH = 5
#: ... or this long after its first message; and each agent sends at most
#: AGENT_SENDS per AGENT_SEND_WINDOW_S, to all sessions together.
AGENT_FLOW_MAX_AGE_S = 300.0
AGENT_SENDS = 20
AGENT_SEND_WINDOW_S = 60.0


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

    def __init__(self, registry: Registry, profiles: ProfileCache, configs: ConfigCache) -> None:
        self._registry = registry
        self._profile_cache = profiles
        self._config_cache = configs
        self._records: dict[str, SessionRecord] = {}
        self._profiles: dict[str, Profile] = {}
        self._configs: dict[str, Config] = {}

    def record(self, session: str) -> SessionRecord:
        if session not in self._records:
            self._records[session] = self._registry.get(session)
        return self._records[session]

    def profile(self, name: str) -> Profile:
        if name not in self._profiles:
            self._profiles[name] = self._profile_cache.get(name)
        return self._profiles[name]

    def config(self, cwd: str) -> Config:
        if cwd not in self._configs:
            self._configs[cwd] = self._config_cache.load(Path(cwd))
        return self._configs[cwd]


class Sending:
    """Admits, stores, audits and announces new messages; cancels pending ones."""

    def __init__(self, paths: Paths, store: MessageStore, registry: Registry, audit: AuditLog,
                 profiles: ProfileCache) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.audit = audit
        self.profiles = profiles
        self._configs = ConfigCache(paths)  # [sources] and [trust] as they are now, per send

    def _lookups(self) -> _Lookups:
        return _Lookups(self.registry, self.profiles, self._configs)

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
        new = self._addressed(new)
        rec, kind = self._admit(new, raw, self._lookups())
        message, created = self.store.enqueue(new, kind=kind, sender_limit=sender_limit)
        if created:
            self.audit.write(**_queued_line(message))
        self._wake(new.session)
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
        look = self._lookups()
        out: list[Sent | AgentwrapError | None] = [None] * len(news)
        admitted: list[tuple[int, SessionRecord, NewMessage, Kind]] = []
        for i, given in enumerate(news):
            try:
                new = self._addressed(given)
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
            self._wake(session)
        return [r for r in out if r is not None]  # every slot was filled above

    def _wake(self, session: str) -> None:
        """Wake the session's supervisor if it runs here (another host's
        supervisor wakes on the store's NOTIFY)."""
        here = self.registry.local(session)
        if here is not None:
            wake(self.paths, here)

    def _addressed(self, new: NewMessage) -> NewMessage:
        """``new`` for the session its address names (``NAME`` or
        ``HOST/NAME``: :meth:`Registry.resolve`), stored under that name."""
        name = self.registry.resolve(new.session)
        return new if name == new.session else replace(new, session=name)

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
        ids = self._config_ids(new)
        if allowed is not None and not any(i in allowed for i in ids):
            raise UntrustedSource(
                f"source {str(new.source)!r} may send only as {', '.join(allowed)}"
                f" (not {new.source_id!r})",
                hint="[sources] in ~/.config/agentwrap/config.toml lists the ids each source"
                " may use",
            )
        # Whose words: the person's own (typed as theirs) or data from outside,
        # decided here from the source and the user's own [trust] config only.
        kind = Kind.INSTRUCTION if any(
            cfg.trust.speaks_for_user(str(new.source), i) for i in ids) else Kind.CONTENT
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

    def _config_ids(self, new: NewMessage) -> tuple[str, ...]:
        """What the user's ``[sources]`` and ``[trust]`` may call ``new``'s
        sender: its source id; an agent of this host's session also by the
        bare name (a shared store's agent id is ``HOST/NAME``, a config's
        ``agent:lead`` means this host's ``lead``)."""
        keys = self.registry.keys
        here = keys.local(new.source_id) if new.source is Source.AGENT and keys.shared else None
        return (new.source_id,) if here in (None, new.source_id) else (new.source_id, here)

    def send_as_agent(
        self, caller: str, target: str, content: str, *,
        priority: Priority | str = Priority.NORMAL, metadata: dict[str, Any] | None = None,
    ) -> Sent:
        """A message from the agent of session ``caller`` to session ``target``:
        source ``agent``, source id the caller's session key (``HOST/NAME`` on
        a shared store, so two hosts' ``dev`` are two senders; its name on SQLite).

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
        caller = self.registry.keys.key(caller)  # the sender, its limit and its flow
        target = self.registry.resolve(target)  # NAME or HOST/NAME
        if self.registry.keys.key(target) == self.registry.keys.key(caller):
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

    def cancel(self, message_id: str) -> Message:
        """Cancel a pending message (id or unique prefix); anything later is past
        recall and raises. Audited like a send, since it changes what an agent gets."""
        msg = self.store.cancel(self.store.get_by_prefix(message_id).id)
        self.audit.write(event="cancelled", session=msg.session, message=msg.id)
        return msg

