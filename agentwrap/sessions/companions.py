"""What runs beside a session's supervisor and stops with it.

The project's feedback watchers and schedules (:mod:`agentwrap.feedback`), the
native hooks' server: each is a :data:`Companion`, a callable the caller
hands in, so this layer depends on none of them. Both ways a supervisor runs
(a process of its own, :func:`agentwrap.sessions.lifecycle.supervise`, or a
thread of the supervisor host, :mod:`agentwrap.sessions.host`) start them with
:func:`start_companions`: here, so that neither imports the other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from ..paths import Paths

log = logging.getLogger("agentwrap.host")


class Stoppable(Protocol):
    def stop(self) -> None: ...


#: Something started beside a session's supervisor and stopped with it; None
#: when it has nothing to do for that session.
Companion = Callable[[Paths, str], "Stoppable | None"]


def start_companions(companions: Sequence[Companion], paths: Paths, name: str) -> list[Stoppable]:
    """Each companion of session ``name`` that has something to do; one that
    fails is logged and left out (the session is supervised all the same)."""
    started: list[Stoppable] = []
    for make in companions:
        try:
            c = make(paths, name)
        except Exception:
            log.exception("a companion of %s did not start", name)
            continue
        if c is not None:
            started.append(c)
    return started


__all__ = ["Companion", "Stoppable", "start_companions"]
