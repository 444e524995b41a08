"""Handing due messages over as text the agent reads itself, not typed.

An agent's hook (its additional context at the session start or between tool
calls), an MCP tool call and Aider's read file all give the agent text that
agentwrap does not type. The messages are claimed atomically first (the typing
path, another hook or a tool call can then no longer take them) and recorded
``delivered`` through the channel only once the text has left agentwrap's
hands. Two callers hand a hook's text over, with the same words:

* the hook itself, through :meth:`agentwrap.service.Service.hand_over`, when no
  supervisor takes it (it then loads the store's code: ~190 ms a run);
* the session's supervisor, whose hook server runs the hook for either hook
  client (:mod:`agentwrap.surfaces.hooks.server`): the store, the config and
  the framing are loaded already, so the hook's process imports only a socket.

The split between :func:`claim` and :meth:`Claimed.delivered` /
:meth:`Claimed.release` is what lets the supervisor give a batch back when
the hook that asked for it is gone before the text reached it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..audit import AuditLog
from ..detect.neutralise import SyntaxSpec
from ..message import Attempt, AttemptOutcome, Message, Priority, Source, Status
from ..paths import private_dir, write_private
from ..queue.store import MessageStore
from .choice import CONSUMABLE_KINDS
from .framing import new_token, render

#: Most messages one hand-over (or one look at the queue for it) takes.
MAX_TAKE = 50
_DUMMY_TOKEN = "0" * 8  # a token's length, to measure a block before the claim

#: Whether a batch asks for an ACK, and with which words (None: it does not).
AckRule = Callable[[Sequence[Message]], "str | None"]


@dataclass(frozen=True)
class Claimed:
    """A batch taken from the queue for one channel, not yet recorded delivered."""

    store: MessageStore
    session: str
    channel: str
    token: str
    messages: tuple[Message, ...]
    text: str  # framed, with how many still wait; "" for a plain consume
    left: int  # due messages still queued after this batch
    claimed_at: float

    def delivered(self, audit: AuditLog, evidence: str | None = None) -> list[Message]:
        """The text reached the agent: each message ends ``delivered`` through
        the channel (one attempt each), with an audit line."""
        now = time.time()
        why = evidence or f"handed to the agent through {self.channel}"
        for m in self.messages:
            self.store.record_attempt(
                Attempt(m.id, self.token, m.attempts + 1, self.claimed_at, now, self.channel,
                        AttemptOutcome.DELIVERED, why)
            )
        self.store.finish(Status.DELIVERED, f"delivered: consumed through {self.channel}",
                          batch_id=self.token, consumed_through=self.channel)
        audit.write(event="consumed", session=self.session, channel=self.channel,
                    ids=[m.id for m in self.messages])
        return [self.store.get(m.id) for m in self.messages]

    def handed(self, evidence: str) -> None:
        """The text went to the agent but reaches the model only later (a
        SessionStart hook's context goes in the session's first turn): one
        attempt each, and the batch stays in flight until :func:`deliver_started`."""
        now = time.time()
        for m in self.messages:
            self.store.record_attempt(
                Attempt(m.id, self.token, m.attempts + 1, self.claimed_at, now, self.channel,
                        AttemptOutcome.HANDED, evidence)
            )

    def release(self, why: str) -> int:
        """The text never reached the agent: the batch goes back to the queue
        at once (a counted attempt), for whichever channel comes next."""
        now = time.time()
        for m in self.messages:
            self.store.record_attempt(
                Attempt(m.id, self.token, m.attempts + 1, self.claimed_at, now, self.channel,
                        AttemptOutcome.NOT_HANDED, why)
            )
        return self.store.retry_later(self.token, now, why)


def take(
    store: MessageStore, session: str, *, channel: str, max_bytes: int,
    sources: Collection[Source] | None = None, contains: str | None = None,
    limit: int | None = None, priorities: Collection[Priority] | None = None,
) -> Claimed | None:
    """Claim the due content messages that fit in ``max_bytes`` (at least one),
    highest priority first; None when none is due."""
    token = new_token()
    now = time.time()
    batch = store.claim_batch(session, token, max_bytes, now, kinds=CONSUMABLE_KINDS,
                              sources=sources, contains=contains, limit=limit,
                              priorities=priorities)
    if not batch:
        return None
    return Claimed(store, session, channel, token, tuple(batch), "", 0, now)


def claim(
    store: MessageStore, session: str, *, channel: str, limit_chars: int, ack_for: AckRule,
    log: Callable[[str], None] = lambda _: None, priorities: Collection[Priority] | None = None,
    whole_first: bool = False,
) -> Claimed | None:
    """Claim the session's due messages whose framed block fits in
    ``limit_chars`` and frame them as the typed block does (quoted,
    ``[source:sourceId]``, the batch token, the ACK request when asked), plus
    how many still wait. None when none is due, or when the first alone is too
    long: that one stays queued for typing. ``priorities``: only messages of
    these (a SessionStart hook takes the start-up context alone).

    ``whole_first``: the channel carries any one message whole, so a first
    message too long for ``limit_chars`` goes alone and uncut, as typing takes
    it. Codex's app-server (its turn input takes 1 MiB; ``limit_chars`` keeps
    its batches the typed block's size) is such a channel, and on it typing
    never takes a message while the server lives: left queued, a message near
    the content limit would have waited for its TTL, holding up the rest."""
    waiting = store.peek(session, kinds=CONSUMABLE_KINDS, due=True, limit=MAX_TAKE,
                         priorities=priorities)
    if not waiting:
        return None
    fit = 0
    for n in range(1, len(waiting) + 1):
        head = waiting[:n]
        if len(compose(head, _DUMMY_TOKEN, ack_for(head), 0)) > limit_chars:
            break
        fit = n
    if fit == 0 and whole_first:
        fit = 1
    if fit == 0:
        log(f"{len(waiting)} due; the next ({waiting[0].id}) is too long for channel {channel!r},"
            " left queued")
        return None
    max_bytes = sum(len(m.content.encode("utf-8")) for m in waiting[:fit])
    got = take(store, session, channel=channel, max_bytes=max_bytes, limit=fit,
               priorities=priorities)
    if got is None:
        return None
    batch = list(got.messages)
    left = len(store.peek(session, kinds=CONSUMABLE_KINDS, due=True, limit=MAX_TAKE))
    text = compose(batch, got.token, ack_for(batch), left)
    if len(text) > limit_chars:  # the note pushed it over: say it without the count
        text = compose(batch, got.token, ack_for(batch), 0)
    if len(text) > limit_chars and not (whole_first and len(batch) == 1):
        # another writer changed the queue between peek and claim
        cut = len(text) - limit_chars + 60
        text = text[: limit_chars - 60] + f"\n[agentwrap: {cut} characters cut]"
    return Claimed(store, session, channel, got.token, got.messages, text, left, got.claimed_at)


def compose(messages: Sequence[Message], token: str, ack: str | None, left: int,
            syntax: SyntaxSpec | None = None) -> str:
    """The typed block's text, and how many messages still wait, if any.
    ``syntax``: the agent's own syntax to defuse, where it parses the text
    (Aider's read file); a hook's context is never parsed as a command."""
    text = render(messages, token=token, ack_wording=ack, syntax=syntax).text
    if left:
        more = f"at least {left}" if left >= MAX_TAKE else str(left)
        noun = "message" if left == 1 else "messages"
        text += f"\n[agentwrap: {more} more {noun} for this session wait in the queue]"
    return text


def started(path: Path) -> list[str]:
    """The batch tokens a SessionStart hook handed over that no model turn
    has taken yet (``path``: :meth:`Paths.started_batches`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [t for t in data if isinstance(t, str)] if isinstance(data, list) else []


def note_started(path: Path, token: str) -> None:
    """Keep ``token`` as handed at the session start (see :func:`started`)."""
    private_dir(path.parent, repair=True)
    write_private(path, json.dumps([*started(path), token]).encode("utf-8"))


def deliver_started(store: MessageStore, audit: AuditLog, session: str, path: Path,
                    channel: str, evidence: str) -> list[str]:
    """A model turn has run since the start: what the SessionStart hook
    handed over went to the model in it, so those batches end ``delivered``;
    returns the message ids. (A batch the session's end took first stays as
    it ended.)"""
    tokens = set(started(path))
    if not tokens:
        return []
    done: list[str] = []
    now = time.time()
    for m in store.in_flight(session):
        if m.batch_id in tokens:  # the hand-over's attempt (same number) becomes delivered
            handed = [a for a in store.attempts(m.id) if a.number == m.attempts + 1]
            began = handed[0].started if handed else now
            store.record_attempt(Attempt(m.id, m.batch_id, m.attempts + 1, began, now, channel,
                                         AttemptOutcome.DELIVERED, evidence))
            done.append(m.id)
    for token in tokens:
        store.finish(Status.DELIVERED, f"delivered: consumed through {channel} ({evidence})",
                     batch_id=token, consumed_through=channel)
    if done:
        audit.write(event="consumed", session=session, channel=channel, ids=done)
    path.unlink(missing_ok=True)
    return done


def ack_rule(required: bool, wording: str) -> AckRule:
    """Whether a batch asks for an ACK, as the typing path decides it: a
    message's own wish, else the session's ``require_ack``."""

    def words(batch: Sequence[Message]) -> str | None:
        wanted = [m.require_ack for m in batch]
        ask = any(w for w in wanted) or (required and not all(w is False for w in wanted))
        return wording if ask else None

    return words


__all__ = [
    "CONSUMABLE_KINDS", "MAX_TAKE", "AckRule", "Claimed", "ack_rule", "claim", "compose",
    "deliver_started", "note_started", "started", "take",
]
