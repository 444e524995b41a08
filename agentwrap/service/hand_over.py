"""Hand-over: messages a reader takes itself instead of having them typed.

An MCP tool the agent calls (``check_input_queue``, ``acknowledge``), a hook
whose output the model reads, the SessionStart context that reaches the
model with the first prompt: each claims the due messages and records them
``delivered`` through its channel in one step, so the supervisor can never
type them as well (the claim itself is :mod:`agentwrap.delivery.handover`'s,
shared with the supervisor's hook server). What the service adds is what
needs the session: does it still run, which messages a reader may take (its
filters, checked), how the ACK is worded, and the agent's acknowledgement.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..audit import AuditLog
from ..config import load_config
from ..delivery import handover
from ..delivery.handover import CONSUMABLE_KINDS, MAX_TAKE
from ..errors import InvalidMessage, MessageNotFound, SessionNotFound, SessionNotRunning
from ..message import Message, Phase, Priority, Source, Status
from ..paths import Paths
from ..queue.sanitize import check_text, sanitize
from ..queue.store import MessageStore
from ..sessions.registry import Registry, SessionRecord

#: How an agent may acknowledge a message it got (:meth:`Service.acknowledge`).
ACK_STATUSES = ("done", "seen", "rejected")
MAX_NOTE_CHARS = 500


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



class HandOver:
    """Hands due messages to readers that deliver them themselves, and takes
    the agent's acknowledgement of what it got."""

    def __init__(self, paths: Paths, store: MessageStore, registry: Registry,
                 audit: AuditLog) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.audit = audit

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
        rec = self._owned(session)
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
        session's supervisor's hook server does the same when it runs the hook
        (:meth:`claim_hand_over`: :mod:`agentwrap.surfaces.hooks.server`).

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
        rec = self._owned(session)
        if rec.ended is not None:
            return ""
        got = handover.claim(self.store, session, channel=channel, limit_chars=limit_chars,
                             ack_for=self._ack_rule(rec), log=log,
                             priorities=(Priority.STARTUP,) if at_start else None)
        if got is None:
            return ""
        if at_start:
            got.handed("handed at the session start; it goes to the model in the first turn")
            handover.note_started(self.paths.started_batches(rec.name), got.token)
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
        rec = self._owned(session)
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

    def _owned(self, session: str) -> SessionRecord:
        """The session's record, if it runs on this machine: only its own host
        hands messages over (its agent's hooks and MCP server run there; any
        host may queue, peek and cancel). A bare name is this host's session
        (a hook, an MCP server of it); none here: whose it is, if another's."""
        try:
            rec = self.registry.get(session)
        except SessionNotFound:
            rec = self.registry.get(self.registry.resolve(session))
        if not self.registry.here(rec):
            raise SessionNotRunning(
                f"session {session!r} runs on host {rec.host!r}: only that host hands its"
                " messages over", hint="its agent's hooks and MCP server run there")
        return rec

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
        m = self.store.get_by_prefix(message_id)
        if m.session != self.registry.keys.key(session):
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
