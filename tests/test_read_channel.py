"""Aider's read-file channel (agentwrap/delivery/read_channel.py) on a real
store, a real file and real inotify: the "agent" is whatever opens the file
(this process with open(), as Aider does), the supervisor a stand-in that only
says which state the agent is in."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentwrap.audit import AuditLog
from agentwrap.config import DeliveryConfig
from agentwrap.delivery.engine import DeliveryEngine
from agentwrap.delivery.read_channel import (
    CHANNEL,
    MAX_FILE_BYTES,
    ReadFileChannel,
    ReadFileState,
)
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import Reading, Signal, State
from agentwrap.message import NewMessage, Phase, Source, Status
from agentwrap.paths import private_dir
from agentwrap.service import Service
from agentwrap.sessions.channels import plan, read_file_path


@dataclass
class Sup:
    """What the channel reads of the supervisor: the agent's state."""

    state: State = State.BUSY
    snap: None = None
    term: None = None
    stopping: bool = False
    detector: object = field(default_factory=object)

    then: State | None = None  # what a fresh look sees, when the last reading is stale
    signal: Signal = Signal.SCREEN  # who decided the state

    @property
    def reading(self) -> Reading:
        return Reading(self.state, self.signal, "test", "test", 0, time.time())

    def observe(self) -> Reading:
        if self.then is not None:
            self.state, self.then = self.then, None
        return self.reading


def _aider_reads(path: Path, times: int = 2) -> str:
    """One model request as Aider 0.86.2 builds it: the file opened twice."""
    text = ""
    for _ in range(times):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return text


def _peek(path: Path) -> str:
    """The file's text, read as the test's eyes (O_NOATIME; its opens still
    count for inotify, so only where the channel's count no longer matters)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOATIME)
    try:
        return os.read(fd, 1 << 20).decode()
    finally:
        os.close(fd)


@pytest.fixture
def chan(svc: Service) -> ReadFileChannel:
    path = read_file_path(svc.paths, "fake")
    private_dir(svc.paths.state_dir / "launch", repair=True)
    private_dir(path.parent, repair=True)
    path.write_bytes(b"")
    c = ReadFileChannel(svc.store, DeliveryConfig(), load_profile("aider"), "fake", path,
                        AuditLog(svc.paths.audit_log))
    c.settle_s = 0  # the turn's end taken at its first reading (see the glitch test)
    yield c
    c._watch and c._watch.close()


def _send(svc: Service, text: str, **kw: object) -> str:
    return svc.send(NewMessage(session="fake", content=text, source=Source.WEBHOOK,
                               source_id="ci", **kw)).message.id  # type: ignore[arg-type]


def test_busy_agent_gets_the_message_in_the_file_framed_and_claimed(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "build 42 failed")
    sup = Sup(State.BUSY)
    assert chan.step(sup) is not None  # a batch is out: it wants to look again soon
    text = _peek(chan.path)
    m = svc.get(mid)
    assert m.status is Status.DELIVERING and m.batch_id and m.batch_id in text
    assert "[webhook:ci] build 42 failed" in text
    assert stat.S_IMODE(chan.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(chan.path.parent.stat().st_mode) == 0o700
    assert chan.batches() == {m.batch_id}


def test_opened_as_one_request_counts_as_delivered_and_leaves_the_file(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "hello")
    sup = Sup(State.BUSY)
    chan.step(sup)
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING  # not read yet
    assert "hello" in _aider_reads(chan.path, 1)
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING  # one open: the request is being built
    _aider_reads(chan.path, 1)
    chan.step(sup)
    entry = svc.message(mid)
    assert entry.message.status is Status.DELIVERED
    assert entry.channel == CHANNEL
    assert _peek(chan.path) == ""
    kinds = [e.kind for e in svc.events(after_id=0)]
    assert "session.consumed" in kinds or "session.input.consumed" in kinds


def test_turn_ended_before_any_read_goes_back_to_the_queue_for_typing(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "later")
    sup = Sup(State.BUSY)
    chan.step(sup)
    sup.state = State.READY
    chan.step(sup)
    m = svc.get(mid)
    assert m.status is Status.PENDING and m.batch_id is None
    assert _peek(chan.path) == ""
    assert [a.outcome for a in svc.store.attempts(mid)] == ["not_read"]
    sup.state = State.BUSY  # never written to the file twice: the typing path has it
    chan.step(sup)
    assert _peek(chan.path) == "" and svc.get(mid).status is Status.PENDING


def test_the_channel_moves_through_its_named_states(svc: Service, chan: ReadFileChannel) -> None:
    """NEW -> IDLE at the first turn; WRITTEN while the turn runs; SETTLING
    while the screen says it ended, back to WRITTEN if it runs on; IDLE once
    the batch is given back."""
    later = [0.0]  # the settle time passes at once
    chan.clock, chan.settle_s = (lambda: time.time() + later[0]), 60.0
    assert chan.state is ReadFileState.NEW
    sup = Sup(State.READY)
    chan.step(sup)
    assert chan.state is ReadFileState.IDLE
    mid = _send(svc, "through the states")
    sup.state = State.BUSY
    chan.step(sup)
    assert chan.state is ReadFileState.WRITTEN
    sup.state = State.READY  # a glance that says the turn ended
    chan.step(sup)
    assert chan.state is ReadFileState.SETTLING
    sup.state = State.BUSY  # it runs on
    chan.step(sup)
    assert chan.state is ReadFileState.WRITTEN
    sup.state = State.READY
    chan.step(sup)
    assert chan.state is ReadFileState.SETTLING
    later[0] = 60.0
    chan.step(sup)
    assert chan.state is ReadFileState.IDLE and svc.get(mid).status is Status.PENDING


def test_one_open_is_not_a_request_and_the_turn_end_gives_it_back(svc: Service, chan: ReadFileChannel) -> None:
    """Aider's prompt completer opens each read file once when the person
    starts typing; a request opens it twice in one go."""
    mid = _send(svc, "x")
    sup = Sup(State.BUSY)
    chan.step(sup)
    _aider_reads(chan.path, 1)
    sup.state = State.DRAFT
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING


def test_a_dialog_mid_turn_keeps_the_batch_in_the_file(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "through the dialog")
    sup = Sup(State.BUSY)
    chan.step(sup)
    for state in (State.WAITING_INPUT, State.UNKNOWN, State.BUSY):
        sup.state = state
        chan.step(sup)
        assert svc.get(mid).status is Status.DELIVERING
    _aider_reads(chan.path, 2)
    sup.state = State.READY  # the request and the turn's end seen in the same turn
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED


def test_idle_agent_gets_nothing_in_the_file(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "typed instead")
    for state in (State.READY, State.DRAFT, State.WAITING_INPUT, State.STARTING):
        assert chan.step(Sup(state)) is None
    assert _peek(chan.path) == "" and svc.get(mid).status is Status.PENDING


def test_the_file_holds_at_most_10_kb_and_says_how_many_wait(svc: Service, chan: ReadFileChannel) -> None:
    ids = [_send(svc, f"{n} " + "y" * 3000) for n in range(5)]
    chan.step(Sup(State.BUSY))
    text = _peek(chan.path)
    assert len(text.encode()) <= MAX_FILE_BYTES
    taken = [i for i in ids if svc.get(i).status is Status.DELIVERING]
    assert 1 <= len(taken) < 5
    assert f"{5 - len(taken)} more messages for this session wait" in text


def test_a_message_that_expires_in_the_file_leaves_it(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "short-lived", ttl_s=1)
    sup = Sup(State.BUSY)
    chan.step(sup)
    assert "short-lived" in _peek(chan.path)
    chan.clock = lambda: time.time() + 5
    chan.step(sup)
    assert svc.get(mid).status is Status.EXPIRED
    assert _peek(chan.path) == ""


def test_a_restarted_supervisor_settles_the_batch_from_the_access_time(svc: Service, chan: ReadFileChannel) -> None:
    read_id = _send(svc, "read before the crash")
    chan.step(Sup(State.BUSY))
    _aider_reads(chan.path, 1)
    chan._watch.close()  # killed: nothing settled, the batch still in the file
    chan._watch = None
    again = ReadFileChannel(svc.store, DeliveryConfig(), chan.profile, "fake", chan.path,
                            AuditLog(svc.paths.audit_log))
    assert again.batches() == {svc.get(read_id).batch_id}  # the engine must leave it alone
    again.step(Sup(State.BUSY))
    assert svc.get(read_id).status is Status.DELIVERED

    unread = _send(svc, "not read before the crash")
    again.step(Sup(State.BUSY))
    assert "not read before" in _peek(chan.path)
    again._watch.close()
    again._watch = None
    third = ReadFileChannel(svc.store, DeliveryConfig(), chan.profile, "fake", chan.path,
                            AuditLog(svc.paths.audit_log))
    third.step(Sup(State.READY))
    assert svc.get(unread).status is Status.PENDING
    assert _peek(chan.path) == ""
    third.close()


def test_close_takes_an_unread_batch_back(svc: Service, chan: ReadFileChannel) -> None:
    mid = _send(svc, "bye")
    chan.step(Sup(State.BUSY))
    chan.close()
    assert svc.get(mid).status is Status.PENDING and _peek(chan.path) == ""


def test_the_engine_never_resumes_a_batch_the_file_holds(svc: Service, chan: ReadFileChannel, aw) -> None:
    mid = _send(svc, "in the file")
    chan.step(Sup(State.BUSY))
    token = svc.get(mid).batch_id
    assert svc.get(mid).phase is Phase.CLAIMED
    engine = DeliveryEngine(svc.store, DeliveryConfig(), chan.profile, "fake", aw.project,
                            AuditLog(svc.paths.audit_log))
    engine.foreign_batches = chan.batches
    engine._resume()
    assert token not in engine._parked  # not taken up: no step of the engine types it
    m = svc.get(mid)
    assert m.status is Status.DELIVERING and m.batch_id == token and m.phase is Phase.CLAIMED


def test_run_registers_the_file_for_aider_only_in_the_state_dir(svc: Service, aw) -> None:
    from agentwrap.config import RunConfig

    profile = load_profile("aider")
    out = plan(profile, RunConfig(), svc.paths, "ai", ["aider"], dict(os.environ), version="0.86.2")
    path = read_file_path(svc.paths, "ai")
    # and Aider's turn end (agentwrap.sessions.turn_end), its other channel
    assert out.channels == ["read-file", "turn-end"]
    assert out.argv[:2] == ["--read", str(path)]
    assert out.argv[2:4] == ["--notifications", "--notifications-command"], out.argv
    assert path.read_bytes() == b"" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert svc.paths.state_dir in path.parents
    off = plan(profile, RunConfig(), svc.paths, "ai2", ["aider"], dict(os.environ),
               version="0.86.2", enabled=False)
    assert off.channels == [] and off.argv == []


@dataclass
class _Snap:
    screen: str
    cols: int = 80

    def text(self) -> str:
        return self.screen


@pytest.mark.parametrize("reply", ["some reply\nACK {token}\n> ",
                                   "some reply, step 39 ACK\n{token}\n> "],  # wrapped (35.2)
                         ids=["one row", "wrapped"])
def test_an_ack_in_the_reply_on_screen_acknowledges_the_batch(
    svc: Service, chan: ReadFileChannel, reply: str
) -> None:
    mid = _send(svc, "ack me", require_ack=True)
    sup = Sup(State.BUSY)
    chan.step(sup)
    token = svc.get(mid).batch_id
    assert f'"ACK {token}"' in _peek(chan.path)
    _aider_reads(chan.path, 2)
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED
    sup.snap = _Snap(reply.format(token=token))  # type: ignore[assignment]
    chan.step(sup)
    assert svc.get(mid).status is Status.ACKNOWLEDGED
    assert chan.step(sup) is None  # nothing left to watch


def test_two_opens_in_a_row_are_two_opens(svc: Service, chan: ReadFileChannel) -> None:
    """The kernel merges an inotify event identical to the unread one before it:
    two reads between two turns of the supervisor must still count twice."""
    mid = _send(svc, "twice")
    sup = Sup(State.BUSY)
    chan.step(sup)
    _aider_reads(chan.path, 2)
    chan.step(sup)
    entry = svc.message(mid)
    assert entry.message.status is Status.DELIVERED
    assert "2 time(s)" in entry.attempts[-1].evidence


def test_a_passing_glance_of_a_draft_mid_turn_keeps_the_batch(svc: Service, chan: ReadFileChannel) -> None:
    """Aider's spinner redrawn away while it waits on the model reads as a
    draft for a moment (seen on the real aider): the batch stays in the file
    unless the turn looks ended for settle_s."""
    now = [time.time()]
    chan.clock = lambda: now[0]
    chan.settle_s = 1.0
    mid = _send(svc, "stay")
    sup = Sup(State.BUSY)
    chan.step(sup)
    sup.state = State.DRAFT
    chan.step(sup)
    now[0] += 0.5
    chan.step(sup)
    sup.state = State.BUSY
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    sup.state = State.READY
    chan.step(sup)
    now[0] += 1.1
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING  # the turn really ended


@pytest.mark.parametrize(("state", "signal", "at_once"), [
    (State.READY, Signal.HOOK, True),  # Aider's notifications mark, its prompt drawn
    (State.READY, Signal.SCREEN, False),  # the prompt rule alone: a glance may pass
    (State.READY, Signal.QUIET, False),
    (State.DRAFT, Signal.SCREEN, False),  # the spinner redrawn away mid-turn reads as a draft
    (State.DRAFT, Signal.HOOK, False),
])
def test_the_agents_own_turn_end_gives_an_unread_batch_back_at_once(
        svc: Service, chan: ReadFileChannel, state: State, signal: Signal, at_once: bool) -> None:
    """Issue 37: a message queued while Aider works goes to the file; a
    one-request turn never reads it, and it goes back to typing when the turn
    ends. Aider's own turn end (its notifications command ran and the prompt is
    drawn: ``ready`` by the hook signal) is that end, no glance: given back at
    the first look (it waited ``settle_s``, 1 s, and Aider's first key came
    ~1.1 s after it took keys). Any other reading still waits ``settle_s``."""
    mid = _send(svc, "next prompt")
    now = [time.time() + 0.01]
    chan.clock = lambda: now[0]
    chan.settle_s = 1.0
    sup = Sup(State.BUSY)
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    sup.state, sup.signal = state, signal
    chan.step(sup)
    now[0] += 0.05
    chan.step(sup)
    assert (svc.get(mid).status is Status.PENDING) is at_once
    assert _peek(chan.path) == "" or not at_once
    now[0] += 1.0
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING  # every turn's end gives it back in the end
    assert [a.outcome for a in svc.store.attempts(mid)] == ["not_read"]


class AiderPair:
    """One model request as Aider 0.86.2's ``format_chat_chunks`` builds it,
    in its two steps: ``choose_fence`` opens the read file (its text only picks
    a fence), then ``get_read_only_files_content`` opens it again and that
    text is what the request quotes. The prompt completer's ``tokenize`` opens
    it once, while the person types."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _open(self) -> str:
        with open(self.path, encoding="utf-8") as f:
            return f.read()

    def choose_fence(self) -> None:
        self._open()

    def quote(self) -> str:
        return self._open()

    def completer(self) -> None:
        self._open()


def test_a_write_between_a_requests_two_opens_is_delivered_by_the_open_that_quotes_it(
        svc: Service, chan: ReadFileChannel) -> None:
    """The write lands after choose_fence opened the (empty) file and before
    the quoting open: that one open after the write carried the message, so
    the turn's end must not take it back (it would be typed a second time)."""
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)  # the turn before ended: the pairs of the next one count from 0
    sup.state = State.BUSY
    aider.choose_fence()  # the request's first open: the file still empty
    mid = _send(svc, "mid-pair")
    chan.step(sup)  # written now, between the two opens
    assert svc.get(mid).status is Status.DELIVERING
    assert "mid-pair" in aider.quote()  # the open that quotes it: the model has it
    chan.step(sup)
    entry = svc.message(mid)
    assert entry.message.status is Status.DELIVERED and entry.channel == CHANNEL
    assert "1 time(s)" in entry.attempts[-1].evidence
    assert _peek(chan.path) == ""
    sup.state = State.READY  # the turn ends with no other request: nothing goes back
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED
    assert [a.outcome for a in svc.store.attempts(mid)] == ["delivered"]


def test_a_mid_pair_write_whose_turn_ends_at_once_is_delivered_at_the_settle(
        svc: Service, chan: ReadFileChannel) -> None:
    """The quoting open taken in while the turn runs, the turn's end seen in
    the very next look: settled as delivered, not given back."""
    later = [0.0]  # the clock moved on by hand (settle_s), never waited for
    chan.clock = lambda: time.time() + later[0]
    chan.settle_s = 1.0
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.BUSY
    aider.choose_fence()
    chan.step(sup)  # the first open taken in (phase odd), nothing queued yet
    mid = _send(svc, "quoted then over")
    chan.step(sup)
    assert "quoted then over" in aider.quote()
    chan._pump()  # taken in while the turn runs (as a close() would)
    sup.state = State.READY
    chan.step(sup)
    later[0] += 1.1
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED


def test_a_write_before_a_request_is_delivered_by_its_second_open_only(
        svc: Service, chan: ReadFileChannel) -> None:
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.BUSY
    aider.choose_fence()
    aider.quote()  # a whole request before the message: the phase is even again
    mid = _send(svc, "next request")
    chan.step(sup)
    aider.choose_fence()  # the next request's first open: it only picks a fence
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    assert "next request" in aider.quote()
    chan.step(sup)
    entry = svc.message(mid)
    assert entry.message.status is Status.DELIVERED
    assert "2 time(s)" in entry.attempts[-1].evidence


def test_a_completer_open_before_the_turn_shifts_no_phase(
        svc: Service, chan: ReadFileChannel) -> None:
    """The completer opens the file once as the person types at the idle
    prompt: counted, it would put the turn's pairs out of phase and a
    request's first open (which only picks a fence) would pass for the
    quoting one."""
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    aider.completer()  # typing at the idle prompt
    chan.step(sup)
    sup.state = State.BUSY  # the turn starts: no request yet
    mid = _send(svc, "not yet read")
    chan.step(sup)
    aider.choose_fence()
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING  # one open of a request: not quoted yet
    assert "not yet read" in aider.quote()
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED


def test_a_lone_completer_open_after_the_turn_is_no_request(
        svc: Service, chan: ReadFileChannel) -> None:
    """Written after the turn's last request; the turn ends and the person
    types at the prompt: that one open after the write is no request."""
    later = [0.0]  # the clock moved on by hand (settle_s), never waited for
    chan.clock = lambda: time.time() + later[0]
    chan.settle_s = 1.0
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.BUSY
    aider.choose_fence()
    aider.quote()  # the turn's last request
    chan.step(sup)
    mid = _send(svc, "after the last request")
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    sup.state = State.READY
    chan.step(sup)
    aider.completer()
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    later[0] += 1.1
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING  # given back to typing: no request quoted it
    assert [a.outcome for a in svc.store.attempts(mid)] == ["not_read"]


def test_a_quoting_open_first_seen_after_the_turn_ended_is_given_back(
        svc: Service, chan: ReadFileChannel) -> None:
    """The case left as a duplicate: the write fell mid-pair, but the look that
    first takes in the quoting open already says the turn ended, and an open
    seen then may as well be the completer's. Typed again rather than lost."""
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.BUSY
    aider.choose_fence()
    mid = _send(svc, "too quick")
    chan.step(sup)
    assert "too quick" in aider.quote()
    sup.state = State.READY
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING


def test_the_phase_is_unknown_until_a_turn_is_seen_to_end(
        svc: Service, chan: ReadFileChannel) -> None:
    """A supervisor that starts mid-turn cannot know where Aider is in a pair:
    one open after the write is no request then."""
    aider = AiderPair(chan.path)
    sup = Sup(State.BUSY)
    aider.choose_fence()
    mid = _send(svc, "unknown phase")
    chan.step(sup)
    aider.quote()
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    aider.choose_fence()
    aider.quote()
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED


def test_a_quoting_open_that_read_nothing_new_is_no_delivery(
        svc: Service, chan: ReadFileChannel) -> None:
    """The quoting open must have read the new version (its access time moved):
    an open that resolved the old version just before our rename can have its
    event queued after the rename. Here the open reads without moving the
    access time (O_NOATIME), as such an open leaves the new version: one open
    after the write, not shown to be of it, is no request."""
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.BUSY
    aider.choose_fence()
    mid = _send(svc, "old version read")
    chan.step(sup)
    assert "old version read" in _peek(chan.path)  # an open, but the access time stays
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    sup.state = State.READY
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING


def test_a_request_made_under_a_stale_reading_counts_for_the_phase(
        svc: Service, chan: ReadFileChannel) -> None:
    """Seen on the real aider: the person's Enter, a whole quick request and
    the next one's first open all came while the last reading still said
    "draft". The opens are put down to a fresh look (busy): the phase stays
    right, and the write that follows falls mid-pair."""
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.DRAFT  # the person typed
    aider.completer()
    chan.step(sup)  # a fresh look still says draft: the completer's open counts for nothing
    aider.choose_fence()
    aider.quote()  # the first request
    aider.choose_fence()  # the reflection's first open: aider waits on its summarizer here
    mid = _send(svc, "under a stale reading")
    sup.then = State.BUSY  # the last reading says draft; a look now says busy
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERING
    assert "under a stale reading" in aider.quote()
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED
    sup.state = State.READY
    chan.step(sup)
    assert svc.get(mid).status is Status.DELIVERED


def test_an_open_whose_fresh_look_says_the_turn_ended_is_no_quoting_open(
        svc: Service, chan: ReadFileChannel) -> None:
    """A batch out at an odd count and the last reading still busy, but the
    screen read after the open shows the prompt: it may be the completer's
    open, so it delivers nothing (given back, typed: the duplicate left)."""
    aider = AiderPair(chan.path)
    sup = Sup(State.READY)
    chan.step(sup)
    sup.state = State.BUSY
    aider.choose_fence()
    mid = _send(svc, "stale busy")
    chan.step(sup)  # written mid-pair
    aider.completer()
    sup.then = State.READY
    chan.step(sup)
    assert svc.get(mid).status is Status.PENDING
