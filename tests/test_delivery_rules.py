"""The delivery engine's rules, fast: no tmux, no agent process, no sleeping.

The engine runs against :mod:`support.scripted_agent`: a scripted screen in
the stand-in agent's layout read by the real detector, a fake clock, and the
real SQLite store in the test's tmp dir. Each table case names the rule it
checks; breaking that rule in the engine makes the case fail. The tmux tests
(``test_delivery.py``) remain the proof that the rules hold against a real
terminal; these cover every case of each rule in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from support.scripted_agent import FAST, World, make_world, standin_profile

from agentwrap.delivery.choice import busy_reason
from agentwrap.delivery.fallback import read_section
from agentwrap.delivery.framing import Injection
from agentwrap.message import Kind, Phase, Priority, Status

# --- the typing window ------------------------------------------------------------------


def _exited(w: World) -> None:
    w.tui.dead = True


def _dialog(w: World) -> None:
    w.tui.open_dialog()


def _unknown(w: World) -> None:
    w.tui.overlay = ["  Select a model:", "  > sonnet", "    opus"]  # no rule explains it
    w.sup.observe()
    w.clock.advance(3.5)  # still, and unexplained, for long enough


def _draft(w: World) -> None:
    w.tui.box = "half a sentence"


def _typing(w: World) -> None:
    w.tui.idle_s = 0.2  # the person typed 200 ms ago (grace: 1500 ms)


def _busy(w: World) -> None:
    w.tui.busy_until = w.clock() + 1000


@dataclass(frozen=True)
class Shut:
    rule: str
    setup: Callable[[World], None]
    reason: str
    engine_kw: tuple[tuple[str, object], ...] = ()
    priority: Priority = Priority.NORMAL


SHUT = [
    Shut("an exited agent is never typed into", _exited, "agent exited"),
    Shut("nothing is typed while a dialog is open", _dialog, "waiting for an answer"),
    Shut("nothing is typed into a screen the profile cannot read", _unknown,
         "agent state unknown"),
    Shut("nothing is typed before the agent's SessionStart hook ran", lambda w: None,
         "SessionStart hook has not run", (("awaits_start_hook", lambda: True),)),
    Shut("a draft in the input box is never typed over", _draft, "draft in input box"),
    Shut("nothing is typed while the person types", _typing, "person is typing"),
    Shut("a busy agent is not typed into", _busy, "agent busy"),
    Shut("a busy agent is not typed into even for HIGH when the profile says it takes no"
         " input while busy", _busy, "agent busy", priority=Priority.HIGH),
    Shut("a busy agent with hooks gets its messages through them", _busy,
         busy_reason("hooks"), (("busy_channel", "hooks"),), Priority.CRITICAL),
]


@pytest.mark.parametrize("case", SHUT, ids=[c.rule for c in SHUT])
def test_the_window_stays_shut(tmp_path: Path, case: Shut) -> None:
    w = make_world(tmp_path, **dict(case.engine_kw))
    case.setup(w)
    w.sup.observe()
    reason = w.engine.window(w.sup, case.priority)
    assert reason is not None and case.reason in reason, reason
    mid = w.send("wait for the window", priority=case.priority)
    w.run(5.0)  # well within readiness_timeout_s: no failed attempt either
    assert w.tui.pastes == [] and w.tui.keys == []
    m = w.get(mid)
    assert (m.status, m.attempts) == (Status.PENDING, 0)


def test_the_window_says_starting_until_the_agent_was_first_ready(tmp_path: Path) -> None:
    w = make_world(tmp_path, start_pending=lambda: "its SessionStart hook has not run yet")
    assert w.sup.reading.state.value == "starting"
    assert w.engine.window(w.sup, Priority.CRITICAL) == "agent starting"


@pytest.mark.parametrize("priority,opens", [(Priority.NORMAL, False), (Priority.HIGH, True),
                                            (Priority.CRITICAL, True)])
def test_a_busy_agent_that_takes_input_gets_only_high_priority(
    tmp_path: Path, priority: Priority, opens: bool
) -> None:
    prof = standin_profile()
    prof = replace(prof, input=replace(prof.input, accepts_input_while_busy=True))
    w = make_world(tmp_path, profile=prof)
    _busy(w)
    w.sup.observe()
    assert (w.engine.window(w.sup, priority) is None) is opens


def test_the_window_opens_when_the_reason_goes(tmp_path: Path) -> None:
    """A draft sent by the person clears the box: then the queue is typed."""
    w = make_world(tmp_path)
    _draft(w)
    mid = w.send("after the draft")
    w.run(2.0)
    assert w.tui.pastes == []
    w.tui.send_key("Enter")  # the person sends their draft
    w.tui.keys.clear()
    m = w.run_until_ended(mid)
    assert m.status is Status.DELIVERED and len(w.tui.pastes) == 1


# --- failed attempts: no window, backoff, hold --------------------------------------------


def test_a_window_shut_for_the_readiness_timeout_is_a_failed_attempt(tmp_path: Path) -> None:
    w = make_world(tmp_path, cfg=replace(FAST, readiness_timeout_s=10.0))
    _busy(w)
    mid = w.send("blocked")
    w.run(9.0)
    assert w.get(mid).attempts == 0
    w.run(2.0)
    m = w.get(mid)
    assert (m.status, m.attempts) == (Status.PENDING, 1)
    assert [a.outcome for a in w.store.attempts(mid)] == ["no_window"]
    assert w.tui.pastes == []


def test_a_busy_agent_with_hooks_waits_for_the_longer_busy_channel_timeout(
    tmp_path: Path
) -> None:
    cfg = replace(FAST, readiness_timeout_s=10.0, busy_channel_timeout_s=60.0)
    w = make_world(tmp_path, cfg=cfg, busy_channel="hooks")
    _busy(w)
    mid = w.send("for the hook")
    w.run(30.0)
    assert w.get(mid).attempts == 0
    w.run(35.0)
    assert [a.outcome for a in w.store.attempts(mid)] == ["no_window"]


def test_retries_back_off_by_the_configured_steps(tmp_path: Path) -> None:
    w = make_world(tmp_path, cfg=replace(FAST, backoff_s=(1.0, 4.0), fallback_after=5))
    w.tui.paste_delay_s = math.inf  # every paste is lost
    mid = w.send("never shows")
    gaps = []
    for n in range(1, 4):
        w.run(60.0, lambda n=n: w.get(mid).attempts >= n)
        m = w.get(mid)
        assert m.status is Status.PENDING
        gaps.append(round(m.next_attempt_at - w.store.attempts(mid)[-1].finished, 3))
    assert gaps == [1.0, 4.0, 4.0]  # the last step repeats
    assert [a.outcome for a in w.store.attempts(mid)] == ["paste_not_seen"] * 3


def test_a_block_left_in_the_box_is_held_and_submitted_again_never_pasted_twice(
    tmp_path: Path
) -> None:
    w = make_world(tmp_path)
    w.tui.ignore_enter = standin_profile().input.submit_retries + 1  # this attempt's Enters
    mid = w.send("press again")
    w.run(60.0, lambda: w.get(mid).attempts >= 1)
    m = w.get(mid)
    assert (m.status, m.phase) == (Status.DELIVERING, Phase.SUBMITTING)  # held, in flight
    assert "block still in the box" in m.detail
    m = w.run_until_ended(mid)
    assert m.status is Status.DELIVERED
    assert len(w.tui.pastes) == 1 and len(w.tui.received) == 1
    assert [a.outcome for a in w.store.attempts(mid)] == ["submit_not_confirmed", "delivered"]


@pytest.mark.parametrize("shut", [_dialog, _typing], ids=["dialog", "person typing"])
def test_a_held_block_is_not_submitted_into_a_dialog_or_while_the_person_types(
    tmp_path: Path, shut: Callable[[World], None]
) -> None:
    w = make_world(tmp_path)
    w.tui.ignore_enter = standin_profile().input.submit_retries + 1
    mid = w.send("held")
    w.run(60.0, lambda: w.get(mid).attempts >= 1)
    keys = len(w.tui.keys)
    shut(w)
    w.run(10.0)  # the hold's backoff (1 s) passed long ago
    assert len(w.tui.keys) == keys and w.get(mid).status is Status.DELIVERING
    w.tui.dialog, w.tui.idle_s = False, None
    assert w.run_until_ended(mid).status is Status.DELIVERED
    assert len(w.tui.pastes) == 1 and len(w.tui.received) == 1


# --- escalation ----------------------------------------------------------------------------


def test_after_fallback_after_failures_the_message_goes_to_the_instruction_file(
    tmp_path: Path
) -> None:
    w = make_world(tmp_path, cfg=replace(FAST, fallback_after=3))
    w.tui.paste_delay_s = math.inf
    mid = w.send("to the file")
    w.run(60.0, lambda: w.get(mid).attempts >= 2)
    assert w.get(mid).status is Status.PENDING  # two failures: not yet
    assert read_section(w.project, "AGENTS.md") is None
    m = w.run_until_ended(mid)
    assert m.status is Status.ESCALATED and m.attempts == 3
    assert read_section(w.project, "AGENTS.md") == [mid]
    assert "to the file" in (w.project / "AGENTS.md").read_text()
    assert any("context was written to AGENTS.md" in x for x in w.tui.displayed)
    (notice,) = w.store.peek("fake")  # and the agent is told where to look
    assert notice.kind is Kind.FALLBACK_NOTICE and notice.metadata["fallback_ids"] == [mid]


def test_a_raw_message_is_never_written_to_the_instruction_file(tmp_path: Path) -> None:
    prof = replace(standin_profile(), framing="raw")
    w = make_world(tmp_path, profile=prof, cfg=replace(FAST, fallback_after=1))
    w.tui.paste_delay_s = math.inf
    mid = w.send("rm -rf build")
    m = w.run_until_ended(mid)
    assert m.status is Status.FAILED and "not typed" in m.detail
    assert not (w.project / "AGENTS.md").exists()


def test_a_profile_without_instruction_file_fails_instead(tmp_path: Path) -> None:
    prof = replace(standin_profile(), instruction_file=None)
    w = make_world(tmp_path, profile=prof, cfg=replace(FAST, fallback_after=1))
    w.tui.paste_delay_s = math.inf
    m = w.run_until_ended(w.send("nowhere to go"))
    assert m.status is Status.FAILED and "has no instruction file" in m.detail


# --- the ACK ---------------------------------------------------------------------------------


def test_an_ack_below_the_echoed_block_acknowledges(tmp_path: Path) -> None:
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=True))
    mid = w.send("ack me")
    m = w.run_until_ended(mid)
    (attempt,) = w.store.attempts(mid)
    assert m.status is Status.ACKNOWLEDGED and attempt.outcome == "acknowledged"
    assert attempt.evidence == f"● ACK {attempt.batch_id}" and len(w.tui.received) == 1


def test_an_ack_the_tui_wrapped_onto_the_next_row_acknowledges(tmp_path: Path) -> None:
    """Issue 35.2: "...step 39 ACK" on one row, the token on the next (the
    TUI's own wrap, under the reply's gutter) is one ACK: acknowledged at the
    first attempt, typed once."""
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=True))
    w.tui.wrap = 40
    w.tui.reply_before_ack = "Done: every step passed, step 39 "
    mid = w.send("ack me, wrapped")
    m = w.run_until_ended(mid)
    (attempt,) = w.store.attempts(mid)
    token = attempt.batch_id
    assert any(x.endswith("step 39 ACK") for x in w.tui.lines())  # it did wrap there
    assert any(x == f"  {token}" for x in w.tui.lines())
    assert m.status is Status.ACKNOWLEDGED and attempt.outcome == "acknowledged"
    assert attempt.evidence == f"● Done: every step passed, step 39 ACK {token}"
    assert len(w.tui.received) == 1


@pytest.mark.parametrize("wrap", [None, 12, 30])
def test_a_missing_ack_ends_the_live_path_and_the_blocks_own_request_never_counts(
    tmp_path: Path, wrap: int | None
) -> None:
    """The echoed block says 'Reply "ACK <token>"', wrapped anywhere (at 12
    cells "ACK" and the token are on rows of their own): never an ACK. And
    the block was submitted: the model may have it, so it is never typed
    again (it was, twice, before issue 35.2) but escalated after its one
    attempt, whatever ``fallback_after`` allows."""
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=True, ack_timeout_s=2.0,
                                          fallback_after=3))
    w.tui.acks = False
    w.tui.wrap = wrap
    mid = w.send("silent agent")
    w.run(30.0, lambda: w.get(mid).phase is Phase.SUBMITTED and not w.tui.reply)
    screen = w.tui.lines()  # as the wait for the ACK sees it
    token = w.get(mid).batch_id
    if wrap == 12:  # "ACK" and the token on rows of their own
        assert '  Reply "ACK' in screen and f'  {token}"' in screen, screen
    else:
        assert any(f'Reply "ACK {token}"' in x for x in screen), screen
    m = w.run_until_ended(mid)
    assert m.status is Status.ESCALATED, m
    assert [a.outcome for a in w.store.attempts(mid)] == ["no_ack"]
    assert [t for t in w.tui.received if "silent agent" in t] == w.tui.pastes[:1]  # once
    assert read_section(w.project, "AGENTS.md") == [mid]


def _quiet(w: World, mid: str) -> None:
    """The agent stays quiet past the ACK timeout."""


def _never_quiet(w: World, mid: str) -> None:
    w.tui.busy_s = 10_000.0  # busy until the hard stop


def _restarted(w: World, mid: str) -> World:
    return w.restarted()


@pytest.mark.parametrize("how", ["quiet past the timeout", "never quiet", "supervisor restarted"])
def test_a_submitted_batch_is_never_typed_again(tmp_path: Path, how: str) -> None:
    """However the wait for its ACK ends without one (the agent quiet past
    ``ack_timeout_s``, busy to the hard stop, a supervisor restarted while it
    waited: it resumes the wait from phase ``submitted``), a batch whose
    submission was proven goes no further than the instruction file: its
    stored phase says the model may have it, and no retry is made from it."""
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=True, ack_timeout_s=2.0,
                                          readiness_timeout_s=5.0, fallback_after=5))
    w.tui.acks = False
    if how == "never quiet":
        _never_quiet(w, "")
    mid = w.send("typed once, whatever happens")
    w.run(30.0, lambda: w.get(mid).phase is Phase.SUBMITTED)
    if how == "supervisor restarted":
        w = _restarted(w, mid)
    m = w.run_until_ended(mid)
    assert m.status is Status.ESCALATED and m.attempts == 1, m
    assert len([t for t in w.tui.pastes if "typed once, whatever" in t]) == 1


def test_a_submitted_batch_without_a_file_to_go_to_ends_delivered_unacknowledged(
    tmp_path: Path
) -> None:
    """No instruction file: the submitted, unacknowledged batch ends
    delivered (what the sender is told by: ``unacknowledged``), never failed."""
    w = make_world(tmp_path, profile=replace(standin_profile(), instruction_file=None),
                   cfg=replace(FAST, require_ack=True, ack_timeout_s=2.0))
    w.tui.acks = False
    m = w.run_until_ended(w.send("no file for me"))
    assert m.status is Status.DELIVERED and "not acknowledged" in m.detail, m
    assert [a.outcome for a in w.store.attempts(m.id)] == ["unacknowledged"]
    assert len(w.tui.received) == 1


def test_an_ack_through_another_channel_ends_the_wait(tmp_path: Path) -> None:
    """The turn-end hook read the ACK in the agent's whole reply (or the agent
    called MCP's acknowledge) while the screen shows none: the engine sees
    the batch end, records its one attempt acknowledged, and types nothing more."""
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=True, ack_timeout_s=2.0))
    w.tui.acks = False
    w.tui.busy_s = 1.0
    mid = w.send("acknowledged by the hook")
    w.run(30.0, lambda: w.get(mid).phase is Phase.SUBMITTED)
    assert w.store.acknowledge(mid, "acknowledged (seen) through hook")
    m = w.run_until_ended(mid)
    w.run(10.0)
    (attempt,) = w.store.attempts(mid)
    assert m.status is Status.ACKNOWLEDGED and attempt.outcome == "acknowledged", attempt
    assert "through hook" in attempt.evidence and len(w.tui.received) == 1
    assert w.engine._ack is None  # the wait ended


def test_no_ack_asked_ends_delivered_at_the_submission(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    w.tui.acks = False
    m = w.run_until_ended(w.send("no ack asked"))
    assert m.status is Status.DELIVERED and len(w.tui.received) == 1


def test_an_agent_that_dies_while_its_ack_is_awaited_got_the_message(tmp_path: Path) -> None:
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=True))
    w.tui.busy_s = 100.0
    mid = w.send("then it dies")
    w.run(30.0, lambda: w.get(mid).phase is Phase.SUBMITTED)
    w.tui.dead = True
    m = w.run_until_ended(mid)
    assert m.status is Status.DELIVERED and "the agent exited first" in m.detail
    assert [a.outcome for a in w.store.attempts(mid)] == ["unacknowledged"]


# --- resume from every write-ahead phase -------------------------------------------------------
#
# A supervisor killed at any point leaves its batch in flight with the phase
# it wrote *before* acting. The screen can then be in any state that action
# may have led to; a new engine on the same store must finish the batch with
# the agent having the message exactly once.

HELD = "held"  # phase SUBMITTING, kept in flight by store.hold: the block stayed in the box


def _nothing(w: World, inj: Injection) -> None:
    pass


def _paste_on_its_way(w: World, inj: Injection) -> None:
    w.tui.paste_delay_s = 1.0  # the old paste and any new one are drawn late
    w.tui._pastes_due.append((w.clock() + 1.0, inj.text))


def _in_box(w: World, inj: Injection) -> None:
    w.tui.box = inj.text


def _taken_busy(w: World, inj: Injection) -> None:
    w.tui.busy_s = 3.0
    w.tui.take(inj.text)


def _taken_answered(w: World, inj: Injection) -> None:
    w.tui.take(inj.text)
    w.clock.advance(w.tui.busy_s + 0.1)


def _taken_then_dialog(w: World, inj: Injection) -> None:
    w.tui.take(inj.text)
    w.tui.open_dialog()
    w.tui.dialog_s = 5.0  # the person answers it


def _dialog_over_the_box(w: World, inj: Injection) -> None:
    w.tui.box = inj.text
    w.tui.open_dialog()
    w.tui.dialog_s = 5.0


def _dialog_of_its_own(w: World, inj: Injection) -> None:
    w.tui.open_dialog()
    w.tui.dialog_s = 5.0


SCREENS: dict[str, Callable[[World, Injection], None]] = {
    "nothing typed": _nothing,
    "paste still on its way": _paste_on_its_way,
    "block in the box": _in_box,
    "block taken, agent busy": _taken_busy,
    "block taken, turn over": _taken_answered,
    "block taken, then a dialog": _taken_then_dialog,
    "a dialog over the block in the box": _dialog_over_the_box,
    "a dialog, nothing of ours": _dialog_of_its_own,
}

# The screens each phase can leave: the action after writing the phase may
# not have happened, or happened, and the agent may have moved on from it.
PLAUSIBLE: dict[str, list[str]] = {
    Phase.CLAIMED.value: ["nothing typed", "a dialog, nothing of ours"],
    Phase.PASTING.value: ["nothing typed", "paste still on its way", "block in the box",
                          "a dialog, nothing of ours", "a dialog over the block in the box"],
    Phase.SUBMITTING.value: ["block in the box", "block taken, agent busy",
                             "block taken, turn over", "block taken, then a dialog",
                             "a dialog over the block in the box"],
    HELD: ["block in the box", "block taken, agent busy", "block taken, turn over"],
    Phase.SUBMITTED.value: ["block taken, agent busy", "block taken, turn over",
                            "block taken, then a dialog"],
}

# Cases in which the engine, as it is, breaks "never typed twice / never
# typed into a dialog"; strict: fixing the engine makes them pass (and fail here).
KNOWN_GAPS: dict[tuple[str, str], str] = {}

RESUME = [(phase, screen, ack) for phase, screens in PLAUSIBLE.items() for screen in screens
          for ack in (False, True)]


def _resume_world(tmp_path: Path, phase: str, screen: str, ack: bool) -> tuple[World, str]:
    w = make_world(tmp_path, cfg=replace(FAST, require_ack=ack))
    mid = w.send("resume me exactly once")
    batch = w.store.claim_batch("fake", "0badc0de", 10_000, w.clock())
    if phase == HELD:
        w.store.set_phase("0badc0de", Phase.SUBMITTING)
        w.store.hold("0badc0de", w.clock(), "attempt failed: submit_not_confirmed")
    elif phase != Phase.CLAIMED.value:
        w.store.set_phase("0badc0de", Phase(phase))
    SCREENS[screen](w, w.engine._render(batch, "0badc0de"))
    w.sup.settle()
    return w, mid


@pytest.mark.parametrize("phase,screen,ack", RESUME,
                         ids=[f"{p}-{s}-{'ack' if a else 'no ack'}" for p, s, a in RESUME])
def test_resume_types_nothing_twice_and_loses_nothing(
    tmp_path: Path, phase: str, screen: str, ack: bool, request: pytest.FixtureRequest
) -> None:
    gap = KNOWN_GAPS.get((phase, screen))
    if gap:
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True))
    w, mid = _resume_world(tmp_path, phase, screen, ack)
    m = w.run_until_ended(mid)
    got = sum(t.count("resume me exactly once") for t in w.tui.received)
    assert got == 1, f"the agent got it {got} times"
    assert m.status is (Status.ACKNOWLEDGED if ack else Status.DELIVERED), m.detail
    typed_before = screen not in ("nothing typed", "a dialog, nothing of ours")
    assert len(w.tui.pastes) == (0 if typed_before else 1), w.tui.pastes


# --- a dialog over the box: wait for it, bounded ------------------------------------------------
#
# A TUI draws its permission dialog over (or instead of) the input box, which
# keeps its text: a block we may have typed is then neither visible nor gone.

HIDDEN = [(Phase.CLAIMED.value, "a dialog, nothing of ours"),
          (Phase.PASTING.value, "a dialog over the block in the box"),
          (Phase.SUBMITTING.value, "block taken, then a dialog"),
          (Phase.SUBMITTING.value, "a dialog over the block in the box")]


@pytest.mark.parametrize("phase,screen", HIDDEN, ids=[f"{p}-{s}" for p, s in HIDDEN])
def test_a_dialog_that_never_closes_ends_a_resumed_batch_once(
    tmp_path: Path, phase: str, screen: str
) -> None:
    """The resumed batch waits for the box (or the window) for the readiness
    timeout, then fails that attempt; one that may be in the box stays held in
    its phase (never pasted again), and after fallback_after attempts the
    message ends escalated, typed at most the once it was before."""
    w, mid = _resume_world(tmp_path, phase, screen, False)
    w.tui.dialog_s = math.inf
    w.run(60.0, lambda: w.get(mid).attempts >= 1)
    m = w.get(mid)
    if phase == Phase.CLAIMED.value:
        assert m.status is Status.PENDING  # nothing typed: back in the queue
    else:
        assert (m.status, m.phase) == (Status.DELIVERING, Phase(phase))  # held in flight
        assert "input box hidden" in m.detail
    m = w.run_until_ended(mid)
    assert m.status is Status.ESCALATED and m.attempts == FAST.fallback_after
    assert [a.outcome for a in w.store.attempts(mid)] == ["no_window"] * FAST.fallback_after
    assert w.tui.pastes == [] and w.tui.keys == []
    assert len(w.tui.received) == (1 if screen == "block taken, then a dialog" else 0)


@pytest.mark.parametrize("after_s,phase,failed", [
    (0.0, Phase.PASTING, "paste_not_seen"), (0.02, Phase.SUBMITTING, "submit_not_confirmed"),
], ids=["before the paste shows", "before the submit key"])
def test_a_dialog_over_a_fresh_paste_holds_the_block_until_it_closes(
    tmp_path: Path, after_s: float, phase: Phase, failed: str
) -> None:
    """The agent opens a dialog of its own right after our paste: the block
    behind it is held (not pasted again, no key pressed into the dialog), and
    submitted once the dialog is answered and the box shows again."""
    w = make_world(tmp_path)
    w.tui.dialog_after_paste_s, w.tui.dialog_s = after_s, 5.0
    mid = w.send("behind the dialog")
    w.run(60.0, lambda: w.get(mid).attempts >= 1)
    m = w.get(mid)
    assert (m.status, m.phase) == (Status.DELIVERING, phase)  # held in flight
    assert "input box hidden" in m.detail and w.tui.keys == []
    w.tui.dialog_after_paste_s = None
    m = w.run_until_ended(mid)
    assert m.status is Status.DELIVERED
    assert len(w.tui.pastes) == 1 and len(w.tui.received) == 1
    assert w.tui.received[0].count("behind the dialog") == 1
    assert [a.outcome for a in w.store.attempts(mid)] == [failed, "delivered"]


# --- one channel per session mode (Codex on its app-server, issue 24) ----------------------


def test_what_another_channel_takes_is_never_typed_until_that_channel_is_dead(
    tmp_path: Path,
) -> None:
    """A session on Codex's app-server: the kinds the server takes are never
    typed, not even while the server is not ready (however long the window
    stays open, no failed attempt either: they wait for the server, or their
    TTL); a raw command, which only typing delivers, is typed as before. Once
    the server is declared dead (it takes nothing), the typing takes over."""
    from agentwrap.delivery.handover import CONSUMABLE_KINDS
    from agentwrap.message import NewMessage

    taken: dict[str, frozenset[Kind]] = {"now": CONSUMABLE_KINDS}
    w = make_world(tmp_path, taken_kinds=lambda: taken["now"])
    held = w.send("for the server", ttl_s=3600.0)
    expiring = w.send("for the server, short-lived", ttl_s=30.0)
    cmd, _ = w.store.enqueue(NewMessage(session="fake", content="/status"), kind=Kind.COMMAND)
    assert w.run_until_ended(cmd.id).status is Status.DELIVERED
    w.run(120.0)  # the agent ready all along: four readiness timeouts and more
    assert not any("for the server" in p for p in w.tui.pastes)
    m = w.get(held)
    assert (m.status, m.attempts) == (Status.PENDING, 0)
    assert w.get(expiring).status is Status.EXPIRED  # its TTL still runs
    taken["now"] = frozenset()  # the server is dead: typed, as without it
    m = w.run_until_ended(held)
    assert m.status is Status.DELIVERED
    assert sum("for the server" in p for p in w.tui.pastes) == 1
