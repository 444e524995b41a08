"""Commands run every N seconds for a session (``[[schedule]]``, ``agentwrap
schedule``): their news is queued as ``scheduler`` messages.

A scheduled run reports like any source (:mod:`.results`): its output when it
changed, a failure once, a recovery once. One thread serves every schedule of
a session and sleeps until the next one is due; a run that outlasts its
period is not started again until it ends (the next one is due a full
period after it ended).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from .sources import ScheduleSource


class Scheduler:
    def __init__(self, schedules: Sequence[ScheduleSource],
                 run: Callable[[ScheduleSource], None], *, first_after_s: float | None = None
                 ) -> None:
        self.schedules = list(schedules)
        self._run = run
        now = time.monotonic()
        self._due = [now + (s.every_s if first_after_s is None else first_after_s)
                     for s in self.schedules]
        self._stop = threading.Event()
        self.runs = 0
        self._thread = threading.Thread(target=self._loop, name="feedback:schedule",
                                        daemon=True)

    def start(self) -> Scheduler:
        if self.schedules:
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            i = min(range(len(self._due)), key=self._due.__getitem__)
            wait = self._due[i] - time.monotonic()
            if wait > 0:
                self._stop.wait(wait)
                continue
            try:
                self._run(self.schedules[i])
            except Exception:
                import logging

                logging.getLogger("agentwrap.feedback").exception("scheduled run failed")
            self.runs += 1
            self._due[i] = time.monotonic() + self.schedules[i].every_s

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
