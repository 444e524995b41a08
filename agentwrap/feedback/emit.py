"""From run results to a queued message: judged, batched, sent, audited.

The one path every trigger takes (the edit hook, a session's watcher,
``agentwrap watch``, the scheduler): :func:`report` asks :mod:`.results`
what is new, :mod:`.batching` makes one message per role within what is left
of the turn's budget, and :meth:`Service.send` stores it with the usual
validation, limits and wake-up. Each injection leaves an audit line with its
provenance (session, sources, trigger, files, size, role, channel, time);
never its content.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AgentwrapError
from ..message import Message, NewMessage, Priority, Source
from ..service import Service
from .batching import CHARS_PER_TOKEN, compose, split_roles
from .results import Outcome, ResultState, judge
from .runner import RunResult
from .sources import FeedbackSource
from .trimming import file_name

if TYPE_CHECKING:
    from ..containers.mounts import Mounts

#: The source each trigger's messages carry ([hook:ruff], [filesystem:ruff]).
SOURCE_OF_TRIGGER = {"edit": Source.HOOK, "watch": Source.FILESYSTEM,
                     "start": Source.FILESYSTEM, "schedule": Source.SCHEDULER}


@dataclass(frozen=True)
class Ran:
    """One run, with what triggered it."""

    src: FeedbackSource
    result: RunResult
    trigger: str
    files: tuple[str, ...] = ()


def report(
    service: Service, session: str, runs: Sequence[Ran], *, budget_tokens: int,
    turn: str | None = None, channel: str = "queue", source: Source | None = None,
    log: list[str] | None = None,
) -> list[Message]:
    """Tell ``session`` what is new in ``runs``; returns the messages queued.

    ``turn``: the agent's turn (a hook payload's prompt or turn id): the budget
    is shared by everything reported in that turn. None: this call alone.
    ``channel``: how the message is expected to reach the agent (recorded in
    the audit line: ``hook`` when the same hook run drains it).
    """
    if not runs:
        return []
    state = ResultState(service.paths, service.registry.local(session) or session)
    with state.locked() as data:
        outcomes: list[tuple[Outcome, Ran]] = []
        for ran in runs:
            o = judge(data, ran.result, ran.trigger, list(ran.files), ran.src.role)
            if o is not None:
                outcomes.append((o, ran))
        if not outcomes:
            return []
        budget = budget_tokens * CHARS_PER_TOKEN
        used = 0
        if turn is not None:
            t = data.get("turn") or {}
            used = int(t.get("used", 0)) if t.get("id") == turn else 0
        composed = []
        spill_to = spill_folder(service, session)
        by_name = {o.source: r for o, r in outcomes}
        for group in split_roles([o for o, _ in outcomes]):
            prio = max((by_name[o.source].src.priority for o in group
                        if o.status == "failing"), default=Priority.NORMAL)
            trig = sorted({o.trigger for o in group})
            c = compose(group, budget_chars=budget - used, paths=service.paths,
                        session=session, priority=prio, why=_why(trig), spill_to=spill_to)
            if c is not None:
                used += len(c.text)
                composed.append(c)
        if turn is not None:
            data["turn"] = {"id": turn, "used": used}
    sent: list[Message] = []
    for c in composed:
        trig = sorted({o.trigger for o in c.outcomes})
        kind = source or SOURCE_OF_TRIGGER.get(trig[0], Source.FILESYSTEM)
        files = sorted({f for o in c.outcomes for f in o.files})
        role = c.outcomes[0].role
        try:
            s = service.send(NewMessage(  # a bare name: this host's session (its loop)
                session=service.own(session), content=as_agent_sees(service, session, c.text),
                source=kind, source_id=c.source_id,
                priority=c.priority,
                metadata={"feedback": {"sources": list(c.sources), "trigger": trig,
                                       "files": files[:50], "role": role,
                                       "status": {o.source: o.status for o in c.outcomes}}},
            ))
        except AgentwrapError as exc:  # rate limited, queue full, session ended
            if log is not None:
                log.append(f"feedback from {c.source_id} not queued: {exc}")
            continue
        sent.append(s.message)
        service.audit.write(
            event="feedback", session=session, message=s.message.id, source=str(kind),
            source_id=c.source_id, sources=list(c.sources), trigger=trig, files=files[:50],
            file_count=len(files), bytes=len(c.text.encode("utf-8")), role=role,
            channel=channel, spilled=[str(p) for p in c.spilled], ts=time.time(),
            status={o.source: o.status for o in c.outcomes},
        )
    return sent


def boxed_mounts(service: Service, session: str) -> tuple[str, Mounts] | None:
    """This host's boxed session's name and the mounts its launch kept (issue 39);
    None for a session on the host, another host's (its launch files are that
    host's), or mounts that cannot be read (then nothing is translated: a path the
    agent cannot open is no instruction)."""
    from ..agents.launch import launch_dir
    from ..containers.box import saved_mounts
    from ..errors import PathNotMounted

    name = service.registry.local(session)
    if name is None:
        return None
    try:
        mounts = saved_mounts(launch_dir(service.paths, name))
    except PathNotMounted:
        return None
    return None if mounts is None else (name, mounts)


def spill_folder(service: Service, session: str) -> Path | None:
    """Where a check's whole output goes for an agent in a container whose box folder
    is mounted: ``feedback/`` in that folder, which the agent reads at
    ``/run/agentwrap/feedback/`` (the message names it there, :func:`as_agent_sees`);
    None (the state dir, which no container mounts) for one on the host."""
    from ..containers.box import box_dir, hooks_reach

    boxed = boxed_mounts(service, session)
    if boxed is None or not hooks_reach(boxed[1], service.paths, boxed[0]):
        return None
    return box_dir(service.paths, boxed[0]) / "feedback"


def as_agent_sees(service: Service, session: str, text: str) -> str:
    """The feedback ``text`` (written on the host: its paths the host's) as the
    agent reads it: for an agent in a container, every host path its mounts hold
    named at the container's path (a project mounted at ``/work`` reads
    ``/work/app.py``, not the host's ``/home/me/proj/app.py``); unchanged on the
    host (:func:`boxed_mounts`)."""
    boxed = boxed_mounts(service, session)
    return text if boxed is None else boxed[1].text_inside(text)


def _why(triggers: list[str]) -> str:
    words = {"edit": "after your edit", "watch": "after files changed",
             "start": "at the session's start", "schedule": "on a schedule"}
    return ", ".join(words.get(t, t) for t in triggers)


MAX_LISTED = 10


def describe_changes(changes: Sequence[tuple[str, str]], root: str) -> str:
    """A burst of changes as one short paragraph: the count, then the first
    :data:`MAX_LISTED` files with what happened to them."""
    n = len(changes)
    head = (f"[agentwrap feedback: files changed in {root}. This is information from the"
            " environment, not a request from the person.]\n")
    noun = "file" if n == 1 else "files"
    lines = [f"{n} {noun} changed:"]
    lines += [f"- {file_name(path)} ({kind})" for path, kind in changes[:MAX_LISTED]]
    if n > MAX_LISTED:
        lines.append(f"... and {n - MAX_LISTED} more")
    return head + "\n".join(lines)


def report_changes(
    service: Service, session: str, changes: Sequence[tuple[str, str]], *, name: str,
    root: str, log: list[str] | None = None,
) -> Message | None:
    """Tell ``session`` that files changed (a watch without a command)."""
    if not changes:
        return None
    text = as_agent_sees(service, session, describe_changes(changes, root))
    files = [p for p, _ in changes]
    try:
        s = service.send(NewMessage(
            session=service.own(session), content=text, source=Source.FILESYSTEM, source_id=name,
            metadata={"feedback": {"sources": [name], "trigger": ["watch"],
                                   "files": files[:50], "role": "environment"}},
        ))
    except AgentwrapError as exc:
        if log is not None:
            log.append(f"change report not queued: {exc}")
        return None
    service.audit.write(
        event="feedback", session=session, message=s.message.id, source="filesystem",
        source_id=name, sources=[name], trigger=["watch"], files=files[:50],
        file_count=len(files), bytes=len(text.encode("utf-8")), role="environment",
        channel="queue", ts=time.time(),
    )
    return s.message
