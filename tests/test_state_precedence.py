"""The precedence between an agent's own word and its screen (issue 37), as a table.

Each case is a recorded sequence: the real screens captured from the CLIs
(tests/fixtures/screens/, as named) and what the agent said about itself at
each step (its hook's signal, its published state: Claude Code's session file),
with the time between steps. The expected verdicts follow
:data:`agentwrap.detect.precedence.TABLE`: a busy screen beats a stale idle
word, a turn-end hook while a dialog shows is waiting, an agent saying it asks
is an expectation (``busy``) until its dialog is drawn, unknown is never ready.
A scan then runs the Enter -> busy sequence on every agent with captured
screens and counts the passing ``ready``s (zero).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentwrap.detect.detector import Detector, HookReading, StructuredReading, evaluate_rules
from agentwrap.detect.precedence import (
    TABLE,
    Claim,
    Outcome,
    Seen,
    Source,
    chain,
    resolve,
)
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import State
from agentwrap.paths import Paths
from agentwrap.terminal.screen import Snapshot

SCREENS = Path(__file__).parent / "fixtures" / "screens"
NAME_RE = re.compile(r"^(?P<state>[a-z_]+)__(?P<what>.+?)__(?P<cols>\d+)x(?P<rows>\d+)$")


def screen(agent: str, name: str) -> Snapshot:
    m = NAME_RE.match(name)
    assert m, name
    f = SCREENS / agent / f"{name}.ansi"
    return Snapshot.from_ansi(f.read_text(encoding="utf-8"), cols=int(m["cols"]), rows=int(m["rows"]))


class Said:
    """What the agent said, as a hook signal or a published state, with its time."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.state: State | None = None
        self.at = 0.0

    def say(self, state: State | None) -> None:
        self.state, self.at = state, self.clock[0]

    def age(self) -> float:
        return self.clock[0] - self.at


class Hooks(Said):
    def read(self) -> HookReading | None:
        if self.state is None:
            return None
        return HookReading(self.state, f"hook says {self.state}", self.age())


class File(Said):
    def read(self) -> StructuredReading | None:
        if self.state is None:
            return None
        return StructuredReading(self.state, f"session file says {self.state}", self.age())

    def stamp(self) -> float | None:
        return None


@dataclass(frozen=True)
class Step:
    wait_s: float  # time since the previous step
    screen: str  # fixture name, for the case's agent
    expect: State
    hook: State | bool | None = False  # False: unchanged; None: none; a state: said now
    file: State | bool | None = False


R, B, W = State.READY, State.BUSY, State.WAITING_INPUT

CASES: dict[str, tuple[str, list[Step]]] = {
    # Issue 37: Enter empties the box; the session file still says idle; the
    # spinner is drawn: busy (the file outranked it: ready for ~0.1 s).
    "enter: a stale idle file under the spinner is busy": ("claude", [
        Step(0.0, "ready__after-reply__160x45", R, file=R),
        Step(5.0, "ready__after-reply__160x45", R),
        Step(0.05, "busy__before-first-token__160x45", B),
        Step(0.05, "busy__streaming__160x45", B),
    ]),
    "enter with hooks: a stale turn end under the spinner is busy": ("claude", [
        Step(0.0, "ready__after-reply__160x45", R, file=R, hook=R),
        Step(0.05, "ready__after-reply__160x45", R),
        Step(0.05, "busy__before-first-token__160x45", B),
        Step(0.05, "busy__before-first-token__160x45", B, hook=B),
    ]),
    # The box held text after the file said idle, and is empty now: a prompt went.
    # The screen decides (an empty box that just changed is busy), not the old idle.
    "enter: a submitted draft ends the idle file's say": ("claude", [
        Step(0.0, "ready__after-reply__160x45", R, file=R),
        Step(2.0, "draft__one-line__160x45", State.DRAFT),
        Step(0.05, "ready__after-reply__160x45", B),
        Step(0.05, "busy__before-first-token__160x45", B),
    ]),
    # Claude fires PermissionRequest and writes "waiting" ~0.5 s before it draws the
    # dialog: an expectation (busy, nothing typed) until the dialog is on screen.
    "permission hook before the dialog is drawn": ("claude", [
        Step(0.0, "busy__streaming__160x45", B, file=B, hook=B),
        Step(0.5, "busy__streaming__160x45", B, hook=W),
        Step(0.4, "busy__streaming__160x45", B),
        Step(0.1, "waiting_input__permission__160x45", W),
    ]),
    "session file 'waiting' before the dialog is drawn": ("claude", [
        Step(0.0, "busy__streaming__160x45", B, file=B),
        Step(0.5, "busy__streaming__160x45", B, file=W),
        Step(0.45, "waiting_input__permission__160x45", W),
    ]),
    "a turn-end hook while a dialog shows is waiting": ("claude", [
        Step(0.0, "waiting_input__permission__160x45", W, hook=W, file=W),
        Step(0.2, "waiting_input__permission__160x45", W, hook=R, file=R),
        Step(1.0, "waiting_input__permission__160x45", W),
    ]),
    "an idle word over a picker is unknown, never ready": ("claude", [
        Step(0.0, "ready__after-reply__160x45", R, file=R),
        Step(1.0, "unknown__model-picker__160x45", State.UNKNOWN),
        Step(0.0, "unknown__model-picker__160x45", State.UNKNOWN, hook=R),
        Step(5.0, "unknown__model-picker__160x45", State.UNKNOWN),
    ]),
    "codex: a turn end under its working line is busy": ("codex", [
        Step(0.0, "ready__after-reply__160x45", R, hook=R),
        Step(0.05, "ready__after-reply__160x45", R),
        Step(0.05, "busy__before-first-token__160x45", B),
    ]),
    # Copilot CLI 1.0.102 fires agentStop up to ~0.7 s before it draws the reply,
    # and its footer says "Working" 2-3 s after it (load 15), on a screen still
    # for more than quiet_ms (400 ms): the turn's end is expected, nothing is
    # typed till the screen agrees; then ready at once, and stays ready.
    "copilot: agentStop before its footer idles is busy till it does": ("copilot", [
        Step(0.0, "busy__streaming__160x45", B, hook=B),
        Step(0.3, "busy__streaming__160x45", B, hook=R),
        Step(0.45, "busy__streaming__160x45", B),
        Step(2.0, "busy__streaming__160x45", B),
        Step(0.5, "busy__streaming__160x45", B),
        Step(0.05, "ready__after-reply__160x45", R),
        Step(0.02, "ready__after-reply__160x45", R),
        Step(0.2, "ready__after-reply__160x45", R),
        Step(0.5, "ready__after-reply__160x45", R),
    ]),
    "copilot: a Working footer left behind after agentStop is ready once the bound passes": (
        "copilot", [
            Step(0.0, "busy__streaming__160x45", B, hook=B),
            Step(0.3, "busy__streaming__160x45", B, hook=R),
            Step(7.9, "busy__streaming__160x45", B),
            Step(0.15, "busy__streaming__160x45", R),
        ]),
    "codex: its permission hook before the dialog is drawn": ("codex", [
        Step(0.0, "busy__streaming__160x45", B, hook=B),
        Step(0.3, "busy__streaming__160x45", B, hook=W),
        Step(0.8, "waiting_input__permission__160x45", W),
    ]),
}


def run_case(agent: str, steps: list[Step], tmp_path: Path) -> list[State]:
    clock = [1000.0]
    hooks, file = Hooks(clock), File(clock)
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=lambda: clock[0], hooks=hooks, structured=file)
    det._seen_ready = True  # the agent was ready before the sequence starts
    got = []
    for step in steps:
        clock[0] += step.wait_s
        if step.hook is not False:
            hooks.say(step.hook if isinstance(step.hook, State) else None)
        if step.file is not False:
            file.say(step.file if isinstance(step.file, State) else None)
        got.append(det.update(screen(agent, step.screen)).state)
    return got


@pytest.mark.parametrize("name", list(CASES))
def test_recorded_sequence(name: str, tmp_path: Path) -> None:
    agent, steps = CASES[name]
    assert run_case(agent, steps, tmp_path) == [s.expect for s in steps]


def _agents_with(*names: str) -> list[str]:
    return sorted(d.name for d in SCREENS.iterdir()
                  if d.is_dir() and all((d / f"{n}.ansi").exists() for n in names))


ENTER = ("ready__after-reply__160x45", "busy__before-first-token__160x45")


@pytest.mark.parametrize("source", ["hook", "file"])
@pytest.mark.parametrize("agent", _agents_with(*ENTER))
def test_no_passing_ready_between_enter_and_busy(agent: str, source: str, tmp_path: Path) -> None:
    """Every agent whose busy screen a busy rule reads: the turn's end said, then
    Enter and the busy screen, frame by frame every 20 ms (the spinner turning):
    no ``ready`` between Enter and the agent's own ``busy`` word."""
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    busy = screen(agent, ENTER[1])
    if not any(m.rule.state is State.BUSY for m in evaluate_rules(profile, busy)):
        pytest.skip(f"{agent}'s busy screen has no busy rule (read by quiet)")
    said = {"hook": R, "file": False} if source == "hook" else {"hook": False, "file": R}
    steps = [Step(0.0, ENTER[0], R, **said), Step(0.3, ENTER[0], R)]
    states = run_frames(agent, steps, ENTER[1], 10, tmp_path, source)
    assert [s for s in states if s is State.READY] == [], states


BUSY = "busy__streaming__160x45"


@pytest.mark.parametrize("source", ["hook", "file"])
@pytest.mark.parametrize("agent", _agents_with(BUSY, ENTER[0]))
def test_a_turn_end_said_before_the_screen_agrees_is_busy(agent: str, source: str,
                                                          tmp_path: Path) -> None:
    """Every agent whose recorded busy screen a busy rule reads: its turn's end
    said (a hook, its session file) while that screen stays, still for longer
    than quiet_ms (Copilot CLI's agentStop ~0.7 s before its reply): no
    ``ready`` till the screen agrees, looked at every 0.1 s for 1.3 s; the
    reply drawn: ``ready`` (a hook's word counts while the screen changed at
    most HOOK_GRACE_MS after it). The bound itself: the Copilot cases."""
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    if not any(m.rule.state is State.BUSY for m in evaluate_rules(profile, screen(agent, BUSY))):
        pytest.skip(f"{agent}'s busy screen has no busy rule (read by quiet)")
    clock = [1000.0]
    hooks, file = Hooks(clock), File(clock)
    det = Detector(profile, clock=lambda: clock[0], hooks=hooks if source == "hook" else None,
                   structured=file if source == "file" else None)
    det._seen_ready = True
    said = hooks if source == "hook" else file
    said.say(B)
    assert det.update(screen(agent, BUSY)).state is B
    clock[0] += 0.2
    said.say(R)
    got = []
    for _ in range(13):
        got.append(det.update(screen(agent, BUSY)).state)
        clock[0] += 0.1
    assert State.READY not in got, (got, det.reading)
    assert det.reading.rule.endswith(":draw-due"), det.reading
    assert det.update(screen(agent, ENTER[0])).state is R, det.reading


def run_frames(agent: str, steps: list[Step], frame: str, n: int, tmp_path: Path,
               source: str) -> list[State]:
    """``steps``, then ``n`` looks at ``frame`` 20 ms apart with output between
    them (the spinner turning, as the supervisor's pipe-pane tells it)."""
    clock = [1000.0]
    hooks, file = Hooks(clock), File(clock)
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=lambda: clock[0], hooks=hooks,
                   structured=file if source == "file" else None)
    det._seen_ready = True
    for step in steps:
        clock[0] += step.wait_s
        if step.hook is not False:
            hooks.say(step.hook if isinstance(step.hook, State) else None)
        if step.file is not False:
            file.say(step.file if isinstance(step.file, State) else None)
        assert det.update(screen(agent, step.screen)).state is step.expect
    states = []
    snap = screen(agent, frame)
    for _ in range(n):
        clock[0] += 0.02
        det.note_output(clock[0])
        states.append(det.update(snap).state)
    return states


def test_the_table_covers_every_claim_and_never_makes_unknown_ready() -> None:
    for source in Source:
        for claim in Claim:
            assert resolve(source, claim, frozenset()).seen is Seen.ANY
        assert resolve(source, Claim.IDLE, frozenset({Seen.NO_BOX})).outcome is Outcome.OVERLAY
        assert resolve(source, Claim.IDLE, frozenset({Seen.SPINNING, Seen.NO_BOX})).outcome \
            is Outcome.BUSY
        assert resolve(source, Claim.ASKS, frozenset({Seen.DUE})).outcome is Outcome.BUSY
    assert not [r for r in TABLE if r.claim is not Claim.IDLE and r.outcome is Outcome.READY]


@pytest.mark.parametrize("agent", sorted(p.stem for p in (Path(__file__).parents[1] / "patterns").glob("*.toml")))
def test_every_agent_has_its_chain(agent: str, tmp_path: Path) -> None:
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    got = chain(profile)
    assert got[0] == "process" and got[-1].startswith("quiet")
    assert ("hook signal" in " ".join(got)) == bool(profile.channels.hooks)


def _drafts() -> list[pytest.param]:
    return [pytest.param(f.parent.name, f.stem, id=f"{f.parent.name}/{f.stem}")
            for f in sorted(SCREENS.glob("*/draft__*.ansi"))]


@pytest.mark.parametrize("source", ["hook", "file"])
@pytest.mark.parametrize(("agent", "name"), _drafts())
def test_a_box_with_text_is_draft_whatever_the_agent_says(agent: str, name: str, source: str,
                                                          tmp_path: Path) -> None:
    """Every agent, every recorded screen of text in its input box: ``draft``,
    never ``ready``, however fresh the agent's own word that its turn is over
    (a message typed then would join the text as one prompt, issue 37), both
    just drawn and long still."""
    said = {"hook": R, "file": False} if source == "hook" else {"hook": False, "file": R}
    steps = [Step(0.0, "ready__after-reply__160x45", R, **said), Step(0.3, name, State.DRAFT),
             Step(0.0, name, State.DRAFT, **said), Step(5.0, name, State.DRAFT)]
    if not (SCREENS / agent / "ready__after-reply__160x45.ansi").exists():
        pytest.skip(f"{agent} has no recorded reply screen")
    clock = [1000.0]
    hooks, file = Hooks(clock), File(clock)
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=lambda: clock[0], hooks=hooks,
                   structured=file if source == "file" else None)
    det._seen_ready = True
    got = []
    for step in steps:
        clock[0] += step.wait_s
        if step.hook is not False:
            hooks.say(step.hook if isinstance(step.hook, State) else None)
        if step.file is not False:
            file.say(step.file if isinstance(step.file, State) else None)
        got.append(det.update(screen(agent, step.screen)).state)
    assert got[1:] == [State.DRAFT] * 3, (got, det.reading)


SUBMIT = ("ready__after-reply__160x45", "draft__one-line__160x45")


@pytest.mark.parametrize("source", ["hook", "file", "none"])
@pytest.mark.parametrize("agent", _agents_with(*SUBMIT))
def test_a_prompt_submitted_is_busy_till_its_turn_shows(agent: str, source: str,
                                                        tmp_path: Path) -> None:
    """Every agent: the previous turn's end said, text in the box, then Enter
    empties it and the agent draws nothing of the new turn for a while (Kimi
    Code, Gemini CLI: 0.7-0.9 s at a session's first prompt; Qwen Code took
    agentwrap's message typed then and the prompt as one, issue 37). The empty
    box is not ``ready`` however still, until the bound; then it is (a box
    emptied by hand)."""
    said = {"hook": {"hook": R}, "file": {"file": R}, "none": {}}[source]
    steps = [Step(0.0, SUBMIT[0], R, **said), Step(1.0, SUBMIT[0], R),
             Step(0.5, SUBMIT[1], State.DRAFT), Step(1.0, SUBMIT[1], State.DRAFT)]
    clock = [1000.0]
    hooks, file = Hooks(clock), File(clock)
    profile = load_profile(agent, Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=lambda: clock[0], hooks=hooks if source == "hook" else None,
                   structured=file if source == "file" else None)
    det._seen_ready = True
    for step in steps:
        clock[0] += step.wait_s
        for who, what in (("hook", hooks), ("file", file)):
            if getattr(step, who) is not False:
                what.say(getattr(step, who) if isinstance(getattr(step, who), State) else None)
        state = det.update(screen(agent, step.screen)).state
        assert state is step.expect or step is steps[0], det.reading
    empty = screen(agent, SUBMIT[0])
    got = []
    for _ in range(int(det.submit_due_s / 0.1) - 1):  # Enter: the box empty, nothing else drawn
        clock[0] += 0.1
        got.append(det.update(empty).state)
    assert State.READY not in got, (got, det.reading)
    clock[0] += 0.2
    assert det.update(empty).state is R, det.reading  # bounded: the box emptied by hand
