"""A session's feedback while it lives: watcher, start checks, schedules.

:class:`FeedbackLoop` is what ``agentwrap watch`` runs in the foreground and
what the supervisor host starts beside each session (:func:`for_session`)
and stops when the session's supervision ends. Bursts go to one
:class:`~.runner.SourceWorker`, so the checks of a burst run together (one
message for all of them), never two at once, and a burst arriving while
another's checks wait replaces the waiting one.

For agents whose edits no hook reports (Aider: no hooks; Codex: none for
``apply_patch``) the watcher's changes also trigger the ``edit`` sources.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.all_agents import AGENTS
from ..config import load_config
from ..errors import AgentwrapError
from ..paths import Paths
from ..service import Service
from .checks import run_all
from .emit import Ran, report, report_changes
from .results import forget
from .runner import Job, SourceWorker, lock_path, run_source
from .scheduler import Scheduler
from .sources import FeedbackSource, ScheduleSource, select
from .watcher import Burst, Watcher

log = logging.getLogger("agentwrap.feedback")

#: Profiles whose edits agentwrap hears through hooks (each agent's
#: ``edits_by_hook``, :mod:`agentwrap.agents`); the others' edits are seen by the
#: watcher only. Codex 0.169 runs no PostToolUse hook for apply_patch (seen end
#: to end: only its shell calls fire one), so its edits are the watcher's, and
#: the result goes in at its next tool call.
HOOKED_AGENTS = tuple(a.name for a in AGENTS.values() if a.edits_by_hook)


@dataclass
class LoopOptions:
    budget_tokens: int = 1000
    debounce_s: float = 0.3
    max_wait_s: float = 3.0
    changes_as: str | None = None  # no watch source: report the changes, as this source id
    on_event: Callable[[dict[str, Any]], None] | None = None  # --json lines, tests
    first_schedule_after_s: float | None = None  # None: a full period after the start


@dataclass
class FeedbackLoop:
    paths: Paths
    session: str
    root: Path
    watch: Sequence[FeedbackSource] = ()
    start_sources: Sequence[FeedbackSource] = ()
    schedules: Sequence[ScheduleSource] = ()
    options: LoopOptions = field(default_factory=LoopOptions)

    def __post_init__(self) -> None:
        self._service: Service | None = None
        self._lock = threading.Lock()
        self._watcher: Watcher | None = None
        self._worker: SourceWorker | None = None
        self._scheduler: Scheduler | None = None
        self.bursts = 0
        self.queued = 0

    # --- lifetime -------------------------------------------------------------------

    def start(self) -> FeedbackLoop:
        self._service = Service.open(self.paths, link_required=False)  # the hub may be away
        if self.watch or self.options.changes_as:
            self._worker = SourceWorker("bursts", self._run_burst)
            self._watcher = Watcher(self.root, self._on_burst, debounce_s=self.options.debounce_s,
                                    max_wait_s=self.options.max_wait_s).start()
        if self.start_sources:
            threading.Thread(target=self._run_start, name="feedback:start", daemon=True).start()
        self._scheduler = Scheduler(self.schedules, self._run_schedule,
                                    first_after_s=self.options.first_schedule_after_s).start()
        return self

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._scheduler is not None:
            self._scheduler.stop()
        if self._worker is not None:
            self._worker.stop()
        with self._lock:
            if self._service is not None:
                # a check that ended after the supervisor removed an ended session's memory
                # wrote it again; nothing reports from here on, so it goes for good
                if self._ended():
                    forget(self.paths, self._service.registry.local(self.session)
                           or self.session)
                self._service.close()
                self._service = None

    def _ended(self) -> bool:
        assert self._service is not None
        try:
            return self._service.state(self._service.own(self.session)).ended is not None
        except AgentwrapError:  # `agentwrap watch` for a name no session has
            return False

    @property
    def scheduled_runs(self) -> int:
        return self._scheduler.runs if self._scheduler is not None else 0

    def wait_idle(self, timeout: float = 30.0) -> bool:
        return self._worker.wait_idle(timeout) if self._worker is not None else True

    # --- events ---------------------------------------------------------------------

    def _emit(self, **event: Any) -> None:
        if self.options.on_event is not None:
            self.options.on_event(event)

    def _on_burst(self, burst: Burst) -> None:
        self.bursts += 1
        self._emit(event="burst", files=len(burst.changes), first=burst.files[:10],
                   first_event_ns=burst.first_event_ns)
        if self._worker is None:
            return
        if self.watch:
            self._worker.submit(burst.files, "watch")
        else:
            kinds = {c.path: c.kind for c in burst.changes}
            self._worker.submit([f"{kinds[p]}\0{p}" for p in burst.files], "changes")

    def _run_burst(self, job: Job) -> None:
        if job.trigger == "changes":
            pairs = [(p.split("\0", 1)[1], p.split("\0", 1)[0]) for p in job.files]
            with self._lock:
                if self._service is None:
                    return
                m = report_changes(self._service, self.session, pairs,
                                   name=self.options.changes_as or "watch", root=str(self.root))
            if m is not None:
                self.queued += 1
                self._emit(event="queued", message=m.id, files=len(pairs), ts_ns=time.time_ns())
            return
        existing = [f for f in job.files if (self.root / f).exists()]
        runs = run_all(self.paths, self.root, self.watch, existing or job.files, "watch")
        self._report(runs)

    def _run_start(self) -> None:
        self._report(run_all(self.paths, self.root, self.start_sources, [], "start"))

    def _run_schedule(self, sched: ScheduleSource) -> None:
        src = sched.as_feedback()
        res = run_source(src, [], self.root, lock_path(self.paths, self.root, src.name))
        self._report([Ran(src, res, "schedule")])

    def _report(self, runs: list[Ran]) -> None:
        for r in runs:
            self._emit(event="ran", source=r.src.name, exit=r.result.exit_code,
                       timed_out=r.result.timed_out, error=r.result.error,
                       seconds=round(r.result.duration_s, 3))
        notes: list[str] = []
        with self._lock:
            if self._service is None:
                return
            sent = report(self._service, self.session, runs,
                          budget_tokens=self.options.budget_tokens, log=notes)
        for n in notes:
            log.warning("%s", n)
        for m in sent:
            self.queued += 1
            self._emit(event="queued", message=m.id, source=m.source_id, ts_ns=time.time_ns())


def for_session(paths: Paths, name: str) -> FeedbackLoop | None:
    """The loop of a session started by ``agentwrap run``: its project's
    ``watch`` sources (``edit`` ones too for an agent without hooks), its
    ``start`` sources and the schedules naming it; None when there are none.
    Sources the person has not trusted are left out, and the log says so."""
    with Service.open(paths) as service:
        rec = service.state(service.own(name))  # this host's session, run here
    root = Path(rec.cwd)
    cfg = load_config(paths, root)
    sel = select(cfg)
    for why in sel.skipped:
        log.warning("%s", why)
    hooked = rec.profile in HOOKED_AGENTS
    watch = [s for s in sel.feedback if "watch" in s.on or (not hooked and "edit" in s.on)]
    start = sel.on("start")
    schedules = [s for s in sel.schedules if s.session == name]
    if not (watch or start or schedules):
        return None
    opts = LoopOptions(budget_tokens=cfg.feedback_options.budget_tokens,
                       debounce_s=cfg.feedback_options.debounce_ms / 1000)
    log.info("feedback for %s: watch %s, start %s, schedules %s", name,
             [s.name for s in watch], [s.name for s in start], [s.name for s in schedules])
    return FeedbackLoop(paths, name, root, watch, start, schedules, opts).start()
