"""A host's link watched from inside its network namespace (issue 38's
stalled-link test): ``python link_probe.py STATE_DIR`` opens the host's link
as the supervisor host does (:func:`agentwrap.queue.link.shared_client`) and
prints ``up`` or ``down`` with the monotonic clock each time that changes,
until its standard input closes."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from agentwrap.queue.link import load_link, shared_client


def main() -> None:
    link = load_link(Path(sys.argv[1]))
    assert link is not None
    client = shared_client(link)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    was: bool | None = None
    while not done.is_set():
        if client.up != was:
            was = client.up
            print("up" if was else "down", time.monotonic(), flush=True)
        done.wait(0.05)
    client.release()


if __name__ == "__main__":
    main()
