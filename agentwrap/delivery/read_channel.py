"""Aider's live channel: a read-only file agentwrap owns, passed with ``--read``.

Aider has no hooks, but it re-reads every ``--read`` file each time it builds
a model request. A message written there while Aider works reaches the model
in the *next request of the running turn*: after an edit, a reflection, a
lint or test round, without waiting for the turn to end. While Aider is idle
the file is not used: typing makes a turn at once, whereas the file would only
ride along with whatever request comes next.

What Aider 0.86.2 does (``aider/coders/base_coder.py``, ``aider/io.py``):
``send_message`` -> ``format_messages`` -> ``format_chat_chunks`` opens each
read file twice, in one go: first ``choose_fence()`` (``io.read_text``, only
to pick a fence that its text does not contain), then, after the system
prompt, the summary and the repo map, ``get_read_only_files_content()``
(``io.read_text`` again): *that second open's text is what the request
quotes*. An empty file is still opened twice (``read_text`` gives ``""``,
not ``None``). The "Waiting for <model>" spinner starts only after both.
Other opens: the prompt's ``AutoCompleter.tokenize`` opens it once per
prompt, when completion first runs as the person types (idle; a dialog's
prompt has ``complete_while_typing=False``); ``/tokens`` and
``/copy-context`` open it twice (idle, typed by a person);
``show_exhausted_error`` builds the messages again after a context overflow
(a pair that is sent nowhere).

One batch at a time, so each message is delivered exactly once:

1. **Claim.** While the agent is busy, the due content messages that fit in
   :data:`MAX_FILE_BYTES` framed are claimed in the store (an atomic claim:
   the typing path, a hook or an MCP call can no longer take them) and
   written to the file, framed as a typed block (``[source:sourceId]``, the
   batch token, the ACK request when asked) plus how many still wait.
2. **Seen.** inotify on the file's dir counts the opens of the file
   (``IN_OPEN``; agentwrap never opens it itself, it replaces it by rename;
   the kernel queues every event in order and our own rename, ``IN_MOVED_TO``,
   divides the versions). A batch is ``delivered`` (channel ``read-file``)
   and the file emptied when a request quoted it:

   * ``reads_per_request`` opens (the profile's, 2 for Aider) after the write:
     whatever the pairs' phase, the last of them quotes it; or
   * the *phase*: the opens of every version (the empty one before the write
     too) counted since the turn began, i.e. since the last supervisor turn
     whose screen said the turn had ended (ready, a draft, exited: counting
     restarts at 0 there, which drops the prompt completer's lone opens). If
     the write came after an odd count it fell *between* the two opens of one
     request, and the next open, the one that quotes (an even count), carries
     it: one open after the write is enough. Opens are put down to a screen
     read *after* them (a fresh look whenever a supervisor turn takes any in:
     the last reading can be older, e.g. a whole quick request made while it
     still said "draft"); only those whose look says the turn runs (busy, a
     dialog, unknown, starting) move the phase or count as that quoting open.
     And the file's access time must say the new version was read (set to
     before the write: an open that resolved the old version just before our
     rename can have its event queued after it).
3. **Not seen.** When the turn ends (the agent ready, a draft, exited; a
   dialog mid-turn keeps it) for ``settle_s`` before a request's worth of
   opens, the file is emptied and the batch goes back to the queue (for
   typing: it is not written to the file again). A single open after the
   write with the phase even is no request: Aider's prompt completer opens
   read files once when the person starts typing. Messages whose TTL passes
   while in the file end ``expired`` and leave it.

   Left as a duplicate (read, then typed again: the behaviour before the
   phase was counted, kept wherever it cannot tell): the write fell
   mid-pair but the look after the quoting open already shows the turn over
   (the supervisor took it in more than ``quiet_ms`` late), or the phase
   was unknown (no turn seen to end since the supervisor started), or the
   access time cannot tell (``noatime``). Counted delivered though no
   request carried it (a loss), only if a pair is cut: when the count is off
   by one (a completer open, then Enter and the request's first open, all
   taken in by one supervisor turn that looks busy; or a request's first
   open taken in by a look made before the screen showed the Enter) the
   first open of a pair can count as the quoting one, which is right as long
   as its second open
   follows (same function, nothing of ours between), so a person's Ctrl-C
   between the two loses the batch; and, as for any pair, a request Aider
   builds but does not send (a context overflow, a declined token warning).
4. **Restart.** The batch token is kept beside the file; a new supervisor
   settles it from the file's access time (set to before the write, so any
   read moved it) before the engine resumes anything, and the engine skips
   the batches this channel holds (:attr:`DeliveryEngine.foreign_batches`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import errno
import json
import logging
import os
import re
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..audit import AuditLog
from ..config import Config, DeliveryConfig
from ..detect.profiles import Profile
from ..detect.states import Reading, Signal, State
from ..message import Attempt, AttemptOutcome, Message, Status
from ..paths import Paths, write_private
from ..queue.backend import configured_store
from ..queue.store import MessageStore
from .framing import new_token
from .handover import CONSUMABLE_KINDS, ack_rule, compose
from .replies import find_in_rows
from .seams import Driver, SessionInfo

log = logging.getLogger("agentwrap.delivery.read_file")

#: The channel name in ``history``, ``metrics`` and the session's options.
CHANNEL = "read-file"
#: The file Aider reads (in the session's launch dir, never in the project).
FILE_NAME = "agentwrap-messages.md"
#: Beside it: the batch in the file, for a restarted supervisor.
BATCH_FILE = "read-file-batch.json"
#: Most bytes of framed text in the file (what does not fit stays queued).
MAX_FILE_BYTES = 10 * 1024
#: How often a supervisor with a batch in the file looks again.
POLL_S = 0.05
#: How long the screen must say the turn ended before an unread batch goes back
#: to typing (a transient reading mid-turn must not take it out of the request).
SETTLE_S = 1.0
#: States in which a batch stays in the file: the turn goes on (a dialog answered
#: mid-turn leads to the next request) or the screen cannot tell. Anything else
#: (ready, a draft, exited) ends the turn: what was not read goes back to typing.
_KEEP_STATES = (State.BUSY, State.WAITING_INPUT, State.UNKNOWN, State.STARTING)
_IN_CLOSE_NOWRITE = 0x10
_IN_OPEN = 0x20
_IN_MOVED_TO = 0x80
_IN_Q_OVERFLOW = 0x4000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")


class Inotify:
    """The opens and renames in one dir, read without blocking (no thread:
    the supervisor asks when it has a batch out)."""

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int = fd
        # IN_CLOSE_NOWRITE only separates the opens: the kernel merges an event
        # identical to the unread one before it, so two reads in a row would
        # otherwise count once
        wd = libc.inotify_add_watch(fd, os.fsencode(folder),
                                    _IN_OPEN | _IN_CLOSE_NOWRITE | _IN_MOVED_TO)
        if wd < 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, f"inotify_add_watch {folder}: {os.strerror(err)}")

    def events(self) -> list[tuple[int, str]]:
        """(mask, name) of every event queued since the last call."""
        out: list[tuple[int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            pos = 0
            while pos + _EVENT.size <= len(data):
                _wd, mask, _cookie, size = _EVENT.unpack_from(data, pos)
                raw = data[pos + _EVENT.size: pos + _EVENT.size + size]
                out.append((mask, os.fsdecode(raw.rstrip(b"\0"))))
                pos += _EVENT.size + size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ReadFileState(enum.Enum):
    """Where the channel is with the file (the named states of the steps above)."""

    NEW = "new"  # before the first turn: a batch a killed supervisor left is still to settle
    OFF = "off"  # no inotify watch (:attr:`ReadFileChannel.broken` says why): never used
    IDLE = "idle"  # the file is empty; a batch is written when the agent turns busy
    WRITTEN = "written"  # a batch is in the file and the turn runs: its opens are counted
    SETTLING = "settling"  # the screen says the turn ended; after settle_s it is taken back


#: The transitions :meth:`ReadFileChannel._enter` allows.
_TRANSITIONS: dict[ReadFileState, frozenset[ReadFileState]] = {
    ReadFileState.NEW: frozenset({ReadFileState.IDLE, ReadFileState.WRITTEN, ReadFileState.OFF}),
    ReadFileState.IDLE: frozenset({ReadFileState.WRITTEN, ReadFileState.OFF}),
    ReadFileState.WRITTEN: frozenset({ReadFileState.SETTLING, ReadFileState.IDLE}),
    ReadFileState.SETTLING: frozenset({ReadFileState.WRITTEN, ReadFileState.IDLE}),
    ReadFileState.OFF: frozenset(),
}


@dataclass
class _Batch:
    token: str
    ids: list[str]
    written: float
    expires: float = 0.0  # the first TTL among them: looked at again from then on


class ReadFileChannel:
    """The supervisor's component for a session launched with the read file."""

    def __init__(
        self,
        store: MessageStore,
        cfg: DeliveryConfig,
        profile: Profile,
        session: str,
        path: Path,
        audit: AuditLog,
        *,
        require_ack: bool | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.profile = profile
        self.session = session
        self.path = path
        self.audit = audit
        self.require_ack = cfg.require_ack if require_ack is None else require_ack
        self.reads_per_request = max(1, profile.channels.reads_per_request)
        self.clock = clock
        self.state = ReadFileState.NEW
        self._watch: Inotify | None = None
        self._batch: _Batch | None = None  # in the file: set in WRITTEN and SETTLING
        self._opens = 0  # opens of the file's current version
        self._moving = False  # our rename is on its way through the event queue
        self._opens_before_move = 0
        # the phase of Aider's open pairs: opens of any version taken in while the
        # turn runs, counted from the last look that said the turn ended (None:
        # no such look yet, the count could start mid-pair)
        self._phase: int | None = None
        self._in_turn = False  # the state of this supervisor turn keeps the turn going
        self._quoted = False  # an open of the current version ended a pair (quoted it)
        self._quoted_before_move = False
        self._phase_at_move: int | None = None  # for the log
        self._overflow = False
        self._tried: set[str] = set()  # written once and not read: typed instead
        # batches delivered that asked for an ACK: token -> (ids, patterns, give up at)
        self._acks: dict[str, tuple[list[str], list[re.Pattern[str]], float | None]] = {}
        self.broken: str | None = None  # why the channel is off (inotify refused)
        self.owns_store = False  # opened by for_session: closed with the channel
        self.settle_s = SETTLE_S
        self._idle_since = 0.0  # SETTLING: the turn looked ended since

    @classmethod
    def for_session(
        cls, paths: Paths, cfg: Config, profile: Profile, rec: SessionInfo, path: Path, *,
        store: MessageStore | None = None,
    ) -> ReadFileChannel:
        """(``store``: one the composition root opened and shares; else its own.)"""
        require_ack = rec.options.require_ack
        chan = cls(
            store or configured_store(paths.db_path, cfg, events_dir=paths.events_dir),
            cfg.delivery, profile, rec.name, path, AuditLog(paths.audit_log),
            require_ack=require_ack if isinstance(require_ack, bool) else None,
        )
        chan.owns_store = store is None
        return chan

    # --- the supervisor's turn ----------------------------------------------------------

    def batches(self) -> set[str]:
        """The batch tokens this channel holds in flight (the engine leaves them alone)."""
        if self.state is ReadFileState.NEW:  # before the first turn: the file's record says
            saved = self._load_batch()
            return {saved.token} if saved else set()
        return {self._batch.token} if self._batch else set()

    def _enter(self, new: ReadFileState) -> None:
        """Move to state ``new`` (a transition :data:`_TRANSITIONS` allows; staying is no move)."""
        if new is self.state:
            return
        assert new in _TRANSITIONS[self.state], f"read-file channel: {self.state} -> {new}"
        self.state = new

    def step(self, sup: Driver) -> float | None:
        if self.state is ReadFileState.NEW:
            self._recover()
        if self.state is ReadFileState.OFF:
            return None
        reading = sup.reading
        events = self._watch.events() if self._watch is not None else []
        if any(mask & _IN_OPEN and name == self.path.name for mask, name in events):
            # opens came since the last turn: whose were they? The last reading
            # can be older than they are (a whole quick request read as the
            # draft typed before it), so they are put down to a screen read
            # after them: a turn that runs now had them, or will read the file
            reading = sup.observe()
        state = reading.state
        self._in_turn = state in _KEEP_STATES
        self._take(events)
        if not self._in_turn:  # the turn ended: the next one starts its pairs at 0
            self._phase = 0
        now = self.clock()
        if self._batch is not None and now >= self._batch.expires:
            self._drop_expired(now)
        if self._batch is not None:
            if self._opens >= self.reads_per_request or self._overflow:
                self._delivered(f"aider opened the file {self._opens} time(s) after the write:"
                                " a model request carried it")
            elif self._quoted and _read_since_written(self.path):
                self._delivered(f"aider opened the file {self._opens} time(s) after the write,"
                                " the open that quotes it: the write fell between the two"
                                " opens of one model request")
            elif state not in _KEEP_STATES:
                # the screen says the turn ended; a glance while Aider waits on the
                # model can say so too (its spinner redrawn away: a "draft"), so only
                # a reading that lasts settle_s gives the batch back, unless Aider
                # itself said so (_turn_over)
                if self.state is ReadFileState.WRITTEN:
                    self._idle_since = now
                    self._enter(ReadFileState.SETTLING)
                over = _turn_over(reading)
                if not over and now - self._idle_since < self.settle_s:
                    return POLL_S
                self._settle(f"the turn ended ({state}"
                             f"{': the agent said so, its prompt drawn' if over else ''})")
            else:
                self._enter(ReadFileState.WRITTEN)  # the turn runs (again)
                return POLL_S
        if state is State.BUSY and self._batch is None:
            self._write_next(now)
        if self._acks:
            self._look_for_acks(sup, state, now)
        return POLL_S if self._batch is not None or self._acks else None

    def abandon(self, reason: str) -> int:
        """The session ends: settle the batch in the file (the engine's
        abandon then gives a released message its end state)."""
        if self._batch is None:
            return 0
        n = len(self._batch.ids)
        self._settle(reason)
        return n

    def close(self) -> None:
        """Leave nothing in the file while no supervisor watches it: a read
        batch is delivered, an unread one goes back to the queue."""
        try:
            if self._batch is not None and self.state is not ReadFileState.OFF:
                self._settle("the supervisor stopped")
        finally:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
            if self.owns_store:
                self.store.close()

    # --- writing ------------------------------------------------------------------------

    def _write_next(self, now: float) -> None:
        due: list[Message] = []
        for m in self.store.peek(self.session, now, kinds=CONSUMABLE_KINDS, due=True, limit=50):
            if m.id in self._tried:  # a claim takes messages in order: stop before it
                break
            due.append(m)
        fit = 0
        for n in range(1, len(due) + 1):
            if len(self._compose(due[:n], "0" * 8, 0).encode("utf-8")) > MAX_FILE_BYTES:
                break
            fit = n
        if fit == 0:
            return  # none due, or the first is too long for the file: typed once idle
        head = due[:fit]
        token = new_token()
        batch = self.store.claim_batch(
            self.session, token, sum(len(m.content.encode("utf-8")) for m in head),
            now, kinds=CONSUMABLE_KINDS, limit=fit,
        )
        if not batch:
            return
        left = len(self.store.peek(self.session, now, kinds=CONSUMABLE_KINDS, limit=50))
        text = self._compose(batch, token, left)
        self._batch = _Batch(token, [m.id for m in batch], now, min(m.expires for m in batch))
        self._enter(ReadFileState.WRITTEN)
        self._save_batch()
        for m in batch:
            self.store.record_attempt(Attempt(m.id, token, m.attempts + 1, now, None, CHANNEL,
                                              AttemptOutcome.WRITTEN, f"written to {self.path.name}"))
        self._replace(text)
        log.info("wrote %d message(s) to %s (batch %s; opens since the turn began: %s)",
                 len(batch), self.path, token, self._phase_at_move)

    def _asks_ack(self, batch: Sequence[Message]) -> bool:
        """As the typed block decides it: a message's own wish, else the session's."""
        return ack_rule(self.require_ack, self.cfg.ack_wording)(batch) is not None

    def _compose(self, batch: Sequence[Message], token: str, left: int) -> str:
        ack = ack_rule(self.require_ack, self.cfg.ack_wording)(batch)
        return compose(batch, token, ack, left, syntax=self.profile.syntax) + "\n"

    def _replace(self, text: str) -> int:
        """Put ``text`` in the file (atomically, by rename); returns the opens
        of the version it replaced."""
        self._pump()
        self._moving = True
        self._opens_before_move = self._opens
        self._quoted_before_move = self._quoted
        write_private(self.path, text.encode("utf-8"))
        try:  # evidence for a restarted supervisor: any read moves the access time
            st = os.stat(self.path)
            os.utime(self.path, ns=(st.st_mtime_ns - 1_000_000_000, st.st_mtime_ns))
        except OSError:
            pass
        self._pump()
        if self._moving:  # the event never came (queue overflow): nothing can be told
            self._moving = False
            self._overflow = True
            return 1
        return self._opens_before_move

    def _pump(self) -> None:
        if self._watch is not None:
            self._take(self._watch.events())

    def _take(self, events: list[tuple[int, str]]) -> None:
        for mask, name in events:
            if mask & _IN_Q_OVERFLOW:
                self._overflow = True
                self._phase = None  # opens were lost: the pairs' phase is unknown
            if name != self.path.name:
                continue
            if mask & _IN_MOVED_TO and self._moving:
                self._moving = False
                self._opens_before_move = self._opens
                self._quoted_before_move = self._quoted
                self._phase_at_move = self._phase
                self._opens = 0
                self._quoted = False
                self._overflow = False
            elif mask & _IN_OPEN:
                self._opens += 1
                if self._in_turn and self._phase is not None:
                    self._phase += 1
                    # the open that ends a request's group is the one that quotes
                    self._quoted = self._quoted or self._phase % self.reads_per_request == 0

    # --- ending a batch ---------------------------------------------------------------------

    def _delivered(self, evidence: str) -> None:
        b = self._batch
        assert b is not None
        self._batch = None
        self._enter(ReadFileState.IDLE)
        self._replace("")
        self._clear_batch()
        now = self.clock()
        flight = self._in_flight(b.token)
        for m in flight:
            self.store.record_attempt(Attempt(m.id, b.token, m.attempts + 1, b.written, now,
                                              CHANNEL, AttemptOutcome.DELIVERED, evidence))
        if flight and self._asks_ack(flight):
            patterns = [re.compile(p.replace("{token}", re.escape(b.token)), re.IGNORECASE)
                        for p in [*self.cfg.ack_patterns, *self.profile.ack_patterns]]
            self._acks[b.token] = ([m.id for m in flight], patterns, None)
        n = self.store.finish(Status.DELIVERED, f"delivered: read through {CHANNEL}",
                              batch_id=b.token, consumed_through=CHANNEL)
        self.audit.write(event="consumed", session=self.session, channel=CHANNEL, ids=b.ids)
        log.info("batch %s delivered through %s (%d message(s)): %s", b.token, CHANNEL, n,
                 evidence)

    def _look_for_acks(self, sup: Driver, state: State, now: float) -> None:
        """The model's reply on screen says ``ACK <token>`` for a batch read
        from the file (the block itself is never on screen, so any match is
        the reply's): its messages are acknowledged. Looked for while the
        agent works and ``ack_timeout_s`` after."""
        rows = sup.snap.text().split("\n") if sup.snap is not None else []
        cols = sup.snap.cols if sup.snap is not None else 0
        for token, (ids, patterns, until) in list(self._acks.items()):
            line = find_in_rows(rows, patterns, cols)  # rows joined where the reply wrapped
            if line:
                del self._acks[token]
                for mid in ids:
                    self.store.acknowledge(mid, f"acknowledged: {line[:200]} (through {CHANNEL})")
                self.audit.write(event="acknowledged", session=self.session, channel=CHANNEL,
                                 ids=ids)
            elif state is State.BUSY:
                self._acks[token] = (ids, patterns, None)
            elif until is None:
                self._acks[token] = (ids, patterns, now + self.cfg.ack_timeout_s)
            elif now >= until:
                del self._acks[token]  # delivered, not acknowledged (as a hook's batch may be)

    def _settle(self, why: str) -> None:
        """Empty the file; the batch is delivered if a request's worth of opens
        came before that, or the open that ends a request's group while the
        turn ran (the write fell mid-request), else it goes back to the queue.
        Other single opens are not a request: Aider's prompt completer opens
        every read file once when the person starts typing, and a request
        opens it ``reads_per_request`` times in one go."""
        b = self._batch
        assert b is not None
        read = _read_since_written(self.path)  # before the rename: of the batch's version
        opened = self._replace("")
        if opened >= self.reads_per_request or self._overflow:
            self._batch = b
            self._delivered(f"aider opened the file {opened} time(s) after the write; then {why}")
            return
        if self._quoted_before_move and read:
            self._batch = b
            self._delivered(f"aider opened the file {opened} time(s) after the write, the open"
                            f" that quotes it (the write fell mid-request); then {why}")
            return
        self._batch = None
        self._enter(ReadFileState.IDLE)
        self._clear_batch()
        now = self.clock()
        for m in self._in_flight(b.token):
            self._tried.add(m.id)
            self.store.record_attempt(Attempt(m.id, b.token, m.attempts + 1, b.written, now,
                                              CHANNEL, AttemptOutcome.NOT_READ, f"not read before {why}"))
        self.store.retry_later(b.token, now, f"not read from the file before {why}: typed instead")
        log.info("batch %s taken back from %s: %s (%d open(s) after the write, the quoting"
                 " one %s, read since written: %s)", b.token, self.path.name, why, opened,
                 "seen" if self._quoted_before_move else "not seen", read)

    def _drop_expired(self, now: float) -> None:
        b = self._batch
        assert b is not None
        flight = self._in_flight(b.token)
        gone = [m.id for m in flight if m.expires <= now]
        if not gone and flight:
            b.expires = min(m.expires for m in flight)
            return
        if gone:
            self.store.finish(Status.EXPIRED, "expired while in the read file", message_ids=gone)
        rest = [m for m in flight if m.id not in gone]
        if not rest:
            self._batch = None
            self._enter(ReadFileState.IDLE)
            self._replace("")
            self._clear_batch()
            return
        b.ids = [m.id for m in rest]
        b.expires = min(m.expires for m in rest)
        left = len(self.store.peek(self.session, now, kinds=CONSUMABLE_KINDS, limit=50))
        self._replace(self._compose(rest, b.token, left))

    def _in_flight(self, token: str) -> list[Message]:
        return [m for m in self.store.in_flight(self.session) if m.batch_id == token]

    # --- restart ------------------------------------------------------------------------------

    def _recover(self) -> None:
        """NEW -> IDLE (or OFF): settle what a killed supervisor left in the file."""
        saved = self._load_batch()
        read = False
        if saved is not None:  # looked at before the watch starts: our own read is no open
            read = _read_since_write(self.path, saved.token)
        try:
            self._watch = Inotify(self.path.parent)
        except OSError as exc:
            self.broken = f"no inotify watch on {self.path.parent}: {exc}"
            log.warning("read-file channel off: %s", self.broken)
        flight = self._in_flight(saved.token) if saved is not None else []
        if saved is None:
            pass
        elif not flight:
            self._clear_batch()
        else:
            self._batch = _Batch(saved.token, [m.id for m in flight], saved.written)
            self._enter(ReadFileState.WRITTEN)
            if read:
                self._delivered("aider read the file before the supervisor restarted")
            elif self.broken:
                self._batch = None
                self._enter(ReadFileState.IDLE)
                self._clear_batch()
                self.store.retry_later(saved.token, self.clock(), "read-file channel off")
            else:
                self._settle("the supervisor restarted")
        self._enter(ReadFileState.OFF if self.broken else ReadFileState.IDLE)

    def _batch_path(self) -> Path:
        return self.path.with_name(BATCH_FILE)

    def _save_batch(self) -> None:
        b = self._batch
        assert b is not None
        write_private(self._batch_path(), json.dumps(
            {"batch": b.token, "ids": b.ids, "written": b.written}).encode("utf-8"))

    def _load_batch(self) -> _Batch | None:
        try:
            data = json.loads(self._batch_path().read_text(encoding="utf-8"))
            return _Batch(str(data["batch"]), [str(i) for i in data["ids"]],
                          float(data["written"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _clear_batch(self) -> None:
        try:
            self._batch_path().unlink()
        except FileNotFoundError:
            pass


def _turn_over(reading: Reading) -> bool:
    """Whether ``reading`` is the agent's own word that its turn is over, its
    prompt on screen: ``ready`` decided by its turn-end signal (Aider 0.86.2
    runs its notifications command, :mod:`agentwrap.sessions.turn_end`, in
    ``get_input`` just before it draws the prompt, after the turn's last
    request; the detector counts the mark only once the prompt is drawn). No
    request of that turn follows, so an unread batch goes back to typing at
    once: waiting :data:`SETTLE_S` for a glance to pass held every message
    queued during a turn ~1.1 s after Aider took keys (issue 37). A ready read
    off the screen alone may be a glance mid-turn and still waits."""
    return reading.state is State.READY and reading.signal is Signal.HOOK


def _read_since_written(path: Path) -> bool:
    """The file's current version was read since we wrote it (its access
    time, set to before the write, moved). A stat only: an open would count."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_atime_ns >= st.st_mtime_ns


def _read_since_write(path: Path, token: str) -> bool:
    """The file holds batch ``token`` and was read since it was written (its
    access time, set to before the write, moved), looked at without moving it."""
    try:
        st = os.stat(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOATIME", 0))
        try:
            text = os.read(fd, 4 * MAX_FILE_BYTES).decode("utf-8", "replace")
        finally:
            os.close(fd)
    except OSError:
        return False
    return token in text and st.st_atime_ns >= st.st_mtime_ns


__all__ = ["CHANNEL", "FILE_NAME", "MAX_FILE_BYTES", "Inotify", "ReadFileChannel", "ReadFileState"]
