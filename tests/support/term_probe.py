#!/usr/bin/env python3
"""A tiny terminal program for backend tests: it reports what it sees.

Modes (first argument):

* ``read LOG [--bracketed] [--bracketed-off]``: raw mode; optionally enable
  bracketed paste (DECSET 2004), and disable it again; print ``READY``; append every chunk read from stdin to LOG
  (binary) until LOG's sibling ``LOG.stop`` exists or stdin closes.
* ``env OUT``: write ``os.environ`` as JSON to OUT, print ``ENV-DONE``, wait.
* ``size OUT``: print and append ``SIZE cols rows`` to OUT at start and on
  every SIGWINCH; wait forever.
* ``exit N``: print ``BYE`` and exit with status N.
* ``sleep``: print ``SLEEPING`` and sleep until killed.
* ``spew``: print ``SPEWING``, then lines of output as fast as the terminal
  takes them, forever (a TUI redrawing while busy), until killed.
* ``spawn PIDFILE``: start a grandchild (own session, ignores SIGHUP), write
  ``child_pid grandchild_pid`` to PIDFILE, wait forever.
* ``flood NBYTES SEED INFO [--then CMD...]``: raw mode; write a start marker,
  NBYTES of printable lines from a seeded PRNG, and an end marker; write the
  sha256 of the data between the markers to INFO; exit 0, or exec CMD.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import tty
from pathlib import Path

START_MARK = b"<<FLOOD-START-7f3a>>"
END_MARK = b"<<FLOOD-END-7f3a>>"


def say(text: str) -> None:
    os.write(1, text.encode() + b"\r\n")


def mode_read(log: Path, bracketed: bool, off_again: bool = False) -> int:
    tty.setraw(0)
    if bracketed:
        os.write(1, b"\x1b[?2004h")
    if off_again:
        os.write(1, b"\x1b[?2004l")
    say("READY")
    stop = Path(str(log) + ".stop")
    with open(log, "ab", buffering=0) as f:
        while not stop.exists():
            import select

            r, _, _ = select.select([0], [], [], 0.1)
            if not r:
                continue
            data = os.read(0, 65536)
            if not data:
                break
            f.write(data)
    return 0


def mode_env(out: Path) -> int:
    out.write_text(json.dumps(dict(os.environ)))
    say("ENV-DONE")
    while True:
        time.sleep(1)


def mode_size(out: Path) -> int:
    def report(*_: object) -> None:
        cols, rows = os.get_terminal_size(0)
        line = f"SIZE {cols} {rows}"
        with open(out, "a") as f:
            f.write(line + "\n")
        say(line)

    signal.signal(signal.SIGWINCH, report)
    report()
    while True:
        signal.pause()


GRANDCHILD = (
    "import signal, time\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\nwhile True: time.sleep(1)"
)


def mode_spawn(pidfile: Path) -> int:
    grandchild = subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD],
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tmp = Path(str(pidfile) + ".tmp")
    tmp.write_text(f"{os.getpid()} {grandchild.pid}")
    tmp.rename(pidfile)
    say("SPAWNED")
    while True:
        time.sleep(1)


def flood_chunks(nbytes: int, seed: int) -> list[bytes]:
    """Deterministic printable data: base64 lines of 76 chars, CRLF-ended."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    left = nbytes
    while left > 0:
        raw = base64.encodebytes(rnd.randbytes(57 * 1024)).replace(b"\n", b"\r\n")
        out.append(raw[:left])
        left -= len(out[-1])
    return out


def mode_flood(nbytes: int, seed: int, info: Path, then: list[str]) -> int:
    tty.setraw(1)  # no ONLCR: the bytes leave exactly as written
    h = hashlib.sha256()
    os.write(1, START_MARK)
    for chunk in flood_chunks(nbytes, seed):
        h.update(chunk)
        view = memoryview(chunk)
        while view:
            n = os.write(1, view)
            view = view[n:]
    os.write(1, END_MARK)
    info.write_text(json.dumps({"sha256": h.hexdigest(), "bytes": nbytes}))
    if then:
        os.execv(then[0], then)
    return 0


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "read":
        return mode_read(
            Path(argv[1]), "--bracketed" in argv[2:], "--bracketed-off" in argv[2:]
        )
    if mode == "env":
        return mode_env(Path(argv[1]))
    if mode == "size":
        return mode_size(Path(argv[1]))
    if mode == "exit":
        say("BYE")
        return int(argv[1])
    if mode == "sleep":
        say("SLEEPING")
        while True:
            time.sleep(1)
    if mode == "spew":
        say("SPEWING")
        line = b"spew " + b"x" * 70 + b"\r\n"
        while True:
            os.write(1, line * 50)
    if mode == "spawn":
        return mode_spawn(Path(argv[1]))
    if mode == "flood":
        then = argv[argv.index("--then") + 1 :] if "--then" in argv else []
        return mode_flood(int(argv[1]), int(argv[2]), Path(argv[3]), then)
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
