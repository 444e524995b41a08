"""The supervisor's parts (agentwrap.sessions.parts): each hook reaches the parts
that define it in the order given; a broken part is logged and dropped while
the others go on; a failure of the world goes to the caller and the part stays."""

from __future__ import annotations

import logging
from typing import cast

import pytest

from agentwrap.errors import StoreLocked
from agentwrap.sessions.parts import Ended, Host, Part, Parts


class Recorder(Part):
    """A part that notes each hook it gets in a shared list."""

    def __init__(self, name: str, calls: list[str], wait: float | None = None) -> None:
        self.name = name
        self.calls = calls
        self.wait = wait

    def turn(self, sup: Host) -> float | None:
        self.calls.append(f"{self.name}.turn")
        return self.wait

    def recorded(self, state: str, changed: bool, screen: object) -> None:
        self.calls.append(f"{self.name}.recorded")

    def close(self, ended: Ended | None) -> None:
        self.calls.append(f"{self.name}.close({ended.exit_code if ended else None})")


class Quiet(Part):
    """Defines no hook at all: every call passes it by."""


class Broken(Recorder):
    def turn(self, sup: Host) -> float | None:
        self.calls.append(f"{self.name}.turn")
        raise KeyError("a bug")


class Busy(Recorder):
    def turn(self, sup: Host) -> float | None:
        self.calls.append(f"{self.name}.turn")
        raise StoreLocked("the store is locked")


SUP = cast(Host, object())  # these parts never look at the supervisor


def test_hooks_run_in_the_given_order_and_skip_parts_without_them() -> None:
    calls: list[str] = []
    parts = Parts([Recorder("a", calls, wait=2.0), Quiet(), Recorder("b", calls, wait=0.5)])
    assert parts.turn(SUP) == 0.5  # the soonest turn any part wants
    parts.recorded("ready", True, None)
    parts.close(Ended(3))
    assert calls == ["a.turn", "b.turn", "a.recorded", "b.recorded", "a.close(3)", "b.close(3)"]
    # hooks nobody defines: their neutral answers
    assert parts.due() is None
    assert parts.typing() is False
    assert len(parts) == 3


def test_a_turn_stops_once_told() -> None:
    calls: list[str] = []
    parts = Parts([Recorder("a", calls), Recorder("b", calls)])
    assert parts.turn(SUP, until=lambda: bool(calls)) is None
    assert calls == ["a.turn"]


def test_a_raising_part_is_logged_and_dropped_while_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    parts = Parts([Recorder("a", calls), Broken("x", calls), Recorder("b", calls, wait=1.0)])
    with caplog.at_level(logging.ERROR, logger="agentwrap.supervisor"):
        assert parts.turn(SUP) == 1.0
    assert calls == ["a.turn", "x.turn", "b.turn"]
    assert "part Broken failed in turn: dropped" in caplog.text
    assert "KeyError" in caplog.text
    calls.clear()
    parts.turn(SUP)
    parts.close(None)
    assert calls == ["a.turn", "b.turn", "a.close(None)", "b.close(None)"]  # x is gone
    assert [type(p).__name__ for p in parts] == ["Recorder", "Recorder"]


def test_a_failure_of_the_world_goes_to_the_caller_and_the_part_stays() -> None:
    """A locked store is no broken part: the loop logs it as ever, and the part's
    next turn retries (the engine resumes its batch from its write-ahead phase)."""
    calls: list[str] = []
    parts = Parts([Busy("s", calls), Recorder("b", calls)])
    with pytest.raises(StoreLocked):
        parts.turn(SUP)
    assert calls == ["s.turn"]
    with pytest.raises(StoreLocked):
        parts.turn(SUP)
    assert len(parts) == 2


def test_a_part_dropped_during_a_hook_misses_nothing_of_the_others() -> None:
    """A hook may be called again from inside another (delivery looks at the
    screen, which publishes): dropping a part meanwhile changes no running call."""
    calls: list[str] = []

    class Nested(Recorder):
        def turn(self, sup: Host) -> float | None:
            self.calls.append(f"{self.name}.turn")
            outer.recorded("busy", True, None)  # Broken raises inside: dropped mid-turn
            return None

    class BrokenRecorded(Recorder):
        def recorded(self, state: str, changed: bool, screen: object) -> None:
            raise RuntimeError("a bug")

    outer = Parts([Nested("n", calls), BrokenRecorded("x", calls), Recorder("b", calls)])
    outer.turn(SUP)
    assert calls == ["n.turn", "n.recorded", "b.recorded", "b.turn"]  # no turn for x
    assert len(outer) == 2
