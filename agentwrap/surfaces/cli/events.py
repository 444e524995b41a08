"""The ``events`` command: the event bus, read by a person or a script.

What happened to messages and sessions, in order, from the store's event log
(:mod:`agentwrap.events`), through :meth:`Service.events`; ``--follow`` keeps
reading as writers announce new events (:meth:`Service.follow_events`), until
Ctrl-C. ``--json`` prints one JSON object per line (what the HTTP server's
event stream will send); people get one escaped line per event.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable

from rich.text import Text

from ...events import Event
from ...message import QueueLimits
from .common import err, open_service, out

HELP = """\
Show what happened to messages and sessions, in order: every event the store
and the supervisors recorded (the last 20,000 are kept), each with an id that
only grows. --follow keeps printing new events as they happen (woken by the
writers, not by polling) until Ctrl-C; --after ID starts after an event you
have seen; --json prints one JSON object per line:
  {"id": 42, "at": 1700000000.5, "session": "api", "kind": "message.ended",
   "subject": "<message id>", "data": {"status": "delivered", "detail": "..."}}

kinds (subject: the message id for message.*, empty for session.*) and data:
  message.queued   a new message was stored: priority, source, kind
  message.phase    its batch moved on: phase (claimed, pasting, submitting,
                   submitted), batch
  message.retry    an attempt failed: next_attempt_at, detail, attempts, held
                   (true: the text stays in the input box, the next try submits)
  message.ended    it reached its end state: status (delivered, acknowledged,
                   escalated, expired, evicted, cancelled, failed), detail
  session.state    the detector saw a new state: state, reason, signal, rule
  session.ended    the agent exited: exit_code
"""

EPILOG = """\
examples:
  agentwrap events api                  # everything kept for session api
  agentwrap events --follow --json      # all sessions, as it happens, for a script
  agentwrap events api -f --after 1200  # resume after the last id you saw
  agentwrap events --last 50            # the 50 most recent events of the log
"""


def cmd_events(args: argparse.Namespace) -> int:
    # reads only: the default limits (no config needed to read the log)
    with open_service(limits=QueueLimits()) as svc:
        if args.name:
            svc.state(args.name)  # an unknown session is an error, not silence
        after = args.after or 0
        if args.after is None and (args.last is not None or args.follow):
            # like tail -f: the recent past, then what happens (not 20,000 old events)
            after = max(0, svc.last_event_id() - (args.last if args.last is not None else 10))
        printed = 0
        try:
            if args.follow:
                _print(svc.follow_events(after, args.name), args.json)
            else:
                while batch := svc.events(after, args.name):
                    printed += _print(batch, args.json)
                    after = batch[-1].id
        except KeyboardInterrupt:  # the way to stop --follow: not an error
            return 0
        except BrokenPipeError:  # | head: the reader has what it wanted
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
            return 0
    if not args.follow and not args.json and not printed:
        err.print("no events yet.")
    return 0


def _print(evs: Iterable[Event], as_json: bool) -> int:
    n = 0
    for ev in evs:
        n += 1
        if as_json:
            sys.stdout.write(json.dumps(ev.to_json(), separators=(",", ":")) + "\n")
            sys.stdout.flush()
        else:
            out.print(event_line(ev))
    return n


def event_line(ev: Event) -> Text:
    """One line per event, every part plain text (never markup): session
    names, details and reasons come from outside."""
    stamp = time.strftime("%H:%M:%S", time.localtime(ev.at))
    data = " ".join(f"{k}={_flat(v)}" for k, v in ev.data.items())
    line = Text(f"{stamp} #{ev.id} ")
    line.append(ev.session, style="bold")
    line.append(f" {ev.kind}", style="cyan")
    if ev.subject:
        line.append(f" {ev.subject[:8]}")
    if data:
        line.append(f" {data}")
    return line


def _flat(value: object) -> str:
    """One line, no terminal controls: whitespace runs become one space,
    anything else unprintable a '?'."""
    text = " ".join(str(value).split())
    return "".join(c if c.isprintable() else "?" for c in text)
