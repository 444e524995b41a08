#!/usr/bin/env python3
"""Benchmark: supervision at scale (issue 9's "Supervision that scales").

N sessions (default 50) of the scripted stand-in agent
(tests/support/standin_agent.py, profile ``standin``), in an isolated
environment (own XDG config/state/runtime dirs under a short ``/tmp/aws-*``
dir), measured in this order:

1. start: ``agentwrap run --detach`` for each session, one after the other,
   until every session is ``ready`` in ``agentwrap ls --json``;
2. idle CPU over ``--idle`` seconds (default 60) of everything agentwrap runs,
   from /proc/PID/stat before and after: the supervisors (``supervisor_pid``
   in ``ls --json``) with the tmux clients they fork and reap (their
   cutime+cstime), every tmux server (``tmux -S SOCK display -p '#{pid}'`` for
   each socket in the runtime dir's ``tmux/``) and the tmux servers' helper
   children (``pipe-pane``'s ``cat``). The agents themselves are excluded,
   printed as context, as is the whole machine's CPU over the same window;
3. RSS (VmRSS, with PSS as context) of each supervisor, tmux server and helper;
4. one message per session, one at a time, all N sessions running: enqueue
   (``Service.send``, the path ``agentwrap send`` takes) -> the agent's first
   read() of its stdin. The stand-in runs under a small wrapper (written to
   the temp dir) that stamps every such read with ``time.monotonic()``, like
   bench_delivery.py's stamp agent; the next message goes out once the
   previous one is DELIVERED;
5. stop: ``agentwrap stop`` (several names in one call if the CLI takes them,
   else one call per session), until every supervisor and tmux server is gone.

Each figure is printed next to issue 9's goal for 50 sessions (scaled
linearly for another N: idle CPU 0.3 % of a core and start 0.3 s / stop
0.1 s per session). ``--mode`` picks how sessions are supervised: ``process``
(a supervisor process per session, as before issue 9), ``host`` (one
supervisor host for all), or ``both`` (default: one after the other in the
same run, then side by side). Everything it starts is killed at the end, also
after Ctrl-C or an error: every supervisor and agent pid, and every tmux
server in its runtime dir.

``--against REF`` runs the same benchmark on commit REF too, in the same run
(scripts/bench_against.py: REF's tree and interpreter built once, cached under
``~/.cache/agentwrap/bench-against``): every run, of either tree, is this script
in a process of its own with ``--agentwrap-root`` on that tree, ``--rounds``
runs per tree and mode taking turns (A B, B A, ...) so the machine's load hits
both alike; it prints each figure for both (the median of the runs), the ratio
this / REF and each round's paired ratio.

    .venv/bin/python scripts/bench_scale.py                      # ~3-4 min for 50
    .venv/bin/python scripts/bench_scale.py -n 5 --idle 10 --json
    .venv/bin/python scripts/bench_scale.py -n 20 --against a27e8eb --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench_against import Tree, interleaved, print_ratios, ratio, this_tree
from benchlib import (
    Interrupted,
    Stamps,
    fmt,
    isolated_env,
    json_safe,
    pct,
    pid_alive,
    raise_interrupted,
    stats_ms,
    teardown_agentwrap,
    tmux_server_pid,
    tmux_sockets,
    wait_until,
)

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
STANDIN_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

# The stand-in, with every read() of its stdin stamped (time.monotonic(), bytes).
STAMP_WRAPPER = r'''
import os, runpy, sys, time

stamps = open(sys.argv[1], "a", buffering=1)
standin = sys.argv[2]
sys.argv = [standin, *sys.argv[3:]]
_read = os.read


def read(fd, n):
    data = _read(fd, n)
    if fd == 0 and data:
        stamps.write("%.6f %d\n" % (time.monotonic(), len(data)))
    return data


os.read = read
runpy.run_path(standin, run_name="__main__")
'''

# issue 9's goals, for 50 sessions
GOAL_SESSIONS = 50
GOAL_IDLE_CPU_PCT_PER_SESSION = 0.3  # 15 % of one core for 50
GOAL_RSS_MB_PER_SESSION = 10.0
GOAL_START_S = 15.0
GOAL_STOP_S = 5.0
GOAL_P99_MS = 20.0


@dataclass
class Bench:
    work: Path
    env: dict[str, str]
    aw_root: Path
    n: int
    cols: int = 100
    rows: int = 30
    timeout: float = 60.0
    names: list[str] = field(default_factory=list)
    seen_pids: set[int] = field(default_factory=set)  # for the teardown

    def cli(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentwrap", *args], env=self.env, cwd=str(self.work / "project"),
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout or self.timeout, check=False,
        )

    def ls(self, *, include_ended: bool = False) -> list[dict[str, Any]]:
        proc = self.cli("ls", "--json", *(["--all"] if include_ended else []))
        if proc.returncode != 0:
            raise RuntimeError(f"agentwrap ls --json -> {proc.returncode}: {proc.stderr.strip()}")
        rows: list[dict[str, Any]] = json.loads(proc.stdout or "[]")
        for r in rows:
            self.seen_pids.update(p for p in (r.get("supervisor_pid"), r.get("agent_pid")) if p)
        return rows

    @property
    def runtime_dir(self) -> Path:
        from agentwrap.paths import Paths

        return Paths.from_env(self.env).runtime_dir

    def stamps_file(self, name: str) -> Path:
        return self.work / "stamps" / f"{name}.txt"

    def agent_argv(self, name: str) -> list[str]:
        return [sys.executable, str(self.work / "stamp_standin.py"), str(self.stamps_file(name)),
                str(STANDIN), "--log", str(self.work / "received.jsonl")]


# --- modes: how sessions are started and stopped ----------------------------------------------


def start_session(b: Bench, name: str) -> None:
    """``agentwrap run --detach``: a tmux server per session; who supervises it
    is the mode's ``[run] supervisor`` setting, written to the config."""
    proc = b.cli("run", "--detach", "--name", name, "--profile", "standin", "--cols", str(b.cols),
                 "--rows", str(b.rows), "--", *b.agent_argv(name))
    if proc.returncode != 0:
        raise RuntimeError(f"agentwrap run {name} -> {proc.returncode}: {proc.stderr.strip()}")


def stop_sessions(b: Bench, names: list[str]) -> str:
    """``agentwrap stop``: several names in one call if the CLI takes them."""
    usage = b.cli("stop", "--help").stdout
    if re.search(r"name \[name \.\.\.\]|names? \.\.\.", usage):
        proc = b.cli("stop", *names, timeout=max(b.timeout, 2.0 * len(names)))
        if proc.returncode != 0:
            raise RuntimeError(f"agentwrap stop -> {proc.returncode}: {proc.stderr.strip()}")
        return f"one `agentwrap stop` call with all {len(names)} names"
    for name in names:
        proc = b.cli("stop", name)
        if proc.returncode != 0:
            raise RuntimeError(f"agentwrap stop {name} -> {proc.returncode}: {proc.stderr.strip()}")
    return f"{len(names)} `agentwrap stop NAME` calls, one after the other (the CLI takes one name)"


@dataclass(frozen=True)
class Mode:
    start: Callable[[Bench, str], None]
    stop: Callable[[Bench, list[str]], str]  # returns how it stopped them, for the report
    about: str
    config: str  # the user config's [run] table for this mode


MODES: dict[str, Mode] = {
    "process": Mode(start_session, stop_sessions,
                    "a supervisor process and a tmux server per session (before issue 9)",
                    '[run]\nsupervisor = "process"\n'),
    "host": Mode(start_session, stop_sessions,
                 "one supervisor host process for all sessions, a tmux server per session",
                 '[run]\nsupervisor = "host"\n'),
}


# --- /proc -------------------------------------------------------------------------------------


def proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, own utime+stime, reaped children's cutime+cstime) in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2 :].split()
    # fields 4 (ppid), 14-17 (utime stime cutime cstime), counted from 1 with pid, comm
    return int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[13]) + int(rest[14])


def proc_kb(pid: int) -> tuple[int, int | None]:
    """(VmRSS, Pss) in kB; Pss None where smaps_rollup is not readable."""
    rss = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                    break
    except OSError:
        pass
    pss: int | None = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                    break
    except OSError:
        pass
    return rss, pss


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st is not None:
                kids.setdefault(st[0], []).append(int(entry))
    return kids


def tree(root: int, kids: dict[int, list[int]]) -> set[int]:
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(kids.get(p, []))
    return out


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs together, from /proc/stat."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals[:8]) - idle, sum(vals[:8])


@dataclass
class Procs:
    """Everything agentwrap runs for the sessions, by role."""

    supervisors: set[int]
    tmux_servers: set[int]
    helpers: set[int]  # tmux servers' children that are not agents: pipe-pane's cat
    agents: set[int]  # agent process trees (excluded from agentwrap's figures)
    missing: list[str]


def discover(b: Bench) -> Procs:
    rows = [r for r in b.ls() if r["name"] in b.names]
    missing = [f"{r['name']}: no supervisor_pid" for r in rows if not r.get("supervisor_pid")]
    supervisors = {int(r["supervisor_pid"]) for r in rows if r.get("supervisor_pid")}
    servers: set[int] = set()
    for sock in tmux_sockets(b.runtime_dir):
        pid = tmux_server_pid(sock)
        if pid is None:
            missing.append(f"{sock.name}: no tmux server answers")
        else:
            servers.add(pid)
    b.seen_pids.update(servers)
    kids = children_map()
    agents: set[int] = set()
    for r in rows:
        if r.get("agent_pid"):
            agents |= tree(int(r["agent_pid"]), kids)
    helpers: set[int] = set()
    for s in servers:
        for child in kids.get(s, []):
            if child not in agents:
                helpers |= tree(child, kids)
    # a supervisor's live children are tmux clients mid-call: counted when reaped
    return Procs(supervisors, servers, helpers, agents, missing)


def sample(pids: set[int]) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for pid in pids:
        st = proc_stat(pid)
        if st is not None:
            out[pid] = (st[1], st[2])
    return out


# --- the steps ----------------------------------------------------------------------------------


def step_start(b: Bench, mode: Mode, parallel: int = 1) -> dict[str, Any]:
    """``parallel`` calls of ``agentwrap run --detach`` at a time (what a
    script starting many agents does with ``&``); 1 is strictly sequential."""
    calls: list[float] = []

    def one(name: str) -> None:
        t = time.monotonic()
        mode.start(b, name)
        calls.append(time.monotonic() - t)

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        for fut in [pool.submit(one, name) for name in b.names]:
            fut.result()
    t_cli = time.monotonic() - t0
    last: list[dict[str, Any]] = []

    def all_ready() -> bool:
        last[:] = [r for r in b.ls() if r["name"] in b.names]
        return len(last) == len(b.names) and all(r["state"] == "ready" for r in last)

    try:
        wait_until(all_ready, max(b.timeout, 3.0 * b.n), "every session to be ready", poll=0.2)
    except TimeoutError as exc:
        states = sorted({str(r["state"]) for r in last})
        raise TimeoutError(f"{exc} (states seen: {states})") from None
    total = time.monotonic() - t0
    return {
        "total_s": total, "per_session_s": total / b.n, "cli_calls_s": t_cli,
        "cli_call_mean_s": sum(calls) / len(calls), "cli_call_max_s": max(calls),
        "parallel": parallel,
    }


def step_idle(b: Bench, idle_s: float, settle_s: float) -> tuple[dict[str, Any], Procs]:
    time.sleep(settle_s)
    procs = discover(b)
    groups = {
        "supervisors": procs.supervisors, "tmux_servers": procs.tmux_servers,
        "helpers": procs.helpers, "agents": procs.agents,
    }
    every = set().union(*groups.values())
    m0 = machine_ticks()
    t0 = time.monotonic()
    before = sample(every)
    time.sleep(idle_s)
    after = sample(every)
    wall = time.monotonic() - t0
    m1 = machine_ticks()

    def pct_of_core(ticks: int) -> float:
        return 100.0 * ticks / CLK_TCK / wall

    cpu: dict[str, Any] = {}
    vanished: list[int] = []
    top: list[tuple[int, str, int]] = []
    for label, pids in groups.items():
        own = reaped = 0
        for pid in pids:
            if pid not in before or pid not in after:
                vanished.append(pid)
                continue
            own += after[pid][0] - before[pid][0]
            reaped += after[pid][1] - before[pid][1]
            top.append((after[pid][0] - before[pid][0] + after[pid][1] - before[pid][1], label, pid))
        cpu[label] = {"pids": len(pids), "own_pct": pct_of_core(own), "reaped_children_pct":
                      pct_of_core(reaped)}
    # agentwrap's total: supervisors with the tmux clients they fork, tmux servers, helpers
    total = (cpu["supervisors"]["own_pct"] + cpu["supervisors"]["reaped_children_pct"]
             + cpu["tmux_servers"]["own_pct"] + cpu["helpers"]["own_pct"])
    busy, all_ = m1[0] - m0[0], m1[1] - m0[1]
    ncpu = os.cpu_count() or 1
    top.sort(reverse=True)
    res = {
        "window_s": wall, "settle_s": settle_s, **cpu,
        "agentwrap_total_pct": total, "agentwrap_per_session_pct": total / b.n,
        "agents_pct": cpu["agents"]["own_pct"],
        "machine_busy_pct_of_one_core": 100.0 * ncpu * busy / all_ if all_ else float("nan"),
        "cpus": ncpu, "vanished_pids": vanished, "missing": procs.missing,
        "busiest": [{"role": r, "pid": p, "pct": pct_of_core(t)} for t, r, p in top[:3]],
    }
    return res, procs


def step_memory(b: Bench, procs: Procs) -> dict[str, Any]:
    res: dict[str, Any] = {}
    total_rss = 0
    total_pss = 0
    for label, pids in (("supervisors", procs.supervisors), ("tmux_servers", procs.tmux_servers),
                        ("helpers", procs.helpers), ("agents", procs.agents)):
        kb = [proc_kb(p) for p in pids if pid_alive(p)]
        rss = [r for r, _ in kb]
        pss = [p for _, p in kb if p is not None]
        res[label] = {
            "n": len(kb), "rss_total_mb": sum(rss) / 1024,
            "rss_mean_mb": sum(rss) / 1024 / len(rss) if rss else float("nan"),
            "rss_max_mb": max(rss) / 1024 if rss else float("nan"),
            "pss_total_mb": sum(pss) / 1024 if len(pss) == len(kb) else float("nan"),
        }
        if label != "agents":
            total_rss += sum(rss)
            total_pss += sum(pss)
    res["agentwrap_rss_total_mb"] = total_rss / 1024
    res["agentwrap_rss_per_session_mb"] = total_rss / 1024 / b.n
    res["agentwrap_pss_per_session_mb"] = total_pss / 1024 / b.n
    return res


def payload(i: int, size: int) -> str:
    head = f"scale message {i:04d} "
    return head + ("lorem ipsum " * (size // 12 + 1))[: max(0, size - len(head))]


def step_messages(b: Bench, size: int) -> dict[str, Any]:
    from agentwrap.config import load_config
    from agentwrap.message import NewMessage, Source, Status
    from agentwrap.paths import Paths
    from agentwrap.queue.sqlite import SQLiteMessageStore
    from agentwrap.service import Service
    from agentwrap.sessions.registry import Registry

    paths = Paths.from_env(b.env)
    store = SQLiteMessageStore(paths.db_path, load_config(paths).limits)
    reg = Registry(paths.db_path)
    service = Service(paths, store, reg)
    lat: list[float] = []
    done: list[float] = []
    errors: list[str] = []

    def ready(name: str) -> bool:
        rec = reg.find(name)
        return rec is not None and rec.state == "ready"

    def first_read(stamps: Stamps, t0: float) -> float | None:
        return stamps.first_after(t0)

    def finished(mid: str) -> Any:
        m = store.get(mid)
        return m if m.status.terminal else None

    try:
        for i, name in enumerate(b.names):
            stamps = Stamps(b.stamps_file(name))
            try:
                wait_until(partial(ready, name), b.timeout, f"{name} to be ready")
                new = NewMessage(session=name, content=payload(i, size), source=Source.AGENT,
                                 source_id="bench-scale", require_ack=False)
                t0 = time.monotonic()
                msg = service.send(new).message
                first = wait_until(partial(first_read, stamps, t0), b.timeout,
                                   f"the first byte at {name}", poll=0.001)
                final = wait_until(partial(finished, msg.id), b.timeout, f"{name}'s message to finish")
            except TimeoutError as exc:
                errors.append(str(exc))
                continue
            lat.append(first - t0)
            done.append(time.monotonic() - t0)
            if final.status is not Status.DELIVERED:
                errors.append(f"{name}: {final.status} {final.detail[:200]}")
    finally:
        store.close()
        reg.close()
    return {"bytes": size, **stats_ms(lat), "enqueue_to_delivered_seen": stats_ms(done),
            "samples_ms": [x * 1000 for x in lat], "errors": errors}


def step_stop(b: Bench, mode: Mode, procs: Procs) -> dict[str, Any]:
    # Stopped = every agent's tmux server gone and every session ended. A
    # supervisor *process* per session exits with its session; the supervisor
    # host outlives the last one by its idle grace (it is not watched here).
    watched = procs.tmux_servers | (procs.supervisors if mode.config.count('"process"') else set())
    t0 = time.monotonic()
    how = mode.stop(b, list(b.names))
    t_cli = time.monotonic() - t0
    left = set(watched)

    def all_gone() -> bool:
        left.intersection_update(p for p in watched if pid_alive(p))
        return not left

    try:
        wait_until(all_gone, max(b.timeout, 20.0), "every supervisor and tmux server to exit",
                   poll=0.02)
    except TimeoutError:
        pass
    total = time.monotonic() - t0
    rows = [r for r in b.ls(include_ended=True) if r["name"] in b.names]
    return {
        "how": how, "cli_s": t_cli, "total_s": total, "per_session_s": total / b.n,
        "left_running": len(left), "ended": sum(1 for r in rows if r.get("ended") is not None),
    }


# --- goals and report ---------------------------------------------------------------------------


def goals(res: dict[str, Any]) -> list[dict[str, Any]]:
    n = res["sessions"]
    scale = n / GOAL_SESSIONS
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, goal: float, unit: str) -> None:
        ok = None if value is None or value != value else value <= goal
        out.append({"what": what, "value": value, "goal": goal, "unit": unit, "pass": ok})

    idle = res.get("idle") or {}
    mem = res.get("memory") or {}
    start = res.get("start") or {}
    stop = res.get("stop") or {}
    msgs = res.get("messages") or {}
    add(f"idle CPU, all {n} sessions", idle.get("agentwrap_total_pct"),
        GOAL_IDLE_CPU_PCT_PER_SESSION * n, "% of a core")
    add("idle CPU per session", idle.get("agentwrap_per_session_pct"), GOAL_IDLE_CPU_PCT_PER_SESSION,
        "% of a core")
    add("RSS per session", mem.get("agentwrap_rss_per_session_mb"), GOAL_RSS_MB_PER_SESSION, "MB")
    add(f"start {n} sessions", start.get("total_s"), GOAL_START_S * scale, "s")
    add(f"stop {n} sessions", stop.get("total_s"), GOAL_STOP_S * scale, "s")
    add("enqueue -> first byte p99", msgs.get("p99_ms"), GOAL_P99_MS, "ms")
    return out


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def print_report(res: dict[str, Any]) -> None:
    n = res["sessions"]
    print(f"mode {res['mode']} ({res['mode_about']}); {n} stand-in sessions; "
          f"{res['cpus']} CPUs; tmux {res['tmux_version']}")
    st = res.get("start")
    if st:
        print(f"\nstart: {fmt(st['total_s'])} s until all {n} ready "
              f"({fmt(st['per_session_s'], '.3f')} s per session); the {n} `run --detach` calls, "
              f"{st.get('parallel', 1)} at a time, "
              f"took {fmt(st['cli_calls_s'])} s (mean {fmt(st['cli_call_mean_s'], '.3f')} s, "
              f"max {fmt(st['cli_call_max_s'], '.3f')} s)")
    idle = res.get("idle")
    if idle:
        print(f"\nidle CPU over {fmt(idle['window_s'], '.1f')} s (after {fmt(idle['settle_s'], '.0f')}"
              " s settling), % of one core:")
        hdr = f"{'':<30} {'pids':>5} {'own':>8} {'reaped kids':>12} {'per session':>12}"
        print(hdr)
        print("-" * len(hdr))
        rows = [("supervisors", "supervisors (+ tmux clients)"), ("tmux_servers", "tmux servers"),
                ("helpers", "pipe-pane helpers (cat)")]
        for key, label in rows:
            c = idle[key]
            own = c["own_pct"] + (c["reaped_children_pct"] if key == "supervisors" else 0.0)
            kids = fmt(c["reaped_children_pct"]) if key == "supervisors" else ""
            print(f"{label:<30} {c['pids']:>5} {fmt(c['own_pct']):>8} {kids:>12} {fmt(own / n, '.3f'):>12}")
        print(f"{'agentwrap total':<30} {'':>5} {fmt(idle['agentwrap_total_pct']):>8} {'':>12} "
              f"{fmt(idle['agentwrap_per_session_pct'], '.3f'):>12}")
        a = idle["agents"]
        print(f"{'(excluded) the agents':<30} {a['pids']:>5} {fmt(a['own_pct']):>8} {'':>12} "
              f"{fmt(a['own_pct'] / n, '.3f'):>12}")
        print(f"(context) whole machine busy: {fmt(idle['machine_busy_pct_of_one_core'], '.0f')} % of one"
              f" core of {idle['cpus'] * 100} %")
        busiest = ", ".join(f"{x['role']} {x['pid']} {fmt(x['pct'])} %" for x in idle["busiest"])
        print(f"busiest processes (own + reaped children): {busiest}")
        for note in idle["missing"]:
            print(f"    ! {note}")
        if idle["vanished_pids"]:
            print(f"    ! {len(idle['vanished_pids'])} process(es) exited during the window")
    mem = res.get("memory")
    if mem:
        print("\nmemory (MB):")
        hdr = f"{'':<30} {'n':>5} {'RSS total':>10} {'mean':>8} {'max':>8} {'PSS total':>10}"
        print(hdr)
        print("-" * len(hdr))
        for key, label in (("supervisors", "supervisors"), ("tmux_servers", "tmux servers"),
                           ("helpers", "pipe-pane helpers (cat)"), ("agents", "(excluded) the agents")):
            m = mem[key]
            print(f"{label:<30} {m['n']:>5} {fmt(m['rss_total_mb'], '.1f'):>10} {fmt(m['rss_mean_mb'], '.1f'):>8}"
                  f" {fmt(m['rss_max_mb'], '.1f'):>8} {fmt(m['pss_total_mb'], '.1f'):>10}")
        print(f"agentwrap RSS {fmt(mem['agentwrap_rss_total_mb'], '.0f')} MB in all, "
              f"{fmt(mem['agentwrap_rss_per_session_mb'], '.1f')} MB per session "
              f"(PSS, shared pages split: {fmt(mem['agentwrap_pss_per_session_mb'], '.1f')} MB per session)")
    msgs = res.get("messages")
    if msgs:
        d = msgs["enqueue_to_delivered_seen"]
        print(f"\none {msgs['bytes']} B message per session, one at a time, all {n} running: "
              f"enqueue -> first byte at the agent p50 {fmt(msgs['p50_ms'])} ms, p99 "
              f"{fmt(msgs['p99_ms'])} ms, max {fmt(msgs['max_ms'])} ms (n={msgs['n']}); "
              f"-> DELIVERED seen p50 {fmt(d['p50_ms'], '.0f')} ms")
        for err in msgs["errors"]:
            print(f"    ! {err}")
    stop = res.get("stop")
    if stop:
        print(f"\nstop: {fmt(stop['total_s'])} s until every supervisor and tmux server had exited "
              f"({fmt(stop['per_session_s'], '.3f')} s per session; the CLI returned after "
              f"{fmt(stop['cli_s'])} s); {stop['how']}; {stop['ended']}/{n} ended, "
              f"{stop['left_running']} process(es) left running")
    scaled = "" if n == GOAL_SESSIONS else f" (scaled from issue 9's 50 sessions to {n})"
    print(f"\ngoals{scaled}:")
    hdr = f"{'':<32} {'measured':>10} {'goal':>10} {'':<12} {'':>6}"
    print(hdr)
    print("-" * len(hdr))
    for g in res["goals"]:
        print(f"{g['what']:<32} {fmt(g['value']):>10} {'<= ' + fmt(g['goal'], 'g'):>10} "
              f"{g['unit']:<12} {verdict(g['pass']):>6}")
    for err in res.get("errors", []):
        print(f"! {err}")
    if res.get("teardown"):
        print(f"teardown had to kill: {', '.join(res['teardown'])}")
    print(f"({res['elapsed_s']:.0f} s)")


# --- driver -------------------------------------------------------------------------------------


def run_mode(args: argparse.Namespace, mode_name: str) -> tuple[dict[str, Any], int]:
    """One whole benchmark in a fresh environment; (results, exit status)."""
    from agentwrap.paths import Paths

    mode = MODES[mode_name]
    aw_root = args.agentwrap_root.resolve()
    work = Path(tempfile.mkdtemp(prefix="aws-", dir="/tmp"))
    env = isolated_env(work, aw_root)
    b = Bench(work=work, env=env, aw_root=aw_root, n=args.sessions, timeout=args.timeout,
              names=[f"s{i:03d}" for i in range(args.sessions)])
    paths = Paths.from_env(env).ensure()
    paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN_PROFILE, paths.user_patterns_dir / "standin.toml")
    paths.config_file.write_text(mode.config, encoding="utf-8")
    (work / "project").mkdir()
    (work / "stamps").mkdir()
    (work / "stamp_standin.py").write_text(STAMP_WRAPPER)
    tmux_v = subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=False).stdout.strip()
    res: dict[str, Any] = {
        "benchmark": "scale", "mode": mode_name, "mode_about": mode.about, "sessions": args.sessions,
        "idle_s": args.idle, "cpus": os.cpu_count(), "tmux_version": tmux_v, "errors": [],
    }
    started = time.monotonic()
    status = 0
    procs: Procs | None = None
    try:
        res["start"] = step_start(b, mode, args.parallel)
        res["idle"], procs = step_idle(b, args.idle, args.settle)
        res["memory"] = step_memory(b, procs)
        res["messages"] = step_messages(b, args.bytes)
        res["stop"] = step_stop(b, mode, procs)
    except (Exception, KeyboardInterrupt, Interrupted) as exc:  # noqa: BLE001 - reported, then torn down
        res["errors"].append(f"{type(exc).__name__}: {exc}")
        status = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the teardown
        extra = set(b.seen_pids) | (procs.supervisors | procs.tmux_servers | procs.helpers
                                    | procs.agents if procs else set())
        res["teardown"] = teardown_agentwrap(env, str(work), extra)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    res["elapsed_s"] = time.monotonic() - started
    res["goals"] = goals(res)
    return res, status


def print_side_by_side(results: list[dict[str, Any]]) -> None:
    """The goals of every mode of this run, one column each."""
    names = [r["mode"] for r in results]
    print("\nside by side (same run, same machine):")
    print(f"{'':34}" + "".join(f"{n:>16}" for n in names) + "        goal")
    for i, g in enumerate(results[0]["goals"]):
        cells = ""
        for r in results:
            gi = r["goals"][i]
            cells += f"{fmt(gi['value']):>11} {verdict(gi['pass']):>4}"
        print(f"{g['what']:34}{cells}   <= {fmt(g['goal'])} {g['unit']}")


#: what --against compares: (label, how to read it from one run's results)
AGAINST_FIGURES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("start all, s", lambda r: (r.get("start") or {}).get("total_s")),
    ("stop all, s", lambda r: (r.get("stop") or {}).get("total_s")),
    ("idle CPU, % of a core", lambda r: (r.get("idle") or {}).get("agentwrap_total_pct")),
    ("RSS per session, MB", lambda r: (r.get("memory") or {}).get("agentwrap_rss_per_session_mb")),
    ("PSS per session, MB", lambda r: (r.get("memory") or {}).get("agentwrap_pss_per_session_mb")),
    ("enqueue -> first byte p50, ms", lambda r: (r.get("messages") or {}).get("p50_ms")),
    ("enqueue -> first byte p99, ms", lambda r: (r.get("messages") or {}).get("p99_ms")),
]


def child_argv(args: argparse.Namespace, tree: Tree, mode: str, _out: Path) -> list[str]:
    """This script, one mode, on ``tree`` (with its interpreter), its results
    as JSON on stdout."""
    return [tree.python, str(Path(__file__).resolve()), "-n", str(args.sessions), "--mode", mode,
            "--idle", str(args.idle), "--parallel", str(args.parallel), "--settle",
            str(args.settle), "--bytes", str(args.bytes), "--timeout", str(args.timeout), "--json",
            "--agentwrap-root", str(tree.root)]


def against(args: argparse.Namespace) -> int:
    """``--rounds`` runs per tree and mode, this tree and REF's taking turns,
    each run in a process of its own; the figures side by side with ratios
    (on stderr with ``--json``, which has stdout)."""
    if args.json:
        with contextlib.redirect_stdout(sys.stderr):
            summary, status = against_runs(args)
        json.dump(json_safe(summary), sys.stdout, indent=1, default=str)
        print()
        return status
    return against_runs(args)[1]


def against_runs(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    modes = ["process", "host"] if args.mode == "both" else [args.mode]

    def progress(r: int, mode: str, tree: Tree, res: dict[str, Any]) -> None:
        msgs = res.get("messages") or {}
        print(f"round {r + 1} {mode:7} {tree.label:22} load {res['load']:4.1f}:"
              f" start {fmt((res.get('start') or {}).get('total_s'))} s,"
              f" idle {fmt((res.get('idle') or {}).get('agentwrap_total_pct'))} %,"
              f" first byte p50/p99 {fmt(msgs.get('p50_ms'))}/{fmt(msgs.get('p99_ms'))}"
              f" ms, stop {fmt((res.get('stop') or {}).get('total_s'))} s", flush=True)
        for err in res.get("errors", []) + msgs.get("errors", []):
            print(f"    ! {err}")

    def read(proc: subprocess.CompletedProcess[str], _out: Path) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(proc.stdout)
        return got

    got = interleaved(args.against, args.rounds, partial(child_argv, args), read, groups=modes,
                      this=this_tree(args.agentwrap_root), progress=progress)
    this, ref = got.trees["this"], got.trees["ref"]
    runs = got.results
    summary: dict[str, Any] = {"against": args.against, "this": this.label, "ref": ref.label,
                               "sessions": args.sessions, "rounds": args.rounds,
                               "loads": got.loads}
    for mode in modes:
        rows = [(label, [get(x) for x in runs["this"][mode]], [get(x) for x in runs["ref"][mode]])
                for label, get in AGAINST_FIGURES]
        title = (f"mode {mode}, {args.sessions} sessions, {args.rounds} runs per tree (turn about),"
                 f" {got.load_range()}, {os.cpu_count()} cpus")
        table = print_ratios(title, this.label, ref.label, rows, ".2f")
        pooled = {side: [ms for x in runs[side][mode]
                         for ms in (x.get("messages") or {}).get("samples_ms", [])]
                  for side in runs}
        p = {side: (pct(xs, 50), pct(xs, 99)) for side, xs in pooled.items()}
        print(f"{'first byte, every run pooled p50 / p99':40} {fmt(p['this'][0])} / {fmt(p['this'][1]):>6}"
              f" {fmt(p['ref'][0]):>8} / {fmt(p['ref'][1]):>6}"
              f"   ratio {fmt(ratio(p['this'][0], p['ref'][0]))} / {fmt(ratio(p['this'][1], p['ref'][1]))}"
              f" (n={len(pooled['this'])}/{len(pooled['ref'])})")
        summary[mode] = {"figures": table, "first_byte_pooled": p, "runs": {s: runs[s][mode]
                                                                            for s in runs}}
    return summary, 1 if got.failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--sessions", type=int, default=50)
    ap.add_argument("--mode", choices=[*sorted(MODES), "both"], default="both",
                    help="how sessions are supervised: process, host, or both in turn (default)")
    ap.add_argument("--idle", type=float, default=60.0, help="idle window, seconds")
    ap.add_argument("--parallel", type=int, default=4,
                    help="`run --detach` calls at a time while starting (1: one after the other)")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds between the last session ready and the idle window")
    ap.add_argument("--bytes", type=int, default=100, help="size of each message's content")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for any one step")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--agentwrap-root", type=Path, default=ROOT,
                    help="source tree of the agentwrap under test (e.g. a patched copy)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (debugging)")
    ap.add_argument("--against", metavar="REF",
                    help="also run commit REF in the same run, turn about, and print ratios")
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --against: runs per tree and mode (default 3)")
    args = ap.parse_args()
    if not shutil.which("tmux"):
        print("tmux is not installed", file=sys.stderr)
        return 2
    if args.against:
        return against(args)
    aw_root = args.agentwrap_root.resolve()
    sys.path.insert(0, str(aw_root))
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupted)
    modes = ["process", "host"] if args.mode == "both" else [args.mode]
    results: list[dict[str, Any]] = []
    status = 0
    for name in modes:
        res, st = run_mode(args, name)
        results.append(res)
        status = status or st
        if not args.json:
            if aw_root != ROOT:
                print(f"agentwrap under test: {aw_root}")
            print_report(res)
            print()
    if args.json:
        json.dump(json_safe(results if len(results) > 1 else results[0]), sys.stdout, indent=1,
                  default=str)
        print()
    elif len(results) > 1:
        print_side_by_side(results)
    return status


if __name__ == "__main__":
    sys.exit(main())
