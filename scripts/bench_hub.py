#!/usr/bin/env python3
"""Benchmark: one hub and many linked hosts (issue 38's scale benchmark), SQLite and PostgreSQL.

One real ``agentwrap hub`` process (plain HTTP on loopback; SQLite in its
state dir, then PostgreSQL: tests/support/pg.py's throwaway server), and
``--hosts`` simulated hosts x ``--sessions`` sessions each, run by
``--procs`` light load-generator processes (this script with ``--worker``).
Each simulated host runs the **real link client** (``LinkClient`` and
``HubStore``, one outbound WebSocket per host) with stand-in sessions.

How a simulated host differs from a real one: no supervisor, tmux, pty or
agent; its sessions are names. Idle, each host does what a real host's
link carries when every agent is idle: it reports its sessions (``register``,
the whole set) every ``--heartbeat`` s, each session looks for work
(``peek``) every ``--poll`` s (a real supervisor's safety poll once settled:
``[host] hub_poll_s``, 60 s by default), and the
host listens for the hub's ``wake`` (push-wake), on which that session looks
at once, as a supervisor claims at once. A message is "at the stand-in" when
that look returns it: the first byte a real agent gets is that plus the
typing (bench_store measures that part). Several hosts share a process
(``--procs``), one link client (its own thread and event loop) per host.

Reported per backend: the hub's PostgreSQL connections (peak of
``pg_stat_activity`` rows with its application name) against its pool size;
the hub's idle CPU (% of one core over ``--idle`` s, /proc utime+stime, goal
<= 10 %) with every session idle; the hub's RSS before the links, with half
of them and with all, and per link as the slope between the last two (the
first links cost a fixed step: each thread of the hub's worker pool that
checks a credential keeps scrypt's 16 MB in its malloc arena); a send on the
hub (an enqueue in its store) -> the stand-in sees it, p50/p99 (goal p99 <=
100 ms); a state change on a host (``--hot`` hosts flip a session between
busy and idle every ``--flip-gap`` s for ``--flip-for`` s; the time is taken
before the report is sent) -> the ``session.state`` event on the hub's
``GET /api/events`` SSE stream, p50/p99 (goal p99 <= 300 ms), matched per
session in order, ``missed``: flips no event answered.

    .venv/bin/python scripts/bench_hub.py                       # 100 x 10, both backends
    .venv/bin/python scripts/bench_hub.py --hosts 20 --sessions 5 --idle 5 --sends 20
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST, isolated_env, stats_ms, wait_until, write_json

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# --- the load generator ---------------------------------------------------------------------


def worker(spec_file: str) -> None:
    """Run the hosts of ``spec_file`` until stdin closes; latencies and state
    flips on stdout, one JSON line. A line on stdin toggles the state flips."""
    from agentwrap.queue.link import HubLink, HubStore, LinkClient

    spec = json.loads(Path(spec_file).read_text())
    stop, flipping = threading.Event(), threading.Event()
    lat: list[float] = []
    flips: list[tuple[str, str, float]] = []  # (HOST/NAME, new state, time.time() sent)
    lock = threading.Lock()

    def host(link: dict[str, str], hot: int) -> None:
        client = LinkClient(HubLink(link["url"], link["host"], link["credential"])).start()
        client.wait_up(300)
        store = HubStore(client)
        names = [f"s{j}" for j in range(spec["sessions"])]
        states = dict.fromkeys(names, "idle")
        woken = threading.Event()
        due = {n: time.monotonic() + (j % 10) * spec["poll"] / 10 for j, n in enumerate(names)}

        def wake(name: str) -> None:  # push-wake: this session looks for work now
            if name in due:
                due[name] = 0.0
                woken.set()

        store.listen(wake)
        next_report = next_flip = 0.0
        seen: set[str] = set()
        while not stop.is_set():
            now = time.monotonic()
            try:
                flip = hot and flipping.is_set() and now >= next_flip
                if flip:  # a state change on this host: the next report carries it
                    states["s1"] = "busy" if states["s1"] == "idle" else "idle"
                    next_flip = now + spec["flip_gap"]
                if flip or now >= next_report:
                    sent = time.time()
                    store.register([{"name": n, "state": states[n]} for n in names],
                                   spec["heartbeat"])
                    next_report = now + spec["heartbeat"]
                    if flip:
                        with lock:
                            flips.append((f"{link['host']}/s1", states["s1"], sent))
                for n in names:
                    if now < due[n]:
                        continue
                    due[n] = now + spec["poll"]
                    for m in store.peek(n):
                        if m.id not in seen and m.content.startswith("lat "):
                            seen.add(m.id)
                            with lock:
                                lat.append(time.time() - float(m.content.split()[1]))
            except Exception:  # noqa: BLE001 - a link that is down: the next round
                pass
            until = min([*due.values(), next_report,
                         *([next_flip] if hot and flipping.is_set() else [])])
            woken.wait(max(0.0, min(until - time.monotonic(), 1.0)))
            woken.clear()
        client.close()

    threads = [threading.Thread(target=host, args=(link, hot), daemon=True)
               for link, hot in zip(spec["links"], spec["hot"], strict=True)]
    for t in threads:
        t.start()
    while sys.stdin.readline():  # a line: toggle the state flips; EOF: stop
        if flipping.is_set():
            flipping.clear()
        else:
            flipping.set()
    stop.set()
    for t in threads:
        t.join(10)
    print(json.dumps({"lat": lat, "flips": flips}), flush=True)


class SseClient:
    """The hub's ``GET /api/events`` read in a thread: each ``session.state``
    event with the time it arrived (HOST/NAME, state, time.time())."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.got: list[tuple[str, str, float]] = []
        self.up = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        import httpx

        with httpx.stream("GET", f"http://127.0.0.1:{self.port}/api/events",
                          headers={"Authorization": f"Bearer {self.token}"},
                          timeout=httpx.Timeout(10, read=None)) as r:
            kind = ""
            for line in r.iter_lines():
                self.up.set()
                if self.done.is_set():
                    return
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "session.state":
                    ev = json.loads(line[6:])
                    self.got.append((ev["session"], ev["data"].get("state", ""), time.time()))

    def close(self) -> None:
        self.done.set()


def state_latency(flips: list[tuple[str, str, float]],
                  seen: list[tuple[str, str, float]]) -> tuple[list[float], int]:
    """Each flip matched to its session's next event of that state (in order,
    per session): the latencies, and how many flips no event answered."""
    by: dict[tuple[str, str], list[float]] = {}
    for session, state, at in seen:
        by.setdefault((session, state), []).append(at)
    out, missed = [], 0
    for session, state, sent in sorted(flips, key=lambda f: f[2]):
        arrivals = by.get((session, state), [])
        while arrivals and arrivals[0] < sent:
            arrivals.pop(0)  # an event of an earlier flip (or before this one was sent)
        if arrivals:
            out.append(arrivals.pop(0) - sent)
        else:
            missed += 1
    return out, missed


# --- the run --------------------------------------------------------------------------------


def run_backend(name: str, url: str, args: argparse.Namespace, pg_server: Any) -> dict[str, Any]:
    from agentwrap.hub.server import hub_keys, open_hub_store
    from agentwrap.message import NewMessage, QueueLimits
    from agentwrap.queue.pgpool import HUB_APPLICATION, POOL_SIZE

    work = Path(tempfile.mkdtemp(prefix="awhb-", dir="/tmp"))
    env = isolated_env(work, ROOT)
    if url:
        env["AGENTWRAP_STORE_URL"] = url
    port = free_port()
    log = open(work / "hub.log", "wb")  # noqa: SIM115
    hub = subprocess.Popen([sys.executable, "-m", "agentwrap", "hub", "--listen",
                            f"127.0.0.1:{port}"], env=env, stdout=log, stderr=log)
    out: dict[str, Any] = {"backend": name}
    workers: list[subprocess.Popen[str]] = []
    try:

        wait_until(lambda: _healthy(port), 60, "the hub", poll=0.1)
        state = work / "s" / "agentwrap"
        limits = QueueLimits(max_pending_per_session=10_000, max_pending_total=1_000_000,
                             rate_per_minute=1_000_000)
        # the sender writes as the hub's own API does: its commits announced on the hub's bus
        from agentwrap.paths import Paths

        bus = Paths.from_env(env).events_dir
        if url:  # the sender's own connection is not counted as the hub's
            from agentwrap.hub.server import HUB_NAME
            from agentwrap.queue.pgpool import PooledPgDatabase
            from agentwrap.queue.postgres import PostgresMessageStore

            store: Any = PostgresMessageStore(url, host=HUB_NAME, database=PooledPgDatabase(
                url, max_size=1, application_name="agentwrap-bench", events_dir=bus),
                events_dir=bus)
        else:
            store = open_hub_store(state, url, events_dir=bus)
        store.limits = limits
        keys = hub_keys(state, store)
        names = [f"h{i:03d}" for i in range(args.hosts)]
        links = [{"url": f"http://127.0.0.1:{port}", "host": n,
                  "credential": keys.join(keys.invite("plain", n), n)} for n in names]
        time.sleep(1.0)
        rss0 = proc_rss_kb(hub.pid)
        hot = [1 if i < args.hot else 0 for i in range(args.hosts)]
        half = max(1, args.procs // 2)  # the links in two steps: RSS per link is the slope
        rss_half, linked_half = 0, 0
        for k in range(args.procs):
            if k == half:
                linked_half = sum(len(links[j::args.procs]) for j in range(half))
                wait_until(lambda n=linked_half: links_up(port) == n, 300, "half the links",
                           poll=0.5)
                time.sleep(args.settle)
                rss_half = proc_rss_kb(hub.pid)
            spec = work / f"spec{k}.json"
            spec.write_text(json.dumps({
                "links": links[k::args.procs], "hot": hot[k::args.procs],
                "sessions": args.sessions, "poll": args.poll, "flip_gap": args.flip_gap,
                "heartbeat": args.heartbeat}))
            workers.append(subprocess.Popen([sys.executable, __file__, "--worker", str(spec)],
                                            env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True))
        wait_until(lambda: links_up(port) == args.hosts, 300, "every host's link", poll=0.5)
        time.sleep(args.settle)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                if pg_server is not None:
                    got = pg_server.psql("SELECT count(*) FROM pg_stat_activity WHERE"
                                         f" application_name = '{HUB_APPLICATION}'")
                    peak[0] = max(peak[0], int(got.strip("[](),")))
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        c0, t0 = proc_cpu_s(hub.pid), time.monotonic()
        time.sleep(args.idle)
        cpu = (proc_cpu_s(hub.pid) - c0) / (time.monotonic() - t0) * 100
        rss1 = proc_rss_kb(hub.pid)
        out.update(hosts=args.hosts, sessions=args.hosts * args.sessions,
                   idle_cpu_pct_of_core=round(cpu, 2), rss_before_kb=rss0, rss_after_kb=rss1,
                   rss_half_kb=rss_half, rss_per_link_kb=round(
                       (rss1 - rss_half) / max(1, args.hosts - linked_half), 1)
                   if rss_half else round((rss1 - rss0) / max(1, args.hosts), 1))
        targets = [f"{names[i]}/s0" for i in range(min(args.hot, args.hosts))]
        for i in range(args.sends):  # every session idle: the hub's wake brings each one
            store.enqueue(NewMessage(session=targets[i % len(targets)],
                                     content=f"lat {time.time():.6f}"))
            time.sleep(args.send_gap)
        time.sleep(2.0)
        token = (state / "api-token").read_text().strip()
        sse = SseClient(port, token)
        sse.up.wait(30)
        time.sleep(1.0)
        for w in workers:  # the hot hosts flip a session's state every --flip-gap s
            assert w.stdin is not None
            w.stdin.write("flip\n")
            w.stdin.flush()
        time.sleep(args.flip_for)
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("flip\n")
            w.stdin.flush()
        time.sleep(3.0)
        sse.close()
        done.set()
        sampler.join()
        lat: list[float] = []
        flips: list[tuple[str, str, float]] = []
        for w in workers:
            got, _ = w.communicate(timeout=60)
            last = json.loads(got.strip().splitlines()[-1])
            lat += last["lat"]
            flips += [tuple(f) for f in last["flips"]]
        state_lat, missed = state_latency(flips, sse.got)
        out["state_to_sse"] = {**stats_ms(state_lat), "flips": len(flips), "missed": missed}
        out["send_to_standin"] = stats_ms(lat)
        if pg_server is not None:
            out.update(pg_connections_peak=peak[0], pool_size=POOL_SIZE)
        store.close()
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(10)
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(20)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait(10)
    return out


def links_up(port: int) -> int:
    import httpx

    return int(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["links"])


def _healthy(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=10, help="per host")
    ap.add_argument("--procs", type=int, default=4, help="load-generator processes")
    ap.add_argument("--poll", type=float, default=60.0,
                    help="an idle session's peek period, s ([host] hub_poll_s)")
    ap.add_argument("--heartbeat", type=float, default=5.0, help="a host's report period, s")
    ap.add_argument("--hot", type=int, default=10,
                    help="hosts whose s0 gets the sends and whose s1 flips its state")
    ap.add_argument("--flip-gap", type=float, default=0.5, help="a hot host's state flips, s")
    ap.add_argument("--flip-for", type=float, default=20.0, help="how long states flip, s")
    ap.add_argument("--sends", type=int, default=100)
    ap.add_argument("--send-gap", type=float, default=0.1)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--idle", type=float, default=30.0, help="the idle CPU window, s")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--json", metavar="FILE")
    add_against(ap)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return 0
    if args.against:
        return against(__file__, args, json_file=True)
    results = []
    for backend in args.backends.split(","):
        if backend == "postgresql":
            from support import pg

            server = pg.start()
            try:
                _, url = server.new_schema()
                results.append(run_backend(backend, url, args, server))
            finally:
                server.stop()
        else:
            results.append(run_backend(backend, "", args, None))
        print(json.dumps(results[-1], indent=1), flush=True)
    print("goals: idle CPU <= 10 % of a core; send -> stand-in p99 <= 100 ms;"
          " PG connections <= the pool; state -> SSE p99 <= 300 ms")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
