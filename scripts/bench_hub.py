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
the whole set) every ``--heartbeat`` s and each session looks for work
(``peek``) every ``--poll`` s (a real supervisor's idle poll). For the
latency step the first ``--hot`` sessions poll every ``--hot-poll`` s (a
supervisor awake for its queue; there is no push wake-up over the link yet,
s43-hublink's), and a message is "at the stand-in" when its poll returns it:
the first byte a real agent would get is that plus the typing (bench_store
measures that part).

Reported per backend: the hub's PostgreSQL connections (peak of
``pg_stat_activity`` rows with its application name) against its pool size;
the hub's idle CPU (% of one core over ``--idle`` s, /proc utime+stime, goal
<= 10 %) with every session idle; the hub's RSS before and after the links,
per host link; a send on the hub (an enqueue in its store) -> the stand-in
sees it, p50/p99 (goal p99 <= 100 ms). The hub has no SSE stream of host
state yet (s43-hubview): state change -> SSE p99 is for later.

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
    """Run the hosts of ``spec_file`` until stdin closes; latencies on stdout, one JSON line."""
    from agentwrap.queue.link import HubLink, HubStore, LinkClient

    spec = json.loads(Path(spec_file).read_text())
    stop = threading.Event()
    lat: list[float] = []
    lock = threading.Lock()
    clients: list[LinkClient] = []

    def host(link: dict[str, str], hot: int) -> None:
        client = LinkClient(HubLink(link["url"], link["host"], link["credential"])).start()
        clients.append(client)
        client.wait_up(120)
        store = HubStore(client)
        names = [f"s{j}" for j in range(spec["sessions"])]
        last = {n: time.monotonic() - (j % 10) * spec["poll"] / 10 for j, n in enumerate(names)}
        next_report = 0.0
        due = dict(last)
        seen: set[str] = set()
        while not stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_report:
                    store.register([{"name": n, "state": "idle"} for n in names],
                                   spec["heartbeat"])
                    next_report = now + spec["heartbeat"]
                due = {n: last[n] + (spec["hot_poll"] if j < hot and spec["hot_on"]
                                     else spec["poll"]) for j, n in enumerate(names)}
                for n in names:
                    if now < due[n]:
                        continue
                    last[n] = now
                    for m in store.peek(n):
                        if m.id not in seen and m.content.startswith("lat "):
                            seen.add(m.id)
                            with lock:
                                lat.append(time.time() - float(m.content.split()[1]))
            except Exception:  # noqa: BLE001 - a link that is down: the next round
                pass
            wait = min(due.values()) - time.monotonic() if names else 0.5
            stop.wait(max(0.002, min(wait, 0.05 if spec["hot_on"] else 0.5)))
        client.close()

    threads = [threading.Thread(target=host, args=(link, hot), daemon=True)
               for link, hot in zip(spec["links"], spec["hot"], strict=True)]
    for t in threads:
        t.start()
    while sys.stdin.readline():  # a line: toggle the hot polls; EOF: stop
        spec["hot_on"] = not spec["hot_on"]
    stop.set()
    for t in threads:
        t.join(10)
    print(json.dumps({"lat": lat}), flush=True)


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
        import httpx

        wait_until(lambda: _healthy(port), 60, "the hub", poll=0.1)
        state = work / "s" / "agentwrap"
        limits = QueueLimits(max_pending_per_session=10_000, max_pending_total=1_000_000,
                             rate_per_minute=1_000_000)
        if url:  # the sender's own connection is not counted as the hub's
            from agentwrap.hub.server import HUB_NAME
            from agentwrap.queue.pgpool import PooledPgDatabase
            from agentwrap.queue.postgres import PostgresMessageStore

            store: Any = PostgresMessageStore(url, host=HUB_NAME, database=PooledPgDatabase(
                url, max_size=1, application_name="agentwrap-bench"))
        else:
            store = open_hub_store(state, url)
        store.limits = limits
        keys = hub_keys(state, store)
        names = [f"h{i:03d}" for i in range(args.hosts)]
        links = [{"url": f"http://127.0.0.1:{port}", "host": n,
                  "credential": keys.join(keys.invite("plain", n), n)} for n in names]
        time.sleep(1.0)
        rss0 = proc_rss_kb(hub.pid)
        hot = [1 if i < args.hot else 0 for i in range(args.hosts)]
        for k in range(args.procs):
            spec = work / f"spec{k}.json"
            spec.write_text(json.dumps({
                "links": links[k::args.procs], "hot": hot[k::args.procs],
                "sessions": args.sessions, "poll": args.poll, "hot_poll": args.hot_poll,
                "heartbeat": args.heartbeat, "hot_on": False}))
            workers.append(subprocess.Popen([sys.executable, __file__, "--worker", str(spec)],
                                            env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True))
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").json()["links"]
                   == args.hosts, 300, "every host's link", poll=0.5)
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
                   rss_per_link_kb=round((rss1 - rss0) / max(1, args.hosts), 1))
        for w in workers:  # the hot sessions poll fast now
            assert w.stdin is not None
            w.stdin.write("hot\n")
            w.stdin.flush()
        time.sleep(1.0)
        targets = [f"{names[i]}/s0" for i in range(min(args.hot, args.hosts))]
        for i in range(args.sends):
            store.enqueue(NewMessage(session=targets[i % len(targets)],
                                     content=f"lat {time.time():.6f}"))
            time.sleep(args.send_gap)
        time.sleep(2.0)
        done.set()
        sampler.join()
        lat: list[float] = []
        for w in workers:
            got, _ = w.communicate(timeout=60)
            lat += json.loads(got.strip().splitlines()[-1])["lat"]
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
    ap.add_argument("--poll", type=float, default=10.0, help="an idle session's peek period, s")
    ap.add_argument("--heartbeat", type=float, default=5.0, help="a host's report period, s")
    ap.add_argument("--hot", type=int, default=5, help="sessions polled fast for the latency")
    ap.add_argument("--hot-poll", type=float, default=0.02)
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
          " PG connections <= the pool; state -> SSE p99 <= 300 ms: for later (no hub SSE yet)")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
