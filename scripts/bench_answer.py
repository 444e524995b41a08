#!/usr/bin/env python3
"""Benchmark: a real agent's permission dialog -> ``waiting_input`` with the parsed
question, and an answer -> the dialog closed, per agent.

Each agent (Claude Code, Codex, Gemini CLI, Aider, Copilot CLI, OpenCode, Qwen
Code, Cline, Kimi Code; one at a time) runs under
``agentwrap run --detach`` against the loopback model server of the e2e tests
(tests/e2e/model_server.py), with the first-run state of tests/e2e/agents.py.
Each run sends ``[[delay: D]] [[tool]]`` (the agent is busy D seconds, then
the model calls its shell tool: a permission dialog; aider: ``Create new
file?``) and, while this script polls the pane (``tmux capture-pane`` every
``--poll`` ms, timestamps from ``time.time()`` like the registry's):

* **draft seen -> registry draft** (the baseline: the supervisor's plain state
  change, ready -> draft, from the screen alone): a person's keys typed into the
  empty box (``send-keys -l``) -> the first poll showing them -> the registry's
  ``state_since`` of ``draft`` (then erased with BSpace). Busy is no baseline:
  Claude's busy comes from its session file before the screen shows it;
* **dialog seen -> question**: the first poll showing the dialog's line ->
  the registry's ``state_since`` of ``waiting_input`` with a question (set
  when the question is published, with its event);
* **model reply -> question**: the model server's tool-call request -> the
  same (includes the agent's own time to draw the dialog);
* Claude only, a dialog of two questions (AskUserQuestion, the second
  multi-select) answered with ``answers`` (``agentwrap answer --answer ...``):
  **answer -> tabs gone** and **-> applied**, in the notes;
* **answer -> dialog gone**: ``Service.answer`` called in process (what
  ``agentwrap answer`` and the HTTP API call) -> the first poll without the
  dialog's line; and **-> applied**: -> the answer's ``finished`` time (the
  supervisor typed the keys and saw the dialog close).

Claude, Codex, Gemini and the five others are answered option 1 (approve, the
file is removed before the next run; OpenCode started in its ask-first mode,
Cline with ``--auto-approve false``, so that they ask); aider is denied
(``n`` + Enter), because once the file exists the same edit no longer asks
``Create new file?``. The poll is the
screen's clock: an event is seen up to one poll interval late, so the
"seen ->" figures are short by up to that much (the same for the baseline).

    .venv/bin/python scripts/bench_answer.py                    # 5 runs per agent, ~2 min
    .venv/bin/python scripts/bench_answer.py --agents claude --runs 10 --json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST, Poller, fmt, json_safe, stats_ms, teardown_agentwrap, wait_until

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


agents_mod = _import("agentwrap_bench_agents", ROOT / "tests" / "e2e" / "agents.py")
server_mod = _import("agentwrap_bench_model_server", ROOT / "tests" / "e2e" / "model_server.py")

DRAFT = "bench draft text"
DIALOG = {
    "claude": re.compile(r"Do you want to proceed\?"),
    "codex": re.compile(r"Would you like to run the following command\?"),
    "gemini": re.compile(r"Allow execution of \["),
    # the answered question stays in aider's transcript: only the last line asks
    "aider": re.compile(r"Create new file\? \(Y\)es/\(N\)o \[Yes\]:\Z"),
    "copilot": re.compile(r"Do you want to run this command\?"),
    "opencode": re.compile(r"△ Permission required"),
    "qwen": re.compile(r"Allow execution of"),
    "cline": re.compile(r"Cline needs permission"),
    "kimi": re.compile(r"Run this command\?"),
}
HOW = {"claude": "option 1", "codex": "option 1", "gemini": "option 1", "aider": "deny",
       "copilot": "option 1", "opencode": "option 1", "qwen": "option 1", "cline": "option 1",
       "kimi": "option 1"}
#: What makes an agent ask before its shell tool runs: agentwrap config (OpenCode
#: runs every tool without asking unless started in its ask-first mode) and
#: arguments after the agent's own (Cline approves everything by default).
ASK_CONFIG = {"opencode": "[run]\nask_first = true\n"}
ASK_ARGS = {"cline": ["--auto-approve", "false"]}
STATES = ("draft", "question", "reply", "gone", "applied", "tabs_gone", "tabs_applied")
TABS = re.compile(r"Tab/Arrow keys to navigate|Ready to submit your answers\?")
ASK_TWO = {"questions": [
    {"question": "Which database?", "header": "Database", "multiSelect": False,
     "options": [{"label": "SQLite", "description": "a file"},
                 {"label": "Postgres", "description": "a server"}]},
    {"question": "Which features?", "header": "Features", "multiSelect": True,
     "options": [{"label": "Search", "description": "full text"},
                 {"label": "Backups", "description": "nightly"},
                 {"label": "Metrics", "description": "Prometheus"}]}]}


def bench_agent(agent: str, work: Path, runs: int, delay: float, poll: float,
                timeout: float) -> dict[str, Any]:
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.registry import Registry

    server = server_mod.ModelServer().start()
    root = work / agent
    home, project = root / "home", root / "project"
    launch = agents_mod.prepare_agent(agent, home, project, server.url)
    env = dict(launch.env)
    env.update(XDG_RUNTIME_DIR=str(root / "r"), PYTHONPATH=str(ROOT))
    (root / "r").mkdir(mode=0o700)
    paths = Paths.from_env(env)
    if agent in ASK_CONFIG:
        paths.config_dir.mkdir(parents=True, exist_ok=True)
        (paths.config_dir / "config.toml").write_text(ASK_CONFIG[agent], encoding="utf-8")
    name = f"bench-{agent}"
    samples: dict[str, list[float]] = {k: [] for k in STATES}
    notes: list[str] = []
    poller: Poller | None = None
    try:
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", name, "--cwd",
             str(project), "--", *launch.argv, *ASK_ARGS.get(agent, [])], env=env,
            capture_output=True, text=True, timeout=90, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"{agent}: agentwrap run failed: {res.stderr}")
        reg = Registry(paths.db_path)
        svc = Service.open(paths)

        def rec() -> Any:
            return reg.get(name)

        wait_until(lambda: rec().state == "ready", 90, f"{agent} ready", poll=0.05)
        poller = Poller(str(paths.tmux_socket_for(name)), f"={name}:0.0", poll)
        for i in range(runs):
            wait_until(lambda: rec().state == "ready", timeout, f"{agent} ready", poll=0.05)
            time.sleep(0.5)
            d0 = time.time()
            subprocess.run(["tmux", "-S", str(paths.tmux_socket_for(name)), "send-keys", "-t",
                            f"={name}:0.0", "-l", DRAFT], check=True)
            typed = wait_until(lambda d0=d0: poller is not None
                               and poller.first(d0, re.compile(DRAFT)), 10, "the draft in a poll")
            d_rec = wait_until(lambda: (r := rec()).state == "draft" and r, timeout,
                               f"{agent} draft", poll=0.01)
            samples["draft"].append(d_rec.state_since - typed)
            subprocess.run(["tmux", "-S", str(paths.tmux_socket_for(name)), "send-keys", "-t",
                            f"={name}:0.0", *["BSpace"] * len(DRAFT)], check=True)
            wait_until(lambda: rec().state == "ready", timeout, f"{agent} ready", poll=0.05)
            time.sleep(0.5)
            t0 = time.time()
            n_req = len(server.requests())
            res = subprocess.run(
                [sys.executable, "-m", "agentwrap", "send", name,
                 f"[[delay: {delay}]] [[tool]] run {i}"], env=env, capture_output=True,
                text=True, timeout=60, check=False)
            if res.returncode != 0:
                raise RuntimeError(f"{agent}: send failed: {res.stderr}")
            q_rec = wait_until(lambda: (r := rec()).state == "waiting_input" and r.question
                               and r, timeout, f"{agent} question (run {i})", poll=0.01)
            dialog_at: float = wait_until(lambda t0=t0: poller is not None
                                          and poller.first(t0, DIALOG[agent]), 5,
                                          "the dialog in a poll")
            call = next((r.time for r in server.requests()[n_req:]
                         if (r.reply or "").startswith("tool_call:") or "Creating the file"
                         in (r.reply or "")), None)
            samples["question"].append(q_rec.state_since - dialog_at)
            if call is not None:  # the reply leaves the server [[delay]] after the request
                samples["reply"].append(q_rec.state_since - (call + delay))
            time.sleep(0.3)
            q_id = q_rec.question["id"]
            a0 = time.time()
            result = (svc.answer(name, deny=True, question_id=q_id, source="bench")
                      if HOW[agent] == "deny" else
                      svc.answer(name, option=1, question_id=q_id, source="bench"))
            done = svc.wait_answer(result.answer.id, timeout)
            if done.status != "applied" or done.finished is None:
                raise RuntimeError(f"{agent}: answer {done.status}: {done.detail}")
            try:
                gone = wait_until(lambda a0=a0: poller is not None
                                  and poller.first(a0, DIALOG[agent], present=False), 5,
                                  "the dialog gone in a poll")
            except TimeoutError:
                raise RuntimeError(f"{agent}: the dialog's line stayed on screen:\n"
                                   f"{poller.frames[-1][1]}") from None
            samples["gone"].append(gone - a0)
            samples["applied"].append(done.finished - a0)
            wait_until(lambda: rec().state == "ready", timeout, f"{agent} ready after", poll=0.05)
            (project / server_mod.TOOL_FILE).unlink(missing_ok=True)
            print(f"  {agent} run {i}: question {1000 * samples['question'][-1]:.0f} ms,"
                  f" applied {1000 * samples['applied'][-1]:.0f} ms", file=sys.stderr)
        if agent == "claude":  # a dialog of two questions, the second multi-select
            for i in range(runs):
                wait_until(lambda: rec().state == "ready", timeout, f"{agent} ready", poll=0.05)
                time.sleep(0.5)
                t0 = time.time()
                res = subprocess.run(
                    [sys.executable, "-m", "agentwrap", "send", name, "--raw",
                     f"[[call: AskUserQuestion {json.dumps(ASK_TWO)}]] run {i}"], env=env,
                    capture_output=True, text=True, timeout=60, check=False)
                if res.returncode != 0:
                    raise RuntimeError(f"{agent}: send failed: {res.stderr}")
                q_rec = wait_until(lambda: (r := rec()).state == "waiting_input" and r.question
                                   and r.question.get("tabs") and r, timeout,
                                   f"{agent} two questions (run {i})", poll=0.01)
                wait_until(lambda t0=t0: poller is not None and poller.first(t0, TABS), 5,
                           "the tabs in a poll")
                time.sleep(0.3)
                a0 = time.time()
                result = svc.answer(name, answers={"Database": "SQLite", "Features": [1, 3]},
                                    question_id=q_rec.question["id"], source="bench")
                done = svc.wait_answer(result.answer.id, timeout)
                if done.status != "applied" or done.finished is None:
                    raise RuntimeError(f"{agent}: answers {done.status}: {done.detail}")
                gone = wait_until(lambda a0=a0: poller is not None
                                  and poller.first(a0, TABS, present=False), 5,
                                  "the tabs gone in a poll")
                samples["tabs_gone"].append(gone - a0)
                samples["tabs_applied"].append(done.finished - a0)
            notes.append("two questions as tabs (--answer for each): answer->gone"
                         f" {fmt(stats_ms(samples['tabs_gone'])['p50_ms'], '.0f')} ms,"
                         f" ->applied {fmt(stats_ms(samples['tabs_applied'])['p50_ms'], '.0f')}"
                         " ms p50 (each tab looked at, then answered, then the review)")
        reg.close()
        svc.close()
    finally:
        if poller is not None:
            poller.close()
        teardown_agentwrap(env, str(root))
        server.stop()
    return {"agent": agent, "how": HOW[agent], "runs": runs,
            **{k: stats_ms(v) for k, v in samples.items()}, "notes": notes}


def print_table(results: list[dict[str, Any]]) -> None:
    head = (f"{'agent':8} {'answer':9} {'draft seen->state':>17} {'dialog seen->question':>22}"
            f" {'ratio':>6} {'reply->question':>16} {'answer->gone':>13} {'answer->applied':>16}")
    print(head)
    print("-" * len(head))
    def cell(r: dict[str, Any], k: str) -> str:
        return f"{fmt(r[k]['p50_ms'], '.0f')}/{fmt(r[k]['p99_ms'], '.0f')}"

    for r in results:
        ratio = r["question"]["p50_ms"] / r["draft"]["p50_ms"] if r["draft"]["p50_ms"] else None
        print(f"{r['agent']:8} {r['how']:9} {cell(r, 'draft'):>17} {cell(r, 'question'):>22}"
              f" {fmt(ratio, '.1f'):>6} {cell(r, 'reply'):>16} {cell(r, 'gone'):>13}"
              f" {cell(r, 'applied'):>16}")
    print("ms, p50/p99 over the runs; ratio: dialog->question p50 over the draft baseline p50")
    for r in results:
        for n in r["notes"]:
            print(f"note {r['agent']}: {n}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    # pi has no dialog to answer: nothing to measure
    ap.add_argument("--agents", default=",".join(a for a in (*agents_mod.AGENT_NAMES,
                                                             *agents_mod.MORE_AGENTS)
                                                 if a in DIALOG))
    ap.add_argument("--runs", type=int, default=5, help="dialogs per agent")
    ap.add_argument("--delay", type=float, default=1.5, help="seconds the agent is busy first")
    ap.add_argument("--poll", type=float, default=0.015, help="pane poll interval, s")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for any one step")
    ap.add_argument("--json", action="store_true")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=False)
    work = Path(tempfile.mkdtemp(prefix="awa-", dir="/tmp"))
    results = []
    try:
        for agent in args.agents.split(","):
            if agents_mod.find_agent(agent) is None:
                print(f"{agent}: not installed (scripts/install_agents.sh)", file=sys.stderr)
                continue
            try:
                results.append(bench_agent(agent, work, args.runs, args.delay, args.poll,
                                           args.timeout))
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
