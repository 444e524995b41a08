#!/usr/bin/env python3
"""Soak: one PostgreSQL queue, two hosts, supervisors killed and the server restarted (issue 23).

``--messages`` (10,000) tagged messages go from ``--producers`` (4)
processes, spread over the simulated hosts, into ``--sessions`` (10)
stand-in agents (tests/support/standin_agent.py, each logging what it
receives to a file of its own) supervised on those hosts, over
``--send-s`` seconds, while

* every ``--kill-every`` s (20) one host's supervisor process (the
  supervisor host, all its sessions at once) is ``kill -9``ed, hosts in
  turn, and ``agentwrap adopt`` restarts it for each of that host's sessions
  (what a person, or a service manager, does); and
* the PostgreSQL server is restarted ``--pg-restarts`` (2) times
  (``pg_ctl restart -m fast``: every connection of every host is cut).

Producers go through ``Service.send`` (the path ``agentwrap send`` takes) on
their host, each message with its tag as the idempotency key: a send whose
answer was lost to the restart is sent again and stored once. After the
sends, every session still without a live supervisor is adopted, and the run
waits until every message is in a terminal state. Then it checks, and
prints as problems:

* every tag a producer had accepted is exactly one message, in exactly one
  terminal state;
* every tag of a delivered (or acknowledged) message reached its own
  session's agent exactly once; no tag reached any agent twice, nor the
  wrong agent.

Simulated hosts: separate XDG state/runtime dirs and ``[host] name`` on one
machine, one throwaway PostgreSQL (tests/support/pg.py). The exit status is
0 when nothing was lost or doubled. tests/test_soak_store.py runs a small
one (300 messages, 3 sessions, one kill, one restart).

    .venv/bin/python scripts/soak_store.py                  # ~10 min
    .venv/bin/python scripts/soak_store.py --messages 300 --sessions 3 --send-s 30 --pg-restarts 1
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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from benchlib import isolated_env, kill_pid, pid_alive, teardown_agentwrap  # noqa: E402
from support import pg  # noqa: E402

STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
STANDIN_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"
HOSTS = ("alpha", "beta")
DELIVERED = ("delivered", "acknowledged")
TAG = re.compile(r"\bsoak-(m\d{5,})\b")

# A producer: its host's service, its share of the tags, paced; a send that
# fails (the store is away) is sent again with the same idempotency key.
PRODUCER = r'''
import json, sys, time
from agentwrap.errors import AgentwrapError, StoreError
from agentwrap.message import NewMessage, Source
from agentwrap.paths import Paths
from agentwrap.service import Service

spec = json.loads(sys.argv[1])
out = open(spec["out"], "a", buffering=1)
svc = None
retries = {}
t0 = time.monotonic()
for k, (tag, session) in enumerate(spec["items"]):
    pause = t0 + k * spec["interval"] - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    while True:
        try:
            if svc is None:
                svc = Service.open(Paths.from_env())
            sent = svc.send(NewMessage(
                session=session, content="soak-%s from %s" % (tag, spec["name"]),
                source=Source.WEBHOOK, source_id=spec["name"], idempotency_key=tag,
                require_ack=spec["ack"]))
            out.write("%s %s\n" % (tag, sent.message.id))
            break
        except Exception as exc:  # the store restarting: send it again (idempotent)
            kind = type(exc).__name__ if isinstance(exc, AgentwrapError) else "bug " + repr(exc)[:200]
            retries[kind] = retries.get(kind, 0) + 1
            if not isinstance(exc, StoreError) and svc is not None:
                try:
                    svc.close()
                except Exception:
                    pass
                svc = None
            time.sleep(0.2)
out.write("done " + json.dumps(retries) + "\n")
'''


@dataclass
class SoakConfig:
    messages: int = 10_000
    sessions: int = 10
    producers: int = 4
    send_s: float = 300.0  # the sends are spread over this long
    kill_every_s: float = 20.0
    pg_restarts: int = 2
    drain_timeout_s: float = 600.0
    busy_s: float = 0.05  # the stand-in's busy time per message
    ack: bool = False
    keep: bool = False


@dataclass
class SoakResult:
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    accepted: int = 0
    kills: int = 0
    adopts: int = 0
    restarts: int = 0
    found_dead: int = 0  # supervisors found gone that were not killed here
    producer_retries: dict[str, int] = field(default_factory=dict)
    typed_tags: int = 0
    not_delivered_typed: int = 0
    send_s: float = 0.0
    drain_s: float = 0.0
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Host:
    name: str
    work: Path
    env: dict[str, str]
    sessions: list[str]

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentwrap", *args], env=self.env,
                              cwd=str(self.work / "project"), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)


#: How long one ``run --detach`` may take: the supervisor host it starts
#: waits for a host still starting up to 120 s (sessions/lifecycle.py
#: hand_to_host), and at a load of 30 on 2 cores a start took over 60 s.
START_S = 180.0


def make_host(work: Path, name: str, url: str, big: int) -> Host:
    from agentwrap.paths import Paths

    work.mkdir(parents=True)
    env = isolated_env(work, ROOT)
    paths = Paths.from_env(env).ensure()
    paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN_PROFILE, paths.user_patterns_dir / "standin.toml")
    paths.config_file.write_text(
        f'[run]\nsupervisor = "host"\n[host]\nname = "{name}"\nheartbeat_s = 1.0\n'
        f'[store]\nurl = "{url}"\n[limits]\nrate_per_minute = {big}\n'
        f"max_pending_per_session = {big}\nmax_pending_total = {big}\n", encoding="utf-8")
    (work / "project").mkdir()
    return Host(name, work, env, [])


class Soak:
    def __init__(self, cfg: SoakConfig, work: Path, server: pg.PgServer, url: str,
                 say: Callable[[str], None]) -> None:
        self.cfg = cfg
        self.work = work
        self.server = server
        self.url = url
        self.say = say
        self.res = SoakResult()
        big = 10 * cfg.messages + 10_000
        self.hosts = [make_host(work / h[0], h, url, big) for h in HOSTS]
        self.names = [f"s{i:02d}" for i in range(cfg.sessions)]
        self.key_of: dict[str, str] = {}  # agent -> its session's key in the store, HOST/NAME
        for i, name in enumerate(self.names):
            host = self.hosts[i % len(self.hosts)]
            host.sessions.append(name)
            self.key_of[name] = f"{host.name}/{name}"
        (work / "agents").mkdir()
        self.seen_pids: set[int] = set()

    # --- the registry, as the hosts share it -------------------------------------------------

    def records(self) -> dict[str, Any]:
        from agentwrap.sessions.registry import Registry

        reg = Registry(self.work / "unused.db", url=self.url, host="soak")
        try:
            recs = {r.name: r for r in reg.list(include_ended=True)}
        finally:
            reg.close()
        for r in recs.values():
            self.seen_pids.update(p for p in (r.supervisor_pid, r.agent_pid) if p)
        return recs

    def wait(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)

    # --- steps -------------------------------------------------------------------------------

    def start_agents(self) -> None:
        for host in self.hosts:
            for name in host.sessions:
                proc = host.cli("run", "--detach", "--name", name, "--profile", "standin",
                                "--cols", "100", "--rows", "30", "--", sys.executable,
                                str(STANDIN), "--log", str(self.work / "agents" / f"{name}.jsonl"),
                                "--busy", str(self.cfg.busy_s), "--startup", "0.1",
                                timeout=START_S)
                if proc.returncode != 0:
                    raise RuntimeError(f"run {name} on {host.name}: {proc.stderr.strip()}")

        def ready() -> bool:
            recs = self.records()
            return all(n in recs and str(recs[n].state) == "ready" for n in self.names)

        self.wait(ready, 60 + 5 * len(self.names), "every agent ready")

    def start_producers(self) -> list[subprocess.Popen[bytes]]:
        cfg = self.cfg
        procs = []
        per = max(1, -(-cfg.messages // cfg.producers))
        for p in range(cfg.producers):
            host = self.hosts[p % len(self.hosts)]
            items = [(f"m{k:05d}", self.names[k % len(self.names)])
                     for k in range(p, cfg.messages, cfg.producers)]
            spec = {"name": f"producer-{p}-on-{host.name}", "items": items, "ack": cfg.ack,
                    "interval": cfg.send_s / per, "out": str(self.work / f"producer-{p}.txt")}
            with open(self.work / f"producer-{p}.err", "wb") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", PRODUCER, json.dumps(spec)], env=host.env,
                    cwd=str(host.work / "project"), stdin=subprocess.DEVNULL, stderr=err,
                    start_new_session=True))
        return procs

    def supervisor_of(self, host: Host) -> int | None:
        recs = self.records()
        pids = {r.supervisor_pid for n, r in recs.items() if n in host.sessions and r.supervisor_pid}
        return next(iter(pids)) if pids else None

    def adopt_all(self, host: Host) -> None:
        """``agentwrap adopt`` until each of the host's sessions has a live
        supervisor: the first adopt starts a supervisor host, which takes every
        orphaned session of its host; the store may be restarting (tried again)."""
        deadline = time.monotonic() + 120
        while True:
            recs = self.records()
            orphans = [n for n in host.sessions if not recs[n].supervisor_alive]
            if not orphans:
                return
            proc = host.cli("adopt", orphans[0])
            self.res.adopts += 1
            if time.monotonic() > deadline:
                self.res.problems.append(f"adopt {orphans} on {host.name}: {proc.stderr.strip()}")
                return
            if proc.returncode != 0:
                time.sleep(1.0)
                continue
            end = time.monotonic() + 10  # the new host adopts the others by itself
            while time.monotonic() < end and not all(
                    r.supervisor_alive for n, r in self.records().items() if n in orphans):
                time.sleep(0.5)

    def kill_one(self, k: int) -> None:
        host = self.hosts[k % len(self.hosts)]
        pid = self.supervisor_of(host)
        if pid is None or not kill_pid(pid, str(self.work)):
            self.res.notes.append(f"kill {k}: no live supervisor on {host.name}")
        else:
            self.res.kills += 1
            self.wait(lambda: not pid_alive(pid), 10, f"supervisor {pid} gone")
        self.say(f"  kill -9 {host.name}'s supervisor {pid}; adopting {', '.join(host.sessions)}")
        self.adopt_all(host)

    def restart_pg(self) -> None:
        self.say("  restarting PostgreSQL")
        self.server.restart()
        self.res.restarts += 1

    def heal(self) -> None:
        """Every session a live supervisor (one that died by itself is counted)."""
        recs = self.records()
        for host in self.hosts:
            dead = [n for n in host.sessions if n in recs and not recs[n].supervisor_alive
                    and recs[n].ended is None]
            if dead:
                self.res.found_dead += len(dead)
                self.res.notes.append(f"after the sends, {host.name} had no live supervisor for"
                                      f" {', '.join(dead)}: adopted")
                self.adopt_all(host)

    def drain(self) -> list[dict[str, Any]]:
        import psycopg

        deadline = time.monotonic() + self.cfg.drain_timeout_s
        last_heal = time.monotonic()
        while True:
            with psycopg.connect(self.url) as conn:
                left = conn.execute("SELECT count(*) FROM messages WHERE status IN"
                                    " ('pending', 'delivering')").fetchall()[0][0]
            if left == 0:
                break
            if time.monotonic() > deadline:
                self.res.problems.append(f"{left} message(s) not terminal after the drain timeout")
                break
            if time.monotonic() - last_heal > 30:
                self.heal()
                last_heal = time.monotonic()
            time.sleep(1.0)
        with psycopg.connect(self.url) as conn:
            cur = conn.execute("SELECT id, session, status, idempotency_key, content FROM messages")
            cols = [c.name for c in cur.description or ()]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    # --- the verdict ---------------------------------------------------------------------------

    def check(self, rows: list[dict[str, Any]]) -> None:
        res = self.res
        accepted: dict[str, str] = {}
        for p in range(self.cfg.producers):
            for line in (self.work / f"producer-{p}.txt").read_text().splitlines():
                if line.startswith("done "):
                    for kind, n in json.loads(line[5:]).items():
                        res.producer_retries[kind] = res.producer_retries.get(kind, 0) + n
                    continue
                tag, mid = line.split()
                accepted[tag] = mid
        res.accepted = len(accepted)
        if len(accepted) != self.cfg.messages:
            res.problems.append(f"{self.cfg.messages - len(accepted)} tag(s) never accepted")
        by_tag: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by_tag.setdefault(str(r["idempotency_key"]), []).append(r)
        res.statuses = dict(Counter(str(r["status"]) for r in rows))
        for tag, mid in accepted.items():
            got = by_tag.get(tag, [])
            if len(got) != 1:
                res.problems.append(f"{tag}: {len(got)} messages stored")
            elif got[0]["id"] != mid:
                res.problems.append(f"{tag}: stored as {got[0]['id']}, accepted as {mid}")
        for r in rows:
            if r["status"] in ("pending", "delivering"):
                res.problems.append(f"{r['idempotency_key']}: still {r['status']}")
        typed: dict[str, list[str]] = {}
        for name in self.names:
            log = self.work / "agents" / f"{name}.jsonl"
            lines = log.read_text().splitlines() if log.exists() else []
            for line in lines:
                for tag in TAG.findall(json.loads(line)["text"]):
                    typed.setdefault(tag, []).append(self.key_of[name])
        res.typed_tags = len(typed)
        for tag, where in typed.items():
            if len(where) > 1:
                res.problems.append(f"{tag} reached agents {len(where)} times: {where}")
        for tag, got in by_tag.items():
            if len(got) != 1:
                continue
            r = got[0]
            where = typed.get(tag, [])
            if r["status"] in DELIVERED:
                if where != [r["session"]]:
                    res.problems.append(f"{tag} ({r['status']}, for {r['session']}) reached: {where}")
            elif where:
                res.not_delivered_typed += 1  # typed, then e.g. no ACK: not a loss, said
        unknown = set(typed) - set(by_tag)
        if unknown:
            res.problems.append(f"{len(unknown)} tag(s) typed that no message holds")

    # --- the run -------------------------------------------------------------------------------

    def plan(self) -> list[tuple[float, str, int]]:
        """The faults, in time order: (seconds after the first send, what, which)."""
        cfg = self.cfg
        kills = [(k + 0.5) * cfg.kill_every_s for k in range(int(cfg.send_s // cfg.kill_every_s)
                                                            + 1)]
        kills = [t for t in kills if t < cfg.send_s]
        restarts = [cfg.send_s * (2 * i + 1) / (2 * cfg.pg_restarts)
                    for i in range(cfg.pg_restarts)]
        return sorted([(t, "kill", k) for k, t in enumerate(kills)]
                      + [(t, "restart", i) for i, t in enumerate(restarts)])

    def fault(self, what: str, k: int) -> None:
        """Carry out one fault of :meth:`plan`."""
        if what == "kill":
            self.kill_one(k)
        else:
            self.restart_pg()

    def run(self) -> SoakResult:
        cfg, res = self.cfg, self.res
        t_start = time.monotonic()
        self.say(f"starting {cfg.sessions} agents on {len(self.hosts)} hosts")
        self.start_agents()
        self.say(f"sending {cfg.messages} messages from {cfg.producers} producers over"
                 f" {cfg.send_s:.0f} s")
        producers = self.start_producers()
        t0 = time.monotonic()
        try:
            for at, what, k in self.plan():
                pause = t0 + at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                self.say(f"{time.monotonic() - t0:6.1f} s: {what}")
                self.fault(what, k)
            deadline = time.monotonic() + cfg.send_s + cfg.drain_timeout_s
            for proc in producers:  # one too slow to send its share: said, and the rest checked
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        finally:
            for proc in producers:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    res.problems.append(f"producer {proc.pid} did not finish")
        res.send_s = time.monotonic() - t0
        self.say(f"sent in {res.send_s:.0f} s; draining")
        self.heal()
        t1 = time.monotonic()
        rows = self.drain()
        res.drain_s = time.monotonic() - t1
        self.check(rows)
        res.elapsed_s = time.monotonic() - t_start
        res.ok = not res.problems
        return res

    def teardown(self) -> None:
        for host in self.hosts:
            for name in host.sessions:
                try:
                    host.cli("stop", name, timeout=30)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            teardown_agentwrap(host.env, str(self.work), self.seen_pids)


def run_soak(cfg: SoakConfig, say: Callable[[str], None] = print) -> SoakResult:
    """One soak in a temp dir with its own PostgreSQL, torn down after."""
    work = Path(tempfile.mkdtemp(prefix="awso-", dir="/tmp"))
    server = pg.start()
    soak: Soak | None = None
    try:
        _, url = server.new_schema()
        soak = Soak(cfg, work, server, url, say)
        return soak.run()
    finally:
        if soak is not None:
            try:
                soak.records()
            except Exception:  # noqa: BLE001 - the teardown goes on with the pids it saw
                pass
            soak.teardown()
        server.stop()
        if cfg.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def print_result(cfg: SoakConfig, res: SoakResult) -> None:
    print(f"\n{cfg.messages} messages, {cfg.producers} producers on {len(HOSTS)} hosts,"
          f" {cfg.sessions} sessions; {res.kills} supervisor kill(s) (kill -9), {res.adopts}"
          f" `agentwrap adopt` call(s), {res.restarts} PostgreSQL restart(s)")
    print_verdict(res, f"; supervisors found dead without a kill: {res.found_dead}")


def print_verdict(res: SoakResult, timing_extra: str = "") -> None:
    """What every soak prints after its own summary line (the hub soak too)."""
    print(f"accepted {res.accepted}; terminal states: "
          + ", ".join(f"{k} {v}" for k, v in sorted(res.statuses.items())))
    print(f"tags that reached an agent: {res.typed_tags} (of messages not delivered:"
          f" {res.not_delivered_typed}); producer retries: {res.producer_retries or 'none'}")
    print(f"sends took {res.send_s:.0f} s, the drain {res.drain_s:.0f} s, all {res.elapsed_s:.0f} s"
          + timing_extra)
    for note in res.notes:
        print(f"  note: {note}")
    for p in res.problems[:30]:
        print(f"  ! {p}")
    if len(res.problems) > 30:
        print(f"  ! ... {len(res.problems) - 30} more")
    print("OK: every message in exactly one terminal state, every delivered tag typed once"
          if res.ok else "PROBLEMS found")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    d = SoakConfig()
    ap.add_argument("--messages", type=int, default=d.messages)
    ap.add_argument("--sessions", type=int, default=d.sessions)
    ap.add_argument("--producers", type=int, default=d.producers)
    ap.add_argument("--send-s", type=float, default=d.send_s, help="the sends take this long")
    ap.add_argument("--kill-every", type=float, default=d.kill_every_s,
                    help="s between supervisor kills")
    ap.add_argument("--pg-restarts", type=int, default=d.pg_restarts)
    ap.add_argument("--drain-timeout", type=float, default=d.drain_timeout_s)
    ap.add_argument("--busy", type=float, default=d.busy_s, help="the agents' busy time, s")
    ap.add_argument("--ack", action="store_true", help="messages ask for an ACK")
    ap.add_argument("--json", help="also write the result to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (debugging)")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    if not shutil.which("tmux"):
        print("tmux is not installed", file=sys.stderr)
        return 2
    cfg = SoakConfig(args.messages, args.sessions, args.producers, args.send_s, args.kill_every,
                     args.pg_restarts, args.drain_timeout, args.busy, args.ack, args.keep)
    res = run_soak(cfg, say=lambda s: print(s, flush=True))
    print_result(cfg, res)
    if args.json:
        Path(args.json).write_text(json.dumps(res.to_json(), indent=1) + "\n")
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
