#!/usr/bin/env python3
"""Benchmark: a message sent while a real agent is in a tool loop -> the model
request that carries it, through the agent's hooks, against typed delivery.

Each agent (Claude Code, Gemini CLI, Codex; one at a time) runs under
``agentwrap run --detach`` against the loopback model server of the e2e tests
(tests/e2e/model_server.py) with the first-run state of tests/e2e/agents.py.
A person's prompt starts a loop: the model calls a read-only tool ``--steps``
times, each reply held back ``--step`` seconds. Once the first tool result
reached the model, a message is enqueued (in process, ``Service.send``: what
``agentwrap send`` and the API call) and the script reads, from the model
server's request log:

* **enqueue -> request**: until the first model request carrying the message.
  With hooks (the ``hooks`` mode) that is the request after the next tool
  result, inside the same turn; the baseline, measured in the same run on the
  same agent, is the ``typed`` mode (``run --no-channels``): the block is typed
  once the turn has ended, and reaches the model in a new turn.
* **safe point -> served** (hooks only): the gap between the model's tool-call
  reply leaving the server and the agent's next request (the tool runs, the
  hooks run, the agent builds the request) for the step whose hook handed the
  message over, minus the median gap of the steps that had nothing to hand
  over in the same run: what delivering costs at the safe point (the issue's
  seed target is <= 100 ms).

Codex runs its per-launch hooks only with ``[run] codex_hook_trust = "bypass"``
in the person's own config; the script writes that into its throwaway config.
For Codex a third mode, ``steer``, runs it on agentwrap's private app-server
(``[run] codex_app_server = true``, ``[delivery] steer = "high"``, no hooks):
the message goes into the running turn with ``turn/steer``. The message is
sent with priority high in every mode (only the steer looks at it).

    .venv/bin/python scripts/bench_channels.py                  # 3 runs per agent and mode
    .venv/bin/python scripts/bench_channels.py --agents claude --runs 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import (
    UNDER_TEST,
    fmt,
    import_path,
    stats_ms,
    teardown_agentwrap,
    wait_until,
    write_json,
)

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
agents_mod = import_path("agentwrap_bench_agents", ROOT / "tests" / "e2e" / "agents.py")
server_mod = import_path("agentwrap_bench_model_server", ROOT / "tests" / "e2e" / "model_server.py")

#: A read-only tool call per agent (Codex: a shell command).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "claude": ("Read", {"file_path": "README.md"}),
    "gemini": ("read_file", {"file_path": "README.md"}),
    "codex": ("cat README.md", {}),
}
MAIN_APIS = ("anthropic", "responses", "gemini", "chat")
MODES = ("hooks", "typed")
EXTRA_MODES: dict[str, tuple[str, ...]] = {"codex": ("steer",)}  # first, in the same run
CONFIGS: dict[tuple[str, str], str] = {
    # the app-server is Codex's default: hooks and typed are measured without it
    ("codex", "hooks"): '[run]\ncodex_hook_trust = "bypass"\ncodex_app_server = false\n',
    ("codex", "typed"): '[run]\ncodex_hook_trust = "bypass"\ncodex_app_server = false\n',
    ("codex", "steer"): '[run]\ncodex_app_server = true\n\n[delivery]\nsteer = "high"\n',
}


class LoopServer(server_mod.ModelServer):  # type: ignore[misc,name-defined]
    """``[[loop]]`` in the prompt: one tool call per request, ``steps`` times,
    each reply held back ``step`` seconds; then the stock answer."""

    def __init__(self, call: tuple[str, dict[str, Any]], steps: int, step: float) -> None:
        super().__init__()
        self.call, self.steps, self.step_s = call, steps, step
        self.step = -1

    def _plan(self, api: str, body: Any, turn: Any, tools: list[Any], side: Any) -> Any:
        if side is None:
            if "[[loop]]" in turn.text:
                self.step = 0
            if self.step >= 0 and (self.step == 0 or turn.tool_result):
                if self.step < self.steps:
                    self.step += 1
                    name, args = self.call
                    tool = next((t for t in tools if t.name == name), None)
                    if tool is None:  # a shell command for the agent's shell tool
                        tool = server_mod.pick_shell_tool(tools)
                        args = {k: (name if k == "command" and isinstance(v, str) else
                                    ["bash", "-lc", name] if k == "command" else v)
                                for k, v in server_mod.build_tool_args(tool, False).items()
                                if k != "justification"}
                    return server_mod.Plan(tool=tool, tool_args=args, delay=self.step_s)
                self.step = -1
        return super()._plan(api, body, turn, tools, side)


class Requests:
    """(time, body, carries a tool result) of every main model request, each
    body serialised once (the script polls this every few milliseconds)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.seen = 0
        self.main: list[tuple[float, str, bool]] = []

    def __call__(self) -> list[tuple[float, str, bool]]:
        new = self.server.requests()[self.seen:]
        self.seen += len(new)
        for r in new:
            if r.side or r.body is None or r.api not in MAIN_APIS:
                continue
            text = json.dumps(r.body, ensure_ascii=False)
            self.main.append((r.time, text, "tool_result" in text
                              or "function_call_output" in text or "functionResponse" in text))
        return self.main


def run_mode(agent: str, mode: str, work: Path, runs: int, steps: int, step: float,
             timeout: float) -> dict[str, Any]:
    from agentwrap.message import NewMessage, Priority, Source
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.registry import Registry

    server = LoopServer(CALLS[agent], steps, step).start()
    _main_requests = Requests(server)
    root = work / f"{agent}-{mode}"
    home, project = root / "home", root / "project"
    launch = agents_mod.prepare_agent(agent, home, project, server.url)
    env = dict(launch.env)
    env.update(XDG_RUNTIME_DIR=str(root / "r"), PYTHONPATH=str(ROOT))
    (root / "r").mkdir(mode=0o700)
    (project / "README.md").write_text("# scratch project for the channel benchmark\n")
    paths = Paths.from_env(env)
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(CONFIGS.get((agent, mode), ""))
    name = f"bench-{agent}"
    socket = str(paths.tmux_socket_for(name))
    to_request: list[float] = []
    served: list[float] = []
    plain_gaps: list[float] = []
    channels: list[str] = []
    try:
        extra = ["--no-channels"] if mode == "typed" else []
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", name, "--cwd",
             str(project), *extra, "--", *launch.argv], env=env, capture_output=True,
            text=True, timeout=90, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"{agent}: agentwrap run failed: {res.stderr}")
        reg = Registry(paths.db_path)
        svc = Service.open(paths)
        wait_until(lambda: reg.get(name).state == "ready", 120, f"{agent} ready", poll=0.05)
        have = list(reg.get(name).options.channels or ())
        if mode == "hooks" and "hooks" not in have:
            raise RuntimeError(f"{agent}: no hooks registered: {reg.get(name).options}")
        if mode == "steer" and not reg.get(name).options.app_server:
            raise RuntimeError(f"{agent}: not on an app-server: {reg.get(name).options}")
        for i in range(runs):
            wait_until(lambda: reg.get(name).state == "ready" and server.step == -1, timeout,
                       f"{agent} ready", poll=0.05)
            time.sleep(0.5)
            n0 = len(_main_requests())
            subprocess.run(["tmux", "-S", socket, "send-keys", "-t", f"={name}:0.0", "-l",
                            f"Look around please, run {i}. [[loop]]"], check=True)
            time.sleep(0.5)
            subprocess.run(["tmux", "-S", socket, "send-keys", "-t", f"={name}:0.0", "Enter"],
                           check=True)
            wait_until(lambda n0=n0: sum(b[2] for b in _main_requests()[n0:]) >= 1,
                       timeout, f"{agent}: first tool result (run {i})", poll=0.01)
            marker = f"CH{uuid.uuid4().hex[:8]}"
            t0 = time.time()
            sent = svc.send(NewMessage(session=name, content=f"build {marker} is green",
                                       source=Source.WEBHOOK, source_id="ci",
                                       priority=Priority.HIGH))
            bodies = wait_until(
                lambda marker=marker: (b := _main_requests()) and any(marker in x[1] for x in b) and b,
                timeout, f"{agent}: the message at the model (run {i})", poll=0.005)
            at = next(k for k, b in enumerate(bodies) if marker in b[1])
            to_request.append(bodies[at][0] - t0)
            wait_until(lambda: server.step == -1 and reg.get(name).state == "ready", timeout,
                       f"{agent}: loop end (run {i})", poll=0.05)
            bodies = _main_requests()[n0:]
            for k in range(1, len(bodies)):
                if not bodies[k][2]:
                    continue
                gap = bodies[k][0] - (bodies[k - 1][0] + step)
                if marker in bodies[k][1] and marker not in bodies[k - 1][1]:
                    served.append(gap)
                elif marker not in bodies[k][1]:
                    plain_gaps.append(gap)
            entry = svc.message(sent.message.id)
            channels.extend(a.channel for a in entry.attempts)
            print(f"  {agent} {mode} run {i}: enqueue -> request {to_request[-1]:.3f} s",
                  file=sys.stderr)
        reg.close()
        svc.close()
    finally:
        teardown_agentwrap(env, str(root))
        server.stop()
    base = statistics.median(plain_gaps) if plain_gaps else None
    return {
        "agent": agent, "mode": mode, "runs": runs, "channels": sorted(set(channels)),
        "enqueue_to_request": stats_ms(to_request),
        "served_over_plain_step": stats_ms([g - base for g in served])
        if mode == "hooks" and base is not None else stats_ms([]),
        "plain_step_gap": stats_ms(plain_gaps),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default="claude,gemini,codex", help="comma-separated")
    p.add_argument("--runs", type=int, default=3, help="runs per agent and mode (default 3)")
    p.add_argument("--steps", type=int, default=4, help="tool calls per loop (default 4)")
    p.add_argument("--step", type=float, default=1.0, help="seconds each tool-call reply is"
                   " held back (default 1.0)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    add_against(p)
    args = p.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    work = Path(tempfile.mkdtemp(prefix="awbc-", dir="/tmp"))
    results = []
    try:
        for agent in [a.strip() for a in args.agents.split(",") if a.strip()]:
            if agents_mod.find_agent(agent) is None:
                print(f"{agent}: not installed, skipped", file=sys.stderr)
                continue
            for mode in (*EXTRA_MODES.get(agent, ()), *MODES):
                results.append(run_mode(agent, mode, work, args.runs, args.steps, args.step,
                                        args.timeout))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'agent':8} {'mode':6} {'channel':11} {'enqueue->request p50/p99 ms':>28}"
          f" {'x typed':>8} {'served-plain p50/p99 ms':>24}")
    typed = {r["agent"]: r["enqueue_to_request"]["p50_ms"] for r in results if r["mode"] == "typed"}
    for r in results:
        e, s = r["enqueue_to_request"], r["served_over_plain_step"]
        ratio = (e["p50_ms"] / typed[r["agent"]] if typed.get(r["agent"]) and e["p50_ms"]
                 else None)
        print(f"{r['agent']:8} {r['mode']:6} {','.join(r['channels']):11}"
              f" {fmt(e['p50_ms'], '13.0f')} {fmt(e['p99_ms'], '13.0f')} {fmt(ratio, '8.2f')}"
              f" {fmt(s['p50_ms'], '11.0f')} {fmt(s['p99_ms'], '11.0f')}")
    print(f"(loop: {args.steps} tool calls, replies held {args.step} s; 'x typed': hooks"
          " or steer against typed delivery after the turn, same agent, same run)")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
