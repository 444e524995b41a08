#!/usr/bin/env python3
"""Benchmark: what agentwrap's hooks cost the agent itself (issue 27).

Each agent (by default the nine: Claude Code, Codex, Gemini CLI, Aider, Copilot
CLI, OpenCode, Qwen Code, Cline, Kimi Code) runs twice at once under
``agentwrap run --detach``: with its native channels (the default: hooks, run by
the native hook client when it is built) and with ``--no-channels`` (typing
only), each against a loopback model server of its own (tests/e2e/model_server.py,
first-run state from tests/e2e/agents.py). Runs alternate between the two, so
the machine's load hits both alike. Per run and mode, with the pane polled
(``tmux capture-pane`` every ``--poll`` s):

* **Enter -> request**: Enter pressed (``send-keys``) -> the model server
  receives the turn's request (a synchronous ``UserPromptSubmit`` is waited
  for before it sends; agentwrap registers it in the background on Claude and
  Codex, and no ``BeforeAgent`` on Gemini, which has no background hooks);
* **reply -> ready**: the reply's text first on screen -> the registry's
  ``state_since`` of ``ready`` (the Stop / AfterAgent hook, or the screen's
  quiet window without hooks);
* **tool step**: a read-only tool call (Claude ``Read``, Gemini's and Qwen's ``read_file``):
  the model's request that calls it -> the next request, with its result (the
  agent runs the tool, then waits for ``PostToolBatch`` / ``AfterTool``);
* **Enter -> dialog**: ``[[tool]]`` (the model calls the shell tool): Enter ->
  the permission dialog first on screen (it waits for ``PermissionRequest``
  with hooks: the model's reply is sent at once, so the difference is the
  agent's own time);
* **dialog -> waiting state**: the dialog on screen -> the first state
  transition to ``waiting_input`` after Enter, whatever decided it (a hook's
  permission request or Claude's session file can say so before the dialog is
  drawn: negative);
* **dialog -> its question**: the dialog on screen -> the registry's
  ``state_since`` of ``waiting_input`` with the question read off the screen
  (what an answer needs; denied then, via ``Service.answer``).

Prints p50/p90 per mode and the hooks/--no-channels ratio of the p50s.

**ccmanager** (optional column, when ``npm install --prefix /opt/ccmanager
ccmanager`` put it there, or ``--ccmanager DIR``): ccmanager's own state
detector module (``services/stateDetector``, per-agent regexes on the last 30
lines; Claude's idle only after 1.5 s unchanged) is driven from node on the
``--no-channels`` pane of the same run, as ccmanager's session manager drives
it: every 100 ms, the screen (here ``tmux capture-pane``, in ccmanager its
xterm buffer) and the previous state in, the state out. Its **reply -> idle**
and **dialog -> waiting_input** (shown against both dialog rows) are measured
from the same on-screen moments.
Without it the column says why it is missing.
Codex runs a third time in mode ``app-server`` (issue 24: its TUI on agentwrap's
private app-server, ``[run] codex_app_server = true``, no channels), whose state
comes from the server's thread status. Prints p50/p90 per mode and the
hooks/--no-channels (and app-server/--no-channels) ratio of the p50s.
Codex's hooks need ``[run] codex_hook_trust = "bypass"`` (set here); Gemini's
need agentwrap to run as root (else that agent's hooks row equals the other).
An agent with no native channel (Aider has its read file, which tells no state;
Cline and Kimi Code have none yet) runs the same screen-only path in both
modes: its ratio shows the noise of the run. The dialog turns run for the
agents :data:`DIALOG` knows (``--plain`` skips them for all).

    .venv/bin/python scripts/bench_agent_hooks.py                      # 10 runs per agent
    .venv/bin/python scripts/bench_agent_hooks.py --agents claude --runs 20 --json
    .venv/bin/python scripts/bench_agent_hooks.py --plain --runs 3     # reply -> ready, nine
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_against import add_arguments as add_against
from bench_against import main as against
from bench_answer import ASK_ARGS, DIALOG, Poller, agents_mod, server_mod
from benchlib import UNDER_TEST, fmt, json_safe, pct, teardown_agentwrap, wait_until

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
# (pi: no hooks and no dialog, nothing to compare)
AGENTS = tuple(a for a in (*agents_mod.AGENT_NAMES, *agents_mod.MORE_AGENTS) if a in DIALOG)
MODES = ("hooks", "no-channels")
#: ``--spawn-true``: Claude Code and Gemini CLI with ``true`` as their hooks (same
#: events, the same in the background, no agentwrap channels): what spawning a
#: hook process costs the agent, whatever the hook does.
TRUE_MODE = "true-hooks"
#: ``--spawn-env``: the same with agentwrap's kinds of command line around a program
#: that does nothing (``true`` alone is the shell's builtin: no process but the
#: shell): ``/usr/bin/env VAR=... true`` (agentwrap's hooks before: dash forks env,
#: which execs true), ``VAR=... exec true`` (now: the shell becomes the program);
#: on Claude also ``/bin/true`` in exec form (``args``: no shell). ``{assigns}``: the
#: session's variables, as agentwrap's hooks set them.
FLOOR_MODES = {TRUE_MODE: "true", "env-true": "/usr/bin/env {assigns} true",
               "assign-true": "{assigns} exec true", "exec-true": ""}
# issue 24: Codex's TUI on agentwrap's private app-server ([run] codex_app_server),
# without channels: its state from the server's thread status instead of the screen
APP_SERVER = "app-server"
METRICS = ("enter_request", "reply_ready", "tool_step", "enter_dialog", "dialog_state",
           "dialog_waiting")
LABELS = {"enter_request": "Enter->request", "reply_ready": "reply->ready",
          "tool_step": "tool step", "enter_dialog": "Enter->dialog",
          "dialog_state": "dialog->waiting state", "dialog_waiting": "dialog->its question"}
#: A read-only tool call that needs no permission, per agent (``[[call: ...]]``;
#: {file}: the project's README.md). Codex has none here: its shell asks.
READ_CALL = {"claude": ("Read", "file_path"), "gemini": ("read_file", "file_path"),
             "qwen": ("read_file", "file_path")}


CCM_STRATEGY = {"claude": "claude", "codex": "codex", "gemini": "gemini"}
CCM_DETECTORS = "node_modules/ccmanager/dist/services/stateDetector/index.js"
#: ccmanager's check, as its session manager runs it (STATE_CHECK_INTERVAL_MS = 100):
#: the screen and the previous state in, the state out; a change printed with
#: the time the check began.
CCM_WATCH = r"""
import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
const [mod, strategy, sock, target, interval] = process.argv.slice(2);
const { createStateDetector } = await import(pathToFileURL(mod).href);
const detector = createStateDetector(strategy);
let state = 'busy';
const terminal = (lines) => ({
  rows: lines.length, cols: 500,
  buffer: { active: { baseY: 0, type: 'normal', cursorX: 0, cursorY: 0,
    getLine: (y) => ({ translateToString: () => lines[y] ?? '' }) } },
});
setInterval(() => {
  const t = Date.now();
  let out;
  try {
    out = execFileSync('tmux', ['-S', sock, 'capture-pane', '-p', '-t', target], { encoding: 'utf8' });
  } catch { return; }
  const next = detector.detectState(terminal(out.replace(/\n$/, '').split('\n')), state);
  if (next !== state) { state = next; process.stdout.write(`${t} ${next}\n`); }
}, Number(interval));
"""


class CcmanagerWatch:
    """ccmanager's state detector on one pane: its state changes, with times."""

    def __init__(self, ccm_dir: Path, agent: str, socket: str, target: str, work: Path) -> None:
        script = work / "ccm-watch.mjs"
        script.write_text(CCM_WATCH, encoding="utf-8")
        self.changes: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            ["node", str(script), str(ccm_dir / CCM_DETECTORS), CCM_STRATEGY[agent], socket,
             target, "100"], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            ms, _, state = line.strip().partition(" ")
            self.changes.append((int(ms) / 1000, state))

    def first(self, after: float, state: str) -> float | None:
        return next((t for t, s in list(self.changes) if t >= after and s == state), None)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=5)


GEMINI_DEFAULTS = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"


def true_hooks_file(agent: str, mode: str = TRUE_MODE, assigns: str = "",
                    only: tuple[str, ...] = ()) -> Path:
    """``true`` as the hook of each event agentwrap registers (``only``: of
    those), the same ones in the background, with the command line of ``mode``
    (:data:`FLOOR_MODES`): Gemini's system defaults (in a private dir under /run:
    Gemini reads such a file only when root owns it and no dir above it is
    group/world writable, not /tmp), Claude's ``--settings`` layer."""
    from agentwrap.sessions.channels import CLAUDE_SIGNAL_EVENTS, HOOK_EVENTS

    path = Path(tempfile.mkdtemp(prefix="awah-true-", dir="/run")) / f"{agent}-true-hooks.json"
    events = [e for e in HOOK_EVENTS[agent] if not only or e in only]
    command = FLOOR_MODES[mode].format(assigns=assigns)
    form: dict[str, Any] = {"command": command} if command else \
        {"command": shutil.which("true") or "/bin/true", "args": []}
    if agent == "claude":  # agentwrap's background set without answer rules
        background = CLAUDE_SIGNAL_EVENTS | {"PermissionRequest"}
        hooks = {e: [{"hooks": [{"type": "command", **form, "timeout": 10,
                                 **({"async": True} if e in background else {})}]}]
                 for e in events}
        data: dict[str, Any] = {"hooks": hooks}
    else:
        hook = {"type": "command", **form, "timeout": 10000}
        data = {"hooksConfig": {"enabled": True}, "hooks": {e: [{"hooks": [hook]}] for e in events}}
    path.write_text(json.dumps(data), encoding="utf-8")
    path.chmod(0o600)
    return path


def ccmanager_dir(given: str | None) -> tuple[Path | None, str]:
    """Where ccmanager is installed, or None and why not."""
    if shutil.which("node") is None:
        return None, "ccmanager: skipped (no node on PATH)"
    root = Path(given or "/opt/ccmanager")
    if not (root / CCM_DETECTORS).is_file():
        return None, (f"ccmanager: skipped (not installed: npm install --prefix {root}"
                      " ccmanager, or --ccmanager DIR)")
    pkg = json.loads((root / "node_modules/ccmanager/package.json").read_text(encoding="utf-8"))
    return root, f"ccmanager {pkg.get('version')}: its state detector on the --no-channels pane"


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
        # Codex's hooks need the person's opt-in; OpenCode asks only in its ask-first mode
        # (the app-server is Codex's default: the other modes measure the screen)
        server_on = f"codex_app_server = {'true' if self.mode == APP_SERVER else 'false'}\n"
        (paths.config_dir / "config.toml").write_text(
            f'[run]\ncodex_hook_trust = "bypass"\nask_first = true\n{server_on}',
            encoding="utf-8")
        self.name = f"b-{self.agent}-{'x' if self.mode == 'exec-true' else self.mode[0]}"
        extra = ["--no-channels"] if self.mode != "hooks" else []
        argv = list(launch.argv)
        if self.mode in FLOOR_MODES:
            from agentwrap.sessions.channels import server_env

            assigns = " ".join(f"{k}={v}" for k, v in
                               {**server_env(self.name, paths),
                                "AGENTWRAP_PROFILE": self.agent}.items())
            self.true_file = true_hooks_file(self.agent, self.mode, assigns, self.floor_events)
            if self.agent == "gemini":
                self.env[GEMINI_DEFAULTS] = str(self.true_file)
            else:
                argv += ["--settings", str(self.true_file)]
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", self.name, *extra,
             "--cwd", str(project), "--", *argv, *ASK_ARGS.get(self.agent, [])],
            env=self.env, capture_output=True,
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
    trace: bool = False
    ccm: CcmanagerWatch | None = None
    true_file: Path | None = None
    floor_events: tuple[str, ...] = ()

    def watch_ccmanager(self, ccm_dir: Path) -> None:
        self.ccm = CcmanagerWatch(ccm_dir, self.agent, self.socket, f"={self.name}:0.0", self.root)
        self.samples.update({"ccm_reply_ready": [], "ccm_dialog_waiting": []})

    def ccm_sample(self, metric: str, after: float, state: str, timeout: float) -> None:
        """ccmanager's first ``state`` after ``after`` (its idle needs 1.5 s still)."""
        ccm = self.ccm
        if ccm is None:
            return
        try:
            t = wait_until(lambda: ccm.first(after - 0.2, state), timeout,
                           f"ccmanager {state}", poll=0.02)
        except TimeoutError:
            print(f"  {self.name}: ccmanager never read {state}", file=sys.stderr)
            return
        self.samples[metric].append(t - after)

    def print_trace(self, t0: float, seen: float, request: float) -> None:
        """One turn's detector inputs and verdicts, in ms from the reply on screen:
        the pane's changes (as polled), the state transitions (signal, rule, reason)."""
        assert self.poller is not None
        time.sleep(0.3)  # the hook's late signals and their transitions
        with self.poller.lock:
            frames = [(t, x) for t, x in self.poller.frames if t >= t0]
        rows = [(request, "request  the model server has the turn")]
        prev = ""
        for t, text in frames:
            if text != prev:
                tail = " | ".join(ln.strip() for ln in text.rstrip().splitlines()[-6:] if ln.strip())
                rows.append((t, f"screen   {tail[:150]}"))
                prev = text
        rows += [(tr.at, f"state    {tr.state:13} {tr.signal:10} {tr.rule:14} {tr.reason[:90]}")
                 for tr in self.reg.transitions(self.name) if tr.at >= t0]
        for f in (self.root / "home" / ".claude" / "sessions").glob("*.json"):  # Claude's own
            rows.append((f.stat().st_mtime, f"file     {f.name} last written: {f.read_text()[:80]}"))
        from agentwrap.paths import Paths
        from agentwrap.sessions.signals import read_signal

        sig = read_signal(Paths.from_env(self.env), self.name)
        if sig is not None and sig.at >= t0:
            rows.append((sig.at, f"signal   {sig.event} -> {sig.signal} (the hook's start)"))
        print(f"--- {self.name} turn trace (ms from the reply on screen)", file=sys.stderr)
        for t, what in sorted(rows):
            print(f"  {(t - seen) * 1000:+8.0f}  {what}", file=sys.stderr)

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
        self.ccm_sample("ccm_reply_ready", seen, "idle", 10)
        if self.trace:
            self.print_trace(t0, seen, req.time)

    def tool_turn(self, i: int, timeout: float) -> None:
        """The request that calls a read-only tool -> the one with its result."""
        if self.agent not in READ_CALL:
            return
        tool, arg = READ_CALL[self.agent]
        self.ready(timeout)
        path = self.root / "project" / "README.md"
        path.write_text(f"# bench project, round {i}\n", encoding="utf-8")
        self.keys(f"[[call: {tool} {json.dumps({arg: str(path)})}]] round {i}", literal=True)
        time.sleep(0.4)
        n = len(self.turns())
        self.keys("Enter")
        reqs = wait_until(lambda: len(self.turns()) >= n + 2 and self.turns()[n:n + 2], timeout,
                          f"{self.name} tool result request")
        self.samples["tool_step"].append(reqs[1].time - reqs[0].time)
        if self.trace:
            print(f"TOOLSTEP {self.name} {reqs[0].time:.4f} {reqs[1].time:.4f}", file=sys.stderr)

    def dialog_turn(self, i: int, timeout: float) -> None:
        """Enter -> dialog on screen -> waiting_input; denied."""
        assert self.poller is not None
        self.ready(timeout)
        self.keys(f"[[tool]] run {i}", literal=True)
        time.sleep(0.4)
        n = len(self.turns())
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
        first = min(tr.at for tr in self.reg.transitions(self.name)
                    if tr.state == "waiting_input" and tr.at > t0)
        self.samples["dialog_state"].append(first - shown)
        self.ccm_sample("ccm_dialog_waiting", shown, "waiting_input", 10)
        if self.trace:
            reqs = self.turns()[n:]
            print(f"DIALOG {self.name} {t0:.4f} {reqs[0].time if reqs else 0:.4f} {shown:.4f}",
                  file=sys.stderr)
            self.print_trace(t0, shown, reqs[0].time if reqs else t0)
        result = self.svc.answer(self.name, deny=True, question_id=asked.question["id"],
                                 source="bench")
        self.svc.wait_answer(result.answer.id, timeout)

    def close(self) -> None:
        if self.ccm is not None:
            self.ccm.close()
        if self.poller is not None:
            self.poller.close()
        for h in (self.reg, self.svc):
            if h is not None:
                h.close()
        teardown_agentwrap(self.env, str(self.root))
        if self.true_file is not None:
            shutil.rmtree(self.true_file.parent, ignore_errors=True)
        if self.server is not None:
            self.server.stop()


def stats(xs: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in xs)
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90)}


def bench_agent(agent: str, work: Path, runs: int, poll: float,
                timeout: float, trace: bool = False, ccm_dir: Path | None = None,
                spawn_true: bool = False, dialogs: bool = True, spawn_env: bool = False,
                floor_events: tuple[str, ...] = ()) -> dict[str, Any]:
    floors = [m for m in FLOOR_MODES if (m == TRUE_MODE and spawn_true)
              or (m != TRUE_MODE and spawn_env and (m != "exec-true" or agent == "claude"))]
    modes = (*MODES, *(floors if agent in ("claude", "gemini") else ()),
             *((APP_SERVER,) if agent == "codex" else ()))
    sessions = [Session(agent, mode, work / f"{agent}-{mode}") for mode in modes]
    try:
        for s in sessions:
            s.poll_s, s.trace, s.floor_events = poll, trace, floor_events
            s.start()
            if ccm_dir is not None and s.mode == "no-channels" and agent in CCM_STRATEGY:
                s.watch_ccmanager(ccm_dir)
        for i in range(runs):
            for s in sessions:  # interleaved: each mode once per round
                s.plain_turn(i, timeout)
                if dialogs:
                    s.tool_turn(i, timeout)
                    if agent in DIALOG:
                        s.dialog_turn(i, timeout)
            print(f"  {agent} run {i} done", file=sys.stderr)
        return {"agent": agent, "runs": runs,
                **{s.mode: {m: stats(v) for m, v in s.samples.items()} for s in sessions}}
    finally:
        for s in sessions:
            s.close()


CCM_OF = {"reply_ready": "ccm_reply_ready", "dialog_state": "ccm_dialog_waiting",
          "dialog_waiting": "ccm_dialog_waiting"}


def print_table(results: list[dict[str, Any]], ccm_note: str) -> None:
    def cell(x: dict[str, float]) -> str:
        return fmt(x["p50_ms"], ".0f") + "/" + fmt(x["p90_ms"], ".0f")

    head = (f"{'agent':8} {'metric':22} {'hooks p50/p90':>15} {'--no-channels':>15} {'ratio':>6}"
            f" {'ccmanager':>11} {'hooks/ccm':>9}")
    print(head)
    print("-" * len(head))
    for r in results:
        for m in METRICS:
            h, n = r["hooks"][m], r["no-channels"][m]
            if not h["n"]:
                continue
            ratio = h["p50_ms"] / n["p50_ms"] if n["p50_ms"] else None
            c = r["no-channels"].get(CCM_OF.get(m, ""))
            c_ratio = h["p50_ms"] / c["p50_ms"] if c and c["p50_ms"] else None
            floors = "".join(
                f"   {mode} {cell(t)} ({fmt(t['p50_ms'] / n['p50_ms'] if n['p50_ms'] else None, '.2f')})"
                for mode in FLOOR_MODES if (t := r.get(mode, {}).get(m)))
            a = r.get(APP_SERVER, {}).get(m)
            a_ratio = a["p50_ms"] / n["p50_ms"] if a and n["p50_ms"] else None
            print(f"{r['agent']:8} {LABELS[m]:22} {cell(h):>15} {cell(n):>15}"
                  f" {fmt(ratio, '.2f'):>6} {cell(c) if c else '':>11}"
                  f" {fmt(c_ratio, '.2f') if c else '':>9}"
                  + floors
                  + (f"   app-server {cell(a)} ({fmt(a_ratio, '.2f')})" if a else ""))
    print("ms, p50/p90 over the runs; ratio: hooks p50 over --no-channels p50 (same run);"
          " hooks/ccm: hooks p50 over ccmanager's p50 (same run); app-server: Codex's TUI on"
          " agentwrap's app-server, no channels")
    print(ccm_note)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--runs", type=int, default=10, help="runs per agent and mode")
    ap.add_argument("--poll", type=float, default=0.01, help="pane poll interval, s")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for any one step")
    ap.add_argument("--plain", action="store_true",
                    help="plain turns only (Enter -> request, reply -> ready): no dialogs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--ccmanager", metavar="DIR",
                    help="ccmanager's npm prefix (default /opt/ccmanager; skipped if absent)")
    ap.add_argument("--spawn-true", action="store_true",
                    help="Claude, Gemini also with `true` as their hooks (what a hook spawn costs)")
    ap.add_argument("--spawn-env", action="store_true",
                    help="Claude, Gemini also with `env VAR=.. true`, `VAR=.. true` and (Claude)"
                         " `true` in exec form as their hooks: agentwrap's command line's share")
    ap.add_argument("--spawn-events", default="",
                    help="the `true` modes register only these events (comma-separated)")
    ap.add_argument("--trace", action="store_true",
                    help="print each plain turn's and dialog's screen changes and state"
                         " transitions, and each tool step's and dialog's request times (stderr)")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=False)
    work = Path(tempfile.mkdtemp(prefix="awah-", dir="/tmp"))
    ccm_dir, ccm_note = ccmanager_dir(args.ccmanager)
    print(ccm_note, file=sys.stderr)
    results = []
    print(f"load average at the start: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    try:
        for agent in args.agents.split(","):
            if agents_mod.find_agent(agent) is None:
                print(f"{agent}: not installed (scripts/install_agents.sh)", file=sys.stderr)
                continue
            try:
                results.append(bench_agent(agent, work, args.runs, args.poll, args.timeout,
                                           args.trace, ccm_dir, args.spawn_true,
                                           dialogs=not args.plain, spawn_env=args.spawn_env,
                                           floor_events=tuple(e for e in
                                                              args.spawn_events.split(",") if e)))
            except (RuntimeError, TimeoutError) as exc:
                print(f"{agent}: FAILED: {exc}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe({"ccmanager": ccm_note, "results": results}), indent=2))
    else:
        print_table(results, ccm_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
