"""The supervisor acts on the agent's own word at once (issue 37).

Codex in its TUI: the reply was on screen and its Stop hook's signal had
arrived, yet ``ready`` waited for the next output-driven look (spaced by the
look's cost, up to a second on a loaded machine) and the queued message for
the engine's next poll (0.1 s while the window was shut): let-through - truth
p50 0.51 s. Here every clock the loop has is made long (60 s), so only a look
taken *because of* the signal, and a parts' turn taken *because of* the
verdict, can come before the deadline.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.waiting import wait_for

from agentwrap.datagram import SIGNAL, send
from agentwrap.detect.detector import HookReading
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import State
from agentwrap.paths import Paths
from agentwrap.sessions.parts import Part
from agentwrap.sessions.supervisor import Supervisor, Timing, opens_window
from agentwrap.terminal.screen import Snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "screens" / "codex"
LONG = 60.0  # every clock of the loop: nothing is looked at or turned on time alone
DEADLINE = 20.0  # a hung test's deadline, well inside LONG


class Hooks:
    """The agent's hook signal, as a test sets it."""

    def __init__(self) -> None:
        self.state = State.BUSY

    def read(self) -> HookReading:
        return HookReading(self.state, f"hook said {self.state.value}", 0.0)


class Term:
    backend = "stub"

    def __init__(self, text: str) -> None:
        self.text = text

    def snapshot(self) -> Snapshot:
        return Snapshot.from_ansi(self.text, cols=160, rows=45)

    def alive(self) -> bool:
        return True

    def set_status(self, text: str) -> None:
        pass


class Registry:
    def set_state(self, *args: object, **kw: object) -> None:
        pass


class Turns(Part):
    """A part that wants its next turn only after LONG (as if it were polling slowly)
    and notes the state it saw at each turn."""

    def __init__(self, sup: list[Supervisor]) -> None:
        self.sup = sup
        self.seen: list[State] = []

    def turn(self, sup: object) -> float | None:
        self.seen.append(self.sup[0].reading.state)
        return LONG


def _timing() -> Timing:
    return Timing(min_snapshot_s=LONG, tick_s=LONG, max_snap_gap_s=LONG, max_tick_s=LONG,
                  idle_tick_s=LONG, settle_s=10 * LONG, queue_poll_s=LONG, heartbeat_s=LONG)


@pytest.fixture
def running(tmp_path: Path):  # type: ignore[no-untyped-def]
    paths = Paths(config_dir=tmp_path / "c", state_dir=tmp_path / "s", runtime_dir=tmp_path / "r")
    paths.ensure()
    text = (FIXTURES / "ready__after-reply__160x45.ansi").read_text()
    hooks = Hooks()
    holder: list[Supervisor] = []
    part = Turns(holder)
    sup = Supervisor("s1", Term(text), load_profile("codex", paths), paths,  # type: ignore[arg-type]
                     Registry(), parts=[part], hooks=hooks, timing=_timing())  # type: ignore[arg-type]
    holder.append(sup)
    looks: list[State] = []
    observe = sup.observe

    def counted():  # type: ignore[no-untyped-def]
        reading = observe()
        looks.append(reading.state)
        return reading

    sup.observe = counted  # type: ignore[method-assign]
    loop = threading.Thread(target=sup._loop, args=(None,), daemon=True)
    loop.start()
    try:
        # the first look and turn (at once), then the quiet window's look (quiet_ms)
        wait_for(lambda: len(looks) >= 2 and part.seen, DEADLINE, "the loop's first looks")
        assert sup.reading.state is State.BUSY  # the hook said busy
        yield sup, hooks, looks, part, paths
    finally:
        sup.stop()
        loop.join(DEADLINE)
        sup.wake.close()


def test_a_hook_signal_is_looked_at_at_once(running) -> None:  # type: ignore[no-untyped-def]
    """Codex's Stop hook: the signal wakes the loop, and the screen is looked at
    then, not at the cost-based spacing's next look."""
    sup, hooks, looks, _part, paths = running
    before = len(looks)
    hooks.state = State.READY
    assert send(paths.wake_socket("s1"), SIGNAL)
    wait_for(lambda: len(looks) > before, DEADLINE, "a look after the hook's signal")
    assert sup.reading.state is State.READY
    assert sup.reading.rule == "hook"


def test_a_ready_verdict_takes_the_parts_turn_at_once(running) -> None:  # type: ignore[no-untyped-def]
    """The verdict that opens the typing window: delivery's turn comes then, not at
    its next poll."""
    _sup, hooks, _looks, part, paths = running
    hooks.state = State.READY
    assert send(paths.wake_socket("s1"), SIGNAL)
    wait_for(lambda: State.READY in part.seen, DEADLINE, "a parts' turn that sees ready")


@pytest.mark.parametrize(("before", "after", "opens"), [
    (State.BUSY, State.READY, True),
    (State.BUSY, State.WAITING_INPUT, True),
    (State.DRAFT, State.READY, True),
    (State.READY, State.READY, False),
    (State.READY, State.BUSY, False),
    (State.BUSY, State.UNKNOWN, False),
    (State.WAITING_INPUT, State.WAITING_INPUT, False),
])
def test_which_verdicts_take_the_parts_turn(before: State, after: State, opens: bool) -> None:
    assert opens_window(before, after) is opens
