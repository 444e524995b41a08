"""Services for the server's worker threads.

A :class:`~agentwrap.service.Service` holds SQLite connections and is used by
one thread at a time; the server runs each request on a worker thread, and
an event stream or a ``?wait=`` holds one for long. The pool lends an idle
service (opening another when all are lent) and closes them all at shutdown.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ...message import QueueLimits
from ...paths import Paths
from ...service import Service


class ServicePool:
    def __init__(self, paths: Paths, limits: QueueLimits) -> None:
        self.paths = paths
        self.limits = limits
        self._idle: list[Service] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def lease(self) -> Iterator[Service]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            svc = self._idle.pop() if self._idle else None
        if svc is None:
            svc = Service.open(self.paths, limits=self.limits)
        try:
            yield svc
        finally:
            with self._lock:
                if self._closed:
                    svc.close()
                else:
                    self._idle.append(svc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for svc in idle:
            svc.close()
