"""A delivery world without tmux: a fake clock, a scripted agent screen and
the supervisor's few members the delivery engine uses (``delivery.seams.Driver``).

:class:`ScriptedTui` draws what ``standin_agent.py`` draws (history, a
``❯`` input box between two rules, a footer that says "esc to interrupt"
while busy) and reacts to keys and pastes the way it does: a paste lands in
the box, Enter moves the box into the history and makes the agent busy for
``busy_s``, after which it replies ``ACK <token>`` when the block asked for
one (or "OK, noted."). Knobs script what a real TUI sometimes does: a paste
drawn late or never, an Enter lost, a dialog opened by a message, a person
typing, a dialog the agent opens of its own (over the box, which keeps its
text), an agent that dies. Every paste and key is recorded, and so is every
message the agent took (``received``): what "typed twice" and "lost" are
counted on.

:class:`FakeSupervisor` reads the screen with the real
:class:`~agentwrap.detect.detector.Detector` and the standin profile, so
the engine's evidence is judged by the same rules as in the tmux tests. Its
:meth:`~FakeSupervisor.pump` advances the fake clock instead of waiting:
nothing here sleeps on the wall clock.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from conftest import STANDIN_PROFILE

from agentwrap.audit import AuditLog
from agentwrap.config import DeliveryConfig
from agentwrap.delivery.engine import DeliveryEngine
from agentwrap.detect.detector import Detector
from agentwrap.detect.profiles import Profile, parse_profile_file
from agentwrap.detect.states import Reading
from agentwrap.message import Message, NewMessage
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.terminal.screen import Snapshot

ACK_RE = re.compile(r'Reply "ACK ([0-9a-f]+)"')
RULE = "─" * 60
DIALOG = [" Bash command", "   touch x", " Do you want to proceed?", " ❯ 1. Yes", "   2. No",
          " Esc to cancel"]


def standin_profile() -> Profile:
    """The profile of the stand-in agent (the screen :class:`ScriptedTui` draws)."""
    return parse_profile_file(STANDIN_PROFILE)


class FakeClock:
    """Time that moves only when told to (the engine, store and detector share it)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class ScriptedTui:
    """The agent's terminal: a :class:`~agentwrap.terminal.base.Terminal`
    whose screen is drawn from a small model of the stand-in agent."""

    backend = "fake"

    def __init__(self, clock: FakeClock, *, cols: int = 160, rows: int = 40) -> None:
        self.clock = clock
        self.cols, self.rows = cols, rows
        # --- the script ---
        self.busy_s = 0.3  # busy after each message it takes
        self.acks = True  # answers "ACK <token>" when the block asks for it
        self.paste_delay_s = 0.0  # a paste shows this late (math.inf: never)
        self.ignore_enter = 0  # this many Enters get lost
        self.dialog_on: str | None = None  # a message containing this opens a dialog
        self.dialog_s = math.inf  # an open dialog is answered (by the person) after this long
        self.dialog_after_paste_s: float | None = None  # a dialog of its own opens this long after a paste
        self.idle_s: float | None = None  # seconds since the person typed (None: unknown)
        self.overlay: list[str] | None = None  # lines no profile rule explains, over the box
        self.reply_before_ack = ""  # words the reply says before its "ACK <token>"
        # A TUI's own word wrap: the echo and the reply in rows of this width,
        # each continuation row under the text, past the gutter (None: no wrap)
        self.wrap: int | None = None
        # --- the agent's state ---
        self.transcript: list[str] = []
        self.box = ""
        self.dialog = False
        self.dialog_since = 0.0
        self.busy_until = -math.inf
        self.reply: str | None = None
        self.dead = False
        self._pastes_due: list[tuple[float, str]] = []
        self._dialog_due = math.inf
        # --- what happened ---
        self.pastes: list[str] = []
        self.keys: list[str] = []
        self.received: list[str] = []  # each message the agent took (Enter with text in the box)
        self.displayed: list[str] = []  # status-line notices (tmux display-message)

    # --- scripting the screen ----------------------------------------------------------

    def echo(self, text: str) -> None:
        """Put a submitted text in the history, as the agent draws it."""
        self.transcript.append(self._wrapped("❯ ", text))

    def _wrapped(self, gutter: str, text: str) -> str:
        """``text`` as the TUI draws it after ``gutter``: each line word-wrapped
        to :attr:`wrap` cells, every row past the first indented under it."""
        if self.wrap is None:
            return gutter + text.replace("\n", "\n  ")
        rows = [row for line in text.split("\n")
                for row in (textwrap.wrap(line, self.wrap - len(gutter)) or [""])]
        return "\n".join((gutter if i == 0 else " " * len(gutter)) + row
                         for i, row in enumerate(rows))

    def take(self, text: str) -> None:
        """The agent takes ``text`` (Enter): history, busy, a reply after."""
        self.received.append(text)
        self.echo(text)
        if self.dialog_on and self.dialog_on in text:
            self.open_dialog()
        self.busy_until = self.clock() + self.busy_s
        tokens = ACK_RE.findall(text)
        self.reply = (f"{self.reply_before_ack}ACK {tokens[-1]}" if tokens and self.acks
                      else "OK, noted.")

    def open_dialog(self) -> None:
        """A permission dialog over the input box (the box keeps its text)."""
        self.dialog, self.dialog_since = True, self.clock()

    def _advance(self) -> None:
        now = self.clock()
        if now >= self._dialog_due:
            self._dialog_due = math.inf
            self.open_dialog()
        if self.dialog and now >= self.dialog_since + self.dialog_s:
            self.dialog = False
            self.transcript.append("  ⎿ (dialog answered)")
        for at, text in list(self._pastes_due):
            if at <= now:
                self._pastes_due.remove((at, text))
                self.box += text
        if self.reply is not None and now >= self.busy_until:
            self.transcript.append(self._wrapped("● ", self.reply))
            self.reply = None

    def lines(self) -> list[str]:
        self._advance()
        busy = self.clock() < self.busy_until
        body = [x for t in self.transcript for x in t.split("\n")]
        if self.dialog:
            tail = [RULE, *DIALOG]
        elif self.overlay is not None:
            tail = list(self.overlay)
        else:
            tail = ["· Working…" if busy else "", RULE, *("❯ " + self.box).split("\n"), RULE,
                    "  esc to interrupt" if busy else "  ? for shortcuts"]
        room = self.rows - len(tail)
        body = body[-room:] if room > 0 else []
        return body + [""] * (room - len(body)) + tail

    # --- the Terminal protocol -----------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return Snapshot.from_text("\n".join(self.lines()), cols=self.cols, rows=self.rows,
                                  at=self.clock())

    def paste(self, text: str, *, bracketed: bool = True) -> None:
        self.pastes.append(text)
        if self.dialog_after_paste_s is not None:
            self._dialog_due = self.clock() + self.dialog_after_paste_s
        if self.paste_delay_s != math.inf:
            self._pastes_due.append((self.clock() + self.paste_delay_s, text))
            self._advance()

    def send_key(self, key: str) -> None:
        self.keys.append(key)
        self._advance()
        if key != "Enter":
            if key == "C-c":
                self.box = ""
            return
        if self.dialog:
            self.dialog = False
            self.transcript.append("  ⎿ (dialog answered)")
            return
        if self.ignore_enter > 0:
            self.ignore_enter -= 1
            return
        if self.box.strip():
            text, self.box = self.box, ""
            self.take(text)

    def send_text(self, text: str) -> None:
        self.box += text

    def alive(self) -> bool:
        return not self.dead

    def exit_code(self) -> int | None:
        return 9 if self.dead else None

    def agent_pid(self) -> int | None:
        return None

    def resize(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows

    def user_idle_s(self) -> float | None:
        return self.idle_s

    def held(self) -> bool:
        return False

    def close(self) -> None:
        self.dead = True

    def display(self, line: str) -> None:
        self.displayed.append(line)


class FakeSupervisor:
    """What the engine needs of a supervisor (``delivery.seams.Driver``): the
    terminal, the last screen and the real detector's reading of it, and
    turns that advance the fake clock."""

    def __init__(self, tui: ScriptedTui, profile: Profile, clock: FakeClock, *,
                 start_pending: Callable[[], str | None] | None = None) -> None:
        self.term = tui
        self.clock = clock
        self.detector = Detector(profile, clock=clock, start_pending=start_pending)
        self.snap: Snapshot | None = None
        self.stopping = False
        self.pumped = 0.0  # fake seconds spent in pump()

    @property
    def reading(self) -> Reading:
        return self.detector.reading

    def observe(self) -> Reading:
        snap = self.term.snapshot()
        if not self.term.alive():
            return self.detector.exited(self.term.exit_code())
        self.snap = snap
        return self.detector.update(snap)

    def pump(self, timeout: float) -> None:
        self.pumped += timeout
        self.clock.advance(timeout)

    def settle(self) -> Reading:
        """Let the screen stand still long enough for the detector's verdict
        (its quiet window), as a real screen does between turns."""
        self.observe()
        self.clock.advance(self.detector.profile.quiet_ms / 1000 + 0.01)
        return self.observe()


@dataclass
class World:
    """One session's delivery with every part real but the agent and the
    clock: the engine, the SQLite store (in the test's tmp dir), the
    instruction file in ``project``."""

    clock: FakeClock
    store: SQLiteMessageStore
    tui: ScriptedTui
    sup: FakeSupervisor
    engine: DeliveryEngine
    project: Path
    session: str = "fake"

    def send(self, content: str, **kw: Any) -> str:
        """Queue a message for the session; its id."""
        m, _ = self.store.enqueue(NewMessage(session=self.session, content=content, **kw))
        return m.id

    def get(self, mid: str) -> Message:
        return self.store.get(mid)

    def run(self, seconds: float, until: Callable[[], bool] = lambda: False) -> None:
        """The supervisor's loop for ``seconds`` of fake time: look, give the
        engine its turn, advance the clock by the wait it asks for."""
        end = self.clock() + seconds
        while self.clock() < end and not until():
            self.sup.observe()
            wait = self.engine.step(self.sup)
            self.clock.advance(0.1 if wait is None else max(wait, 0.01))

    def run_until_ended(self, mid: str, seconds: float = 600.0) -> Message:
        """Run until message ``mid`` ends (or ``seconds`` pass); the message."""
        self.run(seconds, lambda: self.get(mid).status.terminal)
        return self.get(mid)

    def restarted(self) -> World:
        """A new supervisor and engine on the same store, agent and screen:
        what the supervisor killed at any point comes back as."""
        sup = FakeSupervisor(self.tui, self.sup.detector.profile, self.clock)
        engine = make_engine(self.store, self.sup.detector.profile, self.clock, self.project,
                             self.engine.cfg)
        return replace(self, sup=sup, engine=engine)


FAST = DeliveryConfig(notify_on_failure=False, typing_grace_ms=1500, backoff_s=(1.0, 2.0, 5.0))


def make_engine(store: SQLiteMessageStore, profile: Profile, clock: FakeClock, project: Path,
                cfg: DeliveryConfig, **kw: Any) -> DeliveryEngine:
    return DeliveryEngine(store, cfg, profile, "fake", project, AuditLog(project / "audit.jsonl"),
                          lock_dir=project / "locks", clock=clock, **kw)


def make_world(tmp_path: Path, *, profile: Profile | None = None,
               start_pending: Callable[[], str | None] | None = None,
               **engine_kw: Any) -> World:
    """A ready agent (its screen settled) and an engine with :data:`FAST`
    (``cfg=`` replaces it; other keywords go to :class:`DeliveryEngine`)."""
    clock = FakeClock()
    profile = profile or standin_profile()
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    store = SQLiteMessageStore(tmp_path / "queue.db", clock=clock)
    tui = ScriptedTui(clock)
    sup = FakeSupervisor(tui, profile, clock, start_pending=start_pending)
    cfg = engine_kw.pop("cfg", FAST)
    engine = make_engine(store, profile, clock, project, cfg, **engine_kw)
    sup.settle()
    return World(clock, store, tui, sup, engine, project)
