"""Continuity: a handoff record per project, kept while a session runs, and
delivered to the next session started there (issue 12).

* :mod:`.record`: the record (data only);
* :mod:`.store`: where records live (per project, atomic, 0600, bounded);
* :mod:`.collect`: keeping a running session's record current (supervisor);
* :mod:`.hooks`: what the agent's hooks add, and the session-start handoff;
* :mod:`.render`: the bounded, hostile-content-safe startup context;
* :mod:`.launch`: at ``agentwrap run``: prepare the handoff, begin the record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .collect import Collector as Collector
    from .hooks import START_EVENTS as START_EVENTS
    from .hooks import START_SOURCES as START_SOURCES
    from .hooks import TURN_SIGNS as TURN_SIGNS
    from .hooks import notes_file as notes_file
    from .hooks import on_hook as on_hook
    from .hooks import read_json as read_json
    from .launch import Handoff as Handoff
    from .launch import begin as begin
    from .launch import collector as collector
    from .launch import prepare as prepare
    from .launch import previous as previous
    from .launch import store_for as store_for
    from .store import project_path as project_path

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "collect": ("Collector",),
    "hooks": ("START_EVENTS", "START_SOURCES", "TURN_SIGNS", "notes_file", "on_hook", "read_json"),
    "launch": ("Handoff", "begin", "collector", "prepare", "previous", "store_for"),
    "store": ("project_path",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
