#!/usr/bin/env python3
"""Benchmark: the store on each backend, same run, same machine (issue 23's Benchmarks).

SQLite (a file of one machine) against PostgreSQL (the test suite's
throwaway server, tests/support/pg.py, started here on loopback; fsync and
synchronous_commit are off, as in the tests, so this measures agentwrap's
statements and round trips, not a disk). Every figure is printed for both
backends and as the ratio PostgreSQL / SQLite of this run: on a shared
2-core machine absolute figures drift, ratios of one run hold.

Simulated hosts: each has its own XDG config/state/runtime dirs under a
short ``/tmp/awst-*`` dir, a user config with ``[host] name`` and, for
PostgreSQL, ``[store] url`` (limits raised far above what the run sends).
On PostgreSQL host ``alpha`` sends and host ``beta`` runs the agents and the
event stream; on SQLite both are the one machine (that is the baseline).

1. idle CPU: ``--sessions`` (10) stand-in agents (tests/support/standin_agent.py)
   under real supervisors (``agentwrap run --detach``, the supervisor host) on
   each backend at once, ``--windows`` windows (``--idle`` s each) for both
   (each printed, the figure is their sum), after ``--settle`` s: supervisors
   + the tmux clients they reap + tmux servers + pipe-pane helpers, from /proc (scripts/bench_scale.py's accounting). The
   PostgreSQL server's own CPU over the window is printed as context (it is
   another machine's in a real set-up).
2. enqueue in process: ``--n`` ``store.enqueue`` calls from one writer (p50,
   p99, per s), and claim + finish of one message.
3. enqueue, CLI: ``agentwrap send`` (a process per message) from ``--clients``
   (8) parallel callers, ``--cli-requests`` messages (scripts/bench_http.py's
   cli_sends).
4. enqueue, HTTP: ``POST /api/sessions/{name}/input`` on ``agentwrap serve``,
   ``--clients`` keep-alive clients, ``--requests`` POSTs after ``--warmup``
   (bench_http's hammer); its CPU per request.
5. event commit -> SSE client on another host: a client streams
   ``GET /api/events`` from beta's ``serve`` while alpha's service stores
   ``--events`` messages one at a time; latency = receipt - the event's
   ``at`` (the store's clock just before the commit; one machine, one clock).
6. cross-host send -> first byte at the agent: alpha's service
   (``Service.send``, the path ``agentwrap send`` takes) stores a message for
   one of beta's sessions; the agent's stdin reads are stamped with
   ``time.monotonic()`` (bench_scale's stamp wrapper). One at a time, the next
   once the last is delivered, round robin over the sessions.

The backends take turns within each step. Issue 23's goals are printed
beside the figures (cross-host p99 <= 50 ms, event p99 <= 50 ms, idle CPU on
PostgreSQL within 1.2x SQLite's); nothing here passes or fails a build.

    .venv/bin/python scripts/bench_store.py                 # ~4 min
    .venv/bin/python scripts/bench_store.py --sessions 4 --idle 10 --requests 300 \\
        --cli-requests 16 --events 40 --sends 10 --json out.json
    .venv/bin/python scripts/bench_store.py --only-idle --idle 120 --windows 4   # ~9 min
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

import bench_http  # noqa: E402
import bench_scale  # noqa: E402
from benchlib import (  # noqa: E402
    Interrupted,
    Stamps,
    fmt,
    isolated_env,
    raise_interrupted,
    stats_ms,
    step,
    teardown_agentwrap,
    wait_until,
    write_json,
)
from support import pg  # noqa: E402

from agentwrap.message import NewMessage, QueueLimits, Source, Status  # noqa: E402
from agentwrap.queue.backend import open_store  # noqa: E402

BACKENDS = ("sqlite", "postgres")
ROOMY = QueueLimits(max_pending_per_session=1_000_000, max_pending_total=10_000_000,
                    rate_per_minute=10**9)
GOAL_CROSS_HOST_P99_MS = 50.0
GOAL_EVENT_P99_MS = 50.0
GOAL_IDLE_RATIO = 1.2
ENQUEUE_SESSIONS = [f"e{i}" for i in range(8)]


@dataclass
class Backend:
    """One backend's simulated hosts: ``a`` sends, ``b`` runs the agents (the
    same host on SQLite)."""

    name: str
    url: str
    a: bench_scale.Bench
    b: bench_scale.Bench
    token_a: str
    token_b: str


def make_host(work: Path, host: str, url: str, big: int, sessions: int,
              timeout: float) -> bench_scale.Bench:
    from agentwrap.paths import Paths

    work.mkdir(parents=True)
    env = isolated_env(work, ROOT)
    paths = Paths.from_env(env).ensure()
    paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(bench_scale.STANDIN_PROFILE, paths.user_patterns_dir / "standin.toml")
    store = f'[store]\nurl = "{url}"\n' if url else ""
    paths.config_file.write_text(
        f'[run]\nsupervisor = "host"\n[host]\nname = "{host}"\n{store}'
        f"[limits]\nrate_per_minute = {big}\nmax_pending_per_session = {big}\n"
        f"max_pending_total = {big}\n", encoding="utf-8")
    (work / "project").mkdir()
    (work / "stamps").mkdir()
    (work / "stamp_standin.py").write_text(bench_scale.STAMP_WRAPPER)
    return bench_scale.Bench(work=work, env=env, aw_root=ROOT, n=sessions, timeout=timeout,
                             names=[f"s{i:03d}" for i in range(sessions)])


def make_backend(name: str, url: str, work: Path, args: argparse.Namespace) -> Backend:
    from agentwrap.paths import Paths
    from agentwrap.sessions.registry import Registry, SessionRecord
    from agentwrap.surfaces.http.auth import load_or_create_token

    big = 100 * (args.requests + args.warmup + args.cli_requests + args.events + args.n) + 10_000
    if url:
        a = make_host(work / "a", "alpha", url, big, args.sessions, args.timeout)
        b = make_host(work / "b", "beta", url, big, args.sessions, args.timeout)
    else:
        a = b = make_host(work / "one", "one", url, big, args.sessions, args.timeout)
    paths = Paths.from_env(a.env)
    reg = Registry(paths.db_path, events_dir=paths.events_dir, url=url, host="alpha" if url else "one")
    try:  # the enqueue steps' sessions: records without a supervisor (messages wait)
        for s in [*ENQUEUE_SESSIONS, "ev"]:
            reg.register(SessionRecord(name=s, profile="standin", backend="tmux", command=["x"],
                                       cwd=str(a.work / "project"), started=time.time()))
    finally:
        reg.close()
    return Backend(name, url, a, b, load_or_create_token(Paths.from_env(a.env).ensure()),
                   load_or_create_token(Paths.from_env(b.env).ensure()))


def http_env(h: bench_scale.Bench, token: str) -> bench_http.Env:
    return bench_http.Env(h.work, h.env, token, list(ENQUEUE_SESSIONS))


# --- steps ------------------------------------------------------------------------------------


def step_idle(bs: list[Backend], args: argparse.Namespace, server: pg.PgServer) -> dict[str, Any]:
    """Every backend's agents started, then ``--windows`` idle windows, each
    measured for all backends at once (the first after ``--settle`` s)."""
    out: dict[str, Any] = {}
    for be in bs:
        out[be.name] = {"start": bench_scale.step_start(be.b, bench_scale.MODES["host"], 4)}
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    windows: list[dict[str, Any]] = []
    for k in range(max(1, args.windows)):
        settle = args.settle if k == 0 else 0.0
        pg_pids = bench_scale.tree(postmaster, bench_scale.children_map())
        before = bench_scale.sample(pg_pids)
        t0 = time.monotonic()
        win: dict[str, Any] = {}
        with ThreadPoolExecutor(len(bs)) as pool:
            futs = {be.name: pool.submit(bench_scale.step_idle, be.b, args.idle, settle)
                    for be in bs}
            for name, fut in futs.items():
                win[name] = fut.result()[0]
        after = bench_scale.sample(pg_pids)
        wall = time.monotonic() - t0 - settle
        ticks = sum(after[p][0] - before[p][0] for p in after if p in before)
        win["postgres_server_pct"] = 100.0 * ticks / bench_scale.CLK_TCK / max(wall, 1e-9)
        windows.append(win)
    for be in bs:  # the figure: CPU summed over every window, over their summed length
        ws = [w[be.name] for w in windows]
        total = sum(w["agentwrap_total_pct"] * w["window_s"] for w in ws)
        length = sum(w["window_s"] for w in ws)
        out[be.name]["idle"] = {**ws[0], "agentwrap_total_pct": total / length,
                                "window_s": length}
    out["postgres_server_pct"] = sum(w["postgres_server_pct"] for w in windows) / len(windows)
    out["windows"] = windows
    return out


def step_in_process(be: Backend, n: int, work: Path) -> dict[str, Any]:
    store = open_store(work / f"inproc-{be.name}.db", ROOMY, url=be.url)
    try:
        lat: list[float] = []
        t0 = time.perf_counter()
        for i in range(n):
            a = time.perf_counter()
            store.enqueue(NewMessage(session=f"p{i % 4}", content=f"message {i}"))
            lat.append(time.perf_counter() - a)
        rate = n / (time.perf_counter() - t0)
        claims: list[float] = []
        for k in range(min(200, n // 4)):
            a = time.perf_counter()
            store.claim_batch("p0", f"b{k}", max_bytes=1)
            store.finish(Status.DELIVERED, "ok", batch_id=f"b{k}")
            claims.append(time.perf_counter() - a)
        return {**stats_ms(lat), "per_s": rate, "claim_finish": stats_ms(claims)}
    finally:
        store.close()


def step_http(be: Backend, args: argparse.Namespace) -> dict[str, Any]:
    e = http_env(be.a, be.token_a)
    srv = bench_http.start_server(e, "agentwrap", "warning")
    try:
        return bench_http.hammer(srv.url, e.token, e.sessions, requests=args.requests,
                                 warmup=args.warmup, clients=args.clients, size=args.bytes,
                                 server_pid=srv.proc.pid)
    finally:
        bench_http.stop_server(srv)


class Sender:
    """Host alpha's service (on SQLite: the one machine's), in this process."""

    def __init__(self, be: Backend) -> None:
        from agentwrap.paths import Paths
        from agentwrap.service import Service

        self.service = Service.open(Paths.from_env(be.a.env))

    def send(self, session: str, content: str) -> str:
        new = NewMessage(session=session, content=content, source=Source.AGENT,
                         source_id="bench-store", require_ack=False)
        return self.service.send(new).message.id

    def close(self) -> None:
        self.service.close()


def step_events(be: Backend, sender: Sender, args: argparse.Namespace) -> dict[str, Any]:
    """alpha commits, beta's ``serve`` streams: receipt - the event's ``at``."""
    e = http_env(be.b, be.token_b)
    srv = bench_http.start_server(e, "agentwrap", "warning")
    try:
        lis = bench_http.Listener(srv.url, e.token)
        ids: list[str] = []
        try:
            time.sleep(0.5)  # the stream subscribed (and on PostgreSQL, LISTENing)
            for i in range(args.events):
                ids.append(sender.send("ev", f"event {i:05d}"))
                time.sleep(args.event_interval / 1000)
            lis.wait_for(set(ids), 15)
        finally:
            lis.close()
        lat = [lis.got[k][1] - lis.got[k][0] for k in ids if k in lis.got]
        return {**stats_ms(lat), "sent": len(ids), "missed": len(ids) - len(lat),
                "error": lis.error}
    finally:
        bench_http.stop_server(srv)


def send_one(be: Backend, sender: Sender, i: int, timeout: float) -> tuple[float, float]:
    """One message from alpha to one of beta's sessions: (-> first byte, -> delivered seen)."""
    name = be.b.names[i % len(be.b.names)]
    address = f"beta/{name}" if be.url else name  # beta's session, from alpha
    stamps = Stamps(be.b.stamps_file(name))
    reg = sender.service.registry
    wait_until(lambda: (r := reg.find(address)) is not None and r.state == "ready", timeout,
               f"{address} ready", poll=0.01)
    t0 = time.monotonic()
    mid = sender.send(address, f"cross-host message {i:05d} from alpha")
    first = wait_until(lambda: stamps.first_after(t0), timeout, f"the first byte at {name}",
                       poll=0.001)
    final = wait_until(lambda: (m := sender.service.store.get(mid)).status.terminal and m,
                       timeout, f"{name}'s message final", poll=0.005)
    if final.status is not Status.DELIVERED:
        raise RuntimeError(f"{name}: {final.status} {final.detail[:200]}")
    return first - t0, time.monotonic() - t0


# --- report -----------------------------------------------------------------------------------


def ratio(res: dict[str, Any], *keys: str) -> float:
    def get(backend: str) -> float:
        x: Any = res.get(backend) or {}
        for k in keys:
            x = (x or {}).get(k)
        return float("nan") if x is None else float(x)

    s, p = get("sqlite"), get("postgres")
    return p / s if s else float("nan")


def idle_pct(res: dict[str, Any], backend: str) -> float | None:
    idle = ((res.get("idle") or {}).get(backend) or {}).get("idle") or {}
    v = idle.get("agentwrap_total_pct")
    return None if v is None else float(v)


def print_report(res: dict[str, Any]) -> None:
    print(f"{res['cpus']} CPUs, load average {res['load_before']} before the run; "
          f"PostgreSQL {res['pg_version']} on loopback (started in {res['pg_start_s']:.1f} s); "
          f"{res['sessions']} sessions, {res['clients']} clients")
    hdr = f"{'':44} {'SQLite':>12} {'PostgreSQL':>12} {'PG/SQLite':>10}"
    print(hdr)
    print("-" * len(hdr))

    def row(label: str, *keys: str, spec: str = ".2f") -> None:
        vals = []
        for b in BACKENDS:
            x: Any = res.get(b) or {}
            for k in keys:
                x = (x or {}).get(k)
            vals.append(x)
        if vals == [None, None]:
            return  # a step not run (--only-idle)
        print(f"{label:44} {fmt(vals[0], spec):>12} {fmt(vals[1], spec):>12} "
              f"{fmt(ratio(res, *keys)):>10}")

    row("enqueue in process p50 ms", "in_process", "p50_ms")
    row("enqueue in process p99 ms", "in_process", "p99_ms")
    row("enqueue in process per s (1 writer)", "in_process", "per_s", spec=".0f")
    row("claim + finish p50 ms", "in_process", "claim_finish", "p50_ms")
    row("enqueue CLI p50 ms", "cli", "p50_ms", spec=".0f")
    row("enqueue CLI p99 ms", "cli", "p99_ms", spec=".0f")
    row(f"enqueue CLI per s ({res['clients']} callers)", "cli", "per_s", spec=".1f")
    row("enqueue HTTP p50 ms", "http", "p50_ms")
    row("enqueue HTTP p99 ms", "http", "p99_ms")
    row(f"enqueue HTTP per s ({res['clients']} clients)", "http", "per_s", spec=".0f")
    row("enqueue HTTP server CPU ms per request", "http", "server_cpu_ms")
    row("event commit -> SSE (other host) p50 ms", "events", "p50_ms")
    row("event commit -> SSE (other host) p99 ms", "events", "p99_ms")
    row("send -> first byte (other host) p50 ms", "cross_host", "p50_ms")
    row("send -> first byte (other host) p99 ms", "cross_host", "p99_ms")
    row("send -> delivered seen p50 ms", "cross_host", "delivered", "p50_ms", spec=".0f")
    s, p = idle_pct(res, "sqlite"), idle_pct(res, "postgres")
    idle_ratio = p / s if s and p is not None else float("nan")
    print(f"{'idle CPU, ' + str(res['sessions']) + ' sessions, % of a core':44} {fmt(s):>12} "
          f"{fmt(p):>12} {fmt(idle_ratio):>10}")
    idle = res.get("idle") or {}
    wins = idle.get("windows") or []
    if len(wins) > 1:
        for k, w in enumerate(wins):
            ws, wp = ((w.get(b) or {}).get("agentwrap_total_pct") for b in BACKENDS)
            print(f"  window {k + 1} ({fmt((w.get('sqlite') or {}).get('window_s'), '.0f')} s):"
                  f" SQLite {fmt(ws)}, PostgreSQL {fmt(wp)},"
                  f" ratio {fmt(wp / ws if ws and wp is not None else float('nan'))}")
    if "postgres_server_pct" in idle:
        print(f"  (context) the PostgreSQL server over the same window: "
              f"{fmt(idle['postgres_server_pct'])} % of a core")
    for b in BACKENDS:
        st = (idle.get(b) or {}).get("start")
        if st:
            print(f"  ({b}) {res['sessions']} sessions ready in {fmt(st['total_s'])} s")
    ev = [(res.get(b) or {}).get("events") or {} for b in BACKENDS]
    for b, e in zip(BACKENDS, ev, strict=True):
        if e.get("missed") or e.get("error"):
            print(f"  ! {b} events: {e.get('missed')} missed, {e.get('error')}")
    print("SQLite: one machine (sender, agents and stream on it); PostgreSQL: sent from host"
          " alpha, agents and stream on host beta.")
    print("issue 23's goals (PostgreSQL):")
    goals = [("send -> first byte p99", ((res.get("postgres") or {}).get("cross_host") or {})
              .get("p99_ms"), GOAL_CROSS_HOST_P99_MS, "ms"),
             ("event commit -> SSE p99", ((res.get("postgres") or {}).get("events") or {})
              .get("p99_ms"), GOAL_EVENT_P99_MS, "ms"),
             ("idle CPU x SQLite's", idle_ratio, GOAL_IDLE_RATIO, "x")]
    for what, value, goal, unit in goals:
        met = "-" if value is None or value != value else ("met" if value <= goal else "missed")
        print(f"  {what:28} {fmt(value):>9} {unit:<3} (goal <= {goal:g}) {met}")
    for err in res["errors"]:
        print(f"! {err}")
    print(f"({res['elapsed_s']:.0f} s)")


# --- driver -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="awst-", dir="/tmp"))
    res: dict[str, Any] = {
        "benchmark": "store", "cpus": os.cpu_count(), "sessions": args.sessions,
        "clients": args.clients, "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "errors": [], "sqlite": {}, "postgres": {},
    }
    started = time.monotonic()
    server = pg.start()
    res["pg_start_s"] = server.started_in_s
    res["pg_version"] = server.psql("SHOW server_version").strip("[]()',")
    bs: list[Backend] = []
    senders: dict[str, Sender] = {}
    try:
        _, url = server.new_schema()
        bs = [make_backend("sqlite", "", work / "sq", args),
              make_backend("postgres", url, work / "pg", args)]
        if args.idle > 0:
            step(res, "idle", lambda: step_idle(bs, args, server))
        if args.only_idle:
            return res
        for be in bs:
            step(res[be.name], "in_process", lambda be=be: step_in_process(be, args.n, work))  # type: ignore[misc]
        if args.cli_requests:
            for be in bs:
                step(res[be.name], "cli", lambda be=be: bench_http.cli_sends(  # type: ignore[misc]
                    http_env(be.a, be.token_a), requests=args.cli_requests,
                    clients=args.clients, size=args.bytes))
        if args.requests:
            for be in bs:
                step(res[be.name], "http", lambda be=be: step_http(be, args))  # type: ignore[misc]
        for be in bs:
            senders[be.name] = Sender(be)
        if args.events:
            for be in bs:
                step(res[be.name], "events",
                     lambda be=be: step_events(be, senders[be.name], args))  # type: ignore[misc]
        if args.sends and args.idle > 0 and "idle" in res:
            lat: dict[str, list[tuple[float, float]]] = {b.name: [] for b in bs}
            try:
                for i in range(args.sends):
                    for be in bs:
                        lat[be.name].append(send_one(be, senders[be.name], i, args.timeout))
            except (Exception, Interrupted) as exc:
                res["errors"].append(f"cross_host: {type(exc).__name__}: {exc}")
                if isinstance(exc, Interrupted):
                    raise
            for be in bs:
                xs = lat[be.name]
                res[be.name]["cross_host"] = {**stats_ms([x for x, _ in xs]),
                                              "delivered": stats_ms([y for _, y in xs])}
    except (Exception, KeyboardInterrupt, Interrupted) as exc:  # noqa: BLE001 - reported, torn down
        res["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the teardown
        for s in senders.values():
            s.close()
        for be in bs:
            if be.b.seen_pids:  # its agents were started
                try:
                    bench_scale.stop_sessions(be.b, be.b.names)
                except Exception:  # noqa: BLE001 - the teardown kills what is left
                    pass
            for h in {id(be.a): be.a, id(be.b): be.b}.values():
                teardown_agentwrap(h.env, str(work), h.seen_pids)
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        res["elapsed_s"] = time.monotonic() - started
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=10, help="agents on each backend (10)")
    ap.add_argument("--idle", type=float, default=60.0, help="idle window, s (60; 0 skips the"
                    " agents, so also the cross-host sends)")
    ap.add_argument("--windows", type=int, default=1,
                    help="idle windows one after the other, each printed (1)")
    ap.add_argument("--only-idle", action="store_true", help="the idle step only")
    ap.add_argument("--settle", type=float, default=10.0, help="s between ready and the window")
    ap.add_argument("--n", type=int, default=1000, help="in-process enqueues (1000)")
    ap.add_argument("--cli-requests", type=int, default=80, help="`agentwrap send` calls (80)")
    ap.add_argument("--requests", type=int, default=2000, help="measured HTTP POSTs (2000)")
    ap.add_argument("--warmup", type=int, default=100, help="unmeasured HTTP POSTs first (100)")
    ap.add_argument("--clients", type=int, default=8, help="parallel CLI callers / HTTP clients")
    ap.add_argument("--events", type=int, default=200, help="messages for the event latency")
    ap.add_argument("--event-interval", type=float, default=20.0, help="ms between them")
    ap.add_argument("--sends", type=int, default=50, help="cross-host sends per backend (50)")
    ap.add_argument("--bytes", type=int, default=100, help="content size")
    ap.add_argument("--timeout", type=float, default=60.0, help="s to wait for any one thing")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (debugging)")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    if not shutil.which("tmux"):
        print("tmux is not installed", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupted)
    res = run(args)
    print_report(res)
    if args.json:
        write_json(args.json, res)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
