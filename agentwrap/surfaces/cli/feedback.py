"""``agentwrap watch`` and ``agentwrap schedule``: feedback sources by hand.

``watch`` runs in the foreground what a session started by ``agentwrap run``
gets from its project's ``[[feedback]]`` (:mod:`agentwrap.feedback`): a
watcher on the given directories whose bursts are either reported as they
are (which files changed) or checked with a command, and the news queued for
the session. ``schedule start`` runs a command every N for a session;
``schedule list`` shows the ``[[schedule]]`` tables that apply here. A
command typed here is the person's own, so it needs no trust setting.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from ...errors import ConfigError, SessionNotRunning
from .common import emit_json, err, open_service, out, render_rows, user_paths

if TYPE_CHECKING:  # the watchers and checks load only when a command here runs
    from ...feedback.sources import FeedbackSource

WATCH_HELP = "watch directories and queue what changed, or a check's result, for a session"
WATCH_DESCRIPTION = """\
Watch PATH... (recursively; .git, virtualenvs, caches, node_modules and what
.gitignore ignores are left out) and, after each burst of changes (a
formatter rewriting 200 files is one burst), queue for the session either
which files changed, or with --run/--preset a check run on the changed files
(its failure, trimmed; "now passing" once it recovers; an identical result
is not sent twice). Runs until Ctrl-C. The command runs without a shell in
the watched directory; {files} becomes the changed files, one argument each.

Sessions started by `agentwrap run` get this from their project's
[[feedback]] tables (on = ["watch"]) without this command."""
WATCH_EPILOG = """\
examples:
  agentwrap watch . --session api                       # which files changed
  agentwrap watch src --session api --preset ruff       # ruff on the changed files
  agentwrap watch . --session api --run "pytest -x -q"  # the suite after each burst
  agentwrap watch . --session api --json                # one JSON line per event"""
SCHEDULE_HELP = "run a command every N for a session, or list the [[schedule]] tables"
SCHEDULE_EPILOG = """\
examples:
  agentwrap schedule start api --every 15m --run "gh pr checks"   # until Ctrl-C
  agentwrap schedule start api --every 30s --run "date" --times 2 --now
  agentwrap schedule list --json

[[schedule]] every = "15m", run = "...", session = "..." in your config runs
the same inside the supervisor while that session lives."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    w = sub.add_parser("watch", help=WATCH_HELP, description=WATCH_DESCRIPTION,
                       epilog=WATCH_EPILOG, formatter_class=fmt)
    w.add_argument("paths", nargs="+", metavar="PATH", help="directories to watch")
    w.add_argument("--session", required=True, help="the session that gets the messages")
    how = w.add_mutually_exclusive_group()
    how.add_argument("--run", metavar="CMD", help="a check to run after each burst")
    how.add_argument("--preset", metavar="NAME",
                     help="a built-in check: pytest, ruff, mypy, eslint, tsc")
    w.add_argument("--name", help="the source id of the messages (default: the check's name,"
                   " or 'watch')")
    w.add_argument("--debounce-ms", type=int, default=300,
                   help="a burst ends after this much quiet (default 300)")
    w.add_argument("--budget-tokens", type=int, default=None,
                   help="most tokens one burst's message takes (default: config, 1000)")
    w.add_argument("--json", action="store_true", help="one JSON line per event on stdout")
    w.set_defaults(func=cmd_watch)

    s = sub.add_parser("schedule", help=SCHEDULE_HELP, description=SCHEDULE_HELP,
                       epilog=SCHEDULE_EPILOG, formatter_class=fmt)
    verbs = s.add_subparsers(dest="verb", metavar="VERB", required=True)
    st = verbs.add_parser("start", help="run a command every N for a session (foreground)",
                          formatter_class=fmt, epilog=SCHEDULE_EPILOG)
    st.add_argument("session")
    st.add_argument("--every", required=True, help='a duration: "30s", "15m", "2h"')
    st.add_argument("--run", required=True, metavar="CMD", help="the command (no shell)")
    st.add_argument("--name", help="the source id of the messages (default: the command)")
    st.add_argument("--now", action="store_true", help="the first run at once")
    st.add_argument("--times", type=int, default=0, help="stop after this many runs (0: never)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_schedule_start)
    ls = verbs.add_parser("list", help="the [[schedule]] tables that apply here")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_schedule_list)


def _printer(as_json: bool) -> Any:
    lock = threading.Lock()

    def show(event: dict[str, Any]) -> None:
        with lock:
            if as_json:
                print(json.dumps(event, sort_keys=True), flush=True)
                return
            kind = event.get("event")
            if kind == "burst":
                first = ", ".join(event["first"][:5])
                out.print(f"changed: {event['files']} file(s): {escape(first)}")
            elif kind == "ran":
                how = ("timed out" if event.get("timed_out") else event.get("error")
                       or f"exit {event.get('exit')}")
                out.print(f"ran {escape(str(event['source']))}: {escape(str(how))}"
                          f" ({event['seconds']} s)")
            elif kind == "queued":
                out.print(f"queued {event['message'][:8]}")
    return show


def _check_session(name: str) -> str:
    """The running session ``name`` (NAME or HOST/NAME) names, as the service
    names it from here on (on a shared store HOST/NAME: whose it is)."""
    with open_service() as svc:
        rec = svc.state(name)
        address = svc.session_name(name)
    if rec.ended is not None:
        raise SessionNotRunning(f"session {name!r} has ended", hint="`agentwrap ls`")
    return address


def _wait_for_interrupt(stop: threading.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass


def cmd_watch(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...feedback.companion import FeedbackLoop, LoopOptions
    from ...feedback.sources import feedback_source, split_command

    paths = user_paths()
    args.session = _check_session(args.session)  # HOST/NAME: the name from here on
    source: FeedbackSource | None = None
    if args.run is not None:
        argv = split_command(args.run, "--run")
        source = feedback_source({"name": args.name or Path(argv[0]).name[:40] or "check",
                                  "run": args.run, "on": ["watch"]}, "--run")
    elif args.preset is not None:
        table: dict[str, Any] = {"name": args.name or args.preset, "preset": args.preset,
                                 "on": ["watch"]}
        source = feedback_source(table, "--preset")
    roots = [Path(p).resolve() for p in args.paths]
    for r in roots:
        if not r.is_dir():
            raise ConfigError(f"{r}: not a directory", hint="watch directories, not files")
    budget = args.budget_tokens
    if budget is None:
        budget = load_config(paths, roots[0]).feedback_options.budget_tokens
    opts = LoopOptions(budget_tokens=budget, debounce_s=max(0, args.debounce_ms) / 1000,
                       changes_as=None if source else (args.name or "watch"),
                       on_event=_printer(args.json))
    loops = [FeedbackLoop(paths, args.session, r, [source] if source else [],
                          options=opts).start() for r in roots]
    if not args.json:
        what = f"running {source.name}" if source else "reporting changes"
        err.print(f"watching {len(roots)} path(s) for {escape(args.session)}, {what};"
                  " Ctrl-C stops")
    stop = threading.Event()
    try:
        _wait_for_interrupt(stop)
    finally:
        for loop in loops:
            loop.stop()
    return 0


def cmd_schedule_start(args: argparse.Namespace) -> int:
    from ...feedback.companion import FeedbackLoop, LoopOptions
    from ...feedback.sources import ScheduleSource, parse_duration, split_command

    paths = user_paths()
    args.session = _check_session(args.session)  # HOST/NAME: the name from here on
    argv = split_command(args.run, "--run")
    every = parse_duration(args.every, "--every")
    sched = ScheduleSource(args.name or Path(argv[0]).name[:40] or "schedule", argv, every,
                           args.session)
    show = _printer(args.json)
    stop = threading.Event()
    loop = FeedbackLoop(paths, args.session, Path.cwd(), schedules=[sched], options=LoopOptions(
        on_event=show, first_schedule_after_s=0.0 if args.now else None)).start()
    if args.times:
        def counted() -> None:
            while loop.scheduled_runs < args.times:
                time.sleep(0.1)
            stop.set()
        threading.Thread(target=counted, daemon=True).start()
    try:
        _wait_for_interrupt(stop)
    finally:
        loop.stop()
    return 0


def cmd_schedule_list(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...feedback.sources import select

    cfg = load_config(user_paths(), Path.cwd())
    sel = select(cfg)
    rows: list[dict[str, Any]] = [{"name": s.name, "session": s.session, "every_s": s.every_s,
             "run": shlex.join(s.argv), "origin": s.origin} for s in sel.schedules]
    if args.json:
        emit_json({"schedules": rows, "skipped": list(sel.skipped)})
        return 0
    for why in sel.skipped:
        err.print(escape(why))
    if not rows:
        err.print(escape('no [[schedule]] here. Add one: [[schedule]] every = "15m",'
                         ' run = "...", session = "..."'))
        return 0
    render_rows(out, ["NAME", "SESSION", "EVERY", "RUN", "FROM"],
                [[str(r["name"]), str(r["session"]), f"{r['every_s']:g}s", str(r["run"]),
                 str(r["origin"])]
                 for r in rows])
    return 0
