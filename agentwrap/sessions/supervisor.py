"""The session supervisor: one loop per agent that watches and delivers.

It owns the terminal backend, feeds snapshots to the detector, publishes
state changes to the registry (and the tmux status bar), answers dialogs the
person opted in to, and tells its parts (:mod:`agentwrap.sessions.parts`:
delivery, answers, telling, the handoff record ...) of each moment through
their hooks; it names none of them. Which parts a session has, and in which
order, is the composition root's business (:mod:`agentwrap.sessions.compose`).

It reacts to events rather than polling: output (tmux ``pipe-pane`` into a
fifo, or the pty relay's output pipe) makes it take a snapshot at most every
``min_snapshot_s``; a datagram on the wake socket means new messages (or,
``signal``, a hook's state signal: look again). While the agent is busy, its
published state file (Claude's session file) is checked by its stamp every
``published_poll_s``: it changes with no output. A slow periodic tick remains
as a safety net (lost nudges, title-only changes).

For tmux sessions the supervisor is a detached process of its own, so
delivery goes on after the person closes their terminal; if it dies,
``agentwrap attach``/``adopt`` starts a new one that re-adopts the session.
For the pty backend it is a thread of the relay process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..answers.hook_questions import HookQuestions, announcement
from ..datagram import WakeSocket, only_signals
from ..detect.detector import Detector, HookSource, StructuredSource
from ..detect.profiles import Profile
from ..detect.question import Question
from ..detect.states import Reading, State
from ..errors import (
    AgentExited,
    BackendError,
    DeliveryInterrupted,
    StoreUnavailable,
    UnsafePath,
)
from ..events import announce
from ..paths import Paths, open_private_append, private_dir, write_private
from ..terminal.base import OutputPipe, OutputStream, Removable, StatusLine, Terminal
from ..terminal.screen import Snapshot
from ..terminal.styles import DOCUMENT_SUFFIX, to_document
from .parts import Ended, Part, Parts
from .registry import Registry, exit_reason

log = logging.getLogger("agentwrap.supervisor")


@dataclass
class Timing:
    min_snapshot_s: float = 0.05  # throttle for output-driven snapshots
    pause_s: float = 0.03  # output this still counts as paused: time to look
    tick_s: float = 0.5  # safety-net snapshot while the screen is settling
    # Once the screen has been still this long (the unknown-screen verdict
    # needs 3 s), nothing changes without output, an exit (watched by pidfd) or
    # a wake-up: the safety tick and the queue poll slow down to idle_tick_s.
    # Fifty idle sessions then cost almost nothing (issue 9).
    settle_s: float = 6.0
    idle_tick_s: float = 10.0
    queue_poll_s: float = 1.0  # safety poll of the queue (wake-ups are the fast path)
    # the queue's safety poll once the screen is settled, when it is not
    # idle_tick_s: a hub's queue, which pushes a wake for every message
    idle_poll_s: float | None = None
    max_snap_gap_s: float = 1.0  # cost-based spacing never exceeds this ...
    max_tick_s: float = 2.0  # ... nor the stretched flood tick this: one slow
    # snapshot (a busy machine, tmux starting) must not blind the supervisor
    heartbeat_s: float = 1.0
    # While busy, how often the agent's published state (Claude's session file)
    # is checked for a write (a stat): it comes with no output of its own, often
    # just after the last repaint of a turn's end (issue 27).
    published_poll_s: float = 0.03
    # The store is unavailable (a shared server restarting, the network gone):
    # looked at again after this, doubling up to store_retry_max_s.
    store_retry_s: float = 0.2
    store_retry_max_s: float = 5.0


def snapshot_spacing(reading: Reading, cost_gap: float, timing: Timing) -> float:
    """Seconds between output-driven snapshots: ``cost_gap`` (9 x a snapshot's
    cost), except while the agent has announced a dialog the screen has not
    shown yet (its hook's permission request, Claude's session file saying
    ``waiting``): then :attr:`Timing.min_snapshot_s`, so the dialog, and the
    question a person or a rule answers, is read as soon as it is drawn and
    not up to a second later on a loaded machine (issue 27: dialog ->
    ``waiting_input`` with a question took 350-480 ms at load 10, while a
    poll every 100 ms, as ccmanager does, reads it in ~50). Only the
    dialog's own drawing is output then, so this costs little."""
    if reading.state is State.WAITING_INPUT and not reading.rule.startswith("dialog:"):
        return timing.min_snapshot_s
    return cost_gap


def cost_spacing(look_s: float, timing: Timing) -> float:
    """Seconds between output-driven snapshots for a look that cost ``look_s``
    (the snapshot and its detection): 9 x that, so the looking takes at most
    ~10 % of a core, within ``min_snapshot_s`` .. ``max_snap_gap_s``. What
    publishing a verdict costs is not counted (issue 27): a state change's
    registry write (SQLite with ``synchronous=FULL``, the saved screens) waits
    on the disk, 25-160 ms at load 7-15 here, and counted in it held the next
    look up to a second, so a dialog drawn just after a hook's signal changed
    the state was read up to that second late (Gemini's dialog -> ``waiting_input``
    with hooks, 126 vs 48 ms p50 without). Verdicts are published only on a
    change or once per heartbeat, so that cost is bounded on its own."""
    return min(max(timing.min_snapshot_s, 9 * look_s), timing.max_snap_gap_s)


def opens_window(before: State, after: State) -> bool:
    """Whether a verdict changing ``before`` -> ``after`` may let the parts do
    what they waited for (type a queued message, answer a dialog): the parts'
    turn is then taken at once rather than at their next poll."""
    return after is not before and after in (State.READY, State.WAITING_INPUT)


class Supervisor:
    def __init__(
        self,
        name: str,
        term: Terminal,
        profile: Profile,
        paths: Paths,
        registry: Registry,
        *,
        parts: Sequence[Part] = (),
        structured: StructuredSource | None = None,
        hooks: HookSource | None = None,
        hook_questions: HookQuestions | None = None,
        trust_folder: bool = False,
        timing: Timing | None = None,
        start_pending: Callable[[], str | None] | None = None,
    ) -> None:
        self.name = name
        self.term = term
        self.profile = profile
        self.paths = paths
        self.registry = registry
        self.detector = Detector(profile, structured, hooks=hooks, questions=hook_questions,
                                 start_pending=start_pending)
        # the exact requests the agent's hook told (the detector's too): the
        # answers rules gave through the hook are taken from it as states are published
        self.hook_questions = hook_questions
        self.trust_folder = trust_folder
        self.timing = timing or Timing()
        # everything else the session does, told of the loop's moments in this order
        self.parts = Parts(parts)
        self._stream = term if isinstance(term, OutputStream) else None  # output signalled by fd
        self.snap: Snapshot | None = None
        self.exit_code: int | None = None
        self._stop = threading.Event()
        self._last_snap = 0.0
        self._last_beat = 0.0
        self._published: tuple[str, str, str] | None = None  # state, rule, question id
        self._shown = ""  # digest of the screen last saved with its colours
        self._answered: set[str] = set()
        self._fifo_fds: tuple[int, int] | None = None
        self._out_fd: int | None = None
        self._woken = False  # a wake datagram arrived while delivery held the loop
        self._pidfd: int | None = None  # readable once the agent exits (Linux pidfd)
        self._pidfd_fired = False
        self.wake = WakeSocket(paths.wake_socket(name))
        # what the last look (snapshot and detection, not its publishing) cost
        self.look_s = 0.0

    # --- observation -------------------------------------------------------------

    @property
    def reading(self) -> Reading:
        return self.detector.reading

    def observe(self) -> Reading:
        """Snapshot, detect, publish. Safe to call from delivery code.

        The liveness check comes *after* the snapshot: a screen counts only
        if the agent was still alive once it had been taken (a dying TUI
        clears its box as if it had taken our text). Backends that judge
        liveness while snapshotting answer it without another call.
        """
        started = time.monotonic()
        try:
            snap = self.term.snapshot()
            if not self.term.alive():
                raise AgentExited("gone")
            self.snap = snap
        except AgentExited:
            return self._exited()
        self._last_snap = time.monotonic()
        reading = self.detector.update(self.snap)
        self.look_s = time.monotonic() - started
        self._publish(reading)
        if reading.state is State.WAITING_INPUT and reading.rule.startswith("dialog:"):
            self._maybe_answer(reading.rule[len("dialog:") :])
        return reading

    def pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` for output or a command, handling both.

        Delivery code waits for the screen to show something (its paste, the
        submit, an ACK) in short steps; it calls this instead of sleeping, so
        the agent's output keeps being drained (a full ``pipe-pane`` fifo
        stalls tmux, which then never marks a dead pane dead), a "stop"
        is honoured and a wake-up is remembered for the loop.
        """
        fds = [self.wake.fileno()] + ([self._out_fd] if self._out_fd is not None else [])
        try:
            ready, _, _ = select.select(fds, [], [], max(0.0, timeout))
        except InterruptedError:
            return
        if self._out_fd is not None and self._out_fd in ready:
            self._drain_output(self._out_fd)
            self.detector.note_output(time.monotonic())
        if self.wake.fileno() in ready:
            commands = self.wake.drain()
            if b"stop" in commands:
                self._stop.set()
            if commands and not only_signals(commands):
                self._woken = True

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _exited(self) -> Reading:
        self.exit_code = self.term.exit_code()
        reading = self.detector.exited(self.exit_code)
        self._publish(reading)
        return reading

    def _publish(self, reading: Reading) -> None:
        question = self.detector.question
        # a rule's answer given through the hook is recorded before the state that
        # follows it: a turn's end now is ready at once (issue 27), and whoever
        # sees that state finds the answer that let the turn go on already kept
        hooked = self.hook_questions.take_decided() if self.hook_questions is not None else None
        if hooked is not None:  # a rule answered through the hook: no dialog, but announced
            log.info("%s", announcement(self.name, hooked))
            self.parts.hook_answered(hooked)
        self._record(reading, question)
        if self.parts.typing():
            return  # the tabs an answer walks through: no new question to tell or to rule on
        # after the registry holds the question: an answer rule's answer is checked
        # against it; a question a rule answers is announced instead of told
        self.parts.asked(question if reading.state is State.WAITING_INPUT else None)

    def _record(self, reading: Reading, question: Question | None) -> None:
        key = (reading.state.value, reading.rule, question.id if question else "")
        # a new state, or the agent asks something else while still waiting
        changed = self._published is None or self._published[0] != reading.state.value \
            or self._published[2] != key[2]
        now = time.monotonic()
        if key == self._published and now - self._last_beat < self.timing.heartbeat_s:
            return
        self._last_beat = now
        self._published = key
        self._save_screen()
        self.registry.set_state(
            self.name, reading.state, signal=reading.signal.value, rule=reading.rule,
            reason=reading.reason, evidence=self.detector.evidence, quiet_ms=reading.quiet_ms,
            draft=self.detector.draft, changed=changed,
            question=question.to_json() if question else None,
        )
        self.parts.recorded(reading.state.value, changed,
                            self.snap.text if self.snap is not None else None)
        if changed:
            log.info("state %s (%s: %s)", reading.state, reading.signal, reading.reason)
            if isinstance(self.term, StatusLine):
                try:
                    self.term.set_status(f"agentwrap: {reading.state}")
                except BackendError:
                    pass

    def _save_screen(self) -> None:
        """Keep the screen the last verdict was based on, for `state --screen`:
        when a profile misjudges an agent, this is what a person needs to see."""
        if self.snap is None:
            return
        path = self.paths.runtime_dir / f"{self.name}.screen"
        try:  # O_EXCL|O_NOFOLLOW temp file, 0600, in a dir checked to be ours
            write_private(path, (self.snap.text() + "\n").encode("utf-8"))
        except (OSError, UnsafePath) as exc:
            log.warning("could not save the screen to %s: %s", path, exc)
        self._show_screen(self.snap)

    def _show_screen(self, snap: Snapshot) -> None:
        """The same screen with its colours, for the dashboard's live view
        (``GET /api/sessions/NAME/screen``): saved when it changed, then the
        event bus is nudged (no stored event: a spinner would flood the bounded
        log), and the event stream tells watchers ``session.screen``. As often
        as verdicts are recorded: on a state change, else once per heartbeat."""
        if snap.digest == self._shown:
            return
        path = self.paths.runtime_dir / f"{self.name}{DOCUMENT_SUFFIX}"
        try:
            write_private(path, to_document(snap.styled_rows(), cols=snap.cols,
                                            cursor=snap.cursor, title=snap.title,
                                            digest=snap.digest, at=time.time()))
        except (OSError, UnsafePath) as exc:
            log.warning("could not save the screen to %s: %s", path, exc)
            return
        self._shown = snap.digest
        announce(self.paths.events_dir)

    def _maybe_answer(self, dialog_name: str) -> None:
        dialog = next((d for d in self.profile.dialogs if d.name == dialog_name), None)
        if dialog is None or not dialog.keys or dialog_name in self._answered:
            return
        if dialog.opt_in == "trust_folder" and self.trust_folder:
            log.info("answering dialog %s with %s (opted in)", dialog_name, dialog.keys)
            self._answered.add(dialog_name)
            for key in dialog.keys:
                self.term.send_key(key)
                time.sleep(0.05)

    # --- event sources -------------------------------------------------------------

    def _output_fd(self) -> int | None:
        if self._stream is not None:
            return self._stream.output_fd()
        if not isinstance(self.term, OutputPipe):
            return None
        fifo = self.paths.runtime_dir / f"{self.name}.out"
        try:
            fifo.unlink()
        except FileNotFoundError:
            pass
        os.mkfifo(fifo, 0o600)
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        # Hold a writer ourselves, so the fifo never reports hang-up when
        # tmux's `cat` goes away (that would make select spin).
        wfd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        self._fifo_fds = (rfd, wfd)
        self.term.pipe_output(fifo)
        return rfd

    def _drain_output(self, fd: int) -> None:
        if self._stream is not None:
            self._stream.clear_output()
            return
        try:
            while os.read(fd, 65536):
                pass
        except (BlockingIOError, OSError):
            pass

    # --- the loop ------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        try:
            self.wake.sock.sendto(b"stop", str(self.wake.path))
        except OSError:
            pass

    def _watch_exit(self, pid: int | None) -> None:
        """Be woken by the agent's exit itself, not by a tick: a pidfd (Linux
        5.3+) turns readable when the process ends. Without one, the ticks
        notice it (within ``tick_s`` while settling, ``idle_tick_s`` after)."""
        pidfd_open = getattr(os, "pidfd_open", None)
        if pid is None or pidfd_open is None:
            return
        try:
            self._pidfd = pidfd_open(pid)
        except OSError as exc:
            log.info("no pidfd for agent %s (%s): exit is noticed by the ticks", pid, exc)

    def run(self) -> int | None:
        self.registry.claim_supervisor(self.name)
        self.registry.keep_host_alive()  # a shared store's other hosts see this one up
        pid = self.term.agent_pid()
        self.registry.update(self.name, agent_pid=pid)
        self._watch_exit(pid)
        out_fd = self._out_fd = self._output_fd()
        try:
            while not self._stop.is_set():
                try:
                    self._loop(out_fd)
                    break
                except DeliveryInterrupted:
                    break  # "stop" during a delivery step: the batch resumes later
                except StoreUnavailable as exc:
                    self._store_away(exc)
                except Exception:
                    # One bad screen or a store hiccup must not end supervision (or,
                    # in the pty backend, print a traceback into the person's
                    # terminal): log it and go on from a fresh look at the screen.
                    log.exception("supervisor loop error; continuing")
                    time.sleep(0.2)
        finally:
            self._cleanup()
        return self.exit_code

    def _store_away(self, exc: StoreUnavailable) -> None:
        """The store cannot be used: wait for it, then let the loop go on.

        The agent runs on untouched and nothing new is typed (nothing can be
        claimed, and a batch cut mid-way is resumed from its write-ahead
        phase and the screen once the store is back: the delivery engine's
        business). Meanwhile the agent's output is drained (a full fifo
        stalls tmux), a "stop" is honoured, and the store is looked at again
        with a growing pause: said once when it goes, once when it is back,
        not a traceback every turn of the loop. An agent that exits meanwhile
        has its end recorded once the store is back (recording needs it)."""
        since = time.monotonic()
        log.warning("the store is unavailable; the agent runs on and nothing is typed until"
                    " it is back: %s", exc)
        wait = self.timing.store_retry_s
        while not self._stop.is_set():
            try:
                self.pump(wait)
                self.registry.db.read("SELECT 1")
            except StoreUnavailable:
                wait = min(wait * 2, self.timing.store_retry_max_s)
                continue
            log.warning("the store is back after %.1f s", time.monotonic() - since)
            return

    def _loop(self, out_fd: int | None) -> None:
        """Wait for events; snapshot when output *pauses*, not while it flows.

        A snapshot taken while output streams can only say "busy" (ready needs
        ``quiet_ms`` of stillness), yet it costs emulator time that, in the pty
        backend, competes with the relay. So after an output event the output
        fd is not watched for ``pause_s``; a snapshot follows once a pause is
        seen, spaced at least ``9 x`` its own cost apart (<= ~10 % of a core),
        and a continuous flood gets only the safety tick, itself stretched to
        ``27 x`` the snapshot's cost (<= ~4 %): mid-flood the answer is
        "busy" anyway, and on a two-core machine every millisecond of pyte
        is taken from the agent and the person's terminal. Both spacings are
        capped (1 s, 2 s), so one snapshot slowed by a busy machine cannot
        leave the state stale for long.
        """
        t = self.timing
        dirty = True
        last_output = 0.0
        watch_out_at = 0.0
        snap_gap = t.min_snapshot_s
        turn_due: float | None = time.monotonic()  # the parts' next turn
        structured = self.detector.structured
        published = structured.stamp() if structured is not None else None

        def settled(now: float) -> bool:
            if self._pidfd_fired:
                return False  # the agent is exiting: look often until it is recorded
            return not dirty and now - self.detector.last_change >= t.settle_s

        def tick() -> float:
            if dirty:
                return min(max(t.tick_s, 3 * snap_gap), t.max_tick_s)
            return t.idle_tick_s if settled(time.monotonic()) else t.tick_s

        while not self._stop.is_set():
            now = time.monotonic()
            deadlines = [self._last_snap + tick()]
            if dirty:
                gap = snapshot_spacing(self.reading, snap_gap, t)
                deadlines.append(max(last_output + t.pause_s, self._last_snap + gap))
            quiet_at = self.detector.last_change + self.profile.quiet_ms / 1000 + 0.01
            if quiet_at > self._last_snap:
                deadlines.append(quiet_at)
            if turn_due is not None:
                deadlines.append(turn_due)
            part_due = self.parts.due()
            if part_due is not None:  # e.g. an answer rule's after_s: on time, not at the next tick
                deadlines.append(part_due)
            watching = out_fd is not None and now >= watch_out_at
            if out_fd is not None and not watching:
                deadlines.append(watch_out_at)
            polling = structured is not None and self.reading.state is State.BUSY
            if polling:
                deadlines.append(now + t.published_poll_s)
            timeout = max(0.0, min(deadlines) - now)
            fds = [self.wake.fileno()] + ([out_fd] if watching and out_fd is not None else [])
            if self._pidfd is not None:
                fds.append(self._pidfd)
            ready, _, _ = select.select(fds, [], [], timeout)
            now = time.monotonic()
            if self._pidfd is not None and self._pidfd in ready:
                os.close(self._pidfd)  # the agent has exited: look now, and not again
                self._pidfd = None
                self._pidfd_fired = True
                if self.observe().state is State.EXITED:
                    return
            if out_fd is not None and out_fd in ready:
                self._drain_output(out_fd)
                self.detector.note_output(now)
                last_output = now
                watch_out_at = now + t.pause_s
                dirty = True
            commands = self.wake.drain() if self.wake.fileno() in ready else []
            # A hook's state signal (a turn's end, a prompt, a permission request)
            # is the agent's own word: looked at now, not after the cost-based
            # spacing (up to 9 x a loaded look, ~0.2-0.5 s: issue 37, Codex's Stop
            # hook -> ready waited for it while the reply was on screen already)
            signalled = only_signals(commands)
            if commands:
                if b"stop" in commands:
                    return
                if not only_signals(commands):  # a message, an answer: the parts' turn
                    turn_due = now
                dirty = True  # a hook's signal (or a message) came: look at the screen again
            # A pause is output *seen* to stop: the fd was watched and stayed
            # quiet. (Merely not having watched it for pause_s is no pause:
            # that mistake had floods snapshotted every snap_gap.)
            quiet_seen = out_fd is None or (watching and out_fd not in ready)
            republished = False
            if polling and structured is not None:
                stamp = structured.stamp()
                republished, published = stamp != published, stamp
            paused = (dirty and quiet_seen and now - last_output >= t.pause_s
                      and now - self._last_snap >= snapshot_spacing(self.reading, snap_gap, t))
            if paused or republished or signalled or now - self._last_snap >= tick() \
                    or self._last_snap < quiet_at <= now or (part_due is not None and now >= part_due):
                dirty = False
                before = self.reading.state
                reading = self.observe()
                snap_gap = cost_spacing(self.look_s, t)
                if reading.state is State.EXITED:
                    return
                if opens_window(before, reading.state) and turn_due is not None:
                    # the verdict that lets a queued message through: its turn now,
                    # not at the engine's next poll (0.1 s while the window was
                    # shut: issue 37, ready -> keys let through)
                    turn_due = min(turn_due, time.monotonic())
            if self._woken:  # a wake-up seen by pump() while a part's turn held the loop
                self._woken = False
                turn_due = now
            if turn_due is not None and now >= turn_due:
                wait = self.parts.turn(self, until=lambda: self.reading.state is State.EXITED)
                turn_due = time.monotonic() + wait if wait is not None else None
                if self.reading.state is State.EXITED:
                    return
            elif turn_due is None:
                # safety poll for the queue (a lost wake-up, a message another
                # writer stored without one): slower once the screen is settled
                poll = ((t.idle_poll_s or t.idle_tick_s) if settled(now)
                        else t.queue_poll_s)
                turn_due = time.monotonic() + poll

    def _cleanup(self) -> None:
        ended = self.reading.state is State.EXITED or not self.term.alive()
        self.parts.close(Ended(self.term.exit_code()) if ended else None)
        self.wake.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._fifo_fds is not None:
            for fd in self._fifo_fds:
                os.close(fd)
            try:
                (self.paths.runtime_dir / f"{self.name}.out").unlink()
            except FileNotFoundError:
                pass
        if ended:
            self.exit_code = self.term.exit_code()
            from . import boxed  # a container's session (issue 39)

            options = self.registry.get(self.name).options
            box = boxed.end_reason(options)
            if box:
                log.info("session %s: %s", self.name, box)
            self.registry.mark_ended(
                self.name, self.exit_code, f"{exit_reason(self.exit_code)}: {box}" if box else None)
            from .channels import remove_launch_files  # the launch's hook/MCP/read files

            remove_launch_files(self.paths, self.name)
            from .native import native_channels  # an agent's own server (Codex's, issue 24)

            for native in native_channels():
                native.stop(self.paths, self.name, self.registry.get(self.name).options)
            with contextlib.suppress(OSError):  # what its feedback sources last said
                self.paths.feedback_memory(self.name).unlink()
            self.parts.finish(Ended(self.exit_code))
            if isinstance(self.term, Removable):  # tmux: drop the dead pane, detaching clients
                self.term.kill()
            boxed.finish(self.paths, options, self.name)  # its messages ended first


def log_to(path: Path) -> None:
    """Log to ``path``, created 0600 in a private dir: log lines quote message content."""
    private_dir(path.parent, repair=True)
    stream = os.fdopen(open_private_append(path), "a", encoding="utf-8", buffering=1)
    logging.basicConfig(
        handlers=[logging.StreamHandler(stream)], level=logging.INFO,
        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s",
    )
