"""At ``agentwrap run``: the handoff for the new session, and its own record.

:func:`prepare` (before the agent starts) renders the newest record of the
project (or the person's edited ``next.md``) and says whether there is one, so
the launch can register the agent's session-start hook for it.
:func:`begin` (once the session is registered) writes the new session's first
record and puts the handoff on its channel:

* ``hook``: the agent's session-start hook returns it as ``additionalContext``
  (see :mod:`.hooks`), where that hook's output is proven to reach the model's
  request (:data:`agentwrap.sessions.channels.START_CONTEXT`: Claude Code and
  Gemini CLI with hooks registered; not Qwen Code 0.15.10, whose interactive UI
  discards it, nor Codex and Copilot CLI, which run it at the first prompt);
* ``typed``: otherwise it is queued as startup context (priority ``startup``,
  source ``system``, ACK requested), typed first once the agent is ready, and
  written to the instruction file if typing keeps failing, like any message.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..audit import AuditLog
from ..config import ContinuityConfig
from ..message import Message
from ..paths import Paths
from ..queue.sanitize import sanitize
from ..terminal.proctree import alive
from .collect import Collector, git_start, settle
from .hooks import notes_file
from .record import HandoffRecord
from .render import render
from .store import ContinuityStore, project_path


@dataclass
class Handoff:
    """The context prepared for a launch: its ``text`` and where it came from."""

    project: str
    text: str
    record: str  # the record id it was made from ("edited" for next.md)


def store_for(paths: Paths, cfg: ContinuityConfig) -> ContinuityStore:
    return ContinuityStore(paths, keep=max(1, cfg.keep))


def previous(store: ContinuityStore, project: str) -> HandoffRecord | None:
    """The newest session in ``project`` that is over (exited, or crashed: its
    writer gone). One still running beside the new one is no *previous* session:
    two agents at work in one project do not hand each other their records."""
    return store.latest(project, accept=lambda r: settle(r, alive).end_state != "running")


def prepare(paths: Paths, cfg: ContinuityConfig, cwd: Path, *, enabled: bool = True,
            session: str | None = None) -> Handoff | None:
    """The handoff for a new session in ``cwd``, or None (off, or nothing to hand).

    ``session``: the new session's name. A message the previous session left
    queued that is still queued for this name reaches the new agent as itself
    (typed once it is ready): the handoff does not quote it as well."""
    if not (enabled and cfg.enabled):
        return None
    store = store_for(paths, cfg)
    project = project_path(cwd)
    edited = store.edited(project)
    if edited is not None and edited.strip():
        text = sanitize(edited).text
        data = text.encode("utf-8")[: cfg.max_bytes]
        return Handoff(project, data.decode("utf-8", "ignore"), "edited")
    rec = previous(store, project)
    if rec is None:
        return None
    if session is not None and rec.pending:
        waiting = still_queued(paths, session, [n.id for n in rec.pending])
        rec = replace(rec, pending=[n for n in rec.pending if n.id not in waiting])
    return Handoff(project, render(rec, cfg.max_bytes), rec.id)


def still_queued(paths: Paths, session: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` are still queued (pending or in flight) for ``session``."""
    from ..config import load_config
    from ..errors import ConfigError
    from ..queue.backend import open_store, store_url
    from ..queue.keys import host_name

    try:
        cfg = load_config(paths)
        configured, host = cfg.store.url, cfg.host.name
    except ConfigError:  # a config broken since the launch: its supervisor reports it
        configured = host = ""
    url = store_url(configured)
    if not url and not paths.db_path.is_file():
        return set()
    store = open_store(paths.db_path, url=url, host=host_name(host))
    try:
        queued = {m.id for m in store.peek(session)} | {m.id for m in store.in_flight(session)}
        return queued & set(ids)
    finally:
        store.close()


def begin(paths: Paths, cfg: ContinuityConfig, session: str, agent: str, cwd: Path,
          started: float, handoff: Handoff | None, channels: list[str], *,
          enabled: bool = True, typed: bool = True) -> HandoffRecord | None:
    """The new session's first record; its handoff put on its channel (``typed``:
    typing it is allowed; else without hooks it is only kept for ``context show``)."""
    if not (enabled and cfg.enabled):
        return None
    store = store_for(paths, cfg)
    project = project_path(cwd)
    head, branch, untracked = git_start(project)
    rec = HandoffRecord(project=project, session=session, agent=agent, started=started,
                        git_base=head, git_branch=branch, git_untracked=untracked[:500],
                        writer_pid=os.getpid(),
                        handoff_from=handoff.record if handoff else "")
    notes_file(paths, session).unlink(missing_ok=True)  # an earlier launch's notes
    store.drop_handoff(session)
    store.save(rec)
    if handoff is not None:
        channel = "hook" if "hooks" in channels else "typed" if typed else "none"
        data: dict[str, Any] = {"text": handoff.text, "record": handoff.record,
                                "project": project, "channel": channel, "at": time.time()}
        if channel == "typed":
            data["message"] = enqueue_typed(paths, session, handoff)
        store.write_handoff(session, data)
        if handoff.record == "edited":
            store.drop_edited(project)  # used once
        AuditLog(paths.audit_log).write(event="continuity_prepared", session=session,
                                        channel=channel, record=handoff.record,
                                        size=len(handoff.text.encode("utf-8")))
    return rec


def enqueue_typed(paths: Paths, session: str, handoff: Handoff) -> str:
    """Queue the handoff as startup context, typed first, with an ACK asked."""
    from ..config import load_config
    from ..message import NewMessage, Priority, Source
    from ..queue.backend import configured_store

    cfg = load_config(paths, Path(handoff.project))
    store = configured_store(paths.db_path, cfg, events_dir=paths.events_dir)
    try:
        msg, _ = store.enqueue(
            NewMessage(session=session, content=handoff.text, source=Source.SYSTEM,
                       source_id=f"continuity:{handoff.record}", priority=Priority.STARTUP,
                       ttl_s=cfg.limits.max_ttl_s, require_ack=True,
                       metadata={"continuity": handoff.record}),
            internal=True,
        )
    finally:
        store.close()
    return msg.id


def collector(paths: Paths, cfg: ContinuityConfig, session: str, cwd: Path, started: float,
              messages: Callable[[], list[Message]] | None, hooks: bool,
              unacknowledged: Callable[[Sequence[str]], Collection[str]] | None = None,
              ) -> Collector | None:
    """The updater of the record ``begin`` wrote for this launch (None: there is none,
    continuity being off for it). ``unacknowledged``: see :class:`Collector`."""
    if not cfg.enabled:
        return None
    store = store_for(paths, cfg)
    probe = HandoffRecord(project=project_path(cwd), session=session, agent="", started=started)
    rec = next((r for r in reversed(store.records(probe.project)) if r.id == probe.id), None)
    if rec is None:
        return None
    return Collector(paths, store, rec, messages=messages, unacknowledged=unacknowledged,
                     hooks=hooks,
                     on_ready=lambda: type_if_not_handed(paths, store, session))


def type_if_not_handed(paths: Paths, store: ContinuityStore, session: str) -> None:
    """The agent is ready and its session-start hook never took the handoff (a hook
    that did not run, an agent version without the event): type it instead."""
    data = store.read_handoff(session)
    if not data or data.get("channel") != "hook" or data.get("handed_at"):
        return
    handoff = Handoff(str(data.get("project", "")), str(data.get("text", "")),
                      str(data.get("record", "")))
    data["channel"] = "typed"
    data["message"] = enqueue_typed(paths, session, handoff)
    store.write_handoff(session, data)
    AuditLog(paths.audit_log).write(event="continuity_prepared", session=session,
                                    channel="typed", record=handoff.record,
                                    note="the session-start hook did not take it")


__all__ = ["Handoff", "begin", "collector", "enqueue_typed", "prepare", "previous", "store_for"]
