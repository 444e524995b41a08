"""State signals an agent reports about itself, for the detector.

The screen says what an agent shows; some agents also *say* what they do,
through their native hooks (``agentwrap hook``, :mod:`agentwrap.surfaces.hooks`):
a prompt was submitted, the turn ended, a permission question is open, the
prompt sits idle. Such a signal is stronger than the screen and is named as
such in ``state --explain``.

A signal is one small JSON file per session in the runtime dir,
``<session>.signal.json``, replaced atomically on every report, so the latest
signal is all there is (the detector weighs it against the screen by its
time, ``at``). It is not written to the store on purpose: a hook must answer
within milliseconds and work while the database is locked, and a supervisor
can read a file in its loop without a query. The writer nudges the session's
supervisor (:func:`~agentwrap.datagram.wake`) so it looks at once.

Nothing is created that does not exist: without agentwrap's runtime dir
there is no supervisor to read a signal, and nothing is written.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..datagram import SIGNAL, wake
from ..paths import Paths, ReplacedFile, check_session_name, write_private

if TYPE_CHECKING:  # the hook that writes a signal never loads the detector
    from ..detect.detector import HookReading

#: What each signal says about the agent's state (the detector's vocabulary).
SIGNAL_STATES = {
    "prompt_submitted": "busy",  # a turn started (Claude/Codex UserPromptSubmit, Gemini BeforeAgent)
    "turn_end": "ready",  # the turn ended (Claude/Codex Stop, Gemini AfterAgent)
    "permission_prompt": "waiting_input",  # a permission question is open
    "idle_prompt": "ready",  # the prompt has waited for input a while (Claude)
}


@dataclass(frozen=True)
class Signal:
    """One report: ``signal`` (a key of :data:`SIGNAL_STATES`), the ``state``
    it means, who said it (``source``: ``hook``; ``agent``, ``event``: the
    agent's own name for it) and when (``at``, epoch seconds)."""

    signal: str
    state: str
    source: str
    agent: str
    event: str
    at: float
    detail: str = ""


def signal_file(paths: Paths, session: str) -> Path:
    return paths.runtime_dir / f"{check_session_name(session)}.signal.json"


def write_signal(
    paths: Paths, session: str, signal: str, *, source: str, agent: str, event: str,
    detail: str = "", now: float | None = None,
) -> Signal | None:
    """Record ``signal`` as the session's latest and wake its supervisor.

    ``now``: when the agent's event happened (a hook passes its process's start
    time), else now. A signal never replaces one of a later event: hooks run
    in the background, or by threads of the supervisor's hook server, may
    finish in another order than the agent's events came (a prompt's signal
    written after its turn's end would say busy until the screen alone decides).

    None (nothing written) when the runtime dir does not exist or a later
    event's signal is there. Raises ValueError for an unknown signal or a bad
    session name, OSError when the file cannot be written.
    """
    if signal not in SIGNAL_STATES:
        raise ValueError(f"unknown signal {signal!r}")
    path = signal_file(paths, session)
    if not path.parent.is_dir():
        return None
    sig = Signal(signal, SIGNAL_STATES[signal], source, agent, event,
                 time.time() if now is None else now, detail[:200])
    with _locked(path):
        latest = read_signal(paths, session)
        if latest is not None and latest.at > sig.at:
            return None
        write_private(path, json.dumps(asdict(sig)).encode("utf-8"))
    wake(paths, session, SIGNAL)
    return sig


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """The session's signal file to one writer at a time (hooks are processes,
    and threads of the hook server): read, compare and replace as one step."""
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_signal(paths: Paths, session: str) -> Signal | None:
    """The session's latest signal, or None (none yet, or unreadable)."""
    try:
        data = json.loads(signal_file(paths, session).read_text(encoding="utf-8"))
        return Signal(**{k: data[k] for k in Signal.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError):
        return None


class HookSignals:
    """The detector's view of a session's signals (:class:`~agentwrap.detect.detector.HookSource`):
    the latest one, as a state and its age, ignoring any written before
    ``since`` (epoch: this launch's start; an earlier session of the same name
    left it). The file is parsed again only when it changed."""

    def __init__(self, paths: Paths, session: str, since: float = 0.0) -> None:
        self.path = signal_file(paths, session)
        self.paths, self.session, self.since = paths, session, since
        self._file = ReplacedFile(self.path, lambda: read_signal(paths, session))

    def read(self) -> HookReading | None:
        from ..detect.detector import HookReading
        from ..detect.states import State

        sig = self._file.read()
        if sig is None or sig.at < self.since:
            return None
        try:
            state = State(sig.state)
        except ValueError:
            return None
        what = f"{sig.agent} hook {sig.event}" + (f" ({sig.detail})" if sig.detail else "")
        return HookReading(state, f"{what}: {sig.signal.replace('_', ' ')}",
                           max(0.0, time.time() - sig.at))


#: How long the supervisor waits for the agent's SessionStart hook before it
#: types the queue after all (hooks turned off in the person's settings, an
#: agent that never ran it): from the session's start, a trust dialog aside.
START_HOOK_WAIT_S = 10.0


def awaits_start_hook(paths: Paths, session: str, started: float,
                      clock: Callable[[], float] = time.time) -> Callable[[], bool]:
    """True while the session's SessionStart hook has not run (the hook marks
    it: ``Paths.session_started``), for at most :data:`START_HOOK_WAIT_S` after
    ``started``: the hook hands the queue over as startup context, and typing
    it meanwhile would race it."""
    seen = paths.session_started(session)
    done = False

    def waiting() -> bool:
        nonlocal done
        if not done:
            done = clock() >= started + START_HOOK_WAIT_S or seen.exists()
        return not done

    return waiting


__all__ = [
    "SIGNAL_STATES", "START_HOOK_WAIT_S", "HookSignals", "Signal", "awaits_start_hook",
    "read_signal", "signal_file", "write_signal",
]
