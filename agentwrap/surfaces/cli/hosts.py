"""``agentwrap hosts``: the machines of a shared store; ``hosts forget NAME``
drops one gone for good (issue 23).

An adapter over :meth:`Service.hosts` and :meth:`Service.forget_host` (every
rule is there). Host names come from the store, written by other machines:
they are printed as text, never as markup.
"""

from __future__ import annotations

import argparse
import time

from rich.markup import escape

from .common import emit_json, err, open_service, out, render_rows

HELP = "the machines sharing this store: alive or unreachable, their sessions (forget)"
DESCRIPTION = """\
Every host the store knows: its liveness (up, or unreachable since its last
heartbeat), its last beat, the sessions running there and the messages
pending for them.

Several machines share one store when it is PostgreSQL ([store] url): each
host beats every [host] heartbeat_s, and one silent for three of its periods
is unreachable: its sessions show state `unknown` in `ls`. On SQLite the
store is this machine's alone, and this host is the only one shown."""
EPILOG = """\
examples:
  agentwrap hosts                      # the hosts, this one first
  agentwrap hosts --json               # for scripts
  agentwrap hosts forget ci-runner-3   # a machine gone for good"""
FORGET_HELP = "drop a host gone for good: its sessions end, its pending messages fail"
FORGET_DESCRIPTION = """\
Forget a machine that will not come back (an old CI runner): otherwise it
stays in every `ls` as unreachable, its sessions `unknown`, and messages sent
to them wait until their TTL.

In one transaction: the host's sessions are marked ended (they leave `ls`;
`ls --all` keeps them), every message still pending for them ends failed
with a detail naming the host (`history` and `events` show it), and the
host's row is removed. The change is written to the audit log.

Refused, with nothing changed: a host whose heartbeat is still alive (stop
agentwrap there first, or wait until `agentwrap hosts` shows it unreachable;
a host that beats again after being forgotten simply reappears), this host
itself, and a host the store does not know."""
FORGET_EPILOG = """\
exit status: 0 forgotten, 3 no such host, 75 the host is up (or is this one),
65 not a valid host name.

examples:
  agentwrap hosts forget ci-runner-3
  agentwrap hosts forget ci-runner-3 --json"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("hosts", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=fmt)
    p.add_argument("--json", action="store_true", help="print the hosts as JSON")
    p.set_defaults(func=cmd_hosts)
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    f = verbs.add_parser("forget", help=FORGET_HELP, description=FORGET_DESCRIPTION,
                         epilog=FORGET_EPILOG, formatter_class=fmt)
    f.add_argument("name", metavar="NAME", help="the host, as `agentwrap hosts` names it")
    f.add_argument("--json", action="store_true", default=argparse.SUPPRESS,  # or before the verb
                   help="print what was done as JSON")
    f.set_defaults(func=cmd_forget)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def cmd_hosts(args: argparse.Namespace) -> int:
    with open_service() as svc:
        views = svc.hosts()
        shared = svc.registry.db.shared
    if args.json:
        emit_json([v.to_json() for v in views])
        return 0
    rows = []
    for v in views:
        beat = v.seen.heartbeat if v.seen is not None else 0.0
        if v.liveness == "unreachable":
            live = f"unreachable since {_when(beat)}" if beat else "unreachable (never seen)"
        else:
            live = "up (this host)" if v.here else "up"
        rows.append([v.name, live, _when(beat) if beat else "-",
                     ", ".join(v.sessions) or "-", str(v.pending)])
    render_rows(out, ("HOST", "LIVENESS", "LAST BEAT", "SESSIONS", "PENDING"), rows)
    if not shared:
        err.print("[dim]note:[/] " + escape(
            "the store is this machine's SQLite file: this host is its only host"
            " (share a PostgreSQL store, [store] url, to see others)"))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with open_service() as svc:
        done = svc.forget_host(args.name, by="cli")
    if args.json:
        emit_json(done.to_json())
        return 0
    out.print(f"forgot host {escape(done.host)}: {len(done.sessions)} session(s) ended,"
              f" {done.failed} pending message(s) failed")
    return 0
