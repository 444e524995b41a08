#!/usr/bin/env python3
"""Benchmark: a question on the agent's screen -> its notice at the push service.

The stand-in agent (tests/support/standin_agent.py) runs under a real
supervisor (tmux backend) with ``[notify] urls`` naming an ntfy-compatible
stand-in server on loopback (tests/support/notify_sinks.py), reached through
Apprise exactly as ntfy.sh would be. For each run a message opens the
stand-in's permission dialog; the stand-in logs the wall-clock time it read
that message and drew the dialog (its ``t``); the server stamps the wall-clock
time the notice's request arrived. Latency = arrival - drawn. The dialog is
then denied (``agentwrap answer --deny``) and the next run waits for the
session to be ready again.

The goal (issue 40): p99 <= 1 s, most of which should be the service's own
latency (here ~0: loopback), i.e. the supervisor's look at the screen plus
the worker's hand-off.

    .venv/bin/python scripts/bench_notify.py                 # 30 runs, ~1 min
    .venv/bin/python scripts/bench_notify.py --runs 100 --json out.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST as ROOT
from benchlib import isolated_env, stats_ms, teardown_agentwrap, wait_until, write_json

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.notify_sinks import NtfyStandIn

STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"


def cli(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentwrap", *args], env=env, text=True,
                          capture_output=True, timeout=timeout, check=False)


def state(env: dict[str, str], name: str) -> str:
    res = cli(env, "state", name, "--json")
    try:
        return str(json.loads(res.stdout).get("state", ""))
    except json.JSONDecodeError:
        return ""


def drawn_at(log: Path, marker: str) -> float | None:
    """When the stand-in read the message that opened its dialog (wall clock)."""
    if not log.exists():
        return None
    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if marker in rec.get("text", ""):
            return float(rec["t"])
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", default="", help="write the figures to this file")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    work = Path(tempfile.mkdtemp(prefix="awn-", dir="/tmp"))
    env = isolated_env(work, ROOT)
    server = NtfyStandIn()
    result: dict[str, Any] = {"runs": args.runs, "errors": []}
    try:
        from agentwrap.paths import Paths

        paths = Paths.from_env(env).ensure()
        paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROFILE, paths.user_patterns_dir / "standin.toml")
        paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        paths.config_file.write_text(
            "[delivery]\nnotify_on_failure = false\nreadiness_timeout_s = 60\n\n"
            f'[notify]\ndesktop = false\ntmux_message = false\nurls = ["{server.url()}"]\n',
            encoding="utf-8")
        log = work / "standin.jsonl"
        project = work / "p"
        project.mkdir()
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", "bn", "--profile",
             "standin", "--cols", "100", "--rows", "30", "--", sys.executable, str(STANDIN),
             "--log", str(log), "--dialog-on", "OPENDIALOG", "--busy", "0.05"],
            env=env, cwd=project, text=True, capture_output=True, timeout=60, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"run failed: {res.stderr}")
        wait_until(lambda: state(env, "bn") == "ready", 60, "the stand-in ready", poll=0.1)
        lat: list[float] = []
        for i in range(args.runs):
            marker = f"OPENDIALOG run{i}"
            before = len(server.arrived)
            cli(env, "send", "bn", f"please {marker}")
            wait_until(lambda n=before: len(server.arrived) > n, 60, "the notice", poll=0.002)
            arrived = server.arrived[before]
            t_drawn = wait_until(lambda m=marker: drawn_at(log, m), 10, "the stand-in's stamp")
            lat.append(arrived.wall - t_drawn)
            done = cli(env, "answer", "bn", "--deny", "--timeout", "30")
            if done.returncode != 0:
                result["errors"].append(f"run {i}: answer: {done.stderr.strip()[:200]}")
            wait_until(lambda: state(env, "bn") == "ready", 60, "ready again", poll=0.05)
        result["question_to_notice_ms"] = stats_ms(lat)
        s = result["question_to_notice_ms"]
        print(f"question on screen -> notice at the ntfy stand-in ({args.runs} runs):"
              f" p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, max {s['max_ms']:.0f} ms"
              f" (goal: p99 <= 1000 ms)")
    finally:
        teardown_agentwrap(env, str(work))
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        write_json(args.json, result)
    for e in result["errors"]:
        print("error:", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
