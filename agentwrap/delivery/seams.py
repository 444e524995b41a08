"""What the delivery engine needs from the layer above it, as protocols.

The engine is driven by a session's supervisor and built from a session's
record, both of which live in :mod:`agentwrap.sessions`, a layer *above*
delivery. Naming them here, by what the engine actually uses, keeps imports
pointing down (the layer contract in ``pyproject.toml``) and keeps the engine
testable with anything that has these few members.
"""

from __future__ import annotations

from typing import Protocol

from ..detect.question import Question
from ..detect.states import Reading
from ..session_options import SessionOptions
from ..terminal.base import Terminal
from ..terminal.screen import Snapshot


class DraftFlag(Protocol):
    @property
    def draft(self) -> bool:
        """Text the person typed is in the input box (even if the state says otherwise)."""


class _Turns(Protocol):
    """The supervisor's loop as the engine and the answerer use it: the
    terminal, the last screen and verdict, and turns to look again or wait."""

    term: Terminal
    snap: Snapshot | None

    @property
    def reading(self) -> Reading: ...

    @property
    def stopping(self) -> bool: ...

    def observe(self) -> Reading:
        """Snapshot, detect, publish; the new reading."""

    def pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` while draining the agent's output and commands."""


class Driver(_Turns, Protocol):
    """The supervisor that gives the engine its turns and its eyes."""

    @property
    def detector(self) -> DraftFlag: ...


class SessionInfo(Protocol):
    """The parts of a session's record the engine is built from."""

    @property
    def name(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def profile(self) -> str: ...

    @property
    def options(self) -> SessionOptions: ...


class Asking(Protocol):
    @property
    def question(self) -> Question | None:
        """What the waiting agent asks, read off the last screen (None: nothing read)."""

    @property
    def dialog_since(self) -> float | None:
        """When the dialog on screen was first seen (``time.monotonic``; None: no dialog)."""


class AnswerDriver(_Turns, Protocol):
    """The supervisor, as the answerer (:mod:`.answering`) uses it."""

    @property
    def detector(self) -> Asking: ...
