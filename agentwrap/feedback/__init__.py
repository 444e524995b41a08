"""Feedback sources: checks that run when files change or an agent edits, and
whose results reach the agent as environment information (issue 12).

The modules, each with one job:

* :mod:`.presets` and :mod:`.sources`: what a ``[[feedback]]`` / ``[[schedule]]``
  table means, presets by name, and which of them may run (a project's tables
  only with the person's trust);
* :mod:`.checks`: running a set of sources on changed files and reporting,
  shared by the edit hook, a session's watcher and ``agentwrap watch``;
* :mod:`.runner`: one command run, without a shell, bounded in time and output;
  :class:`~.runner.SourceWorker` never runs one source twice at once;
* :mod:`.trimming`: the useful part of a failure;
* :mod:`.results`: what was last said per source (identical results are not
  sent twice, a recovery is said once), kept on disk because every hook run is
  a new process;
* :mod:`.batching`: one message per turn for all sources, within a budget;
* :mod:`.emit`: the message, enqueued through :class:`~agentwrap.service.Service`
  and audited with its provenance;
* :mod:`.watcher`: a watchdog observer, ignore rules and burst debouncing;
* :mod:`.edit_hook`: what the between-tool-calls hook runs after an edit tool;
* :mod:`.companion`: a session's watchers and schedules in the supervisor host;
* :mod:`.scheduler`: sources run every N seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .companion import FeedbackLoop as FeedbackLoop
    from .companion import LoopOptions as LoopOptions
    from .companion import for_session as for_session
    from .edit_hook import after_tool as after_tool
    from .sources import FeedbackSource as FeedbackSource
    from .sources import ScheduleSource as ScheduleSource
    from .sources import feedback_source as feedback_source
    from .sources import parse_duration as parse_duration
    from .sources import select as select
    from .sources import split_command as split_command

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "companion": ("FeedbackLoop", "LoopOptions", "for_session"),
    "edit_hook": ("after_tool",),
    "sources": (
        "FeedbackSource",
        "ScheduleSource",
        "feedback_source",
        "parse_duration",
        "select",
        "split_command",
    ),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
