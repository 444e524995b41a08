#!/usr/bin/env python3
"""Benchmark: delivery latency (enqueue -> first byte read by the agent) and store costs.

(a) Latency. A tiny raw-mode "stamp agent" (written to the temp dir) draws a
prompt box like the agent TUIs, enables bracketed paste, echoes what is
pasted into the box, moves it above the box on Enter (then shows a 0.2 s turn,
"working" under the box, as a real agent shows its turn: agentwrap holds a
submitted prompt busy till its turn shows, 2 s at most), and appends
``time.monotonic()`` and the byte count of EVERY read() of its stdin to a
file (CLOCK_MONOTONIC is system-wide on Linux, so its stamps compare with
this process's). A profile made for it (``awbench``) is written to the temp
XDG config dir's patterns/.

* baseline: the stamp agent on a pty owned by this script; ``os.write`` of a
  bracketed paste of the same size on the master -> the agent's first read.
* pty: ``python -m agentwrap run --backend pty`` (run_pty: relay + supervisor
  thread) in a background process, headless (stdin/stdout not a tty).
* tmux: ``python -m agentwrap run --detach`` (tmux backend; the supervisor is
  its own detached process).

For each message: wait until the session is READY (registry) and the agent
idle, then ``store.enqueue(...)`` + ``datagram.wake(...)`` exactly like
``agentwrap send``; latency = start of the enqueue call -> the agent's first
read after it. The next message is sent only once the previous one is
DELIVERED and the session is READY again.

(b) Store costs with 1000 queued messages (fresh SQLite file, default
synchronous=FULL, on the temp dir's file system): enqueue (queue depth 0 ->
1000), peek, claim_batch (+ retry_later to put the batch back, not timed),
expire_overdue with nothing due (the scan every enqueue also does) and one
expire_overdue that expires all 1000. Two layouts: one session holding 1000
(limits raised), and 20 sessions x 50 (the default limits).

Everything lives in a fresh ``/tmp/awd-*`` dir (isolated XDG dirs, so its own
tmux servers: one per session, sockets in the runtime dir's ``tmux/``), removed
at the end with every tmux server and every process this script started.

    .venv/bin/python scripts/bench_delivery.py                 # ~1 min
    .venv/bin/python scripts/bench_delivery.py --json
    .venv/bin/python scripts/bench_delivery.py --messages 20 --backends pty --skip-store
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import (
    UNDER_TEST,
    Stamps,
    fmt,
    isolated_env,
    json_safe,
    kill_proc,
    stats_ms,
    teardown_agentwrap,
    wait_until,
)

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
sys.path.insert(0, str(ROOT))

COLS, ROWS = 100, 30

STAMP_AGENT = r'''
import os, select, sys, termios, time, tty


stamps = open(sys.argv[1], "a", buffering=1)
fd = 0
tty.setraw(fd)
out = sys.stdout
transcript = []
box = ""
TURN_S = 0.2  # a turn's length: "working" under the box, as the agent TUIs draw it
turn_until = 0.0


def size():
    try:
        s = os.get_terminal_size(1)
        return s.columns, s.lines
    except OSError:
        return 100, 30


def draw():
    cols, rows = size()
    status = "  working" if time.monotonic() < turn_until else "  idle"
    tail = ["─" * cols] + ("❯ " + box).split("\n") + ["─" * cols, status]
    room = rows - len(tail)
    body = transcript[-room:] if room > 0 else []
    screen = body + [""] * (room - len(body)) + tail
    out.write("\x1b[H\x1b[2J" + "\r\n".join(x[:cols] for x in screen[-rows:]))
    out.flush()


out.write("\x1b[?2004h")
draw()
stamps.write("ready %.6f\n" % time.monotonic())
buf = b""
in_paste = False
while True:
    wait = turn_until - time.monotonic()
    if not select.select([fd], [], [], wait if wait > 0 else None)[0]:
        turn_until = 0.0  # the turn is over: idle again
        draw()
        continue
    try:
        data = os.read(fd, 65536)
    except OSError:
        break
    t = time.monotonic()
    if not data:
        break
    stamps.write("%.6f %d\n" % (t, len(data)))
    buf += data
    while buf:
        if in_paste:
            end = buf.find(b"\x1b[201~")
            if end < 0:
                box += buf.decode("utf-8", "replace")
                buf = b""
                break
            box += buf[:end].decode("utf-8", "replace")
            buf = buf[end + 6:]
            in_paste = False
            continue
        if buf.startswith(b"\x1b[200~"):
            in_paste = True
            buf = buf[6:]
            continue
        if buf.startswith(b"\x1b") and len(buf) < 6 and b"\x1b[200~".startswith(buf):
            break
        ch, buf = buf[:1], buf[1:]
        if ch == b"\x04" and not box:
            sys.exit(0)
        if ch == b"\r":
            if box.strip():
                transcript.extend(box.split("\n"))
                box = ""
                turn_until = time.monotonic() + TURN_S
        elif ch == b"\x03":
            box = ""
        elif ch == b"\n":
            box += "\n"
        elif ch >= b" ":
            box += ch.decode("utf-8", "replace")
    draw()
'''

PROFILE = r'''
# bench_delivery.py's stamp agent: a prompt box between two rules, like the agent TUIs.
name = "awbench"
description = "bench_delivery.py stamp agent"
commands = []

[input]
submit_key = "Enter"
submit_delay_ms = 50
bracketed_paste = true
accepts_input_while_busy = false
input_region = "box"

[detect]
quiet_ms = 150

[detect.anchors]
rule = '^─{10,}\s*$'

[detect.regions]
box = { from = "rule[-2]", to = "rule[-1]" }
status = { from = "rule[-1]", to = "bottom" }

[[detect.rules]]
name = "working"
state = "busy"
region = "status"
pattern = '^  working'
explain = "a turn: 'working' under the prompt box"

[[detect.rules]]
name = "draft"
state = "draft"
region = "box"
pattern = '^❯[^\S\n]*\S'
explain = "text in the prompt box"

[[detect.rules]]
name = "empty-box"
state = "ready"
region = "box"
pattern = '^❯[^\S\n]*$'
explain = "prompt box empty"
'''


def payload(i: int, size: int) -> str:
    head = f"bench message {i:04d} "
    return head + ("lorem ipsum " * (size // 12 + 1))[: max(0, size - len(head))]


# --- (a) baseline: raw pty write ---------------------------------------------------------------


def bench_baseline(work: Path, n: int, size: int) -> dict[str, Any]:
    stamp_file = work / "stamps-raw.txt"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    proc = subprocess.Popen([sys.executable, str(work / "stamp_agent.py"), str(stamp_file)],
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    os.set_blocking(master, False)

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except (BlockingIOError, OSError):
            pass

    stamps = Stamps(stamp_file)
    lat: list[float] = []
    try:
        wait_until(lambda: (drain(), stamps.poll(), stamps.ready)[2], 10, "the stamp agent")
        for i in range(n):
            text = payload(i, size).encode()
            time.sleep(0.02)
            drain()
            t0 = time.monotonic()
            os.write(master, b"\x1b[200~" + text + b"\x1b[201~")
            t1 = wait_until(lambda t0=t0: stamps.first_after(t0), 5, "the agent to read", poll=0.001)
            lat.append(t1 - t0)
            os.write(master, b"\r")
            time.sleep(0.005)
            drain()
    finally:
        kill_proc(proc)
        os.close(master)
    return {"backend": "raw-pty-write", **stats_ms(lat)}


# --- (a) agentwrap sessions ------------------------------------------------------------------


def bench_session(backend: str, work: Path, env: dict[str, str], n: int, size: int,
                  timeout: float, aw_root: Path) -> dict[str, Any]:
    from agentwrap.datagram import wake
    from agentwrap.message import NewMessage, QueueLimits, Source, Status
    from agentwrap.paths import Paths
    from agentwrap.queue.sqlite import SQLiteMessageStore
    from agentwrap.sessions.registry import Registry

    paths = Paths.from_env(env)
    name = f"d{backend}"
    stamp_file = work / f"stamps-{backend}.txt"
    agent = [sys.executable, str(work / "stamp_agent.py"), str(stamp_file)]
    base = [sys.executable, "-m", "agentwrap", "run", "--backend", backend, "--profile", "awbench",
            "--name", name, "--cols", str(COLS), "--rows", str(ROWS)]
    proc: subprocess.Popen[bytes] | None = None
    log = open(work / f"run-{backend}.log", "wb")  # noqa: SIM115 - closed in finally
    # a project folder each: the second session of one folder gets the first's handoff at its
    # start (a startup message awaiting its ACK), which the first message measured then shares
    project = work / f"project-{backend}"
    project.mkdir(exist_ok=True)
    if backend == "pty":
        proc = subprocess.Popen([*base, "--", *agent], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, env=env, cwd=str(project), start_new_session=True)
    else:
        subprocess.run([*base, "--detach", "--", *agent], stdin=subprocess.DEVNULL, stdout=log,
                       stderr=log, env=env, cwd=str(project), check=True, timeout=30)
    stamps = Stamps(stamp_file)
    limits = QueueLimits(rate_per_minute=100000, max_pending_per_session=1000, max_pending_total=10000)
    store = SQLiteMessageStore(paths.db_path, limits)
    reg = Registry(paths.db_path)
    lat: list[float] = []
    enq: list[float] = []
    notif: list[float] = []
    done: list[float] = []
    states: list[str] = []
    errors: list[str] = []

    def state() -> str:
        rec = reg.find(name)
        return rec.state if rec is not None else ""

    try:
        wait_until(lambda: state() == "ready" and stamps.poll() is None and stamps.ready, timeout,
                   f"{name} to be ready")
        for i in range(n):
            wait_until(lambda: state() == "ready", timeout, f"{name} to be ready again")
            time.sleep(0.05)  # a little idle time, as between real messages
            new = NewMessage(session=name, content=payload(i, size), source=Source.AGENT,
                             source_id="bench", require_ack=False)
            t0 = time.monotonic()
            msg, _ = store.enqueue(new)
            t1 = time.monotonic()
            wake(paths, name)
            t2 = time.monotonic()
            try:
                first = wait_until(lambda t0=t0: stamps.first_after(t0), timeout, "the first byte",
                                   poll=0.001)
                final = wait_until(lambda mid=msg.id: (m := store.get(mid)).status.terminal and m,
                                   timeout, "the message to finish")
            except TimeoutError as exc:
                errors.append(f"message {i}: {exc}")
                break
            t3 = time.monotonic()
            if final.status is not Status.DELIVERED:
                errors.append(f"message {i}: {final.status} {final.detail[:200]}")
            lat.append(first - t0)
            enq.append(t1 - t0)
            notif.append(t2 - t1)
            done.append(t3 - t0)
        states.append(state())
    finally:
        store.close()
        reg.close()
        stop_session(backend, name, env, paths, proc, work)
        log.close()
    return {
        "backend": backend, **stats_ms(lat),
        "enqueue_call": stats_ms(enq), "notify_call": stats_ms(notif),
        "enqueue_to_delivered_seen": stats_ms(done), "errors": errors,
    }


def stop_session(backend: str, name: str, env: dict[str, str], paths: Any,
                 proc: subprocess.Popen[bytes] | None, work: Path) -> None:
    try:
        subprocess.run([sys.executable, "-m", "agentwrap", "stop", name], env=env, cwd=str(work),
                       capture_output=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        pass
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_proc(proc)
    # whatever is left: supervisor, agent, and each session's own tmux server
    teardown_agentwrap(env, str(work))


# --- (b) store costs -----------------------------------------------------------------------


def bench_store(work: Path, layout: str, total: int, reps: int) -> dict[str, Any]:
    from agentwrap.delivery.framing import new_token
    from agentwrap.message import NewMessage, QueueLimits, Source
    from agentwrap.queue.sqlite import SQLiteMessageStore

    if layout == "one":
        sessions = ["s0"]
        limits = QueueLimits(rate_per_minute=10**6, max_pending_per_session=total + 10,
                             max_pending_total=total + 10)
    else:
        sessions = [f"s{i}" for i in range(20)]
        limits = QueueLimits(rate_per_minute=10**6)  # default pending limits: 50 / 1000
    db = work / f"store-{layout}.db"
    store = SQLiteMessageStore(db, limits)
    t_enq: list[float] = []
    try:
        for i in range(total):
            new = NewMessage(session=sessions[i % len(sessions)], content=payload(i, 200),
                             source=Source.WEBHOOK, source_id=f"w{i % 7}")
            t0 = time.perf_counter()
            store.enqueue(new)
            t_enq.append(time.perf_counter() - t0)
        target = sessions[0]
        t_peek: list[float] = []
        n_peek = 0
        for _ in range(reps):
            t0 = time.perf_counter()
            n_peek = len(store.peek(target))
            t_peek.append(time.perf_counter() - t0)
        t_claim: list[float] = []
        n_claim = 0
        for _ in range(reps):
            token = new_token()
            t0 = time.perf_counter()
            batch = store.claim_batch(target, token, 8 * 1024)
            t_claim.append(time.perf_counter() - t0)
            n_claim = len(batch)
            store.retry_later(token, 0.0, "bench: put back")
        t_exp: list[float] = []
        for _ in range(reps):
            t0 = time.perf_counter()
            store.expire_overdue()
            t_exp.append(time.perf_counter() - t0)
        pending = store.pending_count()
        t0 = time.perf_counter()
        expired = store.expire_overdue(now=time.time() + 10**6)
        t_bulk = time.perf_counter() - t0
    finally:
        store.close()
    return {
        "layout": layout, "sessions": len(sessions), "queued": pending,
        "enqueue": stats_ms(t_enq),
        "peek": {**stats_ms(t_peek), "returned": n_peek},
        "claim_batch": {**stats_ms(t_claim), "claimed": n_claim, "max_bytes": 8192},
        "expire_overdue_none_due": stats_ms(t_exp),
        "expire_overdue_all_due": {"ms": t_bulk * 1000, "expired": expired},
        "db_bytes": db.stat().st_size if db.exists() else None,
    }


# --- driver ------------------------------------------------------------------------------------


def print_tables(res: dict[str, Any]) -> None:
    lat = res.get("latency", [])
    if lat:
        print(f"\n(a) enqueue -> first byte read by the agent ({res['message_bytes']} B messages, "
              f"p50 / p99 / max in ms)")
        hdr = f"{'path':<15} {'n':>3} {'p50':>8} {'p99':>8} {'max':>8} | {'enqueue':>8} {'notify':>7} | {'-> delivered':>12}"
        print(hdr)
        print("-" * len(hdr))
        for r in lat:
            e = r.get("enqueue_call", {})
            nt = r.get("notify_call", {})
            d = r.get("enqueue_to_delivered_seen", {})
            print(f"{r['backend']:<15} {r['n']:>3} {fmt(r['p50_ms']):>8} {fmt(r['p99_ms']):>8} "
                  f"{fmt(r['max_ms']):>8} | {fmt(e.get('p50_ms')):>8} {fmt(nt.get('p50_ms'), '.3f'):>7} | "
                  f"{fmt(d.get('p50_ms'), '.0f'):>12}")
            for err in r.get("errors", []):
                print(f"    ! {err}")
        print("enqueue/notify: p50 of the store.enqueue / datagram.wake calls (included in the latency);"
              " -> delivered: p50 until this script saw DELIVERED (polling)")
    for s in res.get("store", []):
        print(f"\n(b) store costs, {s['queued']} pending before the bulk expiry, layout {s['layout']!r} "
              f"({s['sessions']} session(s)); ms")
        hdr = f"{'operation':<32} {'n':>5} {'p50':>8} {'p99':>8} {'max':>8}"
        print(hdr)
        print("-" * len(hdr))
        rows = [
            ("enqueue (depth 0 -> N)", s["enqueue"]),
            (f"peek (returns {s['peek']['returned']})", s["peek"]),
            (f"claim_batch (8 KB: {s['claim_batch']['claimed']} msgs)", s["claim_batch"]),
            ("expire_overdue, none due", s["expire_overdue_none_due"]),
        ]
        for label, st in rows:
            print(f"{label:<32} {st['n']:>5} {fmt(st['p50_ms']):>8} {fmt(st['p99_ms']):>8} {fmt(st['max_ms']):>8}")
        b = s["expire_overdue_all_due"]
        print(f"{'expire_overdue, all ' + str(b['expired']) + ' due':<32} {1:>5} {fmt(b['ms']):>8}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=50, help="messages per latency path")
    ap.add_argument("--bytes", type=int, default=100, help="size of each message's content")
    ap.add_argument("--backends", default="pty,tmux", help="agentwrap paths to measure: pty,tmux")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-store", action="store_true")
    ap.add_argument("--store-messages", type=int, default=1000)
    ap.add_argument("--store-reps", type=int, default=100, help="repetitions per store operation")
    ap.add_argument("--timeout", type=float, default=20, help="seconds to wait for any one step")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--agentwrap-root", type=Path, default=ROOT,
                    help="source tree of the agentwrap under test (e.g. a patched copy)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (debugging)")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=False)

    aw_root = args.agentwrap_root.resolve()
    sys.path.insert(0, str(aw_root))
    work = Path(tempfile.mkdtemp(prefix="awd-", dir="/tmp"))
    env = isolated_env(work, aw_root)
    (work / "stamp_agent.py").write_text(STAMP_AGENT)
    patterns = work / "c" / "agentwrap" / "patterns"
    patterns.mkdir(parents=True)
    (patterns / "awbench.toml").write_text(PROFILE)
    res: dict[str, Any] = {"benchmark": "delivery", "message_bytes": args.bytes, "latency": [], "store": []}
    started = time.monotonic()
    try:
        if not args.skip_latency:
            backends = [b.strip() for b in args.backends.split(",") if b.strip()]
            if "tmux" in backends and not shutil.which("tmux"):
                print("tmux not installed: skipping the tmux path", file=sys.stderr)
                backends.remove("tmux")
            res["latency"].append(bench_baseline(work, args.messages, args.bytes))
            for b in backends:
                res["latency"].append(bench_session(b, work, env, args.messages, args.bytes, args.timeout,
                                                    aw_root))
        if not args.skip_store:
            for layout in ("one", "spread"):
                res["store"].append(bench_store(work, layout, args.store_messages, args.store_reps))
    finally:
        teardown_agentwrap(env, str(work))  # also after Ctrl-C or an error mid-session
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    res["elapsed_s"] = time.monotonic() - started
    if args.json:
        json.dump(json_safe(res), sys.stdout, indent=1, default=str)
        print()
    else:
        if aw_root != ROOT:
            print(f"agentwrap under test: {aw_root}")
        print_tables(res)
        print(f"({res['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
