"""Enter -> busy with no passing ``ready``, live (issue 37).

The stand-in agent in a real tmux server, the detector fed its captures at a
loaded machine's pace (one look every LOADED_POLL_S, as the supervisor's
cost-based spacing gives at load ~10), and the agent's word that its turn
ended (its published state, as Claude's session file's "idle") given at each
reply and not yet "busy" when the next prompt is sent (Claude writes it ~0.1 s
late, and a loaded machine later). The bug class: that word outranked the
spinner of the prompt just sent, and a message queued then was
typed into a busy agent. The precedence table
(:mod:`agentwrap.detect.precedence`) weighs it against the screen; without it
every look of the busy spell said ``ready``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.waiting import wait_for

from agentwrap.detect.detector import Detector, StructuredReading
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import State
from agentwrap.paths import Paths
from agentwrap.terminal.tmux import TmuxTerminal

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
STANDIN_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"
LOADED_POLL_S = 0.15
TURNS = 4

pytestmark = pytest.mark.usefixtures("tmux")


class SessionFile:
    """The state the agent publishes (Claude's session file): "idle" from the moment
    the test sees a reply, till the next prompt's "busy" is written, late."""

    def __init__(self) -> None:
        self.said: float | None = None

    def read(self) -> StructuredReading | None:
        if self.said is None:
            return None
        return StructuredReading(State.READY, "session file: idle", time.monotonic() - self.said)

    def stamp(self) -> float | None:
        return self.said


class Watch:
    """The detector fed the pane's captures every LOADED_POLL_S, in a thread."""

    def __init__(self, term: TmuxTerminal, detector: Detector) -> None:
        self.term, self.detector = term, detector
        self.seen: list[tuple[float, State, str]] = []
        self.text = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            snap = self.term.snapshot()
            reading = self.detector.update(snap)
            self.text = snap.text()
            self.seen.append((time.monotonic(), reading.state, reading.rule))
            self._stop.wait(LOADED_POLL_S)

    def state(self) -> State:
        return self.seen[-1][1] if self.seen else State.STARTING

    def since(self, t: float) -> list[tuple[float, State, str]]:
        return [s for s in list(self.seen) if s[0] >= t]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def replied(text: str, marker: str) -> bool:
    """The reply's own line on screen (not the prompt's echo, which names it too)."""
    return any(marker in line and "Reply" not in line for line in text.splitlines())


@pytest.fixture
def standin() -> Iterator[tuple[TmuxTerminal, Path]]:
    d = Path(tempfile.mkdtemp(prefix="awsl-", dir="/tmp"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(d), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "SHELL": "/bin/sh", "PYTHONPATH": str(ROOT)}
    socket = d / "tmux.sock"
    try:
        term = TmuxTerminal.launch(socket, "t", [
            sys.executable, str(STANDIN), "--log", str(d / "log.jsonl"), "--startup", "0",
            "--busy", "1.0", "--spin", "0.05"], env=env, cwd=d)
        yield term, d
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_enter_to_busy_has_no_passing_ready(standin: tuple[TmuxTerminal, Path]) -> None:
    term, d = standin
    paths = Paths.from_env({"HOME": str(d)})
    paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN_PROFILE, paths.user_patterns_dir / "standin.toml")
    word = SessionFile()
    watch = Watch(term, Detector(load_profile("standin", paths), structured=word))
    try:
        wait_for(lambda: watch.state() is State.READY, 30, "the stand-in ready")
        passing = []
        for n in range(TURNS):
            marker = f"ACK {n:04x}beef"
            term.paste(f'turn {n}: Reply "{marker}"')
            wait_for(lambda: watch.state() is State.DRAFT, 30, "the prompt in the box")
            enter = time.monotonic()
            term.send_key("Enter")
            wait_for(lambda marker=marker: replied(watch.text, marker), 30, "the reply")
            word.said = time.monotonic()  # "idle", as the reply is drawn
            wait_for(lambda: watch.state() is State.READY, 30, "ready after the reply")
            after = watch.since(enter)
            busy = next((t for t, s, _ in after if s is State.BUSY), None)
            assert busy is not None, (n, [(round(t - enter, 3), s.value, r) for t, s, r in after])
            # every look from Enter to the reply's turn end: never ready
            passing += [(n, round(t - enter, 3), rule) for t, s, rule in after
                        if s is State.READY and t < word.said]
        assert passing == [], passing
    finally:
        watch.stop()
