#!/usr/bin/env python3
"""A host's use of the shared store, run inside a network namespace whose
cable the test pulls (tests/test_store_partition.py), over agentwrap's own
connection (:func:`agentwrap.queue.backend.open_database`).

Usage: cut_client.py URL MODE
  hold  open a write transaction holding the event log's lock (as a write
        does between drawing its event ids and committing), print "held",
        then wait: the test cuts the cable while it holds it
  read  read once, print "ready"; on a line from stdin read again and print
        "read", or the StoreError's class if the store could not be used
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from agentwrap.errors import StoreError
from agentwrap.queue.backend import open_database
from agentwrap.queue.database import Database
from agentwrap.queue.postgres import EVENTS_LOCK


def reachable(db: Database) -> None:
    """Until the store answers: a cable mended a moment ago (the test before)
    may fail the first connection while the two ends learn each other again."""
    deadline = time.monotonic() + 30
    while True:
        try:
            db.read("SELECT 1")
            return
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> int:
    url, mode = sys.argv[1], sys.argv[2]
    db = open_database(Path(os.devnull), url)
    reachable(db)
    if mode == "hold":
        with db.write() as w:
            w.conn.execute("SELECT pg_advisory_xact_lock(?)", (EVENTS_LOCK,))
            print("held", flush=True)
            sys.stdin.readline()
        return 0
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        db.read("SELECT 1")
        print("read", flush=True)
    except StoreError as exc:
        print(type(exc).__name__, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
