#!/usr/bin/env python3
"""Benchmark: is the agent taking keys when agentwrap says ``ready`` (issue 37)?

Ground truth is the agent's own behaviour, not a screen rule: after a reply,
this script types one probe key (``z``) every ``--probe`` ms and erases it;
the **truth** is the first probe that is echoed into a *fresh* prompt (the
reply's line on screen, the key shown in the input box, no busy rule of the
profile matching: a key shown in a busy agent's box is queued, not a new
prompt). For dialogs the truth is the first ``Down`` that moves the dialog's
cursor. Probing types into the box, which agentwrap sees (a draft), so turns
alternate and are paired:

* an **agentwrap turn**: the script types the prompt (``send-keys``) and, once
  the turn is busy, queues the next prompt with ``Service.send``; agentwrap
  types it when it decides ``ready``. Measured from the first pane capture
  showing the reply's line (``--poll`` ms captures): agentwrap's ``ready``
  (its ``session.state`` event), the moment it **lets keys through** (the
  queued message's ``pasting`` phase: its first key), and ccmanager's rule on
  the same captures (busy -> idle once the screen is unchanged for 1.5 s).
  Every ``ready`` event between a turn's Enter and its first ``busy`` is a
  **passing ready**;
* a **truth turn** (the queued message's own turn): the probes, measured from
  its reply's line the same way.

Each agentwrap turn is set against the truth of the truth turn after it
(``let - truth``: two turns, so a slow truth turn skews it). **Keys let
through before the agent takes them** are counted in the agentwrap turn itself:
the first capture showing agentwrap's keys in the input box (its marker, or the
agent's paste placeholder) shows a busy rule, or not yet the reply's line: the
keys went to an agent still in its turn. (The old count, ``let`` below the
*next* turn's truth by more than a probe interval, is kept as ``paired early``:
it counted a slow truth turn as an early let-through.) Dialogs (``--dialogs``): the model
calls the shell tool (a permission dialog); agentwrap's ``waiting_input`` and
the dialog's first capture are measured against the first ``Down`` taken (on
alternate dialogs: the others are answered by agentwrap, ``applied`` time
reported), each dialog then closed with ``Escape``. Same-run figures only; no
thresholds. ``--busy`` loads both cores (two spinning processes) for the run.

``standin`` is tests/support/standin_agent.py (no model server): the fast
test runs it.

    .venv/bin/python scripts/bench_ready.py --agents claude,codex --turns 10     # ~3 min
    .venv/bin/python scripts/bench_ready.py --agents claude --turns 20 --dialogs 10 --busy --json r.json
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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
    kill_proc,
    pct,
    teardown_agentwrap,
    wait_until,
    write_json,
)

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
STANDIN_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"
CCMANAGER_QUIET_S = 1.5
PROBE = "z"
#: How long a probe key's effect is waited for before the next key is typed: the
#: truth is that key's send time, so it is late by at most this (a key taken
#: later than its window is credited to the next one).
WINDOW_S = 0.3


class Pane:
    """``capture-pane`` every ``poll`` s in a thread: the changes, with their times."""

    def __init__(self, socket: str, target: str, poll: float) -> None:
        self.cmd = ["tmux", "-S", socket, "capture-pane", "-p", "-t", target]
        self.poll = poll
        self.changes: list[tuple[float, str]] = []
        self.last = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Pane:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            r = subprocess.run(self.cmd, capture_output=True, text=True, check=False)
            t = time.time()
            if r.returncode == 0 and r.stdout != self.last:
                self.last = r.stdout
                self.changes.append((t, r.stdout))
            self._stop.wait(self.poll)

    def first(self, pred: Any, after: float) -> float | None:
        return next((t for t, s in list(self.changes) if t >= after and pred(s)), None)


class Run:
    """One agent under ``agentwrap run --detach``."""

    def __init__(self, agent: str, work: Path, think: float, poll: float) -> None:
        self.agent, self.think = agent, think
        self.root = work / agent
        home, self.project = self.root / "home", self.root / "project"
        self.server: Any = None
        if agent == "standin":
            home.mkdir(parents=True)
            self.project.mkdir(parents=True)
            env = dict(os.environ, HOME=str(home))
            env.pop("XDG_CONFIG_HOME", None)
            env.pop("XDG_STATE_HOME", None)
            argv = [sys.executable, str(STANDIN), "--log", str(self.root / "log.jsonl"),
                    "--busy", str(think), "--dialog-on", "[[tool]]", "--spin", "0.1"]
            profile = ["--profile", "standin"]
        else:
            agents = import_path("agentwrap_bench_agents", ROOT / "tests" / "e2e" / "agents.py")
            server = import_path("agentwrap_bench_model_server",
                                 ROOT / "tests" / "e2e" / "model_server.py")
            self.server = server.ModelServer().start()
            launch = agents.prepare_agent(agent, home, self.project, self.server.url)
            env, argv, profile = dict(launch.env), list(launch.argv), []
        env = run_env(env, self.root)
        (self.root / "r").mkdir(mode=0o700)
        from agentwrap.paths import Paths

        self.env, self.paths = env, Paths.from_env(env)
        self.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.paths.config_file.write_text(
            "[limits]\nrate_per_minute = 100000\nmax_pending_per_session = 100000\n"
            # Codex's TUI, where keys are typed (its app-server takes a message, and
            # an answer, as a request: no keys, no screen)
            + ('[run]\ncodex_hook_trust = "bypass"\ncodex_app_server = false\n'
               if agent == "codex" else ""))
        if agent == "standin":
            self.paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(STANDIN_PROFILE, self.paths.user_patterns_dir / "standin.toml")
        self.name = f"bench-{agent}"
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", self.name, *profile,
             "--cwd", str(self.project), "--", *argv],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"agentwrap run failed: {res.stderr[-2000:]}")
        from agentwrap.detect.profiles import load_profile
        from agentwrap.service import Service

        self.svc = Service.open(self.paths)
        self.profile = load_profile("standin" if agent == "standin" else agent, self.paths)
        self.socket = str(self.paths.tmux_socket_for(self.name))
        self.target = f"={self.name}:0.0"
        self.pane = Pane(self.socket, self.target, poll).start()
        self.wait_state("ready", 180)

    def close(self) -> None:
        self.pane.stop()
        self.svc.close()
        teardown_agentwrap(self.env, str(self.root))
        if self.server is not None:
            self.server.stop()

    def state(self) -> str:
        rec = self.svc.registry.get(self.name)
        return str(rec.state.value if hasattr(rec.state, "value") else rec.state)

    def wait_state(self, state: str, timeout: float) -> None:
        wait_until(lambda: self.state() == state, timeout, f"{self.agent} {state}", poll=0.02)

    def keys(self, *keys: str, literal: bool = False) -> float:
        t = time.time()
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", self.target,
                        *(["-l"] if literal else []), *keys], check=True)
        return t

    def type_prompt(self, text: str) -> float:
        """Type the bench's own prompt and submit it; the time of the Enter taken.

        The Enter goes once the box shows the text, the profile's submit delay
        after (Copilot CLI draws typed text up to ~1 s late on a loaded machine,
        and an Enter in the same burst as the text is swallowed: the prompt then
        waited in the box and agentwrap's next message joined it; Gemini CLI
        dropped an Enter typed 0.3 s after the text). An Enter that leaves the
        text in the box is pressed again (at most twice more)."""
        tail = text[-10:]
        self.keys(text, literal=True)
        wait_for(lambda: self.typed(self.pane.last, tail), 5.0)
        delay = max(0.3, self.profile.input.submit_delay_ms / 1000)
        t = 0.0
        for _ in range(3):
            time.sleep(delay)
            t = self.keys("Enter")
            if wait_for(lambda: not self.typed(self.pane.last, tail), 2.0) is not None:
                break
        return t

    def events(self, after: float) -> list[Any]:
        return [e for e in self.svc.events(0, self.name, limit=100000) if e.at >= after]

    def busy_screen(self, text: str) -> bool:
        from agentwrap.detect.detector import evaluate_rules
        from agentwrap.detect.states import State
        from agentwrap.terminal.screen import Snapshot

        snap = Snapshot.from_text(text, cols=200, rows=60)
        return any(m.rule.state is State.BUSY for m in evaluate_rules(self.profile, snap))

    def probes(self, text: str) -> int:
        """How many probe keys the input box shows at its end."""
        return box_probes(self.box(text))

    def box(self, text: str) -> str:
        """The input box's lines (the last six lines where the profile names no region)."""
        from agentwrap.detect.regions import ScreenRegions
        from agentwrap.terminal.screen import Snapshot

        region = self.profile.input.input_region or "screen"
        lines = ScreenRegions(self.profile, Snapshot.from_text(text, cols=200, rows=60)).get(region)
        return "\n".join(lines if lines is not None else text.splitlines()[-6:])

    def typed(self, text: str, marker: str) -> bool:
        """Whether the box shows a typed message: its marker, or the agent's
        placeholder for a paste (Claude's "[Pasted text #1 ...]")."""
        box = self.box(text)
        return marker in box or any(p.search(box) for p in self.profile.input.paste_placeholders)

    def since(self, t0: float) -> list[tuple[float, str]]:
        """The captures from ``t0`` on, oldest first."""
        out = []
        for t, text in reversed(list(self.pane.changes)):
            if t < t0:
                break
            out.append((t, text))
        return out[::-1]


def box_probes(box: str) -> int:
    """How many probe keys end the text of an input box's lines ``box``. Qwen
    Code draws a zero-width space after the text (its cursor); Kimi Code a box
    edge ("│") after it on the same line (unread, no probe was ever seen: its
    keys stayed in the box, a draft the runs waited on)."""
    m = re.search(rf"({PROBE}+)[\s\u200b\u2500-\u257f]*$", box, re.M)
    return len(m.group(1)) if m else 0


def run_env(env: dict[str, str], root: Path) -> dict[str, str]:
    """The environment agentwrap and the agent run in: ``env`` (the stand-in's,
    or the one tests/e2e/agents.py prepared) with a runtime dir of the bench's.
    The agent's config and state homes stay those that were seeded: OpenCode
    reads its loopback provider from ``$XDG_CONFIG_HOME/opencode``, and with a
    config home of the bench's own it ran on its default cloud model."""
    out = dict(env, XDG_RUNTIME_DIR=str(root / "r"), PYTHONPATH=str(ROOT))
    out.setdefault("XDG_CONFIG_HOME", str(root / "c"))
    out.setdefault("XDG_STATE_HOME", str(root / "s"))
    out.pop("TMUX", None)
    return out


def prompt(marker: str, think: float, tool: bool = False, standin: bool = False) -> str:
    if standin:
        return "Say it. [[tool]]" if tool else f'Say it. Reply "ACK {marker}"'
    return f"Say it. [[delay: {think}]] " + ("[[tool]]" if tool else f"[[reply: {marker}]]")


def replied(marker: str) -> Any:
    """The reply's own line on screen (not the prompt's echo, which names the marker too)."""
    return lambda text: any(marker in line and "reply" not in line.lower()
                            for line in text.splitlines())


def truth_probe(run: Run, marker: str, after: float, probe_s: float, timeout: float) -> float | None:
    """The send time of the first probe key echoed into a fresh prompt after
    ``after``. Keys echoed into a busy agent's box stay there (erasing each would
    cost a window per key): each probe is seen as one more key at the box's end."""
    deadline = time.time() + timeout
    count = run.probes(run.pane.last)
    found = None
    while found is None and time.time() < deadline:
        sent = run.keys(PROBE, literal=True)
        hit = wait_for(lambda sent=sent, count=count: next(
            ((t, x) for t, x in run.since(sent) if run.probes(x) > count), None), WINDOW_S)
        if hit is not None:
            count = run.probes(hit[1])
            if sent >= after and replied(marker)(hit[1]) and not run.busy_screen(hit[1]):
                found = sent
            elif count >= 20:
                clear(run)
                count = run.probes(run.pane.last)
        time.sleep(probe_s)
    clear(run)
    return found


def clear(run: Run) -> None:
    """Erase every probe key the box shows (one taken late shows up after its
    window). Each round waits for the box to stop changing first: Copilot CLI
    draws typed keys (and their erasing) up to ~1 s late on a loaded machine,
    and a count read meanwhile left 49 probes in its box (a draft the run then
    waited on)."""
    for _ in range(10):
        time.sleep(WINDOW_S)
        wait_for(lambda: run.pane.changes and time.time() - run.pane.changes[-1][0] > 1.0, 5.0)
        n = run.probes(run.pane.last)
        if not n:
            return
        run.keys(*["BSpace"] * n)


def wait_for(cond: Any, timeout: float) -> Any:
    try:
        return wait_until(cond, timeout, "", poll=0.005)
    except TimeoutError:
        return None


def turns(run: Run, n: int, probe_s: float, timeout: float) -> dict[str, Any]:
    got = [pair(run, probe_s, timeout) for _ in range(0, n, 2)]
    return {"turns": [r for r in got if "skipped" not in r],
            "skipped": [r for r in got if "skipped" in r]}


def pair(run: Run, probe_s: float, timeout: float) -> dict[str, Any]:
    """One agentwrap turn, then the truth turn of the message it typed."""
    from agentwrap.message import NewMessage

    mark_aw, mark_truth = uuid.uuid4().hex[:10], uuid.uuid4().hex[:10]
    sa = run.agent == "standin"
    run.wait_state("ready", timeout)
    time.sleep(0.5)
    enter = run.type_prompt(prompt(mark_aw, run.think, standin=sa))
    if wait_for(lambda: any(e.kind == "session.state" and e.data.get("state") == "busy"
                            for e in run.events(enter)), 15.0) is None:
        # no busy verdict at all for the turn (the Enter not taken, or a turn too short
        # for a capture): no pair, said so in the figures
        wait_for(lambda: run.state() in ("ready", "draft"), timeout)
        if run.state() == "draft":
            run.keys("C-u")
        return {"skipped": "no busy seen after Enter", "screen": run.pane.last[-600:]}
    sent = run.svc.send(NewMessage(session=run.name, content=prompt(mark_truth, run.think, standin=sa)))
    mid = sent.message.id
    drawn = wait_until(lambda: run.pane.first(replied(mark_aw), enter), timeout,
                       "reply drawn", poll=0.02)
    let = wait_until(lambda: next((e.at for e in run.events(enter) if e.subject == mid
                                   and e.data.get("phase") in ("pasting", "submitting")),
                                  None), timeout, "queued message typed", poll=0.02)
    submitted = wait_until(lambda: next((e.at for e in run.events(enter) if e.subject == mid
                                         and e.data.get("phase") == "submitted"), None),
                           timeout, "submitted", poll=0.02)
    # the in-turn truth: the first capture showing agentwrap's keys in the box.
    # Keys shown in a busy agent's box (a busy rule matching, or the reply not
    # drawn yet) went to an agent that was not taking a new prompt: early
    landed = next(((t, x) for t, x in run.since(let) if run.typed(x, mark_truth)), None)
    early = None if landed is None else bool(run.busy_screen(landed[1])
                                              or not replied(mark_aw)(landed[1]))
    ev = run.events(enter)
    states = [(e.at, e.data.get("state")) for e in ev if e.kind == "session.state"]
    first_busy = next((t for t, s in states if s == "busy"), None)
    ready = next((t for t, s in states if s == "ready" and t >= (first_busy or enter)), None)
    ready_ev = next((e for e in ev if e.kind == "session.state" and e.at == ready), None)
    why = [dict(e.data, before_busy_s=round(first_busy - e.at, 3)) for e in ev
           if e.kind == "session.state" and e.data.get("state") == "ready" and first_busy
           and e.at < first_busy]
    # the truth turn: the queued message's own
    truth = truth_probe(run, mark_truth, submitted, probe_s, timeout)
    tdrawn = run.pane.first(replied(mark_truth), submitted)
    # its passing readies: a ready followed by a busy before its reply is drawn.
    # (Not "before the first busy event after submitted": agentwrap may say busy
    # before the submitted phase is recorded, and then the next pair's busy was
    # taken, the turn's own end counted as passing: Aider's "2 passing".)
    end2 = tdrawn if tdrawn is not None else truth
    ev2 = [e for e in run.events(submitted) if e.kind == "session.state"
           and (end2 is None or e.at < end2)]
    for i, e in enumerate(ev2):
        busy2 = next((x.at for x in ev2[i + 1:] if x.data.get("state") == "busy"), None)
        if e.data.get("state") == "ready" and busy2 is not None:
            why.append(dict(e.data, before_busy_s=round(busy2 - e.at, 3), truth_turn=True))
    # ccmanager's rule had nobody typed: the screen's last change before agentwrap
    # typed, + 1.5 s (a lower bound: the agent might have changed it later)
    last = max((t for t, _ in list(run.pane.changes) if drawn <= t < let), default=drawn)
    ccm = last + CCMANAGER_QUIET_S
    wait_for(lambda: run.state() in ("ready", "draft"), timeout)
    return {
        "ready_s": None if ready is None else ready - drawn,
        "let_s": let - drawn,
        "ccmanager_s": None if ccm is None else ccm - drawn,
        "truth_s": None if truth is None or tdrawn is None else truth - tdrawn,
        "passing_ready": len(why), "passing_detail": why,
        "early": early, "landed_s": None if landed is None else landed[0] - drawn,
        "landed_screen": None if not early or landed is None else landed[1][-800:],
        # what the screen showed when agentwrap said ready early (its last capture before)
        "ready_screen": None if not early or ready is None else
        next((x for t, x in reversed(list(run.pane.changes)) if t <= ready), "")[-1500:],
        "states": [(round(t - enter, 3), s) for t, s in states] if early else None,
        # who decided the agentwrap turn's ready (its signal and rule)
        "ready_by": None if ready_ev is None else
        f"{ready_ev.data.get('signal')}:{ready_ev.data.get('rule')}",
    }


def dialogs(run: Run, n: int, probe_s: float, timeout: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    pattern = next((d.pattern for d in run.profile.dialogs if d.name == "permission"), None)
    if pattern is None:
        return {"dialogs": [], "note": "the profile has no permission dialog"}
    for i in range(n):
        rows.append(dialog(run, i, pattern, probe_s, timeout))
    return {"dialogs": rows}


def dialog(run: Run, i: int, pattern: re.Pattern[str], probe_s: float,
           timeout: float) -> dict[str, Any]:
    """One permission dialog: the first Down it takes (even ``i``), or agentwrap's answer."""
    run.wait_state("ready", timeout)
    time.sleep(0.5)
    enter = run.type_prompt(prompt("", run.think, tool=True, standin=run.agent == "standin"))
    def waiting() -> float:
        return float(wait_until(lambda: next((e.at for e in run.events(enter)
                                              if e.kind == "session.state"
                                              and e.data.get("state") == "waiting_input"), None),
                                timeout, "waiting_input", poll=0.01))

    row: dict[str, Any] = {"waiting_s": None, "taken_s": None, "applied_s": None}
    if i % 2 == 0:  # truth: the first Down the dialog takes, probed from its first capture
        drawn = wait_until(lambda: run.pane.first(lambda s: bool(pattern.search(s)), enter),
                           timeout, "the dialog drawn", poll=0.005)
        taken = None
        base = cursor(next(s for t, s in run.pane.changes if t >= drawn))
        while time.time() < drawn + timeout:
            sent = run.keys("Down")
            if wait_for(lambda: pattern.search(run.pane.last)
                        and cursor(run.pane.last) not in ("", base), WINDOW_S):
                taken = sent
                break
        row.update(waiting_s=waiting() - drawn, taken_s=None if taken is None else taken - drawn)
        run.keys("Escape")
    else:  # agentwrap answers it (option 1)
        q = wait_until(lambda: run.svc.registry.get(run.name).question, timeout, "question")
        res = run.svc.answer(run.name, option=1, question_id=str(q["id"]))
        aid = res.answer.id
        done = run.svc.wait_answer(aid, timeout)
        drawn = run.pane.first(lambda s: bool(pattern.search(s)), enter)
        row.update(waiting_s=waiting() - drawn if drawn else None,
                   applied_s=(done.finished - drawn) if drawn and done.finished else None,
                   status=str(done.status))
    wait_for(lambda: run.state() == "ready", timeout)
    return row


def cursor(text: str) -> str:
    return next((line for line in text.splitlines() if re.search(r"[❯›>]\s*\d\.", line)), "")


def summary(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    xs = [r[key] for r in rows if r.get(key) is not None]
    return {"n": len(xs), "p50_ms": pct(xs, 50) * 1000 if xs else float("nan"),
            "p90_ms": pct(xs, 90) * 1000 if xs else float("nan")}


def report(agent: str, t: dict[str, Any], d: dict[str, Any], probe_s: float) -> dict[str, Any]:
    rows = t["turns"]
    truths = [r["truth_s"] for r in rows]
    paired_early = 0
    gaps = []
    for r, truth in zip(rows, truths, strict=False):
        if truth is None:
            continue
        gaps.append(r["let_s"] - truth)
        if r["let_s"] < truth - probe_s:
            paired_early += 1
    # early, in the turn itself: agentwrap's keys seen in a busy agent's box
    early = sum(1 for r in rows if r.get("early"))
    out = {"agent": agent, "turns": len(rows) * 2, "truth": summary(rows, "truth_s"),
           "ready": summary(rows, "ready_s"), "let": summary(rows, "let_s"),
           "ccmanager": summary(rows, "ccmanager_s"),
           "let_minus_truth": {"p50_ms": pct(gaps, 50) * 1000 if gaps else float("nan"),
                               "p90_ms": pct(gaps, 90) * 1000 if gaps else float("nan")},
           "keys_before_taken": early,
           "unseen": sum(1 for r in rows if r.get("early") is None),
           # the old figure: the let against the *next* (truth) turn's probe
           "paired_early": paired_early,
           "passing_ready": sum(r["passing_ready"] for r in rows), "rows": rows,
           "skipped": t.get("skipped", [])}
    if d.get("dialogs"):
        out["dialogs"] = {"waiting": summary(d["dialogs"], "waiting_s"),
                          "taken": summary(d["dialogs"], "taken_s"),
                          "applied": summary(d["dialogs"], "applied_s"), "rows": d["dialogs"]}
    return out


def load_cores() -> list[subprocess.Popen[bytes]]:
    """One spinning process per core, each ending when this script does (however it ends)."""
    spin = f"import os\nwhile os.getppid() == {os.getpid()}: pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 2)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default="claude,codex", help="comma-separated (standin: the stand-in)")
    p.add_argument("--turns", type=int, default=10, help="turns per agent (half agentwrap, half truth)")
    p.add_argument("--dialogs", type=int, default=0, help="permission dialogs per agent")
    p.add_argument("--think", type=float, default=1.0, help="seconds each model reply is held")
    p.add_argument("--probe", type=float, default=0.03, help="seconds between probe keys")
    p.add_argument("--poll", type=float, default=0.02, help="seconds between pane captures")
    p.add_argument("--timeout", type=float, default=90.0)
    p.add_argument("--busy", action="store_true", help="load every core for the run")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    add_against(p)
    args = p.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    work = Path(tempfile.mkdtemp(prefix="awrd-", dir="/tmp"))
    load = load_cores() if args.busy else []
    results: list[dict[str, Any]] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        for agent in args.agents.split(","):
            run = None
            try:
                run = Run(agent, work, args.think, args.poll)
                t = turns(run, max(2, args.turns), args.probe, args.timeout)
                d = dialogs(run, args.dialogs, args.probe, args.timeout) if args.dialogs else {}
                results.append(report(agent, t, d, args.probe))
            except Exception as exc:  # noqa: BLE001 - reported; the other agents go on
                results.append({"agent": agent, "error": f"{type(exc).__name__}: {exc}",
                                "screen": run.pane.last[-1500:] if run is not None else "",
                                "state": run.state() if run is not None else ""})
            finally:
                if run is not None:
                    run.close()
    finally:
        for proc in load:
            kill_proc(proc)
        shutil.rmtree(work, ignore_errors=True)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores"
          + (", both cores loaded by --busy" if args.busy else ""))
    print(f"{'agent':9} {'truth p50/p90':>14} {'ready p50/p90':>14} {'let p50/p90':>13}"
          f" {'let-truth p50/p90':>18} {'ccm p50/p90':>13} {'early':>6} {'passing':>8}"
          "   (ms from the reply's line on screen)")
    for r in results:
        if "error" in r:
            print(f"{r['agent']:9} error: {r['error']} (state {r['state']}); screen:\n{r['screen']}")
            continue
        def two(s: dict[str, float]) -> str:
            return f"{fmt(s['p50_ms'], '.0f')}/{fmt(s['p90_ms'], '.0f')}"
        print(f"{r['agent']:9} {two(r['truth']):>14} {two(r['ready']):>14} {two(r['let']):>13}"
              f" {two(r['let_minus_truth']):>18} {two(r['ccmanager']):>13}"
              f" {r['keys_before_taken']:>6} {r['passing_ready']:>8}"
              f"  (paired early {r['paired_early']}, keys not seen {r['unseen']})"
              + (f"  ({len(r['skipped'])} pairs skipped: no busy seen)" if r["skipped"] else ""))
        if "dialogs" in r:
            dd = r["dialogs"]
            print(f"{'':9} dialogs: waiting {two(dd['waiting'])}, first Down taken {two(dd['taken'])},"
                  f" answer applied {two(dd['applied'])} (ms from the dialog's first capture)")
    if args.json:
        write_json(args.json, {"load_1min": os.getloadavg()[0], "busy": args.busy,
                               "results": results})
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
