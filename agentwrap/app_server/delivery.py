"""Messages to Codex through its app-server instead of typing (issue 24 step 5).

When the session's Codex runs on agentwrap's private app-server and the
person's thread is idle, the due messages are claimed like a hook's hand-over
(:func:`agentwrap.delivery.handover.claim`, framed as a typed block, Codex's
``$skill`` syntax defused because Codex parses it in any user input) and sent
with ``turn/start``: the TUI shows them as the person's input and the model
gets them in a turn of their own. Nothing is typed, so a draft in the
composer is never touched.

One channel per session mode: on the server, the typing engine never takes
what this part can (:func:`server_takes`), not even while the server is not
ready yet (starting, being started again by the keeper, its thread not yet
known): those messages wait for it, their TTL running. Only a server declared
dead (unusable for :data:`~.state.DEAD_AFTER_S`)
hands them to typing, until it is back. And a turn/start is never sent while
the server has not yet said what came of the previous one (:meth:`_starting`).
Either mix put one message into another's starting turn: Codex then asks the
model again with both.

Exactly once, across a supervisor crash: the batch's token is the turn's
``clientUserMessageId``, and the attempt is recorded ``handed`` *before* the
request goes out. The server's answer (the turn id) makes it ``delivered``.
A supervisor that died in between finds the batch in flight on its next start
and asks the thread's items for a user message with that client id: found,
the batch is delivered (receipt: the item's turn); not found once the thread
has been idle a moment, it goes back to the queue (while a turn runs the
items may not list it yet: the batch stays in flight and is looked for
again). A lost answer (the connection dropped) is settled the same way; an
error answer (the server did nothing) puts the batch back at once. The typing
engine never resumes these batches (they are foreign to it,
:func:`app_server_batches`).

ACK: the model's reply is read from the thread's agent message items
(``thread/items/list`` once the thread is idle again), not from the screen.

Steering (``[delivery] steer``): while the thread is busy (a turn runs, no
dialog waits) a due message whose priority the setting names (``"high"``:
high and critical; ``"all"``; ``"off"``: none) goes into the running turn with
``turn/steer``: the model gets it in its next request of the same turn, framed
and defused exactly as a turn/start block. The running turn's id comes from
``thread/turns/list`` (agentwrap's connection hears no ``turn/started`` of a
turn the person typed). The write-ahead record, the client id and the recovery
are the same as for turn/start. A steer refused because the turn has just
ended (wrong ``expectedTurnId``) reached nothing: the batch goes back to the
queue and leaves as turn/start once idle (or as a steer into the next turn).
The other messages wait for the turn's end. A draft in the composer does not
hold a steer back: nothing is typed into it.
Codex's own queue (``thread/queue/add``, verified) is not used.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Protocol

from ..audit import AuditLog
from ..codex_server.protocol import AgentMessage
from ..delivery.choice import APP_SERVER, AgentState, channel_for
from ..delivery.seams import Asking, DraftFlag
from ..detect.neutralise import SyntaxSpec
from ..errors import AppServerError, AppServerRefused
from ..message import UNACKNOWLEDGED, Attempt, AttemptOutcome, Kind, Message, Priority
from ..queue.store import MessageStore
from .state import AppServerState

CHANNEL = APP_SERVER
ACK_ITEMS = 20  # the thread's last items an ACK is looked for in
SETTLE_IDLE_S = 1.0  # idle this long, the thread's items list every input it took
#: After a turn/start, an "idle" the server said before it is stale until the
#: server says what came of the turn (it does within milliseconds); this long
#: at most, should that word never come.
STALE_IDLE_S = 10.0
HANDED = AttemptOutcome.HANDED
SUBMITTED = AttemptOutcome.SUBMITTED
_log = logging.getLogger("agentwrap.delivery")


class Eyes(DraftFlag, Asking, Protocol):
    """What a turn reads of the detector: a draft in the box, the question asked."""


class Keyboard(Protocol):
    """The session's terminal as this delivery asks it: whether a person holds
    the keyboard from a page (a take-over), however long since their last key."""

    def held(self) -> bool: ...


class Supervising(Protocol):
    """The supervisor as this delivery's turn reads it (the sessions layer's
    part host is one)."""

    @property
    def detector(self) -> Eyes: ...

    @property
    def term(self) -> Keyboard: ...


def steer_priorities(mode: str) -> frozenset[Priority]:
    """The priorities ``[delivery] steer = mode`` steers into a running turn
    (empty: none, every message waits for the turn's end)."""
    if mode == "all":
        return frozenset(Priority)
    if mode == "high":
        return frozenset({Priority.HIGH, Priority.CRITICAL})
    return frozenset()


def server_takes(state: AppServerState) -> frozenset[Kind]:
    """The kinds of message the app-server delivers for a session on it: all
    it can take (everything but the raw commands and the supervisor's own
    notices, which only typing can deliver), until the server is declared dead
    (:meth:`AppServerState.dead`). The typing engine leaves these alone, also
    while the server is merely not ready yet (starting, being started again,
    its thread not known): one channel per session mode. Typed meanwhile, a
    message met a thread the TUI's screen called idle but the server had just
    started a turn on (Codex submits it into that turn, and asks the model
    again with it: one message in two requests)."""
    dead = state.dead()
    return frozenset(k for k in Kind if channel_for({APP_SERVER}, AgentState.IDLE, k,
                                                     server_dead=dead) == APP_SERVER)


def app_server_batches(store: MessageStore, session: str) -> set[str]:
    """The session's batches in flight through the app-server: never typed."""
    return {m.batch_id for m in store.in_flight(session)
            if m.batch_id and _last_channel(store, m) == CHANNEL}


def _last_channel(store: MessageStore, m: Message) -> str | None:
    attempts = store.attempts(m.id)
    return attempts[-1].channel if attempts else None


class AppServerDelivery:
    """The part that starts turns with the due messages (see the module doc)."""

    RECHECK_S = 1.0

    def __init__(self, state: AppServerState, store: MessageStore, audit: AuditLog, session: str,
                 *, ack_wording: str, require_ack: bool, ack_patterns: Sequence[str],
                 syntax: SyntaxSpec | None, limit_chars: int, ack_timeout_s: float = 5.0,
                 steer: frozenset[Priority] = frozenset()) -> None:
        self.state, self.store, self.audit, self.session = state, store, audit, session
        self.steer = steer  # the priorities steered into a running turn
        self.ack_wording, self.require_ack = ack_wording, require_ack
        self.ack_patterns, self.syntax, self.limit_chars = tuple(ack_patterns), syntax, limit_chars
        self.ack_timeout_s = ack_timeout_s
        self._recovered = False
        self._refused_turn: str | None = None  # the last turn that refused a steer
        self._started_at: float | None = None  # monotonic: our last turn/start went out
        #: batches sent whose outcome the thread's items do not tell yet: why, and
        #: the thread they went to (the TUI may have moved on since: /new, /resume)
        self._undecided: dict[str, tuple[list[Message], str, str]] = {}
        #: batches awaiting their ACK: the messages, the patterns, since when idle
        self._acks: dict[str, tuple[list[Message], list[re.Pattern[str]], float | None]] = {}
        self._ack_thread: dict[str, str] = {}  # batch -> the thread its ACK is looked for in

    # ------------------------------------------------------------------ the turn

    def turn(self, sup: Supervising) -> float | None:
        status = self.state.status()
        client = self.state.client()
        thread = self.state.thread_id
        if status is None or client is None or thread is None:
            return self.RECHECK_S  # not ready: waited for (typed only once dead, server_takes)
        if not self._recovered:
            self._recover(thread)
            self._recovered = True
        for token, (batch, why, went_to) in list(self._undecided.items()):
            self._settle(went_to, batch, token, why)
        if status.kind != "idle":
            dialog = any(f.startswith("waitingOn") for f in status.flags) \
                or sup.detector.question is not None
            now = AgentState.DIALOG if dialog else AgentState.BUSY
            if status.kind == "active" and any(
                    channel_for({APP_SERVER}, now, Kind.INSTRUCTION, p, steer=self.steer)
                    == APP_SERVER for p in Priority):
                self._steer(thread)  # the rest waits for the turn's end
            return self.RECHECK_S
        if self._starting():
            return self.RECHECK_S  # the server's word on our turn wakes the supervisor
        self._look_for_acks(thread)
        if sup.detector.draft or sup.term.held():
            # the person is typing, or holds the keyboard from a page (a take-over,
            # however long since their last key): after their turn, not under them
            return self.RECHECK_S
        self._send(thread, None)
        return self.RECHECK_S

    def _starting(self) -> bool:
        """Our last turn/start went out after the server last said the thread
        was idle: that idle is stale, the turn is starting. Another turn/start
        now would not be a turn of its own: Codex 0.169.0 puts its input into
        the starting turn and asks the model again with both (the first
        message reached the model in two requests; seen in
        tests/e2e/test_send_at_start.py with the burst after the start-up context)."""
        started = self._started_at
        if started is None:
            return False
        changed = self.state.changed_at
        if (changed is not None and changed >= started) \
                or time.monotonic() - started >= STALE_IDLE_S:
            self._started_at = None
            return False
        return True

    def _ack_for(self, batch: Sequence[Message]) -> str | None:
        from ..delivery.handover import ack_rule

        return ack_rule(self.require_ack, self.ack_wording)(batch)

    def _steer(self, thread: str) -> None:
        """A due message of a steered priority goes into the running turn."""
        from ..delivery.handover import CONSUMABLE_KINDS

        if not self.store.peek(self.session, kinds=CONSUMABLE_KINDS, due=True, limit=1,
                               priorities=self.steer):
            return
        client = self.state.client()
        try:
            running = client.running_turn(thread) if client is not None else None
        except AppServerError:
            return
        # None: it has just ended, the next turn() sends it; a turn that refused a
        # steer (one that cannot be steered) is not asked again: its end is awaited
        if running is not None and running != self._refused_turn:
            self._send(thread, running)

    def _send(self, thread: str, running: str | None) -> None:
        """Claim the due messages and send them: ``turn/start`` when idle
        (``running`` None), else ``turn/steer`` into the turn ``running``
        (only the steered priorities)."""
        from ..delivery.handover import claim, compose

        ack_for = self._ack_for
        got = claim(self.store, self.session, channel=CHANNEL, limit_chars=self.limit_chars,
                    ack_for=ack_for, priorities=self.steer if running is not None else None,
                    whole_first=True)
        if got is None:
            return
        batch = list(got.messages)
        ack = ack_for(batch)
        text = compose(batch, got.token, ack, got.left, syntax=self.syntax)
        method = "turn/start" if running is None else "turn/steer"
        client = self.state.client()
        got.handed(f"{method} sent with clientUserMessageId {got.token}")  # before it goes out
        try:
            if client is None:
                raise AppServerError("the app-server connection is gone")
            if running is None:
                self._started_at = time.monotonic()  # before: its word may come first
                self.state.note_turn_start(thread)
                turn = client.start_turn(thread, text, got.token)
            else:  # refused (AppServerRefused) when the turn has ended meanwhile
                turn = client.steer(thread, running, text, got.token)
        except AppServerRefused as exc:  # it did nothing: back to the queue at once
            if running is None:
                self._started_at = None
            self._refused_turn = running
            self._release(batch, got.token, f"{method} refused: {exc}")
            return
        except AppServerError as exc:  # it may have: the thread's items decide
            self._settle(thread, batch, got.token, f"{method} failed: {exc}")
            return
        receipt = f"{method}: turn {turn} (client id {got.token})"
        if ack is None:
            self._delivered(batch, got.token, receipt)
        else:
            self._submitted(batch, got.token, receipt, thread)

    # ------------------------------------------------------------------ records

    def _delivered(self, batch: Sequence[Message], token: str, evidence: str,
                   outcome: str = AttemptOutcome.DELIVERED) -> None:
        from ..message import Status

        self._record(batch, token, outcome, evidence)
        self.store.finish(Status.DELIVERED, f"delivered: consumed through {CHANNEL} ({evidence})",
                          batch_id=token, consumed_through=CHANNEL)
        self.audit.write(event="consumed", session=self.session, channel=CHANNEL,
                         ids=[m.id for m in batch])
        _log.info("batch %s delivered through %s: %s", token, CHANNEL, evidence)

    def _record(self, batch: Sequence[Message], token: str, outcome: str,
                evidence: str) -> None:
        """Each message's attempt through the server ends now with ``outcome``
        (begun when it was handed, as the write-ahead record says)."""
        now = time.time()
        for m in batch:
            handed = [a for a in self.store.attempts(m.id) if a.number == m.attempts + 1]
            began = handed[0].started if handed else now
            self.store.record_attempt(Attempt(m.id, token, m.attempts + 1, began, now, CHANNEL,
                                              outcome, evidence))

    def _submitted(self, batch: Sequence[Message], token: str, evidence: str,
                   thread: str) -> None:
        """In the thread, awaiting its ACK (as a typed batch waits for its own)."""
        from ..message import Phase

        self._record(batch, token, SUBMITTED, evidence)
        self.store.set_phase(token, Phase.SUBMITTED)
        self._expect_ack(batch, token, thread)
        _log.info("batch %s submitted through %s: %s", token, CHANNEL, evidence)

    def _settle(self, thread: str, batch: Sequence[Message], token: str, why: str) -> None:
        """The outcome of a send not known: the thread's items decide. Found,
        the batch is delivered. Not found is final only once the thread has been
        idle a moment: an accepted steer (or turn) is listed in the items some
        tens of milliseconds after the server's answer (measured on 0.169.0);
        until then the batch stays in flight and is looked for again at each
        turn, in the items since it was handed. ``thread`` is the one it was sent
        to, also after the TUI moved to another (/new, /resume): exactly once."""
        self._undecided.pop(token, None)
        client = self.state.client()
        handed = [a for a in self.store.attempts(batch[0].id) if a.number == batch[0].attempts + 1]
        try:
            found = client.find_message(thread, token, since=handed[0].started if handed else None) \
                if client is not None else None
        except AppServerError:
            found = None
            client = None  # unknown still
        if found is not None:
            receipt = f"found in turn {found.turn_id} (client id {token})"
            if self._ack_for(batch) is None:
                self._delivered(batch, token, receipt)
            else:
                self._submitted(batch, token, receipt, thread)
            return
        self.state.status()  # the connection's look (reconnects when due)
        status = self.state.status_of(thread)
        since = self.state.changed_at
        quiet = status is not None and status.kind == "idle" \
            and (since is None or time.monotonic() - since >= SETTLE_IDLE_S)
        if client is None or not quiet:
            self._undecided[token] = (list(batch), why, thread)
            return
        self._release(batch, token, why)

    def _release(self, batch: Sequence[Message], token: str, why: str) -> None:
        """The batch never reached the thread: back to the queue (a counted attempt)."""
        now = time.time()
        for m in batch:
            self.store.record_attempt(Attempt(m.id, token, m.attempts + 1, now, now, CHANNEL,
                                              AttemptOutcome.NOT_HANDED, why))
        self.store.retry_later(token, now, why)
        _log.info("batch %s back to the queue: %s", token, why)

    def _recover(self, thread: str) -> None:
        """After a supervisor crash: batches handed to the server whose answer was
        never recorded are delivered (the thread has our client id) or queued again."""
        by_token: dict[str, list[Message]] = {}
        waiting: dict[str, list[Message]] = {}
        for m in self.store.in_flight(self.session):
            attempts = self.store.attempts(m.id)
            if not (m.batch_id and attempts and attempts[-1].channel == CHANNEL):
                continue
            if attempts[-1].outcome == HANDED:
                by_token.setdefault(m.batch_id, []).append(m)
            elif attempts[-1].outcome == SUBMITTED:
                waiting.setdefault(m.batch_id, []).append(m)
        for token, batch in by_token.items():
            self._settle(thread, batch, token, "the supervisor stopped before the server answered")
        for token, batch in waiting.items():  # its ACK may be in the thread already
            self._expect_ack(batch, token, thread)

    # ------------------------------------------------------------------ ACKs

    def _expect_ack(self, batch: Sequence[Message], token: str, thread: str) -> None:
        patterns = [re.compile(p.replace("{token}", re.escape(token)), re.IGNORECASE)
                    for p in self.ack_patterns]
        self._acks[token] = (list(batch), patterns, None)
        self._ack_thread[token] = thread

    def _look_for_acks(self, thread: str) -> None:
        """The thread's agent messages since the batches went (their items: no
        subscription needed, nothing read off the screen) carry their ACKs. A
        batch sent to a thread the TUI has left since is looked for there, once
        that thread is idle too."""
        if not self._acks:
            return
        client = self.state.client()
        if client is None:
            return
        said: dict[str, list[AgentMessage]] = {}
        now = time.time()
        for token, (batch, patterns, idle_since) in list(self._acks.items()):
            went_to = self._ack_thread.get(token, thread)
            if went_to not in said:
                other = self.state.status_of(went_to) if went_to != thread else None
                if other is not None and other.kind != "idle":
                    continue  # the left thread still runs: its reply is not complete
                try:
                    said[went_to] = client.agent_messages(went_to, limit=ACK_ITEMS)
                except AppServerError:
                    return
            hit = next((m for m in said[went_to] if any(p.search(m.text) for p in patterns)),
                       None)
            ids = [m.id for m in batch]
            if hit is None:
                if idle_since is None:  # the thread is idle: the reply is complete
                    self._acks[token] = (batch, patterns, now)
                elif now - idle_since >= self.ack_timeout_s:
                    del self._acks[token]
                    self._ack_thread.pop(token, None)
                    self._delivered(batch, token, "in the thread; its ACK never came",
                                    outcome=UNACKNOWLEDGED)
                continue
            del self._acks[token]
            self._ack_thread.pop(token, None)
            for m in batch:
                self.store.record_attempt(Attempt(m.id, token, m.attempts + 1, now, now, CHANNEL,
                                                  AttemptOutcome.ACKNOWLEDGED,
                                                  f"turn {hit.turn_id}, item {hit.item_id}:"
                                                  f" {hit.text[:200]}"))
                self.store.acknowledge(m.id, f"acknowledged: {hit.text[:200]} (through {CHANNEL})")
            self.audit.write(event="acknowledged", session=self.session, channel=CHANNEL, ids=ids)
            _log.info("batch %s acknowledged in item %s", token, hit.item_id)

    def close(self, ended: object) -> None:
        self.state.close()


__all__ = ["CHANNEL", "AppServerDelivery", "Eyes", "Supervising", "app_server_batches",
           "server_takes", "steer_priorities"]
