"""The supervisor's spacing of output-driven snapshots (issue 27): a dialog the
agent announced (its hook, Claude's session file) is looked for at once."""

from __future__ import annotations

from agentwrap.detect.states import Reading, Signal, State
from agentwrap.sessions.supervisor import Timing, snapshot_spacing


def _reading(state: State, signal: Signal, rule: str) -> Reading:
    return Reading(state, signal, rule, "", 0, 0.0)


def test_an_announced_dialog_is_looked_for_at_the_shortest_spacing() -> None:
    t = Timing()
    loaded = 0.45  # 9 x a 50 ms snapshot on a loaded machine
    hook = _reading(State.WAITING_INPUT, Signal.HOOK, "hook")
    published = _reading(State.WAITING_INPUT, Signal.STRUCTURED, "structured")
    assert snapshot_spacing(hook, loaded, t) == t.min_snapshot_s
    assert snapshot_spacing(published, loaded, t) == t.min_snapshot_s


def test_otherwise_snapshots_keep_their_cost_based_spacing() -> None:
    t = Timing()
    loaded = 0.45
    shown = _reading(State.WAITING_INPUT, Signal.SCREEN, "dialog:permission")  # read already
    busy = _reading(State.BUSY, Signal.HOOK, "hook")
    ready = _reading(State.READY, Signal.STRUCTURED, "structured")
    for r in (shown, busy, ready):
        assert snapshot_spacing(r, loaded, t) == loaded
