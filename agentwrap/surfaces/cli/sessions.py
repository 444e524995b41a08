"""Commands for sessions: ``run``, ``attach``, ``adopt``, ``stop``, ``ls``.

Each calls :mod:`agentwrap.sessions.lifecycle` (starting and stopping
processes is not the store's business) and prints the outcome; ``ls`` reads
the sessions through :class:`~agentwrap.service.Service`. ``_supervise`` is the
detached supervisor process that ``run`` and ``adopt`` start.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from ...detect.states import State
from ...errors import InvalidMessage, InvalidRunOption
from ...message import QueueLimits
from ...service import SessionRecord
from .common import emit_json, err, fmt_age, open_service, out, render_rows, user_paths

if TYPE_CHECKING:
    from ...sessions.compose import Companion


def cmd_run(args: argparse.Namespace) -> int:
    from ...sessions.lifecycle import RunOptions, attach, run_pty, start_tmux

    if not args.command:
        raise InvalidMessage("no agent command given", hint="e.g. `agentwrap run claude`")
    from ...session_options import timeout_policy

    paths = user_paths()
    on_timeout, answer_timeout_s = timeout_policy(getattr(args, "on_timeout", None),
                                                getattr(args, "answer_timeout", None))
    opts = RunOptions(
        argv=list(args.command), name=args.name, profile=args.profile, backend=args.backend,
        cwd=Path(args.cwd).resolve() if args.cwd else Path.cwd(), detach=args.detach,
        trust_folder=args.trust_folder, require_ack=args.require_ack,
        context_files=[Path(p) for p in args.context], cols=args.cols, rows=args.rows,
        channels=getattr(args, "channels", True),
        continuity=getattr(args, "continuity", True),
        on_timeout=on_timeout, answer_timeout_s=answer_timeout_s,
        container=getattr(args, "container", None), image=getattr(args, "image", None),
        keep=getattr(args, "keep", False),
    )
    for f in opts.context_files:
        if not f.is_file():
            raise InvalidMessage(
                f"context file not found: {f}", hint="pass an existing file to --context"
            )
    from ...config import load_config

    backend = opts.backend or load_config(paths, opts.cwd).run.backend
    if backend == "pty":
        if opts.container or opts.image:
            raise InvalidRunOption("--container and --image run on tmux",
                                   hint="leave out --backend pty (or [run] backend = \"pty\")")
        if opts.detach:
            raise InvalidMessage(
                "the pty backend cannot run detached", hint="use --backend tmux for --detach"
            )
        return run_pty(paths, opts, interactive=sys.stdin.isatty(), companions=companions())
    rec = start_tmux(paths, opts)
    gate = rec.options.permission_gate or ""
    if gate.startswith("none") and not args.json:  # OpenCode: offer its ask-first mode
        err.print(escape(f"{rec.name}: no permission gate: {gate.removeprefix('none: ')}"))
    if opts.detach or not sys.stdin.isatty():
        if args.json:
            emit_json(rec.to_json())
        else:
            err.print(
                f"started [bold]{escape(rec.name)}[/] ({escape(rec.profile)}, tmux). "
                f"`agentwrap attach {escape(rec.name)}` to see it, "
                f"`agentwrap state {escape(rec.name)}` for its state."
            )
        return 0
    return _attached(attach(paths, rec.name), rec.name)


def cmd_attach(args: argparse.Namespace) -> int:
    from ...sessions.lifecycle import attach

    return _attached(attach(user_paths(), args.name), args.name)


def _attached(exit_code: int | None, name: str) -> int:
    """The terminal is back from the session: the agent's exit code if it ended,
    else (detached) 0 and how to come back, since tmux's own "[detached]" line does
    not say the agent keeps running, nor which command returns to it."""
    if exit_code is not None:
        return exit_code
    err.print(f"agentwrap: {escape(name)} keeps running under supervision; "
              f"`agentwrap attach {escape(name)}` to come back.")
    return 0


def cmd_adopt(args: argparse.Namespace) -> int:
    from ...sessions.lifecycle import adopt

    pid = adopt(user_paths(), args.name)
    err.print(f"supervising {escape(args.name)} (supervisor pid {pid})")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from ...sessions.lifecycle import stop_many

    paths = user_paths()
    names = list(args.names)
    if args.all:
        with open_service(paths, limits=QueueLimits()) as svc:
            names += [v.record.name for v in svc.sessions()  # another host's: that host's to stop
                      if v.record.name not in names and svc.registry.here(v.record)]
    if not names:
        err.print("nothing to stop: name sessions, or --all")
        return 0
    recs = stop_many(paths, names)
    if args.json:
        emit_json(recs[0].to_json() if len(args.names) == 1 and not args.all
                   else [r.to_json() for r in recs])
    else:
        for rec in recs:
            err.print(f"stopped {escape(rec.name)} (exit code {rec.exit_code})")
    return 0


def companions() -> list[Companion]:
    """What runs beside every session's supervisor, however it runs (the pty
    backend's ``run``, a supervisor process of its own, the supervisor host):
    the project's feedback watchers and schedules, and the hooks' server,
    which runs the hooks of both hook clients. Written once, here (issue 36:
    each of the three had its own list)."""
    from ...feedback.companion import for_session  # the project's watchers and schedules
    from ..hooks.server import for_session as hook_server

    return [for_session, hook_server]


def cmd_supervise(args: argparse.Namespace) -> int:
    from ...sessions.lifecycle import supervise

    return supervise(user_paths(), args.name, companions=companions())


def cmd_host(args: argparse.Namespace) -> int:
    from ...sessions.host import serve

    return serve(user_paths(), companions=companions())


def liveness_label(rec: SessionRecord) -> str:
    """``ls``'s liveness column (``state --explain`` says a silent host's the same way)."""
    live = rec.liveness
    if live == "stale":
        return "stale (supervisor gone; `agentwrap adopt`)"
    if rec.seen is not None and not rec.seen.reachable:  # another host, silent
        since = rec.seen.heartbeat
        return (f"unreachable since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}"
                if since else "unreachable (never seen)")
    return live


def cmd_ls(args: argparse.Namespace) -> int:
    with open_service(limits=QueueLimits()) as svc:  # reads only: no config needed
        views = svc.sessions(include_ended=True)
    # each view's own pending count: two hosts may each have a session of one name
    recs = [(v.record, v.pending) for v in views if args.all or v.record.ended is None]
    ended = sum(1 for v in views if v.record.ended is not None)
    if args.json:
        emit_json([{**r.to_json(), "pending": pending} for r, pending in recs])
        return 0
    # Ended sessions are kept (issue 42) but not listed by default: `ls` answers
    # "what runs", scripts read it so; the count says there is more to see.
    many = ended != 1
    hidden = "" if args.all or not ended else (
        f"{ended} ended session{'s' if many else ''} kept: `agentwrap ls --all` lists"
        f" {'them' if many else 'it'}, `agentwrap dismiss NAME` forgets one")
    if not recs:
        err.print("no sessions. Start one with `agentwrap run claude` (or codex, aider, gemini).")
        if hidden:
            err.print(escape(hidden))
        return 0
    rows = [
        [
            r.name, r.host or "-", r.profile, r.backend,
            (f"ended {r.exit_code if r.exit_code is not None else '?'}" if r.ended is not None
             else r.state.value + (" +draft" if r.draft and r.state is not State.DRAFT else "")),
            fmt_age(r.ended if r.ended is not None else r.state_since), str(pending),
            r.state_reason if r.ended is not None else liveness_label(r), r.cwd,
        ]
        for r, pending in recs
    ]
    render_rows(
        out, ("NAME", "HOST", "AGENT", "BACKEND", "STATE", "SINCE", "PENDING", "SUPERVISOR", "CWD"),
        rows,
    )
    if hidden:
        err.print(escape(hidden))
    return 0


def cmd_dismiss(args: argparse.Namespace) -> int:
    with open_service() as svc:
        recs = [svc.dismiss(name, by="cli") for name in args.names]
    if args.json:
        emit_json([r.to_json() for r in recs])
    else:
        for rec in recs:
            err.print(f"dismissed {escape(rec.name)} (ended: {escape(rec.state_reason)})")
    return 0

