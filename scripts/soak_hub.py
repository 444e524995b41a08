#!/usr/bin/env python3
"""Soak: one hub, hosts linked to it, links cut, supervisors and the hub killed (issue 38).

``--messages`` (10,000) tagged messages go from ``--producers`` (4)
processes, spread over ``--hosts`` (10) linked hosts, into ``--sessions``
(50) stand-in agents (tests/support/standin_agent.py under real supervisor
hosts and tmux, each agent logging what it receives to a file of its own),
over ``--send-s`` seconds, while

* every ``--cut-every`` s (20) every host's link is cut at once (a relay
  between the hosts and the hub, tests/support/link_cutter.py, shuts both
  sockets of every link mid-whatever);
* every ``--kill-every`` s (20, offset by half) one host's supervisor host
  is ``kill -9``ed, hosts in turn, and ``agentwrap adopt`` restarts it; and
* the hub is ``kill -9``ed and started again ``--hub-restarts`` (2) times.

The hub is a real ``agentwrap hub`` process (plain HTTP on loopback behind
the relay; its store SQLite, or ``--pg`` a throwaway PostgreSQL). Each host
joins with a one-time code and keeps its own state, runtime dir and name;
producers go through ``Service.send`` on their host (over its link), sending
to ``HOST/NAME`` with the tag as the idempotency key, again after a lost
answer. The verdict is scripts/soak_store.py's: every accepted tag one
message in exactly one terminal state, every delivered tag typed into its own
agent exactly once, no tag typed twice or into the wrong agent.

    .venv/bin/python scripts/soak_hub.py                                 # full size
    .venv/bin/python scripts/soak_hub.py --messages 200 --hosts 2 --sessions 4 --send-s 40
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import UNDER_TEST

ROOT = UNDER_TEST
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

import soak_store as base  # noqa: E402
from benchlib import isolated_env  # noqa: E402
from support import pg  # noqa: E402
from support.link_cutter import LinkCutter  # noqa: E402


@dataclass
class HubSoakConfig(base.SoakConfig):
    messages: int = 10_000
    sessions: int = 50
    hosts: int = 10
    cut_every_s: float = 20.0
    hub_restarts: int = 2
    postgres: bool = False


@dataclass
class HubSoakResult(base.SoakResult):
    cuts: int = 0
    links_cut: int = 0
    hub_restarts: int = 0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HubProc:
    """``agentwrap hub`` on a fixed loopback port (the same after each restart)."""

    def __init__(self, work: Path, url: str, big: int) -> None:
        from agentwrap.paths import Paths

        work.mkdir(parents=True)
        self.work, self.url = work, url
        self.env = {**isolated_env(work, ROOT), **({"AGENTWRAP_STORE_URL": url} if url else {})}
        # the hub's store applies the queue's limits: the soak's rate is above the
        # default per-session rate (a run at the defaults spent its time in RateLimited)
        config = Paths.from_env(self.env).config_file
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"[limits]\nrate_per_minute = {big}\nmax_pending_per_session = {big}\n"
                          f"max_pending_total = {big}\n", encoding="utf-8")
        (work / "project").mkdir()
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import httpx

        log = open(self.work / "hub.log", "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "hub", "--listen", f"127.0.0.1:{self.port}"],
            env=self.env, cwd=str(self.work / "project"), stdout=log, stderr=log,
            start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).is_success:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the hub did not start: "
                                   + (self.work / "hub.log").read_text()[-2000:])
            time.sleep(0.2)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def cli(self, *args: str, stdin: str | None = None) -> str:
        got = subprocess.run([sys.executable, "-m", "agentwrap", *args], env=self.env,
                             cwd=str(self.work / "project"), input=stdin, capture_output=True,
                             text=True, timeout=120, check=False)
        if got.returncode != 0:
            raise RuntimeError(f"agentwrap {args[0]}: {got.stderr.strip()}")
        return got.stdout.strip()

    @property
    def state_dir(self) -> Path:
        from agentwrap.paths import Paths

        return Paths.from_env(self.env).state_dir

    def rows(self) -> list[dict[str, Any]]:
        """Every message on the hub's store (its SQLite file, or PostgreSQL)."""
        sql = "SELECT id, session, status, idempotency_key, content FROM messages"
        if self.url:
            import psycopg

            with psycopg.connect(self.url) as conn:
                cur = conn.execute(sql)
                cols = [c.name for c in cur.description or ()]
                return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        conn = sqlite3.connect(self.state_dir / "hub.db", timeout=30)
        try:
            cur = conn.execute(sql)
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        finally:
            conn.close()

    def unfinished(self) -> int:
        return sum(1 for r in self.rows() if r["status"] in ("pending", "delivering"))


class HubSoak(base.Soak):
    """soak_store's soak, its hosts linked to a hub instead of sharing PostgreSQL."""

    def __init__(self, cfg: HubSoakConfig, work: Path, hub: HubProc,
                 say: Callable[[str], None]) -> None:
        from agentwrap.paths import Paths
        from agentwrap.queue.link import load_link, save_link

        self.cfg, self.work, self.say, self.hub = cfg, work, say, hub
        self.res: HubSoakResult = HubSoakResult()
        self.cutter = LinkCutter(hub.port).start()
        big = 10 * cfg.messages + 10_000
        self.hosts = []
        for i in range(cfg.hosts):
            name = f"host{i:02d}"
            host = base.make_host(work / name, name, "", big)
            cfg_file = Paths.from_env(host.env).config_file  # no [store] url: the link is the store
            cfg_file.write_text(cfg_file.read_text().replace('[store]\nurl = ""\n', ""))
            code = hub.cli("hub", "invite", name)
            subprocess.run([sys.executable, "-m", "agentwrap", "join",
                            f"http://127.0.0.1:{hub.port}", "--host", name], env=host.env,
                           cwd=str(host.work / "project"), input=code + "\n", text=True,
                           capture_output=True, timeout=120, check=True)
            state = Paths.from_env(host.env).state_dir
            link = load_link(state)
            assert link is not None
            save_link(state, type(link)(f"http://127.0.0.1:{self.cutter.port}", link.host,
                                        link.credential))
            self.hosts.append(host)
        self.names = [f"s{i:02d}" for i in range(cfg.sessions)]
        self.key_of: dict[str, str] = {}
        for i, name in enumerate(self.names):
            host = self.hosts[i % len(self.hosts)]
            host.sessions.append(name)
            self.key_of[name] = f"{host.name}/{name}"
        (work / "agents").mkdir()
        self.seen_pids: set[int] = set()

    def records(self) -> dict[str, Any]:
        """Every host's own registry (a linked host keeps its sessions locally)."""
        from agentwrap.paths import Paths
        from agentwrap.sessions.registry import Registry

        recs: dict[str, Any] = {}
        for host in self.hosts:
            reg = Registry(Paths.from_env(host.env).db_path)
            try:
                recs.update({r.name: r for r in reg.list(include_ended=True)
                             if r.name in host.sessions})
            finally:
                reg.close()
        for r in recs.values():
            self.seen_pids.update(p for p in (r.supervisor_pid, r.agent_pid) if p)
        return recs

    def start_producers(self) -> list[subprocess.Popen[bytes]]:
        cfg = self.cfg
        procs = []
        per = max(1, -(-cfg.messages // cfg.producers))
        for p in range(cfg.producers):
            host = self.hosts[p % len(self.hosts)]
            items = [(f"m{k:05d}", self.key_of[self.names[k % len(self.names)]])
                     for k in range(p, cfg.messages, cfg.producers)]
            spec = {"name": f"producer-{p}-on-{host.name}", "items": items, "ack": cfg.ack,
                    "interval": cfg.send_s / per, "out": str(self.work / f"producer-{p}.txt")}
            with open(self.work / f"producer-{p}.err", "wb") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", base.PRODUCER, json.dumps(spec)], env=host.env,
                    cwd=str(host.work / "project"), stdin=subprocess.DEVNULL, stderr=err,
                    start_new_session=True))
        return procs

    def restart_pg(self) -> None:  # the plan's "restart": the hub's, kill -9 and start
        self.say("  kill -9 the hub; starting it again")
        self.hub.kill()
        self.hub.start()
        self.res.hub_restarts += 1
        self.res.restarts += 1

    def cut(self) -> None:
        n = self.cutter.cut_all()
        self.res.cuts += 1
        self.res.links_cut += n
        self.say(f"  cut {n} link(s)")

    def drain(self) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.cfg.drain_timeout_s
        last_heal = time.monotonic()
        while (left := self.hub.unfinished()) > 0:
            if time.monotonic() > deadline:
                self.res.problems.append(f"{left} message(s) not terminal after the drain timeout")
                break
            if time.monotonic() - last_heal > 30:
                self.heal()
                last_heal = time.monotonic()
            time.sleep(1.0)
        return self.hub.rows()

    def plan(self) -> list[tuple[float, str, int]]:
        """The store soak's supervisor kills, plus every link cut every ``cut_every_s``
        and the hub's own restarts (in place of PostgreSQL's)."""
        cfg = self.cfg
        assert isinstance(cfg, HubSoakConfig)
        kills = [t for k in range(int(cfg.send_s // cfg.kill_every_s) + 1)
                 if (t := (k + 0.5) * cfg.kill_every_s) < cfg.send_s]
        cuts = [t for k in range(1, int(cfg.send_s // cfg.cut_every_s) + 1)
                if (t := k * cfg.cut_every_s) < cfg.send_s]
        restarts = [cfg.send_s * (2 * i + 1) / (2 * cfg.hub_restarts)
                    for i in range(cfg.hub_restarts)]
        return sorted([(t, "kill", k) for k, t in enumerate(kills)]
                      + [(t, "cut", k) for k, t in enumerate(cuts)]
                      + [(t, "hub", i) for i, t in enumerate(restarts)])

    def fault(self, what: str, k: int) -> None:
        if what == "cut":
            self.cut()
        else:
            super().fault(what, k)  # "hub": restart_pg is the hub's restart here


def run_soak(cfg: HubSoakConfig, say: Callable[[str], None] = print) -> HubSoakResult:
    """One hub soak in a temp dir (its own hub, and PostgreSQL with ``postgres``)."""
    work = Path(tempfile.mkdtemp(prefix="awsh-", dir="/tmp"))
    server = pg.start() if cfg.postgres else None
    hub: HubProc | None = None
    soak: HubSoak | None = None
    try:
        url = server.new_schema()[1] if server is not None else ""
        hub = HubProc(work / "hub", url, 10 * cfg.messages + 10_000)
        hub.start()
        soak = HubSoak(cfg, work, hub, say)
        res = soak.run()
        assert isinstance(res, HubSoakResult)  # the result HubSoak was made with
        return res
    finally:
        if soak is not None:
            try:
                soak.records()
            except Exception:  # noqa: BLE001 - the teardown goes on with the pids it saw
                pass
            soak.teardown()
            soak.cutter.close()
        if hub is not None:
            hub.kill()
        if server is not None:
            server.stop()
        if cfg.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def print_result(cfg: HubSoakConfig, res: HubSoakResult) -> None:
    print(f"\n{cfg.messages} messages, {cfg.producers} producers, {cfg.sessions} sessions on"
          f" {cfg.hosts} linked hosts ({'PostgreSQL' if cfg.postgres else 'SQLite'} hub);"
          f" {res.cuts} cut(s) of every link ({res.links_cut} links), {res.kills} supervisor"
          f" kill(s) (kill -9), {res.adopts} adopt call(s), {res.hub_restarts} hub kill -9 +"
          " restart(s)")
    base.print_verdict(res)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    d = HubSoakConfig()
    ap.add_argument("--messages", type=int, default=d.messages)
    ap.add_argument("--hosts", type=int, default=d.hosts)
    ap.add_argument("--sessions", type=int, default=d.sessions)
    ap.add_argument("--producers", type=int, default=d.producers)
    ap.add_argument("--send-s", type=float, default=d.send_s, help="the sends take this long")
    ap.add_argument("--cut-every", type=float, default=d.cut_every_s)
    ap.add_argument("--kill-every", type=float, default=d.kill_every_s)
    ap.add_argument("--hub-restarts", type=int, default=d.hub_restarts)
    ap.add_argument("--drain-timeout", type=float, default=d.drain_timeout_s)
    ap.add_argument("--busy", type=float, default=d.busy_s, help="the agents' busy time, s")
    ap.add_argument("--pg", action="store_true", help="the hub on PostgreSQL (else SQLite)")
    ap.add_argument("--json", help="also write the result to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (debugging)")
    args = ap.parse_args()
    if not shutil.which("tmux"):
        print("tmux is not installed", file=sys.stderr)
        return 2
    cfg = HubSoakConfig(messages=args.messages, sessions=args.sessions,
                        producers=args.producers, send_s=args.send_s,
                        kill_every_s=args.kill_every, drain_timeout_s=args.drain_timeout,
                        busy_s=args.busy, keep=args.keep, hosts=args.hosts,
                        cut_every_s=args.cut_every, hub_restarts=args.hub_restarts,
                        postgres=args.pg)
    res = run_soak(cfg, say=lambda s: print(s, flush=True))
    print_result(cfg, res)
    if args.json:
        Path(args.json).write_text(json.dumps(res.to_json(), indent=1) + "\n")
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
