"""Answers to the questions agents ask, as the service offers them.

The rules of an answer are :class:`~agentwrap.answers.intake.AnswerIntake`'s,
shared with the answer folder and the answer policy inside the supervisor;
what the service keeps is the answers table, opened only on first use (most
commands never need it, and a hook must start fast), a status by id, and a
wait for an answer to be applied.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..audit import AuditLog
from ..errors import InvalidAnswer
from ..paths import Paths
from ..sessions.registry import Registry
from .events import wait_for
from .profiles import ProfileCache

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast
    from ..answers.intake import AnswerIntake
    from ..answers.store import Answer, AnswerStore


class Answering:
    """The answers table of one service, and the intake that fills it."""

    def __init__(self, paths: Paths, registry: Registry, audit: AuditLog,
                 profiles: ProfileCache) -> None:
        self.paths = paths
        self.registry = registry
        self.audit = audit
        self.profiles = profiles
        self._store: AnswerStore | None = None
        self._lock = threading.Lock()

    @property
    def store(self) -> AnswerStore:
        """The answers table (opened on first use: most commands never need it)."""
        from ..answers.store import AnswerStore

        with self._lock:
            if self._store is None:
                self._store = AnswerStore(self.paths.db_path, events_dir=self.paths.events_dir,
                                          url=self.registry.url,  # the registry's store
                                          host=self.registry.host)
            return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    @property
    def intake(self) -> AnswerIntake:
        from ..answers.intake import AnswerIntake

        return AnswerIntake(self.paths, self.registry, lambda: self.store, self.audit,
                            self.profiles.get)

    def status(self, answer_id: str) -> Answer:
        try:
            return self.store.get(answer_id)
        except KeyError:
            raise InvalidAnswer(f"no answer {answer_id!r}") from None

    def wait(self, answer_id: str, timeout: float, recheck_s: Callable[[], float]) -> Answer:
        """Block until the answer is applied, stale or failed, or ``timeout``
        passed (then it is returned still pending); woken by the event bus."""
        return wait_for(self.paths, lambda: self.status(answer_id), lambda a: a.ended,
                        timeout, recheck_s)
