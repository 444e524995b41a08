"""The delivery engine: queued messages into the agent's input, provably.

One turn (:meth:`DeliveryEngine.step`, called by the supervisor):

1. **Window.** Only when the agent is ready (or busy, for high/critical
   messages, when the profile says it takes input while busy), no dialog is
   open, the input box holds no draft, and the person has not typed for
   ``typing_grace_ms``.
2. **Batch.** Everything due, highest priority first, up to
   ``max_injection_bytes``, rendered as one marked block (:mod:`framing`).
3. **Verified submit.** Paste; confirm by *content* that the block (its
   token) or the agent's paste placeholder is in the input box; press the
   submit key after the profile's delay; confirm that the box no longer holds
   it and the block appears above the box or the agent turns busy. The submit
   key is re-sent only while the text is still in the box.
4. **ACK** when asked: the profile's ACK patterns, searched only below the
   echoed block, until ``ack_timeout_s`` after the agent goes quiet.
5. **Retry** with backoff; after ``fallback_after`` failed attempts, write the
   instruction-file fallback section and notify.

Every step is preceded by a write-ahead phase in the store (claimed ->
pasting -> submitting -> submitted), so a supervisor killed at any point and
restarted resumes without typing anything twice.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wcwidth import wcwidth

from ..audit import AuditLog
from ..config import Config, DeliveryConfig, load_config
from ..detect.neutralise import neutralise
from ..detect.profiles import Profile
from ..detect.regions import split_around
from ..detect.states import Signal, State
from ..errors import (
    AgentExited,
    AgentwrapError,
    BackendError,
    DeliveryInterrupted,
    FallbackError,
    MessageNotFound,
)
from ..message import (
    SECTION_REMOVED,
    UNACKNOWLEDGED,
    Attempt,
    Kind,
    Message,
    NewMessage,
    Phase,
    Priority,
    Source,
    Status,
)
from ..paths import Paths
from ..queue.sqlite import SQLiteMessageStore
from ..queue.store import MessageStore
from ..terminal.screen import Snapshot
from .choice import busy_channel_of, busy_reason
from .fallback import (
    FallbackEntry,
    WriteResult,
    context_file,
    notify_desktop,
    read_section,
    remove_section,
    write_section,
)
from .framing import Injection, new_token, render, render_raw
from .handover import ack_rule
from .seams import Driver, SessionInfo

log = logging.getLogger("agentwrap.delivery")

POLL_S = 0.03


@dataclass(frozen=True)
class Outcome:
    ok: bool
    outcome: str  # submitted | acknowledged | delivered | paste_not_seen | submit_not_confirmed | no_ack | no_window | agent_exited | error
    evidence: str


@dataclass
class _AckWait:
    """A submitted batch whose ACK is awaited.

    Waiting is a *state* of the delivery, checked on each of the supervisor's
    turns, never a loop that holds the supervisor: meanwhile it drains the
    agent's output, notices the agent exit and obeys "stop".
    """

    inj: Injection
    batch: list[Message]
    started: float  # when this attempt began (for its Attempt record)
    channel: str
    submitted: str  # the evidence of submission
    patterns: list[re.Pattern[str]]
    hard_stop: float
    quiet_since: float | None = None


class DeliveryEngine:
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
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.profile = profile
        self.session = session
        self.fallback_dir = fallback_dir  # where the instruction file (or the live context file) is
        self.audit = audit
        self.require_ack = cfg.require_ack if require_ack is None else require_ack
        self.lock_dir = lock_dir  # for the fallback file's lock (None: the runtime dir)
        # Sources whose messages may be typed as is (config [trust]), read when
        # a raw message is due: checked again here although the service checks
        # at enqueue, since the store may have other writers.
        self.raw_sources = raw_sources
        # A channel that reaches the agent's running turn between tool calls
        # (its hooks): while the agent works, that channel is the stronger one,
        # so nothing is typed then (typed text becomes a user turn of its own),
        # and a long busy spell is not a failed attempt until busy_channel_timeout_s.
        self.busy_channel = busy_channel
        self.clock = clock
        self._resumed = False
        self._channel = "tmux-paste"  # the typing channel last used (the backend's)
        self._leftovers_checked = False  # the section's unacknowledged entries, at start
        self._blocked_since: float | None = None
        self._next_expiry = 0.0  # expire overdue messages on the first turn
        self._held: dict[str, float] = {}  # token -> when to press submit again
        self._ack: _AckWait | None = None  # the batch whose ACK is awaited
        self._ack_patterns = [*cfg.ack_patterns, *profile.ack_patterns]
        # batches in flight through another channel of the supervisor (Aider's
        # read file): never resumed (typed) here
        self.foreign_batches = foreign_batches
        self.owns_store = True  # closed with the engine (False: a shared one, closed by its opener)
        # True while the agent's SessionStart hook, which hands the queue over
        # as startup context, has yet to run: typing then would race it
        self.awaits_start_hook = awaits_start_hook

    @classmethod
    def for_session(
        cls, paths: Paths, cfg: Config, profile: Profile, rec: SessionInfo, *,
        store: MessageStore | None = None,
        foreign_batches: Callable[[], Collection[str]] = frozenset,
        awaits_start_hook: Callable[[], bool] = lambda: False,
    ) -> DeliveryEngine:
        """The engine of one session, its collaborators built from the state dir
        (``store``: one the composition root opened and shares; else its own)."""
        require_ack = rec.options.require_ack
        fallback_dir = Path(rec.cwd)
        if profile.context_file_arg and profile.instruction_file:
            # The file the agent was launched to read (see session.agent_argv).
            fallback_dir = context_file(paths.state_dir, rec.name, profile.instruction_file).parent
        engine = cls(
            store or SQLiteMessageStore(paths.db_path, cfg.limits, events_dir=paths.events_dir),
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
        )
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
            self._resume(sup)
            if not self._leftovers_checked:
                self._leftovers_checked = True
                self._announce_leftovers()
        if self._ack is not None:
            wait = self._check_ack(sup)
            if wait is not None:
                return wait
        now = self.clock()
        if self._held:
            wait = self._retry_held(sup, now)
            if wait is not None:
                return wait
        if now >= self._next_expiry:
            # peek() merely hides a message whose TTL passed; nothing else marks it
            # EXPIRED, so `send --wait` and `history` would show it pending forever.
            self.store.expire_overdue(now)
        upcoming = self.store.peek(self.session, now)
        self._next_expiry = min((m.expires for m in upcoming), default=math.inf)
        due = [m for m in upcoming if m.next_attempt_at <= now]
        if not due:
            self._blocked_since = None
            if upcoming:
                # Wake up for the next retry, or to expire a message at its TTL.
                wake = min(self._next_expiry, *(m.next_attempt_at for m in upcoming))
                return max(0.05, wake - now)
            return None
        reason = self.window(sup, due[0].priority)
        if reason is not None:
            if sup.reading.state is State.EXITED:
                return None
            if self.awaits_start_hook():
                return 0.1  # a short wait of its own (bounded), not a failed attempt
            limit = self.cfg.readiness_timeout_s
            if self.busy_channel and sup.reading.state is State.BUSY:
                limit = max(limit, self.cfg.busy_channel_timeout_s)
            if self._blocked_since is None:
                self._blocked_since = now
            elif now - self._blocked_since >= limit:
                self._blocked_since = None
                self._no_window(due, reason)
                return 0.05
            return 0.1
        self._blocked_since = None
        token = new_token()
        batch = self._claim(token, now, rows=sup.snap.rows if sup.snap is not None else None)
        if batch:
            self._deliver(sup, token, batch, Phase.CLAIMED)
        return 0.05

    def _retry_held(self, sup: Driver, now: float) -> float | None:
        """Press submit again for a block left in the box by an earlier attempt."""
        token, due_at = min(self._held.items(), key=lambda kv: kv[1])
        if due_at > now:
            return None if not self.store.peek(self.session, now) else min(0.5, due_at - now)
        state = sup.reading.state
        idle = sup.term.user_idle_s()
        if state in (State.WAITING_INPUT, State.STARTING) or (
            idle is not None and idle * 1000 < self.cfg.typing_grace_ms
        ):
            return 0.1
        del self._held[token]
        if state is State.EXITED:
            return None
        batch = [m for m in self.store.in_flight(self.session) if m.batch_id == token]
        if batch:
            self._deliver(sup, token, batch, Phase.SUBMITTING)
        return 0.05

    def window(self, sup: Driver, priority: Priority) -> str | None:
        """None when typing is safe now, else why not (shown by `agentwrap queue`)."""
        reading = sup.reading
        if reading.state is State.EXITED:
            return "agent exited"
        if reading.state is State.WAITING_INPUT:
            return f"agent is waiting for an answer ({reading.reason})"
        if reading.state is State.UNKNOWN:
            return f"agent state unknown ({reading.reason})"
        if self.awaits_start_hook():
            return "waiting for the agent's start-up (its SessionStart hook has not run yet)"
        if reading.state is State.DRAFT or sup.detector.draft:
            return "draft in input box"
        idle = sup.term.user_idle_s()
        if idle is not None and idle * 1000 < self.cfg.typing_grace_ms:
            return "person is typing"
        if reading.state is State.READY:
            return None
        if reading.state is State.BUSY and self.busy_channel:
            return busy_reason(self.busy_channel)
        if (
            reading.state is State.BUSY
            and self.profile.input.accepts_input_while_busy
            and priority >= Priority.HIGH
        ):
            return None
        return "agent busy" if reading.state is State.BUSY else "agent starting"

    # --- one batch -----------------------------------------------------------------------

    def ack_wording(self, batch: Sequence[Message]) -> str | None:
        """The ACK request a batch carries (None: none), whichever channel hands it over."""
        if any(m.kind is Kind.FALLBACK_NOTICE for m in batch):
            # The notice's ACK is what lets the section go (_after_success):
            # asked whenever the section is to be removed at all.
            return self.cfg.ack_wording if self._removes_fallback() else None
        return ack_rule(self.require_ack, self.cfg.ack_wording)(batch)

    def _removes_fallback(self) -> bool:
        return self.cfg.remove_fallback_on_delivery and bool(self.profile.instruction_file)

    def _claim(self, token: str, now: float | None = None, rows: int | None = None) -> list[Message]:
        """The next batch; a raw session types one message at a time. ``rows``:
        the screen's height, which a block must stay well within (:meth:`_fit`)."""
        max_bytes = 0 if self.profile.raw else self.cfg.max_injection_bytes
        limit = self._fit(rows, now) if rows and not self.profile.raw else None
        return self.store.claim_batch(self.session, token, max_bytes, now, limit=limit)

    def _fit(self, rows: int, now: float | None) -> int | None:
        """How many due messages make a block of at most half the screen's
        rows (at least one): an agent that shows a paste line by line (no
        ``[Pasted text]`` placeholder) grows its input box with it, and a box
        taller than the screen pushes its own edges off it: neither the paste
        nor the submit can be seen, the screen reads as unknown, and every
        message behind it ends in the fallback file. None: no limit."""
        if self.profile.input.paste_placeholders:
            return None  # a long paste collapses into one line
        budget = max(2, rows // 2 - 2)  # the block's first and last lines aside
        used = n = 0
        for m in self.store.peek(self.session, now, due=True, limit=500):
            used += m.content.count("\n") + 1
            if n and used > budget:
                break
            n += 1
        return n or None

    def _is_raw(self, batch: Sequence[Message]) -> bool:
        return self.profile.raw or any(m.kind is Kind.COMMAND for m in batch)

    def _render(self, batch: Sequence[Message], token: str) -> Injection:
        if self._is_raw(batch):
            return render_raw(batch[0], token=token, tabs_as_spaces=self.profile.input.tabs_as_spaces)
        return render(
            batch, token=token, ack_wording=self.ack_wording(batch),
            tabs_as_spaces=self.profile.input.tabs_as_spaces, syntax=self.profile.syntax,
        )

    def _untrusted_raw(self, batch: list[Message]) -> bool:
        """End (failed) a raw batch from a source not trusted with raw input;
        nothing of it is typed."""
        if not self._is_raw(batch):
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
            result = Outcome(False, "agent_exited", str(exc))
        except BackendError as exc:
            result = Outcome(False, "error", str(exc))
        if result.outcome == "awaiting_ack":
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
        if result.outcome == "no_ack":
            batch = self._unacknowledged_notices(inj, batch, started, channel, result)
            if not batch:
                return
        # delivered with its ACK asked: the wait ended without one (the agent exited)
        outcome = UNACKNOWLEDGED if result.ok and result.outcome == "delivered" \
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
            status = Status.ACKNOWLEDGED if result.outcome == "acknowledged" else Status.DELIVERED
            self.store.finish(status, f"{result.outcome}: {result.evidence}"[:500], batch_id=token)
            self._after_success(batch, token, result)
        elif result.outcome == "agent_exited":
            self.store.finish(Status.FAILED, f"agent exited: {result.evidence}", batch_id=token)
        else:
            stuck = (
                sup is not None
                and result.outcome == "submit_not_confirmed"
                and self._in_box(sup, inj) is True
            )
            self._failed(sup, token, batch, result, still_in_box=stuck)

    def _run_phases(
        self, sup: Driver, inj: Injection, batch: list[Message], phase: Phase
    ) -> Outcome:
        if phase in (Phase.CLAIMED, Phase.PASTING):
            live = self.store.set_phase(inj.token, Phase.PASTING)
            if {m.id for m in live} != set(inj.message_ids):
                if not live:
                    return Outcome(False, "error", "every message of the batch expired")
                inj = self._render(live, inj.token)
            # Resuming PASTING after a restart: the earlier paste may still be on its
            # way to the screen (a slow or stalled agent has not drawn it yet). Give it
            # as long as a fresh paste gets before deciding it never went out; one
            # look at the box was not enough and typed the block twice.
            pasted = phase is Phase.PASTING and self._wait_until(
                sup, self.cfg.paste_timeout_s, lambda: self._in_box(sup, inj) is True
            )
            if not pasted:
                sup.term.paste(inj.text, bracketed=self.profile.input.bracketed_paste)
            seen = self._wait_until(sup, self.cfg.paste_timeout_s, lambda: self._in_box(sup, inj) is True)
            if not seen:
                return Outcome(False, "paste_not_seen", self._screen_tail(sup))
            phase = Phase.SUBMITTING
            self.store.set_phase(inj.token, Phase.SUBMITTING)
            self._pause(sup, self.profile.input.submit_delay_ms / 1000)
        if phase is Phase.SUBMITTING:
            submitted = self._submit(sup, inj)
            if not submitted.ok:
                return submitted
            self.store.set_phase(inj.token, Phase.SUBMITTED)
            if not inj.ack_requested:
                return Outcome(True, "delivered", submitted.evidence)
            return Outcome(True, "awaiting_ack", submitted.evidence)
        if inj.ack_requested:
            return Outcome(True, "awaiting_ack", "submitted before a supervisor restart")
        return Outcome(True, "delivered", "submitted before a supervisor restart")

    def _submit(self, sup: Driver, inj: Injection) -> Outcome:
        key = self.profile.input.submit_key
        for pressed in range(self.profile.input.submit_retries + 1):
            where = self._box_seen(sup, inj)
            if sup.reading.state in (State.WAITING_INPUT, State.UNKNOWN):
                # Never press the submit key into a dialog: it would answer it.
                if pressed:
                    return Outcome(True, "submitted", "a dialog opened after the submit key")
                return Outcome(False, "submit_not_confirmed", "a dialog opened before submitting")
            if where is None:
                # The input box is not on screen (a redraw, an overlay): pressing
                # Enter blind could answer something else; claiming success could
                # lose the message. Neither: this attempt fails and is retried.
                return Outcome(False, "submit_not_confirmed", "input box not found on screen")
            if where is False:
                # Not in the box any more (restart after the key went out).
                ev = self._submitted_evidence(sup, inj)
                return Outcome(True, "submitted", ev or "input box no longer holds the block")
            was_busy = sup.reading.state is State.BUSY
            sup.term.send_key(key)
            found: list[str] = []
            done = functools.partial(self._confirmed, sup, inj, was_busy, found)

            if self._wait_until(sup, self.cfg.submit_timeout_s, done):
                return Outcome(True, "submitted", found[-1])
            if self._in_box(sup, inj) is False:
                # The box emptied but nothing else showed up; never type it again.
                return Outcome(True, "submitted", "input box emptied after the submit key")
        return Outcome(False, "submit_not_confirmed", self._screen_tail(sup))

    def _confirmed(
        self, sup: Driver, inj: Injection, was_busy: bool, found: list[str]
    ) -> bool:
        """After the submit key: is there evidence that the agent took the block?
        Appends the evidence to ``found``."""
        seen = self._in_box(sup, inj)
        reading = sup.reading
        if reading.state is State.UNKNOWN and seen is not True:
            # Still, unexplained, and our block has left the box: the agent took
            # it and opened something the profile does not know (a permission
            # dialog, a menu). Pressing the key again would answer it.
            found.append(f"the agent showed an unrecognised screen after the submit key"
                         f" ({reading.reason})")
            return True
        if reading.state is State.WAITING_INPUT:
            # A dialog after our key: the agent took the message and now asks
            # about what it started (a permission prompt, aider's "Create new
            # file?"). Never "unconfirmed": a retry's Enter would answer it.
            found.append(f"agent opened a dialog after the submit key ({reading.reason})")
            return True
        if (
            seen is True
            and not was_busy
            and reading.state is State.BUSY
            and reading.signal is not Signal.QUIET
        ):
            # Some agents (Aider) leave the submitted text where it was typed
            # and show a busy marker under it: busy by a rule, right after our
            # key and not before it, is the submission.
            found.append(f"agent turned busy ({reading.reason})")
            return True
        if seen is not False:  # still ours, or cannot tell yet
            return False
        ev = self._submitted_evidence(sup, inj)
        if ev:
            found.append(ev)
        return bool(ev)

    def _await_ack(
        self, inj: Injection, batch: list[Message], started: float, channel: str, submitted: str
    ) -> None:
        patterns = [
            re.compile(p.replace("{token}", re.escape(inj.token)), re.IGNORECASE)
            for p in self._ack_patterns
        ]
        self._ack = _AckWait(
            inj, batch, started, channel, submitted, patterns,
            hard_stop=self.clock() + self.cfg.readiness_timeout_s * 4,
        )

    def _check_ack(self, sup: Driver) -> float | None:
        """One look for the awaited ACK; the seconds until the next look, or
        None once the wait has ended (acknowledged, timed out, agent gone)."""
        w = self._ack
        assert w is not None
        reading = sup.reading
        now = self.clock()
        result: Outcome | None = None
        found = self._find_ack(sup, w.inj, w.patterns)
        if found:
            result = Outcome(True, "acknowledged", found)
        elif reading.state is State.EXITED:
            # It was submitted (that was proven before the wait began): the
            # message reached the agent, which died before it could answer.
            # (The same words as abandon()'s, which may see the exit first.)
            result = Outcome(
                True, "delivered", f"{w.submitted}; not acknowledged: the agent exited first"
            )
        elif reading.state in (State.READY, State.DRAFT, State.UNKNOWN):
            w.quiet_since = w.quiet_since or now
            if now - w.quiet_since >= self.cfg.ack_timeout_s:
                result = Outcome(False, "no_ack", self._screen_tail(sup))
        else:
            w.quiet_since = None
        if result is None and now >= w.hard_stop:
            result = Outcome(False, "no_ack", "agent never went quiet: " + self._screen_tail(sup))
        if result is None:
            return POLL_S * 2
        self._ack = None
        self._conclude(sup, w.inj, w.batch, w.started, w.channel, result)
        return None

    def _find_ack(self, sup: Driver, inj: Injection, patterns: list[re.Pattern[str]]) -> str:
        snap = sup.snap
        if snap is None:
            return ""
        parts = self._around_input(snap)
        outside = parts[1] if parts is not None else snap.text()
        lines = outside.split("\n")
        # Only below our own echoed block: its 'Reply "ACK <token>"' line must not count.
        echo = (f"agentwrap context {inj.token}", f'"ACK {inj.token}"')
        end = max((i for i, x in enumerate(lines) if any(e in x for e in echo)), default=-1)
        for line in lines[end + 1 :]:
            for pat in patterns:
                if pat.search(line):
                    return line.strip()
        return ""

    # --- evidence ------------------------------------------------------------------------

    def _around_input(self, snap: Snapshot) -> tuple[str, str] | None:
        """(input box text, everything else), trying the profile's fallback
        region when the primary one is not on screen."""
        spec = self.profile.input
        parts = split_around(self.profile, snap, spec.input_region)
        if parts is None and spec.input_region_fallback:
            parts = split_around(self.profile, snap, spec.input_region_fallback)
        return parts

    def _split(self, snap: Snapshot, inj: Injection) -> tuple[str, str] | None:
        """(input box, everything else) for finding ``inj.mark``.

        Raw text has no token: it is found by the end of its last line with
        whitespace squeezed out (wrapping and padding vary). In a line-based
        program (``last_line`` input) its line is the cursor's, since the last
        line on screen may already be the output of a command it started.
        """
        if not inj.raw:
            return self._around_input(snap)
        if self.profile.input.input_region == "last_line":
            parts = _split_at_cursor(snap)
        else:
            parts = self._around_input(snap)
        return None if parts is None else (_squeeze(parts[0]), _squeeze(parts[1]))

    def _in_box(self, sup: Driver, inj: Injection) -> bool | None:
        """Whether our block (its token, or the agent's paste placeholder) is in
        the input box; None when the box is not on screen, which proves nothing."""
        sup.observe()
        snap = sup.snap
        if snap is None:
            return None
        parts = self._split(snap, inj)
        if parts is None:
            return None
        box = parts[0]
        if inj.mark in box:
            return True
        return any(p.search(box) for p in self.profile.input.paste_placeholders)

    def _box_seen(self, sup: Driver, inj: Injection) -> bool | None:
        """:meth:`_in_box`, waiting a moment for the box to be drawn."""
        result: list[bool | None] = []

        def known() -> bool:
            result.append(self._in_box(sup, inj))
            return result[-1] is not None

        self._wait_until(sup, self.cfg.paste_timeout_s, known)
        return result[-1] if result else None

    def _submitted_evidence(self, sup: Driver, inj: Injection) -> str:
        snap = sup.snap
        if snap is None:
            return ""
        parts = self._split(snap, inj)
        outside = parts[1] if parts is not None else snap.text()
        if inj.mark in outside:
            return "text echoed above the input" if inj.raw else "block echoed above the input box"
        for p in self.profile.input.paste_placeholders:
            m = p.search(outside)
            if m:
                return f"paste placeholder above the input box: {m.group(0)}"
        if sup.reading.state is State.BUSY:
            return f"agent turned busy ({sup.reading.reason})"
        return ""

    def _wait_until(self, sup: Driver, timeout: float, cond: Callable[[], bool]) -> bool:
        """Poll ``cond`` until it holds or ``timeout`` passes, while the
        supervisor keeps draining output and watching for "stop".

        Evidence from the screen of a dead agent proves nothing (a dying TUI
        clears its input box as if it had taken the text), so a condition that
        holds only counts while the agent is still alive.
        """
        deadline = self.clock() + timeout
        while True:
            if cond():
                if not sup.term.alive():
                    raise AgentExited("the agent exited during delivery")
                return True
            if sup.reading.state is State.EXITED:
                raise AgentExited("the agent exited during delivery")
            if sup.stopping:
                raise DeliveryInterrupted("the supervisor is stopping")
            if self.clock() >= deadline:
                return False
            sup.pump(POLL_S)

    def _pause(self, sup: Driver, seconds: float) -> None:
        """Let ``seconds`` pass with the supervisor still draining output."""
        deadline = self.clock() + seconds
        while (left := deadline - self.clock()) > 0:
            if sup.stopping:
                raise DeliveryInterrupted("the supervisor is stopping")
            sup.pump(left)

    def _screen_tail(self, sup: Driver) -> str:
        if sup.snap is None:
            return ""
        lines = [x for x in sup.snap.lines if x.strip()]
        return "\n".join(lines[-8:])

    # --- failure, retry, fallback ----------------------------------------------------------

    def _no_window(self, due: list[Message], reason: str) -> None:
        token = new_token()
        batch = self._claim(token)
        if not batch:
            return
        now = self.clock()
        for m in batch:
            self.store.record_attempt(
                Attempt(m.id, token, m.attempts + 1, now, now, "none", "no_window", reason)
            )
        self._failed(None, token, batch, Outcome(False, "no_window", reason))

    def _failed(
        self,
        sup: Driver | None,
        token: str,
        batch: list[Message],
        result: Outcome,
        *,
        still_in_box: bool = False,
    ) -> None:
        detail = f"attempt failed: {result.outcome}"
        give_up = [m for m in batch if m.attempts + 1 >= self.cfg.fallback_after]
        if give_up:
            if still_in_box:
                result = Outcome(False, result.outcome, "the block is still in the input box")
            self._escalate(sup, give_up, result)
        rest = [m for m in batch if m not in give_up]
        if rest:
            n = min(m.attempts for m in rest)  # attempts before this one
            backoff = self.cfg.backoff_s[min(n, len(self.cfg.backoff_s) - 1)] if self.cfg.backoff_s else 1.0
            if still_in_box:
                # Our block sits in the input box: the retry must press the submit
                # key again, not paste a second copy behind it.
                self.store.hold(token, self.clock() + backoff, detail + " (block still in the box)")
                self._held[token] = self.clock() + backoff
            else:
                self.store.retry_later(token, self.clock() + backoff, detail)
        log.info("batch %s: %s (%d to retry, %d given up)", token, result.outcome, len(rest), len(give_up))

    def _escalate(self, sup: Driver | None, msgs: list[Message], result: Outcome) -> None:
        if self._is_raw(msgs):
            # A command belongs in the terminal, never in an instruction file.
            ids = [m.id for m in msgs]
            self.store.finish(Status.FAILED, f"{result.outcome}; not typed: {result.evidence}"[:500],
                              message_ids=ids)
            self.audit.write(event="raw_failed", session=self.session, ids=ids,
                             outcome=result.outcome)
            self._tell(sup, f"{len(ids)} raw message(s) could not be typed ({result.outcome})")
            return
        notices = [m for m in msgs if m.kind is Kind.FALLBACK_NOTICE]
        content = [m for m in msgs if m.kind is not Kind.FALLBACK_NOTICE]
        if notices:
            self.store.finish(
                Status.FAILED, f"fallback notice not delivered: {result.outcome}",
                message_ids=[m.id for m in notices],
            )
        if not content:
            return
        fname = self.profile.instruction_file
        ids = [m.id for m in content]
        if not fname:
            self.store.finish(
                Status.FAILED, f"{result.outcome}; profile {self.profile.name} has no instruction file",
                message_ids=ids,
            )
            return
        try:
            written = self._write_fallback(fname, content)
        except (FallbackError, OSError) as exc:
            # Refused (a symlink out of the project, malformed markers, not a
            # regular file, read-only) or failed: the messages still end, and
            # the person is told why, in one place.
            self.store.finish(Status.FAILED, f"{result.outcome}; fallback refused: {exc}", message_ids=ids)
            self.audit.write(event="fallback_failed", session=self.session, ids=ids, error=str(exc))
            self._tell(sup, f"live delivery failed and {fname} was not written: {exc}")
            return
        reach = (
            "re-read on every request" if self.profile.instruction_file_live
            else f"{self.profile.name} reads it at start-up: the next session sees it"
        )
        self.store.finish(
            Status.ESCALATED,
            f"after {result.outcome}: written to {written.path.name}, section agentwrap ({reach})",
            message_ids=ids,
        )
        self.audit.write(
            event="escalated", session=self.session, ids=ids, file=str(written.path),
            outcome=result.outcome,
        )
        self._notify(sup, written.path.name, content)

    def _write_fallback(self, fname: str, content: list[Message]) -> WriteResult:
        """The section as it should be now: what it held before (still known
        to the store) plus ``content``."""
        entries = self._section_entries(fname, content)
        return write_section(self.fallback_dir, fname, entries, lock_dir=self.lock_dir)

    def _section_entries(
        self, fname: str, content: list[Message], drop: Collection[str] = ()
    ) -> list[FallbackEntry]:
        """The section's entries: what it holds now (still known to the
        store) but ``drop``, then ``content``."""
        ids = {m.id for m in content}
        previous = read_section(self.fallback_dir, fname) or []
        entries = []
        for mid in previous:
            if mid in ids or mid in drop:
                continue
            try:
                old = self.store.get(mid)
            except MessageNotFound:
                # Written with another store (or a wiped one): only its id is known,
                # so its entry cannot be rebuilt and is dropped on this rewrite.
                log.warning("fallback section names unknown message %s; dropping its entry", mid)
                continue
            entries.append(self._entry(old))
        return entries + [self._entry(m) for m in content]

    def _entry(self, m: Message) -> FallbackEntry:
        """A section entry, defused like a typed block: the agent parses its
        instruction file too (CLAUDE.md and GEMINI.md import ``@path``)."""
        syntax = self.profile.syntax
        return FallbackEntry(
            m.id, neutralise(m.label, syntax), m.created, neutralise(m.content, syntax)
        )

    def _tell(self, sup: Driver | None, line: str) -> None:
        """Tell the person: the tmux status line, and a desktop notification."""
        if sup is not None:
            display = getattr(sup.term, "display", None)
            if display is not None:
                try:
                    display(f"agentwrap: {line}")
                except BackendError:
                    pass
        if self.cfg.notify_on_failure:
            notify_desktop(f"agentwrap: {self.session}", line)

    def _notify(self, sup: Driver | None, fname: str, msgs: list[Message]) -> None:
        """Announce an escalation, and queue a notice for the agent.

        The notice points to the section instead of repeating the content: the
        agent already saw that text in each failed attempt, and whatever it
        says reaches the model through the instruction file. Agents that read
        their instruction file only at start-up (Codex, Gemini) are told so.
        """
        line = f"context was written to {fname}, section agentwrap"
        self._tell(sup, line)
        self._queue_notice(fname, msgs)

    def _queue_notice(self, fname: str, msgs: list[Message], *, earlier: bool = False) -> None:
        """Queue the notice (a HIGH message of kind FALLBACK_NOTICE) naming
        ``msgs``' entries. ``earlier``: they were written before this
        supervisor started (an earlier session) and no notice of them was
        acknowledged: the section is still there, and this notice's ACK lets it go."""
        n = len(msgs)
        labels = ", ".join(sorted({m.label for m in msgs}))
        when = (
            "It is re-read on every request."
            if self.profile.instruction_file_live
            else "This agent reads it at start-up, so it takes effect in the next session;"
            " read the section now if it matters to the current task."
        )
        where = (f"{fname}, in the section between the 'agentwrap:begin agentwrap' and"
                 " 'agentwrap:end agentwrap' markers")
        notice = (
            f"Live delivery of {n} message{'s' if n != 1 else ''} ({labels}) failed, so"
            f" {'they were' if n != 1 else 'it was'} written to {where}. {when}"
        )
        if earlier:
            notice = (
                f"Your instruction file {fname} holds {n} message{'s' if n != 1 else ''}"
                f" ({labels}) that could not be delivered live earlier, in the section"
                f" between the 'agentwrap:begin agentwrap' and 'agentwrap:end agentwrap'"
                " markers. Read that section if you have not."
            )
        if self._removes_fallback():
            notice += (" The section stays in the file until you acknowledge this notice;"
                       " agentwrap removes it then.")
        try:
            self.store.enqueue(
                NewMessage(
                    session=self.session, content=notice,
                    source=Source.SYSTEM, source_id="fallback", priority=Priority.HIGH,
                    metadata={"fallback_ids": [m.id for m in msgs]},
                    require_ack=False,
                ),
                kind=Kind.FALLBACK_NOTICE,
                internal=True,
            )
        except AgentwrapError as exc:  # a full queue must not break the supervisor
            log.warning("could not queue the fallback notice: %s", exc)

    def _after_success(self, batch: list[Message], token: str, result: Outcome) -> None:
        """A notice in ``batch`` reached the agent. Its section goes only once
        the agent has read it, which only an ACK of the notice proves:
        removing it as soon as the notice was typed lost the content (gone
        from the file before the agent opened it, and from the next session's
        start-up read). Unacknowledged, it stays for the agent's next read."""
        notices = [m for m in batch if m.kind is Kind.FALLBACK_NOTICE]
        if not notices or not self._removes_fallback():
            return
        if result.outcome == "acknowledged":
            self._retract(notices, token, f"read by the agent (ACK {token})")
        else:
            self._keep_section(notices, token, f"notice {result.outcome}, not acknowledged")

    def _unacknowledged_notices(
        self, inj: Injection, batch: list[Message], started: float, channel: str,
        result: Outcome,
    ) -> list[Message]:
        """The notices in a batch whose ACK never came: their submission was
        proven, so they end delivered (retyping one adds nothing) and their
        section stays. Returns the rest of the batch, which failed."""
        notices = [m for m in batch if m.kind is Kind.FALLBACK_NOTICE]
        if not notices:
            return batch
        evidence = f"submitted; not acknowledged, the fallback section stays ({result.evidence})"
        for m in notices:
            self.store.record_attempt(Attempt(m.id, inj.token, m.attempts + 1, started,
                                              self.clock(), channel, UNACKNOWLEDGED,
                                              evidence[:2000]))
        self.store.finish(Status.DELIVERED, f"delivered: {evidence}"[:500],
                          message_ids=[m.id for m in notices])
        self._keep_section(notices, inj.token, "notice not acknowledged")
        return [m for m in batch if m.kind is not Kind.FALLBACK_NOTICE]

    def _keep_section(self, notices: list[Message], token: str, why: str) -> None:
        self.audit.write(event="fallback_kept", session=self.session, batch=token,
                         ids=sorted({i for n in notices for i in _announced(n)}), reason=why)

    def _retract(self, notices: list[Message], token: str, why: str) -> None:
        """Take the entries the notices announced out of the section (the
        section, once none is left), and record it on each message: an
        attempt through ``fallback-file`` that ``history`` shows, and an audit
        line. Entries written after the notice was queued stay: their own
        notice is still to be read."""
        fname = self.profile.instruction_file
        assert fname is not None
        announced = {i for n in notices for i in _announced(n)}
        try:
            gone = [i for i in read_section(self.fallback_dir, fname) or [] if i in announced]
            if not gone:
                return  # removed already (by the person, or another notice)
            entries = self._section_entries(fname, [], drop=gone)
            if entries:
                write_section(self.fallback_dir, fname, entries, lock_dir=self.lock_dir)
            else:
                remove_section(self.fallback_dir, fname, lock_dir=self.lock_dir)
        except (FallbackError, OSError) as exc:
            log.warning("could not remove the fallback section: %s", exc)
            self.audit.write(event="fallback_remove_failed", session=self.session,
                             ids=sorted(announced), error=str(exc))
            return
        now = self.clock()
        evidence = f"section removed from {fname}: {why}"
        for mid in gone:
            try:
                m = self.store.get(mid)
            except MessageNotFound:
                continue
            self.store.record_attempt(Attempt(mid, token, m.attempts + 1, now, now,
                                              "fallback-file", SECTION_REMOVED, evidence))
        self.audit.write(event="fallback_removed", session=self.session, batch=token, ids=gone,
                         file=fname, reason=why, left=len(entries))

    def _announce_leftovers(self) -> None:
        """At the supervisor's start: entries no notice got acknowledged for
        are still in the section (a silent agent, a session that ended
        first). The agent read them at its start-up, or reads them now; a
        new notice asks it to acknowledge, so that the section can go. Named:
        this store's escalated messages no queued notice names already."""
        fname = self.profile.instruction_file
        if not fname or not self._removes_fallback():
            return
        try:
            ids = read_section(self.fallback_dir, fname) or []
        except (FallbackError, OSError) as exc:
            log.warning("could not read the fallback section: %s", exc)
            return
        waiting = [*self.store.peek(self.session), *self.store.in_flight(self.session)]
        named = {i for m in waiting if m.kind is Kind.FALLBACK_NOTICE for i in _announced(m)}
        msgs = []
        for mid in ids:
            try:
                m = self.store.get(mid)
            except MessageNotFound:
                continue
            if mid not in named and m.status is Status.ESCALATED:
                msgs.append(m)
        if msgs:
            self._queue_notice(fname, msgs, earlier=True)

    def abandon(self, reason: str) -> int:
        """The session ended: nothing queued for it can be delivered any more.
        Every message still pending or in flight gets its terminal state.

        A batch whose submission was already proven (phase SUBMITTED, e.g.
        waiting for its ACK) reached the agent: it is *delivered*, never
        failed. Anything earlier is not proven to have gone in: failed.
        """
        waited, self._ack = self._ack, None
        in_flight = self.store.in_flight(self.session)
        submitted = [m.id for m in in_flight if m.phase is Phase.SUBMITTED]
        ids = [m.id for m in in_flight if m.phase is not Phase.SUBMITTED]
        ids += [m.id for m in self.store.peek(self.session)]
        n = 0
        if submitted:
            self._unacknowledged([m for m in in_flight if m.phase is Phase.SUBMITTED], waited,
                                 f"submitted; not acknowledged before {reason}")
            n += self.store.finish(
                Status.DELIVERED, f"delivered: submitted; not acknowledged before {reason}",
                message_ids=submitted,
            )
        if ids:
            n += self.store.finish(Status.FAILED, reason, message_ids=ids)
        if submitted or ids:
            self.audit.write(
                event="abandoned", session=self.session, ids=ids, delivered=submitted,
                reason=reason,
            )
        return n

    def _unacknowledged(self, msgs: list[Message], waited: _AckWait | None, why: str) -> None:
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

    def _resume(self, sup: Driver) -> None:
        """Finish batches a killed supervisor left in flight, from their phase."""
        batches: dict[str, list[Message]] = {}
        for m in self.store.in_flight(self.session):
            if m.batch_id:
                batches.setdefault(m.batch_id, []).append(m)
        for token, batch in batches.items():
            if token in self._held or (self._ack is not None and self._ack.inj.token == token):
                continue  # ours, waiting for its next step
            if token in self.foreign_batches():
                continue  # another channel's, settled by it
            phase = batch[0].phase or Phase.CLAIMED
            log.info("resuming batch %s from phase %s", token, phase)
            sup.observe()
            self._deliver(sup, token, batch, phase)


def _announced(notice: Message) -> list[str]:
    """The ids of the messages a fallback notice names (its own metadata)."""
    ids = notice.metadata.get("fallback_ids")
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _squeeze(text: str) -> str:
    """``text`` without whitespace: wrapping, padding and prompts' spacing vary."""
    return "".join(text.split())


def _split_at_cursor(snap: Snapshot) -> tuple[str, str] | None:
    """(the cursor's line up to the cursor, with the rows just above it that a
    long line wrapped from; every row above those), or None if the cursor is
    off screen. A raw text is typed where the cursor is, and ends just left of
    it until the program takes it (a shell moves the cursor to the next line)."""
    row, col = snap.cursor
    if not 0 <= row < len(snap.lines):
        return None
    lines = snap.lines
    start = row
    while start > 0 and row - start < _RAW_WRAP_ROWS and _width(lines[start - 1]) >= snap.cols - 1:
        start -= 1  # a full row above: the line wrapped into the next one
    box = "\n".join([*lines[start:row], _cells(lines[row], col)])
    return box, "\n".join(lines[:start])


_RAW_WRAP_ROWS = 8  # at most this many wrapped rows above the cursor's belong to its line


def _width(line: str) -> int:
    return sum(max(wcwidth(ch), 0) for ch in line)


def _cells(line: str, width: int) -> str:
    """The start of ``line`` that fills ``width`` terminal cells (wide characters: 2)."""
    used = 0
    for i, ch in enumerate(line):
        used += max(wcwidth(ch), 0)
        if used > width:
            return line[:i]
    return line


def _trusted_raw_sources(paths: Paths, rec: SessionInfo) -> tuple[str, ...]:
    """The session's ``[trust] raw_sources`` as the config says *now*; none
    while the config cannot be read (refusing is the safe side)."""
    try:
        return load_config(paths, Path(rec.cwd)).for_profile(rec.profile).trust.raw_sources
    except AgentwrapError as exc:
        log.warning("config unreadable, trusting no source with raw input: %s", exc)
        return ()
