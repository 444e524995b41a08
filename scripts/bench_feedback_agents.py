#!/usr/bin/env python3
"""Benchmark: a file saved by the agent -> the check's result in one of its
model requests, per agent, on the real CLIs (issue 12).

Each agent runs under ``agentwrap run --detach`` against the loopback model
server of the e2e tests (tests/e2e/model_server.py), in a project whose only
``[[feedback]]`` source is a trivial check with no interpreter start::

    run = "grep -H -v NOPE {files} /nonexistent"   # prints the file, exits 2
    on = ["edit"], paths = ["fb_*.py"]

(it always fails, with the saved file's content, so every result is new and
is reported). The save time is the file's mtime; the arrival is the time the
model server received the first request carrying the check's output.

* **Claude Code, Gemini CLI** (the edit hook): the model writes ``fb_N.py``
  with its write tool; the result is in the *next* request. **Baseline, same
  session, interleaved**: the same write of ``plain_N.py``, which no source
  checks: save -> the next request (the agent's own step gap, hook included).
* **Codex** (the watcher: ``apply_patch`` runs no hook): the model adds
  ``fb_N.py`` with ``apply_patch``, then runs ``true`` twice; the result goes
  in at the next shell call's hook, i.e. the request after the one answering
  the patch. **Baseline**: ``plain_N.py`` the same way, save -> the request in
  that same position (the second after the save).
* **Aider** (the watcher; no hooks), a one-request turn: each round is a
  prompt whose reply edits ``fb.py`` and ends the turn; the result is typed
  after the turn and is the next request. **Baseline**: the watcher's own
  save -> queued time in the same round (Aider makes no further request of
  its own to compare with).
* **aider-turn**, a three-request turn: the reply also holds a block that
  matches nothing, so Aider reflects at once (request 1 after the save, built
  before any check can end), that is answered after ``--think`` with another
  such block, and its reflection (request 2) is the next one Aider builds: the
  result rides it through the read file. **Baseline**: the same turn editing
  ``plain.py`` (checked by no source), save -> request 2.

For every agent save -> queued (the message stored) is printed too: the
watcher's debounce (300 ms, the default) is in it for Codex and Aider.
Every model reply is held ``--think`` seconds (the same for both series).

    .venv/bin/python scripts/bench_feedback_agents.py                  # ~5 min
    .venv/bin/python scripts/bench_feedback_agents.py --rounds 8 --agents claude,aider --json f.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
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
AGENTS = ("claude", "gemini", "codex", "aider", "aider-turn")
CHECK = "grep -H -v NOPE {files} /nonexistent-agentwrap-bench"
#: Per agent: extra argv (edits without a dialog) and its write tool.
FLAGS = {"claude": (["--permission-mode", "acceptEdits"], "Write"),
         "gemini": (["--approval-mode", "auto_edit"], "write_file"),
         "codex": ([], ""), "aider": (["--edit-format", "diff", "fb.py", "plain.py"], "")}
FENCE = "```"
NO_MATCH = "this line is not in the file"


def _block(path: str, old: str, new: str) -> str:
    return f"{path}\n{FENCE}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n{FENCE}\n"


def _patch(path: str, line: str) -> str:
    return (f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n+{line}\n"
            "*** End Patch\nEOF\n")


class ScriptServer(server_mod.ModelServer):  # type: ignore[misc,name-defined]
    """``[[bench]]``: one scripted step per request (a tool call, or a shell
    command for Codex), each reply held ``think`` s, then ``done``.
    ``[[aider N FILE]]``: an edit of FILE to the line ``aider_lines[FILE][N]``;
    with ``reflect``, plus a block that matches nothing, so Aider reflects at
    once (request 1 after the save), answered after ``think`` with another such
    block (request 2), then ``done``: a three-request turn."""

    def __init__(self, think: float) -> None:
        super().__init__()
        self.think = think
        self.steps: list[tuple[str, dict[str, Any]]] = []
        self.step = -1
        self.aider_lines: dict[str, list[str]] = {}
        self.aider_now = {"fb.py": "# start", "plain.py": "# start"}
        self.reflect = False
        self.pending = 0

    def _plan(self, api: str, body: Any, turn: Any, tools: list[Any], side: Any) -> Any:
        if side is None:
            if api == "chat" and "[[aider " in turn.text:
                n, path = turn.text.split("[[aider ", 1)[1].split("]]", 1)[0].split()
                old = self.aider_now[path]
                self.aider_now[path] = self.aider_lines[path][int(n)]
                text = "Editing.\n\n" + _block(path, old, self.aider_now[path])
                if self.reflect:
                    self.pending = 2
                    text += "\n" + _block(path, NO_MATCH, "x = 1")
                return server_mod.Plan(text=text, delay=self.think)
            if api == "chat" and self.pending:
                self.pending -= 1
                return server_mod.Plan(text="Again.\n\n" + _block("fb.py", NO_MATCH, "x = 2")
                                       if self.pending else "Done.", delay=self.think)
            if "[[bench]]" in turn.text:
                self.step = 0
            if self.step >= 0 and (self.step == 0 or turn.tool_result):
                if self.step < len(self.steps):
                    name, args = self.steps[self.step]
                    self.step += 1
                    tool = next((t for t in tools if t.name == name), None)
                    if tool is None:  # a shell command for the agent's shell tool
                        tool = server_mod.pick_shell_tool(tools)
                        args = {k: v for k, v in server_mod.build_tool_args(tool, False).items()
                                if k != "justification"}
                        for key in ("cmd", "command"):
                            if isinstance(args.get(key), str):
                                args[key] = name
                            elif isinstance(args.get(key), list):
                                args[key] = ["bash", "-lc", name]
                    return server_mod.Plan(tool=tool, tool_args=args, delay=self.think)
                self.step = -1
                return server_mod.Plan(text="done", delay=self.think)
        return super()._plan(api, body, turn, tools, side)


def _bodies(server: Any) -> list[tuple[float, str]]:
    return [(r.time, json.dumps(r.body, ensure_ascii=False)) for r in server.requests()
            if not r.side and r.body is not None]


def _after(bodies: list[tuple[float, str]], t: float, k: int) -> float | None:
    """The time of the k-th request after ``t`` (1: the next)."""
    later = [bt for bt, _ in bodies if bt > t]
    return later[k - 1] - t if len(later) >= k else None


def _carrying(bodies: list[tuple[float, str]], t: float, needle: str) -> tuple[float, int] | None:
    """How long after ``t`` the first request carrying ``needle`` came, and which one it was."""
    later = [(bt, b) for bt, b in bodies if bt > t]
    for i, (bt, b) in enumerate(later, 1):
        if needle in b:
            return bt - t, i
    return None


def run_agent(agent: str, work: Path, rounds: int, think: float, timeout: float) -> dict[str, Any]:
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.registry import Registry

    cli = "aider" if agent.startswith("aider") else agent
    server = ScriptServer(think).start()
    server.reflect = agent == "aider-turn"
    root = work / agent
    home, project = root / "home", root / "project"
    launch = agents_mod.prepare_agent(cli, home, project, server.url)
    env = dict(launch.env)
    env.update(XDG_RUNTIME_DIR=str(root / "r"), PYTHONPATH=str(ROOT))
    (root / "r").mkdir(mode=0o700)
    paths = Paths.from_env(env)
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(
        f'[trust]\nfeedback_projects = ["{project}"]\n'
        '[limits]\nrate_per_minute = 100000\nmax_pending_per_session = 100000\n'
        # Codex's hooks, measured as before the app-server became its default
        + ('[run]\ncodex_hook_trust = "bypass"\ncodex_app_server = false\n' if agent == "codex" else ""))
    (project / ".agentwrap.toml").write_text(textwrap.dedent(f"""\
        [[feedback]]
        name = "bench"
        run = "{CHECK}"
        on = ["edit"]
        paths = ["fb_*.py", "fb.py"]
        timeout_s = 30

        [feedback_options]
        budget_tokens = 100000
        """))
    marks = [f"# M{uuid.uuid4().hex[:8]}" for _ in range(rounds)]
    plain = [f"# P{uuid.uuid4().hex[:8]}" for _ in range(rounds)]
    flags, write = FLAGS[cli]
    if cli == "aider":
        (project / "fb.py").write_text("# start\n")
        (project / "plain.py").write_text("# start\n")
        server.aider_lines = {"fb.py": marks, "plain.py": plain}
    elif agent == "codex":
        for i in range(rounds):
            server.steps += [(_patch(f"fb_{i}.py", marks[i]), {}), ("true", {}), ("true", {}),
                             (_patch(f"plain_{i}.py", plain[i]), {}), ("true", {}), ("true", {})]
    else:
        for i in range(rounds):
            server.steps += [(write, {"file_path": str(project / f"fb_{i}.py"),
                                      "content": marks[i] + "\n"}),
                             (write, {"file_path": str(project / f"plain_{i}.py"),
                                      "content": plain[i] + "\n"})]
    name = f"bench-{cli}"
    socket = str(paths.tmux_socket_for(name))
    out: dict[str, Any] = {"agent": agent, "rounds": rounds, "think_s": think}

    def keys(text: str) -> None:
        subprocess.run(["tmux", "-S", socket, "send-keys", "-t", f"={name}:0.0", "-l", text],
                       check=True)
        time.sleep(0.5)
        subprocess.run(["tmux", "-S", socket, "send-keys", "-t", f"={name}:0.0", "Enter"],
                       check=True)

    try:
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", name, "--cwd",
             str(project), "--", *launch.argv, *flags],
            env=env, capture_output=True, text=True, timeout=90, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"agentwrap run failed: {res.stderr}")
        reg = Registry(paths.db_path)
        wait_until(lambda: reg.get(name).state == "ready", 120, f"{agent} ready", poll=0.05)
        out["channels"] = list(reg.get(name).options.channels or ())
        needle = [f"fb_{i}.py:{marks[i]}" for i in range(rounds)]
        psaves: list[float] = []
        if cli == "aider":
            needle = [f"fb.py:{m}" for m in marks]
            saves: list[float] = []
            for i in range(rounds):
                wait_until(lambda: reg.get(name).state == "ready", timeout, "ready", poll=0.05)
                time.sleep(0.5)
                keys(f"Round {i}. [[aider {i} fb.py]]")
                wait_until(lambda i=i: _carrying(_bodies(server), 0, needle[i]), timeout,
                           f"aider round {i}'s result at the model", poll=0.05)
                saves.append((project / "fb.py").stat().st_mtime_ns / 1e9)
                if server.reflect:  # the same three-request turn on a file no source checks
                    wait_until(lambda: reg.get(name).state == "ready" and not server.pending,
                               timeout, "ready", poll=0.05)
                    time.sleep(0.5)
                    keys(f"Round {i}. [[aider {i} plain.py]]")
                    wait_until(lambda: not server.pending and reg.get(name).state == "ready",
                               timeout, f"aider plain round {i} done", poll=0.05)
                    psaves.append((project / "plain.py").stat().st_mtime_ns / 1e9)
        else:
            keys("Write the files please. [[bench]]")
            wait_until(lambda: server.step == -1 and reg.get(name).state == "ready", timeout,
                       f"{agent}'s scripted loop done", poll=0.1)
            saves = [(project / f"fb_{i}.py").stat().st_mtime_ns / 1e9 for i in range(rounds)]
        time.sleep(1.0)
        bodies = _bodies(server)
        got = [_carrying(bodies, saves[i], needle[i]) for i in range(rounds)]
        out["missing"] = sum(g is None for g in got)
        out["save_to_request"] = stats_ms([g[0] for g in got if g])
        out["which_request"] = sorted({g[1] for g in got if g})
        with Service.open(paths) as svc:
            hist = [h.message for h in svc.history(name) if h.message.source_id == "bench"]
            out["delivered_via"] = sorted({h.channel for h in svc.history(name)
                                           if h.message.source_id == "bench"})
        created = sorted(m.created for m in hist)
        out["save_to_queued"] = stats_ms([min((c for c in created if c >= s), default=s) - s
                                          for s in saves])
        if agent == "aider":
            out["baseline"] = "save -> queued (the watcher)"
            out["baseline_ms"] = out["save_to_queued"]
        else:
            k = 1 if agent in ("claude", "gemini") else 2
            if not psaves:
                psaves = [(project / f"plain_{i}.py").stat().st_mtime_ns / 1e9
                          for i in range(rounds)]
            base = [_after(bodies, s, k) for s in psaves]
            out["baseline"] = f"plain file: save -> request {k} after it"
            out["baseline_ms"] = stats_ms([b for b in base if b is not None])
        reg.close()
    finally:
        teardown_agentwrap(env, str(root))
        server.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="checked saves per agent (default 5)")
    p.add_argument("--agents", default=",".join(AGENTS))
    p.add_argument("--think", type=float, default=0.5,
                   help="seconds each model reply is held (default 0.5)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    add_against(p)
    args = p.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    work = Path(tempfile.mkdtemp(prefix="awfa-", dir="/tmp"))
    results = []
    try:
        for agent in args.agents.split(","):
            if agents_mod.find_agent(agent.split("-")[0]) is None:
                print(f"{agent}: not installed", file=sys.stderr)
                continue
            r = run_agent(agent, work, args.rounds, args.think, args.timeout)
            print(f"  {agent}: {r}", file=sys.stderr)
            results.append(r)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'agent':7} {'save->result in request p50/p99 ms':>36} {'req#':>5}"
          f" {'save->queued p50':>17} {'baseline p50':>13} {'x base':>7}  baseline")
    for r in results:
        s, q, b = r["save_to_request"], r["save_to_queued"], r["baseline_ms"]
        ratio = s["p50_ms"] / b["p50_ms"] if b["p50_ms"] else None
        print(f"{r['agent']:7} {fmt(s['p50_ms'], '28.0f')} {fmt(s['p99_ms'], '7.0f')}"
              f" {','.join(map(str, r['which_request'])):>5} {fmt(q['p50_ms'], '17.0f')}"
              f" {fmt(b['p50_ms'], '13.0f')} {fmt(ratio, '7.2f')}  {r['baseline']}"
              + (f"  ({r['missing']} not seen)" if r["missing"] else ""))
    print(f"(check: {CHECK!r}; every model reply held {args.think} s; req#: which request"
          " after the save carried the result)")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
