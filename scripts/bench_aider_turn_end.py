"""Aider's turn end to ``ready``, on the real Aider, this tree against another (issue 37).

Starts one Aider session per tree under ``agentwrap run`` (each its own tmux
server, HOME and loopback model server: tests/e2e), the two side by side, and
drives them turn by turn, alternating, so both see the same load. Each turn
types a prompt straight into the pane (tmux ``send-keys``, not ``agentwrap
send``: the delivery's own steps are not measured) and polls ``capture-pane``
every ~20 ms until the turn's fresh prompt is on screen and the session has
recorded ``ready`` (its ``state_transitions`` row).

Per turn it reports, relative to **truth** (the first frame that shows the
fresh prompt: a lone ``>`` under the rule, below the reply; the first moment a
key would be echoed into it):

* ``reply``: the reply's last line first on screen;
* ``ready``: agentwrap's first ``ready`` (and its signal/rule);
* ``early``: a frame captured *after* the ready was recorded still had no
  prompt (a ready before Aider takes keys).

    .venv/bin/python scripts/bench_aider_turn_end.py --turns 10 --other /tmp/old-tree

``--other`` is a checkout of the code to compare (e.g. ``git worktree add
/tmp/old aae88cc``); its native helpers are taken from this tree when it has
none. Without it only this tree runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
sys.path.insert(0, str(ROOT))

from agentwrap.paths import Paths  # noqa: E402
from tests.e2e.agents import prepare_agent  # noqa: E402
from tests.e2e.model_server import ModelServer  # noqa: E402

RULE = "─" * 10
POLL_S = 0.02


@dataclass
class Turn:
    tree: str
    n: int
    sent: float = 0.0
    reply: float | None = None
    truth: float | None = None
    ready: float | None = None
    how: str = ""
    early: bool = False


@dataclass
class Bench:
    tree: str
    code: Path
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    server: ModelServer | None = None
    turns: list[Turn] = field(default_factory=list)

    @property
    def paths(self) -> Paths:
        return Paths.from_env(self.env)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentwrap", *args], env=self.env,
                              cwd=self.root / "project", capture_output=True, text=True,
                              timeout=120, check=False)

    def tmux(self, *args: str) -> str:
        sock = str(self.paths.tmux_socket_for("bench"))
        return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True,
                              timeout=20, check=False).stdout

    def start(self) -> None:
        self.server = ModelServer().start()
        home, work = self.root / "home", self.root / "project"
        launch = prepare_agent("aider", home, work, self.server.url)
        (self.root / "r").mkdir(mode=0o700)
        self.env = {**launch.env, "XDG_RUNTIME_DIR": str(self.root / "r"),
                    "PYTHONPATH": str(self.code)}
        (work / "README.md").write_text("# scratch\n")
        got = self.cli("run", "--detach", "--name", "bench", "--cwd", str(work), "--",
                       *launch.argv, "README.md")
        if got.returncode != 0:
            raise SystemExit(f"{self.tree}: run failed: {got.stderr}")

    def state_after(self, t: float, state: str) -> tuple[float, str] | None:
        db = sqlite3.connect(f"file:{self.paths.db_path}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT at, signal, rule FROM state_transitions WHERE session ="
                             " 'bench' AND state = ? AND at > ? ORDER BY id LIMIT 1",
                             (state, t)).fetchone()
        finally:
            db.close()
        return (row[0], f"{row[1]}/{row[2]}") if row else None

    def ready_after(self, t: float) -> tuple[float, str] | None:
        return self.state_after(t, "ready")

    def wait_ready(self, timeout: float = 90) -> None:
        end = time.time() + timeout
        while time.time() < end:
            if self.ready_after(0):
                return
            time.sleep(0.2)
        raise SystemExit(f"{self.tree}: never ready:\n{self.screen()}")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "=bench:0.0")

    def turn(self, n: int) -> Turn:
        tag = f"Turn {n} reply ends here."
        t = Turn(self.tree, n)
        text = f"[[reply: Reply {n}. {tag}]] turn {n}"
        typed = time.time()
        self.tmux("send-keys", "-t", "=bench:0.0", "-l", text)
        # agentwrap saw the draft before Enter: under load a fast turn could
        # otherwise fall between two of its snapshots (ready -> ready, no event)
        while not self.state_after(typed, "draft") and time.time() < typed + 30:
            time.sleep(POLL_S)
        t.sent = time.time()
        self.tmux("send-keys", "-t", "=bench:0.0", "Enter")
        end = t.sent + 90
        after_ready = 0
        while time.time() < end and after_ready < 5:
            before = time.time()
            lines = [ln.rstrip() for ln in self.screen().splitlines() if ln.strip()]
            after = time.time()
            shown = any(tag in ln and "[[" not in ln for ln in lines[:-1])  # not the echo
            if shown and t.reply is None:
                t.reply = (before + after) / 2
            rules = [i for i, ln in enumerate(lines) if ln.startswith(RULE)]
            prompt = shown and bool(rules) and lines[-1] == ">" \
                and all(not ln.startswith(">") for ln in lines[rules[-1] + 1:-1]) \
                and any(tag in ln for ln in lines[max(0, rules[-1] - 6):rules[-1]])
            if prompt and t.truth is None:
                t.truth = (before + after) / 2
            if t.ready is None:
                got = self.ready_after(t.sent)
                if got:
                    t.ready, t.how = got
            elif before > t.ready:
                if not prompt:
                    t.early = True
                after_ready += 1
            time.sleep(POLL_S)
        self.turns.append(t)
        return t

    def stop(self) -> None:
        self.cli("stop", "bench")
        self.tmux("kill-server")
        if self.server:
            self.server.stop()


def _summary(turns: list[Turn]) -> dict[str, object]:
    d = sorted(t.ready - t.truth for t in turns if t.ready and t.truth)
    r = sorted(t.truth - t.reply for t in turns if t.truth and t.reply)

    def q(xs: list[float], p: float) -> float | None:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3) if xs else None

    return {"turns": len(turns), "p50": q(d, 0.5), "p90": q(d, 0.9),
            "median_reply_to_truth": round(statistics.median(r), 3) if r else None,
            "median_reply_to_ready": round(statistics.median(
                [t.ready - t.reply for t in turns if t.ready and t.reply]), 3) if r else None,
            "early": sum(t.early for t in turns), "signals": sorted({t.how for t in turns})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--other", type=Path, help="a checkout of the code to compare")
    ap.add_argument("--json", action="store_true")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        sys.exit(against(__file__, args, json_file=False))
    native = ROOT / "agentwrap" / "terminal" / "_native"
    trees = [("this", ROOT)]
    if args.other:
        other_native = args.other / "agentwrap" / "terminal" / "_native"
        for f in native.glob("agentwrap-*"):
            if not (other_native / f.name).exists():
                shutil.copy2(f, other_native / f.name)
        trees.append(("other", args.other.resolve()))
    benches = [Bench(name, code, Path(tempfile.mkdtemp(prefix=f"awbench-{name}-", dir="/tmp")))
               for name, code in trees]
    try:
        for b in benches:
            b.start()
        for b in benches:
            b.wait_ready()
        time.sleep(1.5)
        for n in range(1, args.turns + 1):
            for b in benches if n % 2 else reversed(benches):
                t = b.turn(n)
                print(f"{t.tree:5} turn {n:2}: reply→truth "
                      f"{(t.truth or 0) - (t.reply or 0):+.3f}s ready−truth "
                      f"{(t.ready or 0) - (t.truth or 0):+.3f}s {t.how}"
                      f"{' EARLY' if t.early else ''}", flush=True,
                      file=sys.stderr if args.json else sys.stdout)  # --json: stdout is the JSON
                time.sleep(0.5)
        out = {"load": os.getloadavg(), **{b.tree: _summary(b.turns) for b in benches}}
        print(json.dumps(out, indent=1))
    finally:
        for b in benches:
            b.stop()
            shutil.rmtree(b.root, ignore_errors=True)


if __name__ == "__main__":
    main()
