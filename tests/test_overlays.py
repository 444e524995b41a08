"""Unknown is not ready (issue 35): a picker, menu or help screen over the input box.

Claude Code 2.1.197's rewind picker (Esc Esc) was read ``ready``: its session
file says "idle" while the picker is open, and the session file won over the
screen. Three pastes went nowhere and the message was written into CLAUDE.md.
On 2.1.332 the file says "waiting" there: ``waiting_input`` with no question.

The rule that closes the class: ``ready`` needs positive evidence that the
input box is on screen (a ready or draft rule of the profile matches), whatever
signal says the agent is idle (its hook's turn end, its session file); a
"waiting" with no dialog on screen is not a question either. Both are an
overlay (``unknown``, rule ``overlay``), and so is every picker a profile's
``[[overlays]]`` names. Delivery waits while one is open: no failed attempt,
so nothing is escalated into the instruction file for it.

The fixtures are the real CLIs' own pickers and overlays
(``scripts/capture_screens.py --only overlays``): each is checked under every
signal an idle agent gives.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_channels import Clock
from test_profile_screens import NAME_RE, SCREENS, snapshot_of

from agentwrap.config import DeliveryConfig
from agentwrap.delivery.window import TypingWindow
from agentwrap.detect.detector import Detector, HookReading, StructuredReading
from agentwrap.detect.profiles import load_all_profiles, load_profile
from agentwrap.detect.states import Reading, Signal, State
from agentwrap.message import Priority
from agentwrap.terminal.screen import Snapshot

AGENTS = ("claude", "codex", "aider", "gemini", "copilot", "opencode", "qwen", "cline", "kimi", "pi")

#: The overlays each agent's own keys open (``OVERLAY_CASES`` of the capture
#: script), by the fixture's ``<what>``: captured from the real CLI, every one.
OVERLAYS = {
    "rewind-picker", "slash-menu", "at-file-picker", "shortcuts-help", "history-search",
    "model-picker", "backtrack", "settings", "slash-completion", "command-palette",
}


def overlay_of(what: str) -> str:
    """``rewind-picker`` of ``rewind-picker-v2.1.197`` (captured on another
    version ``doctor`` accepts)."""
    return re.sub(r"-v\d+(?:\.\d+)*$", "", what)


def overlay_fixtures() -> list[Any]:
    out = []
    for f in sorted(SCREENS.glob("*/*.txt")):
        m = NAME_RE.match(f.name)
        if m and overlay_of(m["what"]) in OVERLAYS:
            out.append(pytest.param(f, m, id=f"{f.parent.name}/{f.stem}"))
    return out


class Said:
    """What an idle agent says of itself: its hook's turn end, its session file."""

    def __init__(self, hook: HookReading | None = None,
                 published: StructuredReading | None = None) -> None:
        self.hook, self.published = hook, published

    def read(self) -> Any:  # HookSource and StructuredSource at once
        return self.hook if self.hook is not None else self.published

    def stamp(self) -> float | None:
        return None


SIGNALS: dict[str, dict[str, Any]] = {
    "screen alone": {},
    "hook: turn end": {"hooks": HookReading(State.READY, "hook Stop: turn end", 0.0)},
    "session file: idle": {"structured": StructuredReading(
        State.READY, "claude session file says 'idle'", 0.0)},
    "session file: waiting": {"structured": StructuredReading(
        State.WAITING_INPUT, "claude session file says 'waiting'", 0.0)},
}


def verdict(agent: str, snap: Snapshot, signal: str, *, settle: bool = True) -> Detector:
    """The detector of ``agent`` that has seen it ready before and now sees
    ``snap`` (still for 30 s when ``settle``), told ``signal`` by the agent."""
    clock = Clock()
    said = SIGNALS[signal]
    hooks = Said(hook=said["hooks"]) if "hooks" in said else None
    published = Said(published=said["structured"]) if "structured" in said else None
    det = Detector(load_profile(agent), clock=clock, hooks=hooks, structured=published)
    det._seen_ready = True
    det.update(Snapshot.from_text("placeholder"))
    clock.t += 5
    det.update(snap)
    if settle:
        clock.t += 30
        det.update(snap)
    return det


@pytest.mark.parametrize("signal", list(SIGNALS))
@pytest.mark.parametrize(("path", "m"), overlay_fixtures())
def test_no_picker_or_overlay_is_ever_ready(path: Path, m: re.Match[str], signal: str) -> None:
    """Every captured picker and overlay of every agent, settled or just drawn,
    under every signal an idle agent gives: never ``ready``, and never a
    ``waiting_input`` without a question."""
    agent = path.parent.name
    for settle in (True, False):
        det = verdict(agent, snapshot_of(path, m), signal, settle=settle)
        r = det.reading
        assert r.state is not State.READY, f"{r} / evidence {det.evidence!r}"
        assert r.state is not State.WAITING_INPUT or det.question is not None, r
        if m["state"] == "unknown":
            assert r.overlay and r.state is State.UNKNOWN, r
            assert "nothing is typed" in r.reason or "overlay" in r.reason.lower(), r


def test_every_agent_has_overlay_fixtures() -> None:
    """The table above covers each of the nine agents' own pickers."""
    have = {p.values[0].parent.name for p in overlay_fixtures()}
    assert have == set(AGENTS), sorted(set(AGENTS) - have)


def test_claude_rewind_picker_is_named() -> None:
    """2.1.332 (pinned) and 2.1.197 (``doctor`` accepts from 2.1.0): the picker
    is named, whatever the session file says."""
    got = sorted(SCREENS.glob("claude/unknown__rewind-picker*__*.txt"))
    assert {f.name.split("__")[1] for f in got} == {"rewind-picker", "rewind-picker-v2.1.197"}
    assert got, "no rewind picker fixture"
    for f in got:
        m = NAME_RE.match(f.name)
        assert m is not None
        for signal in SIGNALS:
            r = verdict("claude", snapshot_of(f, m), signal).reading
            assert (r.state, r.rule) == (State.UNKNOWN, "overlay:rewind_picker"), (f.name, r)
            assert "rewind" in r.reason


@pytest.mark.parametrize("signal", ["hook: turn end", "session file: idle"])
@pytest.mark.parametrize(("path", "m"), [
    pytest.param(f, NAME_RE.match(f.name), id=f"{f.parent.name}/{f.stem}")
    for f in sorted(SCREENS.glob("*/*.txt"))
    if (NAME_RE.match(f.name) or {"state": ""})["state"] in ("ready", "draft")
    and overlay_of((NAME_RE.match(f.name) or {"what": ""})["what"]) not in OVERLAYS])
def test_a_real_ready_screen_with_the_agents_idle_word_stays_ready(
    path: Path, m: re.Match[str], signal: str
) -> None:
    """The box evidence holds on every real ready and draft screen: the agent's
    own word that it is idle still makes it ``ready`` (or ``draft``) at once."""
    r = verdict(path.parent.name, snapshot_of(path, m), signal).reading
    assert r.state.value == m["state"], r


PICKER = Snapshot.from_text(
    "  Some list the profile has never seen\n\n  ❯ 1. first earlier prompt\n"
    "    2. second earlier prompt\n\n  Enter to pick · Esc to close\n", cols=80, rows=12)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("signal", [s for s in SIGNALS if s != "screen alone"])
def test_an_unknown_screen_while_the_agent_says_idle_is_an_overlay(agent: str, signal: str) -> None:
    """The class, for every agent: a screen without the input box (a picker no
    profile knows) while the agent's hook or session file says idle or waiting
    is ``unknown`` (an overlay, said so), at once, never ``ready`` or a question."""
    det = verdict(agent, PICKER, signal, settle=False)
    r = det.reading
    assert (r.state, r.rule, r.signal) == (State.UNKNOWN, "overlay", Signal.SCREEN), r
    assert r.overlay and det.question is None
    assert "input box is not on screen" in r.reason or "no dialog" in r.reason, r
    assert "overlay or picker is open" in r.reason


def test_profiles_without_box_rules_keep_their_quiet_ready() -> None:
    """A generic REPL is read by quiet alone: nothing there shows a box, so a
    turn end is believed as before."""
    for name, prof in load_all_profiles().items():
        if any(r.state in (State.READY, State.DRAFT) for r in prof.rules):
            continue
        clock = Clock()
        det = Detector(prof, clock=clock,
                       hooks=Said(hook=HookReading(State.READY, "turn end", 0.0)))
        det.update(PICKER)
        clock.t += 0.01
        assert det.update(PICKER).state is State.READY, name


# --- what delivery does with an overlay -------------------------------------------------------


class _Term:
    def held(self) -> bool:
        return False


class _Sup:
    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.term = _Term()


def _reading(state: State, rule: str) -> Reading:
    return Reading(state, Signal.SCREEN, rule, "why", 0, 0.0)


def test_an_overlay_shuts_the_window_without_failing_an_attempt() -> None:
    """A picker left open past the readiness timeout is a wait, never a failed
    attempt (three of those wrote the message into CLAUDE.md); an unexplained
    still screen still fails one, as before; and the typing window says why."""
    cfg = DeliveryConfig()
    window = TypingWindow(cfg, load_profile("claude"))
    for rule in ("overlay", "overlay:rewind_picker"):
        sup: Any = _Sup(_reading(State.UNKNOWN, rule))
        assert window.reason(sup, Priority.NORMAL) is not None and "overlay" in str(window.reason(sup, Priority.NORMAL))
        assert window.press_reason(sup) is not None
        assert not any(window.shut_too_long(sup, t * cfg.readiness_timeout_s)
                       for t in range(20))
    unknown: Any = _Sup(_reading(State.UNKNOWN, "none"))
    assert not _Sup(_reading(State.UNKNOWN, "none")).reading.overlay
    assert [window.shut_too_long(unknown, t * cfg.readiness_timeout_s) for t in range(3)] \
        == [False, True, False]
