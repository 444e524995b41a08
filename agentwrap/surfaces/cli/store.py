"""``agentwrap store``: the store itself; ``store migrate`` moves it (issue 23).

An adapter over :func:`agentwrap.service.migrate_store` (every rule is there:
nothing moves while a supervisor of the source runs, only into an empty
target, all or nothing, the source left as it was). It prints what was moved
and how to point the hosts at the new store: it never edits a config file,
and names a store only without its password.
"""

from __future__ import annotations

import argparse

from rich.markup import escape

from .common import emit_json, err, out, render_rows, user_paths

HELP = "the message store itself: move it to PostgreSQL or back (migrate)"
DESCRIPTION = """\
The store keeps the queue (messages and their attempts), the event log, the
sessions registry and the answers: this machine's SQLite file by default, or
the PostgreSQL server of [store] url / AGENTWRAP_STORE_URL."""
MIGRATE_HELP = "copy every row of this host's store into another, empty one (SQLite <-> PostgreSQL)"
MIGRATE_DESCRIPTION = """\
Copy everything the store keeps (pending and delivering messages with their
phase and batch, the history and its attempts, the event log with its ids,
the sessions registry, the answers, the hosts) into another store, in one
transaction that is checked row for row before it commits.

Refused, with nothing changed: while a supervisor of the source store runs
(`agentwrap stop` them first, or wait until they end), and when the target
already holds rows (move into an empty database, schema or file).

The source is left as it was, and no config file is edited: once it is done,
point the hosts at the new store ([store] url, or remove it to go back to
SQLite) and start the sessions again. The password of a URL is never shown
(put it in ~/.pgpass)."""
MIGRATE_EPILOG = """\
TARGET and SOURCE:
  postgresql://USER@HOST/DB?...   a PostgreSQL server (its database, or a schema
                                  with options=-csearch_path%3DNAME)
  sqlite                          this machine's SQLite file (in the state dir)
  PATH                            another SQLite file (a copy to keep)

exit status: 0 moved, 73 the target holds rows, 75 supervisors of the source
run, 74/77 a store failed (nothing was copied).

examples:
  agentwrap store migrate --to "postgresql://aw@db.example/agentwrap?sslmode=verify-full"
  agentwrap store migrate --to sqlite          # back from PostgreSQL ([store] url set)
  agentwrap store migrate --from sqlite --to /backup/agentwrap.db --json"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("store", help=HELP, description=DESCRIPTION, formatter_class=fmt)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    m = verbs.add_parser("migrate", help=MIGRATE_HELP, description=MIGRATE_DESCRIPTION,
                         epilog=MIGRATE_EPILOG, formatter_class=fmt)
    m.add_argument("--to", required=True, metavar="TARGET",
                   help="where to: a postgresql:// URL, `sqlite` or a SQLite file's path")
    m.add_argument("--from", dest="source", default="", metavar="SOURCE",
                   help="what to move (default: the store this host uses now)")
    m.add_argument("--json", action="store_true", help="print what was moved as JSON")
    m.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    paths = user_paths()
    from ...config import load_config

    cfg = load_config(paths)
    from ...service import migrate_store, store_place  # the migration's code: this command's only

    report = migrate_store(store_place(args.source, paths, cfg),
                           store_place(args.to, paths, cfg), paths)
    if args.json:
        emit_json(report.to_json())
        return 0
    out.print(f"moved {escape(report.source)} -> {escape(report.target)}")
    render_rows(out, ["TABLE", "ROWS"], [[t, str(n)] for t, n in report.rows.items()])
    err.print(f"[dim]next:[/] {escape(report.next_step)}")
    return 0
