"""The delivery engine: queued messages into the agent's input, provably.

One turn (:meth:`DeliveryEngine.step`, called by the supervisor):

1. **Window** (:mod:`.window`). Only when the agent is ready (or busy, for
   high/critical messages, when the profile says it takes input while busy),
   no dialog is open, the input box holds no draft, the person has not typed
   for ``typing_grace_ms`` and the agent's start-up is complete.
2. **Batch.** Everything due, highest priority first, up to
   ``max_injection_bytes``, rendered as one marked block (:mod:`.framing`).
3. **Verified submit.** Paste; confirm by *content* that the block (its
   token) or the agent's paste placeholder is in the input box; press the
   submit key after the profile's delay; confirm that the box no longer holds
   it and the block appears above the box or the agent turns busy. The submit
   key is re-sent only while the text is still in the box. What the screen
   proves is read by :mod:`.evidence`.
4. **ACK** when asked: the profile's ACK patterns, searched only below the
   echoed block, in the reply's rows joined where the TUI or the terminal
   wrapped them (:mod:`.replies`), until ``ack_timeout_s`` after the agent
   goes quiet; or found by another channel in the agent's whole reply (the
   turn-end hook, MCP's acknowledge), which ends the batch in the store: the
   wait sees it there (:meth:`.AckWait.settled`).
5. **Retry** with backoff; after ``fallback_after`` failed attempts, write the
   instruction-file fallback section and notify (:mod:`.escalation`).

**A message the model may have seen is never typed again.** Retrying is for
attempts that never got the block to the agent (not pasted, not submitted,
no window). Once the screen proved the submission (the block left the box
and shows above it, its placeholder does, or the turn went busy) the phase
SUBMITTED is stored, and from there the batch has three ends only:
acknowledged; delivered, not acknowledged (the agent exited; no file to
write to: attempt outcome ``unacknowledged``); or, its ACK never come,
escalated to the instruction file at once, whatever ``fallback_after``
allows. :meth:`DeliveryEngine._failed` reads the stored phase
(:func:`was_submitted`), not the attempt's outcome, to decide: a batch the store says was submitted is given
up, never put back in the queue; a restarted supervisor resumes it as
awaiting its ACK (``_run_phases``), never pastes it. Before issue 35.2 a
wrapped ACK went unseen and the message reached the model three times.

This module is the state machine that ties them: every step is preceded by a
write-ahead phase in the store (claimed -> pasting -> submitting ->
submitted), so a supervisor killed at any point and restarted resumes
without typing anything twice (:meth:`DeliveryEngine._resume`).

A batch between turns (a block held in the box, a batch a restarted
supervisor found in flight) is *parked*: it takes its next step only when
the screen lets it (:meth:`DeliveryEngine._parked_blocked`). Nothing of a
claimed batch is typed before the typing window opens, as for a new one; a
block that may be in the box already waits while a dialog hides the box,
since a hidden box proves neither that it is there (submit) nor that it is
not (paste again). A screen that does not let it for ``readiness_timeout_s``
fails the attempt as a shut window does, and a block that may be in the box
stays held in flight rather than going back to be pasted again.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from ..audit import AuditLog
from ..config import Config, DeliveryConfig, load_config
from ..detect.profiles import Profile
from ..detect.states import State
from ..errors import AgentExited, AgentwrapError, BackendError
from ..message import (
    UNACKNOWLEDGED,
    Attempt,
    AttemptOutcome,
    Kind,
    Message,
    Phase,
    Priority,
    Status,
)
from ..paths import Paths
from ..queue.backend import configured_store
from ..queue.rules import due_run
from ..queue.store import MessageStore
from .ack import AckWait
from .choice import busy_channel_of
from .escalation import Escalation, is_raw
from .evidence import POLL_S, ScreenEvidence, screen_tail
from .fallback import context_file
from .framing import Injection, new_token, render, render_raw
from .handover import ack_rule
from .outcome import Outcome
from .seams import Driver, SessionInfo
from .window import TypingWindow

log = logging.getLogger("agentwrap.delivery")
HELD_RECHECK_S = 1.0  # how often messages another channel holds are looked at


def end_queue(store: MessageStore, audit: AuditLog, session: str, reason: str, *,
              unacknowledged: Callable[[list[Message], str], None] | None = None) -> int:
    """The session ended: every message still pending or in flight for it gets
    its terminal state, so nothing waits for a session that is gone (the
    supervisor's :meth:`DeliveryEngine.abandon`; ``agentwrap stop`` of a session
    whose supervisor is dead, :mod:`agentwrap.sessions.lifecycle`).

    A batch whose submission was already proven (phase SUBMITTED, e.g.
    waiting for its ACK) reached the agent: it is *delivered*, never failed
    (``unacknowledged`` is told of them first). Anything earlier is not proven
    to have gone in: failed."""
    in_flight = store.in_flight(session)
    submitted = [m.id for m in in_flight if m.phase is Phase.SUBMITTED]
    ids = [m.id for m in in_flight if m.phase is not Phase.SUBMITTED]
    ids += [m.id for m in store.peek(session)]
    n = 0
    if submitted:
        why = f"submitted; not acknowledged before {reason}"
        if unacknowledged is not None:
            unacknowledged([m for m in in_flight if m.phase is Phase.SUBMITTED], why)
        n += store.finish(Status.DELIVERED, f"delivered: {why}", message_ids=submitted)
    if ids:
        n += store.finish(Status.FAILED, reason, message_ids=ids)
    if submitted or ids:
        audit.write(event="abandoned", session=session, ids=ids, delivered=submitted,
                    reason=reason)
    return n


class DeliveryEngine:
    """One session's typed delivery: the write-ahead state machine of its
    batches, with the typing window, the screen evidence and the escalation
    as its parts (built here from the constructor's arguments)."""

    def __init__(
        self,
        store: MessageStore,
        cfg: DeliveryConfig,
        profile: Profile,
        session: str,
        fallback_dir: Path,
        audit: AuditLog,
        *,
        require_ack: bool | None = None,
        lock_dir: Path | None = None,
        raw_sources: Callable[[], Iterable[str]] = lambda: ("user",),
        busy_channel: str | None = None,
        clock: Callable[[], float] = time.time,
        foreign_batches: Callable[[], Collection[str]] = frozenset,
        awaits_start_hook: Callable[[], bool] = lambda: False,
        taken_kinds: Callable[[], Collection[Kind]] = frozenset,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.profile = profile
        self.session = session
        self.audit = audit
        self.require_ack = cfg.require_ack if require_ack is None else require_ack
        # Sources whose messages may be typed as is (config [trust]), read when
        # a raw message is due: checked again here although the service checks
        # at enqueue, since the store may have other writers.
        self.raw_sources = raw_sources
        self.clock = clock
        # ``busy_channel``: one that reaches the agent's running turn (its
        # hooks); ``awaits_start_hook``: its SessionStart hook is still to run.
        self.typing_window = TypingWindow(cfg, profile, busy_channel=busy_channel,
                                          awaits_start_hook=awaits_start_hook)
        self.evidence = ScreenEvidence(cfg, profile, clock)
        self.escalation = Escalation(store, cfg, profile, session, fallback_dir, audit,
                                     lock_dir=lock_dir, clock=clock)
        self._resumed = False
        self._channel = "tmux-paste"  # the typing channel last used (the backend's)
        self._leftovers_checked = False  # the section's unacknowledged entries, at start
        self._next_expiry = 0.0  # expire overdue messages on the first turn
        # parked batches (held in the box, or resumed): token -> when to take their next step
        self._parked: dict[str, float] = {}
        self._ack: AckWait | None = None  # the batch whose ACK is awaited
        self._ack_patterns = [*cfg.ack_patterns, *profile.ack_patterns]
        # batches in flight through another channel of the supervisor (Aider's
        # read file): never resumed (typed) here
        self.foreign_batches = foreign_batches
        self.taken_kinds = taken_kinds  # never typed here (:func:`typed_kinds`)
        self.owns_store = True  # closed with the engine (False: a shared one, closed by its opener)

    @classmethod
    def for_session(
        cls, paths: Paths, cfg: Config, profile: Profile, rec: SessionInfo, *,
        store: MessageStore | None = None,
        foreign_batches: Callable[[], Collection[str]] = frozenset,
        awaits_start_hook: Callable[[], bool] = lambda: False,
        taken_kinds: Callable[[], Collection[Kind]] = frozenset,
    ) -> DeliveryEngine:
        """The engine of one session, its collaborators built from the state dir
        (``store``: one the composition root opened and shares; else its own)."""
        require_ack = rec.options.require_ack
        fallback_dir = Path(rec.cwd)
        if profile.context_file_arg and profile.instruction_file:
            # The file the agent was launched to read (see session.agent_argv).
            fallback_dir = context_file(paths.state_dir, rec.name, profile.instruction_file).parent
        engine = cls(
            store or configured_store(paths.db_path, cfg, events_dir=paths.events_dir),
            cfg.delivery,
            profile,
            rec.name,
            fallback_dir,
            AuditLog(paths.audit_log),
            require_ack=require_ack if isinstance(require_ack, bool) else None,
            lock_dir=paths.runtime_dir / "locks",
            raw_sources=functools.partial(_trusted_raw_sources, paths, rec),
            busy_channel=busy_channel_of(rec.options),
            foreign_batches=foreign_batches,
            awaits_start_hook=awaits_start_hook,
            taken_kinds=taken_kinds,
        )
        if rec.options.container and rec.options.container_engine:  # issue 39
            from ..containers.box import write_guard

            engine.escalation.guard = write_guard(rec.options.container_engine,
                                                  rec.options.container)
        engine.owns_store = store is None
        return engine

    def close(self) -> None:
        if self.owns_store:
            self.store.close()

    # --- the supervisor's turn ---------------------------------------------------------

    def step(self, sup: Driver) -> float | None:
        try:
            return self._step(sup)
        except Exception:
            # A store error (locked, disk full) or a backend failure mid-batch
            # may leave a batch claimed: the next turn resumes it from its
            # write-ahead phase, as a restarted supervisor would.
            self._resumed = False
            raise

    def _step(self, sup: Driver) -> float | None:
        if not self._resumed:
            self._resumed = True
            self._resume()
            if not self._leftovers_checked:
                self._leftovers_checked = True
                self.escalation.announce_leftovers()
        if self._ack is not None:
            wait = self._check_ack(sup)
            if wait is not None:
                return wait
        now = self.clock()
        if self._parked:
            wait = self._step_parked(sup, now)
            if wait is not None:
                return wait
        if now >= self._next_expiry:
            # peek() merely hides a message whose TTL passed; nothing else marks it
            # EXPIRED, so `send --wait` and `history` would show it pending forever.
            self.store.expire_overdue(now)
        queued = self.store.peek(self.session, now)
        self._next_expiry = min((m.expires for m in queued), default=math.inf)
        kinds = typed_kinds(self.taken_kinds())
        upcoming = [m for m in queued if kinds is None or m.kind in kinds]
        due = list(due_run(upcoming, now, lambda m: m.next_attempt_at))  # as a claim takes
        if not due:
            self.typing_window.opened()
            return _wake(now, self._next_expiry, upcoming, held=len(upcoming) < len(queued))
        reason = self.window(sup, due[0].priority)
        if reason is not None:
            return self._shut(sup, now, functools.partial(self._no_window, reason))
        self.typing_window.opened()
        token = new_token()
        batch = self._claim(token, now, rows=sup.snap.rows if sup.snap is not None else None,
                            kinds=kinds)
        if batch:
            self._deliver(sup, token, batch, Phase.CLAIMED)
        return 0.05

    def _shut(self, sup: Driver, now: float, fail: Callable[[], None]) -> float | None:
        """The screen does not let the next step happen now: wait, or ``fail``
        the attempt once it has not for the readiness timeout."""
        if sup.reading.state is State.EXITED:
            return None
        if self.typing_window.awaits_start_hook():
            return 0.1  # a short wait of its own (bounded), not a failed attempt
        if self.typing_window.shut_too_long(sup, now):
            fail()
            return 0.05
        return 0.1

    def _step_parked(self, sup: Driver, now: float) -> float | None:
        """The next step of a parked batch: a block left in the box by an
        earlier attempt (press submit again), or a batch a restarted supervisor
        found in flight (resume from its phase), once the screen lets it."""
        token, due_at = min(self._parked.items(), key=lambda kv: kv[1])
        if due_at > now:
            return None if not self.store.peek(self.session, now) else min(0.5, due_at - now)
        batch = [m for m in self.store.in_flight(self.session) if m.batch_id == token]
        if not batch:
            del self._parked[token]  # ended meanwhile (abandoned, given up)
            return 0.05
        phase = batch[0].phase or Phase.CLAIMED
        reason = self.typing_window.resume_reason(sup, phase, max(m.priority for m in batch))
        if reason is not None:
            return self._shut(sup, now, functools.partial(
                self._parked_shut_out, sup, token, batch, phase, reason))
        del self._parked[token]
        self.typing_window.opened()
        self._deliver(sup, token, batch, phase)
        return 0.05

    def _parked_shut_out(
        self, sup: Driver, token: str, batch: list[Message], phase: Phase, reason: str
    ) -> None:
        """A parked batch the screen did not let go on for the readiness
        timeout: a failed attempt; one that may have left its block in the
        box stays held in flight (its next attempt resumes from its phase)."""
        del self._parked[token]
        in_box = False if phase is Phase.CLAIMED else None
        self._window_failed(sup, token, batch, reason, in_box=in_box)

    def window(self, sup: Driver, priority: Priority) -> str | None:
        """None when typing is safe now, else why not (:meth:`TypingWindow.reason`)."""
        return self.typing_window.reason(sup, priority)

    # --- one batch -----------------------------------------------------------------------

    def ack_wording(self, batch: Sequence[Message]) -> str | None:
        """The ACK request a batch carries (None: none), whichever channel hands it over."""
        if any(m.kind is Kind.FALLBACK_NOTICE for m in batch):
            # The notice's ACK is what lets the section go (Escalation.after_success):
            # asked whenever the section is to be removed at all.
            return self.cfg.ack_wording if self.escalation.removes_fallback() else None
        return ack_rule(self.require_ack, self.cfg.ack_wording)(batch)

    def _claim(self, token: str, now: float | None = None, rows: int | None = None,
               kinds: frozenset[Kind] | None = None) -> list[Message]:
        """The next batch (of ``kinds``, None: any); a raw session types one message
        at a time. ``rows``: the screen's height, which a block must stay within."""
        max_bytes = 0 if self.profile.raw else self.cfg.max_injection_bytes
        limit = fit(self.store, self.session, self.profile, rows, now, kinds) \
            if rows and not self.profile.raw else None
        return self.store.claim_batch(self.session, token, max_bytes, now, limit=limit,
                                      kinds=kinds)

    def _render(self, batch: Sequence[Message], token: str) -> Injection:
        if is_raw(self.profile, batch):
            return render_raw(batch[0], token=token, tabs_as_spaces=self.profile.input.tabs_as_spaces)
        return render(
            batch, token=token, ack_wording=self.ack_wording(batch),
            tabs_as_spaces=self.profile.input.tabs_as_spaces, syntax=self.profile.syntax,
        )

    def _untrusted_raw(self, batch: list[Message]) -> bool:
        """End (failed) a raw batch from a source not trusted with raw input;
        nothing of it is typed."""
        if not is_raw(self.profile, batch):
            return False
        trusted = set(self.raw_sources())
        bad = sorted({str(m.source) for m in batch if str(m.source) not in trusted})
        if not bad:
            return False
        what = "a shell" if self.profile.shell else "raw input"
        detail = (f"refused: source {', '.join(bad)} may not type {what} into this session"
                  " ([trust] raw_sources in your config)")
        self.store.finish(Status.FAILED, detail, message_ids=[m.id for m in batch])
        self.audit.write(event="refused_raw", session=self.session,
                         ids=[m.id for m in batch], sources=bad)
        log.warning("batch: %s", detail)
        return True

    def _deliver(self, sup: Driver, token: str, batch: list[Message], phase: Phase) -> None:
        if phase is Phase.CLAIMED and self._untrusted_raw(batch):
            return
        inj = self._render(batch, token)
        started = self.clock()
        channel = self._channel = f"{sup.term.backend}-paste"
        try:
            result = self._run_phases(sup, inj, batch, phase)
        except AgentExited as exc:
            result = Outcome(False, AttemptOutcome.AGENT_EXITED, str(exc))
        except BackendError as exc:
            result = Outcome(False, AttemptOutcome.ERROR, str(exc))
        if result.outcome == AttemptOutcome.AWAITING_ACK:
            self._await_ack(inj, batch, started, channel, result.evidence)
            return
        self._conclude(sup, inj, batch, started, channel, result)

    def _conclude(
        self, sup: Driver | None, inj: Injection, batch: list[Message], started: float,
        channel: str, result: Outcome,
    ) -> None:
        """Record the attempt and move the batch to its next status."""
        token = inj.token
        batch = [m for m in batch if m.id in inj.message_ids]
        if result.outcome == AttemptOutcome.NO_ACK:
            batch = self.escalation.unacknowledged_notices(inj, batch, started, channel, result)
            if not batch:
                return
        # delivered with its ACK asked: the wait ended without one (the agent exited)
        outcome = UNACKNOWLEDGED if result.ok and result.outcome == AttemptOutcome.DELIVERED \
            and inj.ack_requested else result.outcome
        for m in batch:
            self.store.record_attempt(
                Attempt(m.id, token, m.attempts + 1, started, self.clock(), channel,
                        outcome, result.evidence[:2000])
            )
        self.audit.write(
            event="injection", session=self.session, batch=token,
            ids=list(inj.message_ids), sources=sorted({str(m.source) for m in batch}),
            bytes=len(inj.text.encode()), channel=channel, outcome=outcome,
            started=started, finished=self.clock(),
        )
        if result.ok:
            status = Status.ACKNOWLEDGED if result.outcome == AttemptOutcome.ACKNOWLEDGED else Status.DELIVERED
            self.store.finish(status, f"{result.outcome}: {result.evidence}"[:500], batch_id=token)
            self.escalation.after_success(batch, token, result)
        elif result.outcome == AttemptOutcome.AGENT_EXITED:
            self.store.finish(Status.FAILED, f"agent exited: {result.evidence}", batch_id=token)
        else:
            self._failed(sup, token, batch, result, in_box=self._left_in_box(sup, inj, result))

    def _left_in_box(self, sup: Driver | None, inj: Injection, result: Outcome) -> bool | None:
        """Whether a failed paste or submit left our block in the input box:
        True (seen there), None (the box is hidden, by a dialog say: it may
        be), False. Either of the first two holds the batch in flight, so
        that it is never pasted a second time behind the first."""
        if sup is None or result.outcome not in (AttemptOutcome.PASTE_NOT_SEEN,
                                                     AttemptOutcome.SUBMIT_NOT_CONFIRMED):
            return False
        return self.evidence.in_box(sup, inj)

    def _run_phases(
        self, sup: Driver, inj: Injection, batch: list[Message], phase: Phase
    ) -> Outcome:
        if phase in (Phase.CLAIMED, Phase.PASTING):
            live = self.store.set_phase(inj.token, Phase.PASTING)
            if {m.id for m in live} != set(inj.message_ids):
                if not live:
                    return Outcome(False, AttemptOutcome.ERROR, "every message of the batch expired")
                inj = self._render(live, inj.token)
            # Resuming PASTING after a restart: the earlier paste may still be on its
            # way to the screen (a slow or stalled agent has not drawn it yet). Give it
            # as long as a fresh paste gets before deciding it never went out; one
            # look at the box was not enough and typed the block twice. A box still
            # hidden then (a dialog over it) proves nothing either way: not pasted.
            pasted = self.evidence.in_box_within(sup, inj, self.cfg.paste_timeout_s) \
                if phase is Phase.PASTING else False
            if pasted is None:
                return Outcome(False, AttemptOutcome.PASTE_NOT_SEEN,
                               "input box hidden, the earlier paste may be in it: "
                               + screen_tail(sup))
            if not pasted:
                sup.term.paste(inj.text, bracketed=self.profile.input.bracketed_paste)
            seen = self.evidence.wait_until(sup, self.cfg.paste_timeout_s, lambda: self.evidence.in_box(sup, inj) is True)
            if not seen:
                return Outcome(False, AttemptOutcome.PASTE_NOT_SEEN, screen_tail(sup))
            phase = Phase.SUBMITTING
            self.store.set_phase(inj.token, Phase.SUBMITTING)
            self.evidence.pause(sup, self.profile.input.submit_delay_ms / 1000)
        if phase is Phase.SUBMITTING:
            submitted = self._submit(sup, inj)
            if not submitted.ok:
                return submitted
            self.store.set_phase(inj.token, Phase.SUBMITTED)
            if not inj.ack_requested:
                return Outcome(True, AttemptOutcome.DELIVERED, submitted.evidence)
            return Outcome(True, AttemptOutcome.AWAITING_ACK, submitted.evidence)
        if inj.ack_requested:
            return Outcome(True, AttemptOutcome.AWAITING_ACK, "submitted before a supervisor restart")
        return Outcome(True, AttemptOutcome.DELIVERED, "submitted before a supervisor restart")

    def _submit(self, sup: Driver, inj: Injection) -> Outcome:
        key = self.profile.input.submit_key
        for pressed in range(self.profile.input.submit_retries + 1):
            where = self.evidence.box_seen(sup, inj)
            if sup.reading.state in (State.WAITING_INPUT, State.UNKNOWN):
                # Never press the submit key into a dialog: it would answer it.
                if pressed:
                    return Outcome(True, AttemptOutcome.SUBMITTED, "a dialog opened after the submit key")
                return Outcome(False, AttemptOutcome.SUBMIT_NOT_CONFIRMED, "a dialog opened before submitting")
            if where is None:
                # The input box is not on screen (a redraw, an overlay): pressing
                # Enter blind could answer something else; claiming success could
                # lose the message. Neither: this attempt fails and is retried.
                return Outcome(False, AttemptOutcome.SUBMIT_NOT_CONFIRMED, "input box not found on screen")
            if where is False:
                # Not in the box any more (restart after the key went out).
                ev = self.evidence.submitted(sup, inj)
                return Outcome(True, AttemptOutcome.SUBMITTED, ev or "input box no longer holds the block")
            was_busy = sup.reading.state is State.BUSY
            sup.term.send_key(key)
            found: list[str] = []
            done = functools.partial(self.evidence.confirmed, sup, inj, was_busy, found)

            if self.evidence.wait_until(sup, self.cfg.submit_timeout_s, done):
                return Outcome(True, AttemptOutcome.SUBMITTED, found[-1])
            if self.evidence.in_box(sup, inj) is False:
                # The box emptied but nothing else showed up; never type it again.
                return Outcome(True, AttemptOutcome.SUBMITTED, "input box emptied after the submit key")
        return Outcome(False, AttemptOutcome.SUBMIT_NOT_CONFIRMED, screen_tail(sup))

    def _await_ack(
        self, inj: Injection, batch: list[Message], started: float, channel: str, submitted: str
    ) -> None:
        self._ack = AckWait.begin(inj, batch, started, channel, submitted, self._ack_patterns,
                                  hard_stop=self.clock() + self.cfg.readiness_timeout_s * 4)

    def _check_ack(self, sup: Driver) -> float | None:
        """One look for the awaited ACK; the seconds until the next look, or
        None once the wait has ended (acknowledged, here or through another
        channel; timed out; agent gone)."""
        w = self._ack
        assert w is not None
        result = (w.settled(self.store, self.session, self.clock())
                  or w.look(sup, self.evidence, self.cfg.ack_timeout_s, self.clock()))
        if result is None:
            return POLL_S * 2
        self._ack = None
        self._conclude(sup, w.inj, w.batch, w.started, w.channel, result)
        return None

    # --- failure, retry, fallback ----------------------------------------------------------

    def _no_window(self, reason: str) -> None:
        """The window stayed shut for the readiness timeout: the due batch's attempt failed."""
        token = new_token()
        batch = self._claim(token)
        if batch:
            self._window_failed(None, token, batch, reason)

    def _window_failed(
        self, sup: Driver | None, token: str, batch: list[Message], reason: str, *,
        in_box: bool | None = False,
    ) -> None:
        """Record an attempt that never got to act (``no_window``) and fail it."""
        now = self.clock()
        for m in batch:
            self.store.record_attempt(
                Attempt(m.id, token, m.attempts + 1, now, now, "none", AttemptOutcome.NO_WINDOW, reason)
            )
        self._failed(sup, token, batch, Outcome(False, AttemptOutcome.NO_WINDOW, reason), in_box=in_box)

    def _failed(self, sup: Driver | None, token: str, batch: list[Message], result: Outcome, *,
                in_box: bool | None = False) -> None:
        """``in_box``: the attempt left the block in the input box (True), or
        may have (None: the box is hidden): the batch is held in flight."""
        detail = f"attempt failed: {result.outcome}"
        where = ("block still in the box" if in_box
                 else "input box hidden: the block may be in it" if in_box is None else "")
        # Submitted, the model may have it: never typed again (the module's doc).
        submitted = was_submitted(self.store, self.session, token)
        give_up = [m for m in batch if submitted or m.attempts + 1 >= self.cfg.fallback_after]
        if give_up:
            if in_box is True:
                result = Outcome(False, result.outcome, "the block is still in the input box")
            elif in_box is None:
                result = Outcome(False, result.outcome,
                                 f"the input box was hidden, the block may be in it: {result.evidence}")
            self.escalation.escalate(sup, give_up, result, submitted=submitted)
        rest = [m for m in batch if m not in give_up]
        if rest:
            n = min(m.attempts for m in rest)  # attempts before this one
            backoff = self.typing_window.backoff(n)
            if where:
                # Our block sits (or may sit) in the input box: the retry must look
                # for it and press the submit key again, not paste a second copy behind it.
                self.store.hold(token, self.clock() + backoff, f"{detail} ({where})")
                self._parked[token] = self.clock() + backoff
            else:
                self.store.retry_later(token, self.clock() + backoff, detail)
        log.info("batch %s: %s (%d to retry, %d given up)", token, result.outcome, len(rest), len(give_up))

    def abandon(self, reason: str) -> int:
        """The session ended: nothing queued for it can be delivered any more
        (:func:`end_queue`); an ACK asked of a submitted batch and never seen
        gets its attempt (:meth:`_unacknowledged`)."""
        waited, self._ack = self._ack, None
        return end_queue(self.store, self.audit, self.session, reason,
                         unacknowledged=lambda msgs, why: self._unacknowledged(msgs, waited, why))

    def _unacknowledged(self, msgs: list[Message], waited: AckWait | None, why: str) -> None:
        """Record the attempt that ends submitted messages whose ACK was asked and
        never came (:data:`~agentwrap.message.UNACKNOWLEDGED`: what ``send --wait``
        and the API tell senders by); one asked none gets no attempt here."""
        now = self.clock()
        for m in msgs:
            if self.ack_wording([x for x in msgs if x.batch_id == m.batch_id]) is None:
                continue
            ours = waited if waited is not None and waited.inj.token == m.batch_id else None
            self.store.record_attempt(Attempt(
                m.id, m.batch_id or "", m.attempts + 1, ours.started if ours else now, now,
                ours.channel if ours else self._channel, UNACKNOWLEDGED, why))

    # --- restart -----------------------------------------------------------------------------

    def _resume(self) -> None:
        """Park the batches a killed supervisor left in flight: each goes on
        from its phase once the screen lets it (:meth:`_step_parked`)."""
        now = self.clock()
        for m in self.store.in_flight(self.session):
            token = m.batch_id
            if not token or token in self._parked \
                    or (self._ack is not None and self._ack.inj.token == token):
                continue  # ours, waiting for its next step
            if token in self.foreign_batches():
                continue  # another channel's, settled by it
            log.info("resuming batch %s from phase %s", token, m.phase or Phase.CLAIMED)
            self._parked[token] = now



def was_submitted(store: MessageStore, session: str, token: str) -> bool:
    """The store says batch ``token`` was submitted (its write-ahead phase,
    stored once the screen proved the block left the box): the agent may have it."""
    return any(m.batch_id == token and m.phase is Phase.SUBMITTED
               for m in store.in_flight(session))


def typed_kinds(taken: Collection[Kind]) -> frozenset[Kind] | None:
    """The kinds of message the engine types (None: every kind): those no
    other channel of the supervisor takes now (``taken``: Codex's app-server
    takes all it can until it is declared dead; never typed, not even while
    that channel is not ready yet)."""
    return frozenset(Kind) - frozenset(taken) if taken else None


def _wake(now: float, expiry: float, upcoming: Sequence[Message], *, held: bool) -> float | None:
    """How long the engine may sleep with nothing due: until the next retry
    of ``upcoming``, or the next TTL (``expiry``, of every queued message:
    those another channel takes are marked expired here too); and not long
    while another channel ``held`` some (it may be declared dead: they are
    typed then). None: nothing queued."""
    wake = min([expiry, *(m.next_attempt_at for m in upcoming),
                now + HELD_RECHECK_S if held else math.inf])
    return max(0.05, wake - now) if wake < math.inf else None


def fit(store: MessageStore, session: str, profile: Profile, rows: int,
        now: float | None, kinds: Collection[Kind] | None = None) -> int | None:
    """How many due messages make a block of at most half the screen's
    rows (at least one): an agent that shows a paste line by line (no
    ``[Pasted text]`` placeholder) grows its input box with it, and a box
    taller than the screen pushes its own edges off it: neither the paste
    nor the submit can be seen, the screen reads as unknown, and every
    message behind it ends in the fallback file. None: no limit."""
    if profile.input.paste_placeholders:
        return None  # a long paste collapses into one line
    budget = max(2, rows // 2 - 2)  # the block's first and last lines aside
    used = n = 0
    for m in store.peek(session, now, due=True, limit=500, kinds=kinds):
        used += m.content.count("\n") + 1
        if n and used > budget:
            break
        n += 1
    return n or None


def _trusted_raw_sources(paths: Paths, rec: SessionInfo) -> tuple[str, ...]:
    """The session's ``[trust] raw_sources`` as the config says *now*; none
    while the config cannot be read (refusing is the safe side)."""
    try:
        return load_config(paths, Path(rec.cwd)).for_profile(rec.profile).trust.raw_sources
    except AgentwrapError as exc:
        log.warning("config unreadable, trusting no source with raw input: %s", exc)
        return ()
