#!/usr/bin/env python3
"""Benchmark: what agentwrap's hooks cost the agent itself (issue 27).

Each hooked agent (Claude Code, Codex, Gemini CLI) runs twice at once under
``agentwrap run --detach``: with its native channels (the default: hooks, run by
the native hook client when it is built) and with ``--no-channels`` (typing
only), each against a loopback model server of its own (tests/e2e/model_server.py,
first-run state from tests/e2e/agents.py). Runs alternate between the two, so
the machine's load hits both alike. Per run and mode, with the pane polled
(``tmux capture-pane`` every ``--poll`` s):

* **Enter -> request**: Enter pressed (``send-keys``) -> the model server
  receives the turn's request (the agent waits for ``UserPromptSubmit`` /
  ``BeforeAgent`` before it sends);
* **reply -> ready**: the reply's text first on screen -> the registry's
  ``state_since`` of ``ready`` (the Stop / AfterAgent hook, or the screen's
  quiet window without hooks);
* **Enter -> dialog**: ``[[tool]]`` (the model calls the shell tool): Enter ->
  the permission dialog first on screen (it waits for ``PermissionRequest``
  with hooks: the model's reply is sent at once, so the difference is the
  agent's own time);
* **dialog -> waiting_input**: the dialog on screen -> the registry's
  ``state_since`` of ``waiting_input`` (denied then, via ``Service.answer``).

Codex runs a third time in mode ``app-server`` (issue 24: its TUI on agentwrap's
private app-server, ``[run] codex_app_server = true``, no channels), whose state
comes from the server's thread status. Prints p50/p90 per mode and the
hooks/--no-channels (and app-server/--no-channels) ratio of the p50s.
Codex's hooks need ``[run] codex_hook_trust = "bypass"`` (set here); Gemini's
need agentwrap to run as root (else that agent's hooks row equals the other).

    .venv/bin/python scripts/bench_agent_hooks.py                      # 10 runs per agent
    .venv/bin/python scripts/bench_agent_hooks.py --agents claude --runs 20 --json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_answer import DIALOG, Poller, agents_mod, server_mod
from benchlib import fmt, json_safe, pct, teardown_agentwrap, wait_until

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ("claude", "codex", "gemini")
MODES = ("hooks", "no-channels")
# issue 24: Codex's TUI on agentwrap's private app-server ([run] codex_app_server),
# without channels: its state from the server's thread status instead of the screen
APP_SERVER = "app-server"
METRICS = ("enter_request", "reply_ready", "enter_dialog", "dialog_waiting")
LABELS = {"enter_request": "Enter->request", "reply_ready": "reply->ready",
          "enter_dialog": "Enter->dialog", "dialog_waiting": "dialog->waiting_input"}


@dataclass
class Session:
    """One agent under agentwrap in one mode, with its own model server."""

    agent: str
    mode: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    name: str = ""
    server: Any = None
    poller: Poller | None = None
    reg: Any = None
    svc: Any = None
    samples: dict[str, list[float]] = field(default_factory=dict)

    def start(self) -> None:
        from agentwrap.paths import Paths
        from agentwrap.service import Service
        from agentwrap.sessions.registry import Registry

        self.server = server_mod.ModelServer().start()
        home, project = self.root / "home", self.root / "project"
        launch = agents_mod.prepare_agent(self.agent, home, project, self.server.url)
        self.env = dict(launch.env, XDG_RUNTIME_DIR=str(self.root / "r"), PYTHONPATH=str(ROOT))
        (self.root / "r").mkdir(mode=0o700)
        paths = Paths.from_env(self.env)
        paths.config_dir.mkdir(parents=True, exist_ok=True)
        server_on = "codex_app_server = true\n" if self.mode == APP_SERVER else ""
        (paths.config_dir / "config.toml").write_text(
            f'[run]\ncodex_hook_trust = "bypass"\n{server_on}', encoding="utf-8")
        self.name = f"b-{self.agent}-{self.mode[0]}"
        extra = ["--no-channels"] if self.mode != "hooks" else []
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", self.name, *extra,
             "--cwd", str(project), "--", *launch.argv], env=self.env, capture_output=True,
            text=True, timeout=90, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"{self.name}: agentwrap run failed: {res.stderr}")
        self.reg = Registry(paths.db_path)
        self.svc = Service.open(paths)
        self.socket = str(paths.tmux_socket_for(self.name))
        self.samples = {m: [] for m in METRICS}
        wait_until(lambda: self.rec().state == "ready", 120, f"{self.name} ready", poll=0.05)
        channels = list(self.rec().options.channels or ())
        print(f"  {self.name}: channels {channels}", file=sys.stderr)
        self.poller = Poller(self.socket, f"={self.name}:0.0", self.poll_s)

    poll_s: float = 0.01

    def rec(self) -> Any:
        return self.reg.get(self.name)

    def keys(self, *keys: str, literal: bool = False) -> None:
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", f"={self.name}:0.0",
                        *(["-l"] if literal else []), *keys], check=True)

    def turns(self) -> list[Any]:
        return [r for r in self.server.requests() if not r.side]

    def ready(self, timeout: float) -> None:
        wait_until(lambda: self.rec().state == "ready", timeout, f"{self.name} ready", poll=0.02)
        time.sleep(0.5)

    def plain_turn(self, i: int, timeout: float) -> None:
        """Enter -> request, and the reply on screen -> ready."""
        assert self.poller is not None
        self.ready(timeout)
        reply = f"all done R{i}Z"  # on screen twice: in the prompt, and as the reply
        # busy a second first: the screen alone must see the turn, as with a real model
        self.keys(f"[[delay: 1]] [[reply: {reply}]]", literal=True)
        time.sleep(0.4)
        n = len(self.turns())
        t0 = time.time()
        self.keys("Enter")
        req = wait_until(lambda: len(self.turns()) > n and self.turns()[n], timeout,
                         f"{self.name} request")
        self.samples["enter_request"].append(req.time - t0)
        try:
            seen = wait_until(lambda: self.poller is not None
                              and self.poller.first(t0, re.compile("(?<!reply: )" + re.escape(reply))),
                              timeout,
                              f"{self.name} reply on screen")
        except TimeoutError:
            last = self.poller.frames[-1][1] if self.poller.frames else ""
            raise RuntimeError(f"{self.name}: {reply!r} never on screen; request"
                               f" {req.body!r:.300}; last screen:\n{last}") from None
        done = wait_until(lambda: (r := self.rec()).state == "ready"
                          and r.state_since > req.time and r, timeout,
                          f"{self.name} ready after the reply", poll=0.005)
        self.samples["reply_ready"].append(done.state_since - seen)

    def dialog_turn(self, i: int, timeout: float) -> None:
        """Enter -> dialog on screen -> waiting_input; denied."""
        assert self.poller is not None
        self.ready(timeout)
        self.keys(f"[[tool]] run {i}", literal=True)
        time.sleep(0.4)
        t0 = time.time()
        self.keys("Enter")
        shown = wait_until(lambda: self.poller is not None
                           and self.poller.first(t0, DIALOG[self.agent]), timeout,
                           f"{self.name} dialog")
        asked = wait_until(lambda: (r := self.rec()).state == "waiting_input" and r.question
                           and r.state_since > t0 and r, timeout, f"{self.name} question",
                           poll=0.005)
        self.samples["enter_dialog"].append(shown - t0)
        self.samples["dialog_waiting"].append(asked.state_since - shown)
        result = self.svc.answer(self.name, deny=True, question_id=asked.question["id"],
                                 source="bench")
        self.svc.wait_answer(result.answer.id, timeout)

    def close(self) -> None:
        if self.poller is not None:
            self.poller.close()
        for h in (self.reg, self.svc):
            if h is not None:
                h.close()
        teardown_agentwrap(self.env, str(self.root))
        if self.server is not None:
            self.server.stop()


def stats(xs: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in xs)
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90)}


def bench_agent(agent: str, work: Path, runs: int, poll: float,
                timeout: float) -> dict[str, Any]:
    modes = (*MODES, APP_SERVER) if agent == "codex" else MODES
    sessions = [Session(agent, mode, work / f"{agent}-{mode}") for mode in modes]
    try:
        for s in sessions:
            s.poll_s = poll
            s.start()
        for i in range(runs):
            for s in sessions:  # interleaved: each mode once per round
                s.plain_turn(i, timeout)
                s.dialog_turn(i, timeout)
            print(f"  {agent} run {i} done", file=sys.stderr)
        return {"agent": agent, "runs": runs,
                **{s.mode: {m: stats(v) for m, v in s.samples.items()} for s in sessions}}
    finally:
        for s in sessions:
            s.close()


def print_table(results: list[dict[str, Any]]) -> None:
    head = (f"{'agent':7} {'metric':22} {'hooks p50/p90':>15} {'--no-channels':>15} {'ratio':>6}"
            f" {'app-server':>15} {'ratio':>6}")
    print(head)
    print("-" * len(head))
    for r in results:
        for m in METRICS:
            h, n = r["hooks"][m], r["no-channels"][m]
            ratio = h["p50_ms"] / n["p50_ms"] if n["p50_ms"] else None
            print(f"{r['agent']:7} {LABELS[m]:22}"
                  f" {fmt(h['p50_ms'], '.0f') + '/' + fmt(h['p90_ms'], '.0f'):>15}"
                  f" {fmt(n['p50_ms'], '.0f') + '/' + fmt(n['p90_ms'], '.0f'):>15}"
                  f" {fmt(ratio, '.2f'):>6}", end="")
            a = r.get(APP_SERVER, {}).get(m)
            if a is None:
                print()
                continue
            a_ratio = a["p50_ms"] / n["p50_ms"] if n["p50_ms"] else None
            print(f" {fmt(a['p50_ms'], '.0f') + '/' + fmt(a['p90_ms'], '.0f'):>15}"
                  f" {fmt(a_ratio, '.2f'):>6}")
    print("ms, p50/p90 over the runs; ratio: hooks (app-server) p50 over --no-channels p50"
          " (same run); app-server: Codex's TUI on agentwrap's app-server, no channels")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--runs", type=int, default=10, help="runs per agent and mode")
    ap.add_argument("--poll", type=float, default=0.01, help="pane poll interval, s")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for any one step")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="awah-", dir="/tmp"))
    results = []
    try:
        for agent in args.agents.split(","):
            if agents_mod.find_agent(agent) is None:
                print(f"{agent}: not installed (scripts/install_agents.sh)", file=sys.stderr)
                continue
            try:
                results.append(bench_agent(agent, work, args.runs, args.poll, args.timeout))
            except (RuntimeError, TimeoutError) as exc:
                print(f"{agent}: FAILED: {exc}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(json_safe(results), indent=2))
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
