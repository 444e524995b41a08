"""The supervisor's spacing of output-driven snapshots (issue 27): a dialog the
agent announced (its hook, Claude's session file) is looked for at once."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

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


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_publishing_a_verdict_does_not_space_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: a state change's registry write waits on the disk (fsync), 25-160
    ms on the loaded machine; counted as the look's cost (x 9) it held the next
    snapshot up to a second, and a dialog drawn meanwhile was read that late.
    Only the snapshot and its detection count."""
    from agentwrap.detect.profiles import load_profile
    from agentwrap.paths import Paths
    from agentwrap.sessions import supervisor as sup_mod
    from agentwrap.terminal.screen import Snapshot

    clock = _Clock()
    monkeypatch.setattr(sup_mod, "time", SimpleNamespace(monotonic=clock, time=time.time,
                                                         sleep=time.sleep))

    class Term:
        backend = "stub"

        def snapshot(self) -> Snapshot:
            clock.t += 0.004  # the snapshot itself
            return Snapshot.from_text("> \n", cols=40, rows=5)

        def alive(self) -> bool:
            return True

    class SlowRegistry:
        def set_state(self, *args: object, **kw: object) -> None:
            clock.t += 0.5  # the disk, under load

    paths = Paths(config_dir=tmp_path / "c", state_dir=tmp_path / "s", runtime_dir=tmp_path / "r")
    paths.ensure()
    sup = sup_mod.Supervisor("s1", Term(), load_profile("generic", paths), paths,  # type: ignore[arg-type]
                             SlowRegistry())  # type: ignore[arg-type]
    try:
        before = clock.t
        sup.observe()
        assert clock.t - before > 0.5  # it did publish (a new state), slowly
        assert sup.look_s < 0.1
        t = Timing()
        assert sup_mod.cost_spacing(sup.look_s, t) == t.min_snapshot_s
        assert sup_mod.cost_spacing(0.3, t) == t.max_snap_gap_s  # a slow look itself still counts
    finally:
        sup.wake.close()
