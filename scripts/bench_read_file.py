#!/usr/bin/env python3
"""Benchmark: a message sent while Aider waits on the model -> the model request
that carries it, through Aider's read file (channel ``read-file``), against
typed delivery after the turn (``run --no-channels``) in the same run.

Aider runs under ``agentwrap run --detach`` against the loopback model server of
the e2e tests (tests/e2e/model_server.py) with README.md in the chat and
``--edit-format diff``. A prompt with ``[[reflect]]`` makes a two-request turn:
the first reply, held back ``--hold`` seconds, is an edit whose SEARCH block
matches nothing, so Aider reflects the error to the model at once. The message
is enqueued (in process, ``Service.send``) as soon as the first request has
reached the server and agentwrap sees Aider busy; the script reads from the server's request log when the
first request carrying it arrived:

* ``read-file``: the reflection request, inside the same turn;
* ``typed``: a new turn once the turn has ended and the block was typed.

    .venv/bin/python scripts/bench_read_file.py                 # 3 runs per mode
    .venv/bin/python scripts/bench_read_file.py --runs 5 --hold 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import shutil
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
MODES = ("read-file", "typed")
BAD_EDIT = (
    "Updating the readme.\n\nREADME.md\n```\n<<<<<<< SEARCH\nthis line is not in the file\n"
    "=======\nreplacement\n>>>>>>> REPLACE\n```\n"
)


class ReflectServer(server_mod.ModelServer):  # type: ignore[misc,name-defined]
    """``[[reflect]]``: a failing edit held back ``hold`` s, then a plain answer."""

    def __init__(self, hold: float) -> None:
        super().__init__()
        self.hold = hold
        self.stage = 0

    def _plan(self, api: str, body: Any, turn: Any, tools: list[Any], side: Any) -> Any:
        if side is None and api == "chat":
            if "[[reflect]]" in turn.text:
                self.stage = 1
                return server_mod.Plan(text=BAD_EDIT, delay=self.hold)
            if self.stage == 1:
                self.stage = 2
                return server_mod.Plan(text="Understood; nothing else to change.")
        return super()._plan(api, body, turn, tools, side)


def run_mode(mode: str, work: Path, runs: int, hold: float, timeout: float) -> dict[str, Any]:
    from agentwrap.message import NewMessage, Source
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.registry import Registry

    server = ReflectServer(hold).start()
    root = work / mode
    home, project = root / "home", root / "project"
    launch = agents_mod.prepare_agent("aider", home, project, server.url)
    env = dict(launch.env)
    env.update(XDG_RUNTIME_DIR=str(root / "r"), PYTHONPATH=str(ROOT))
    (root / "r").mkdir(mode=0o700)
    (project / "README.md").write_text("# scratch project for the read-file benchmark\n")
    paths = Paths.from_env(env)
    name = "bench-aider"
    socket = str(paths.tmux_socket_for(name))
    to_request: list[float] = []
    channels: list[str] = []

    def carrying(marker: str) -> float | None:
        return next((r.time for r in server.requests() if not r.side and r.api == "chat"
                     and marker in json.dumps(r.body, ensure_ascii=False)), None)

    try:
        extra = ["--no-channels"] if mode == "typed" else []
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", name, "--cwd",
             str(project), *extra, "--", *launch.argv, "--edit-format", "diff", "README.md"],
            env=env, capture_output=True, text=True, timeout=90, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"agentwrap run failed: {res.stderr}")
        reg = Registry(paths.db_path)
        svc = Service.open(paths)
        wait_until(lambda: reg.get(name).state == "ready", 120, "aider ready", poll=0.05)
        have = list(reg.get(name).options.channels or ())
        if mode == "read-file" and "read-file" not in have:
            raise RuntimeError(f"no read file registered: {reg.get(name).options}")
        for i in range(runs):
            wait_until(lambda: reg.get(name).state == "ready", timeout, "aider ready", poll=0.05)
            time.sleep(0.5)
            server.stage = 0
            subprocess.run(["tmux", "-S", socket, "send-keys", "-t", f"={name}:0.0", "-l",
                            f"Please fix the readme, run {i}. [[reflect]]"], check=True)
            time.sleep(0.5)
            subprocess.run(["tmux", "-S", socket, "send-keys", "-t", f"={name}:0.0", "Enter"],
                           check=True)
            wait_until(lambda: server.stage >= 1, timeout, f"first request (run {i})", poll=0.01)
            wait_until(lambda: reg.get(name).state == "busy", timeout, f"busy (run {i})",
                       poll=0.01)
            marker = f"RB{uuid.uuid4().hex[:8]}"
            t0 = time.time()
            sent = svc.send(NewMessage(session=name, content=f"build {marker} is green",
                                       source=Source.WEBHOOK, source_id="ci"))
            at = wait_until(lambda marker=marker: carrying(marker), timeout,
                            f"the message at the model (run {i})", poll=0.01)
            to_request.append(at - t0)
            wait_until(lambda mid=sent.message.id: svc.get(mid).status.value
                       in ("delivered", "acknowledged"), timeout, f"delivered (run {i})",
                       poll=0.05)
            channels.extend(a.channel for a in svc.message(sent.message.id).attempts)
            print(f"  aider {mode} run {i}: enqueue -> request {to_request[-1]:.3f} s",
                  file=sys.stderr)
        reg.close()
        svc.close()
    finally:
        teardown_agentwrap(env, str(root))
        server.stop()
    return {"agent": "aider", "mode": mode, "runs": runs, "hold_s": hold,
            "channels": sorted(set(channels)), "enqueue_to_request": stats_ms(to_request)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="runs per mode (default 3)")
    p.add_argument("--hold", type=float, default=2.0, help="seconds the first reply is held"
                   " back (default 2.0)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    add_against(p)
    args = p.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    if agents_mod.find_agent("aider") is None:
        print("aider: not installed", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="awbr-", dir="/tmp"))
    try:
        results = [run_mode(m, work, args.runs, args.hold, args.timeout) for m in MODES]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    typed = results[-1]["enqueue_to_request"]["p50_ms"]
    print(f"{'mode':10} {'channel':18} {'enqueue->request p50/p99 ms':>28} {'x typed':>8}")
    for r in results:
        e = r["enqueue_to_request"]
        ratio = e["p50_ms"] / typed if typed and e["p50_ms"] else None
        print(f"{r['mode']:10} {','.join(r['channels']):18} {fmt(e['p50_ms'], '13.0f')}"
              f" {fmt(e['p99_ms'], '13.0f')} {fmt(ratio, '8.2f')}")
    print(f"(first reply held {args.hold} s, the message sent as soon as the first request"
          " arrived; 'x typed': against typed delivery after the turn, same run)")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
