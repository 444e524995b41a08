#!/usr/bin/env python3
"""Benchmark: feedback watchers (issue 12).

1. **save -> message queued** (the watch path, no command): a file is
   written; :class:`agentwrap.feedback.companion.FeedbackLoop` sees it through
   its watchdog observer, ends the burst after the debounce, and queues the
   "files changed" message through ``Service.send`` (store, audit line,
   wake-up). p50/p99 over ``-n`` saves, one at a time, for the default debounce
   (300 ms) and for none. **Baseline, same run**: a bare watchdog observer on
   the same kind of tree, save -> its own ``on_any_event`` callback. The
   difference is what agentwrap adds (ignore rules, debounce, the store).
2. **idle cost of a watcher on a big tree**: ``--files`` files (default
   50,000, in dirs of 100) plus a ``.git`` and a ``node_modules`` of 2,000
   files each; a child process starts a :class:`~agentwrap.feedback.watcher.Watcher`
   on it, then sits idle ``--idle`` seconds: its CPU (utime+stime from
   /proc/PID/stat) as a share of one core, against the goal of 0.2 %, and its
   RSS against a bare interpreter that imported the same modules (baseline).
   The time to start watching (inotify watches on every dir) is printed too.

    .venv/bin/python scripts/bench_feedback.py              # ~1-2 min
    .venv/bin/python scripts/bench_feedback.py -n 20 --files 5000 --idle 10 --json
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST, fmt, stats_ms, write_json

sys.path.insert(0, str(UNDER_TEST))  # this checkout, or the tree --against runs this on

CLK = os.sysconf("SC_CLK_TCK")


def _env(root: Path) -> None:
    os.environ.update(XDG_CONFIG_HOME=str(root / "c"), XDG_STATE_HOME=str(root / "s"),
                      XDG_RUNTIME_DIR=str(root / "r"))
    (root / "r").mkdir(mode=0o700, exist_ok=True)
    cfg = root / "c" / "agentwrap" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    # the benchmark queues a message a save: no limit may stop it
    cfg.write_text("[limits]\nrate_per_minute = 100000\nmax_pending_per_session = 100000\n"
                   "max_pending_total = 100000\n")


def _tree(root: Path, files: int, per_dir: int = 100) -> None:
    for i in range(files):
        d = root / f"d{i // per_dir:04}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % per_dir:03}.py").write_bytes(b"x = 1\n")
    for ignored in (".git/objects", "node_modules/pkg"):
        base = root / ignored
        base.mkdir(parents=True, exist_ok=True)
        for i in range(2000):
            (base / f"o{i}").write_bytes(b"x")


def baseline_latency(root: Path, n: int) -> list[float]:
    """save -> a bare watchdog observer's callback."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    got = threading.Event()
    target = str(root / "d0000" / "f000.py")

    class H(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.src_path == target and event.event_type == "modified":
                got.set()

    obs = Observer()
    obs.schedule(H(), str(root), recursive=True)
    obs.start()
    out = []
    try:
        time.sleep(0.5)
        for i in range(n):
            got.clear()
            t0 = time.perf_counter()
            with open(target, "w") as f:
                f.write(f"x = {i}\n")
            if got.wait(10):
                out.append(time.perf_counter() - t0)
            time.sleep(0.05)
    finally:
        obs.stop()
        obs.join()
    return out


def loop_latency(root: Path, n: int, debounce_s: float) -> list[float]:
    """save -> the "files changed" message queued by a FeedbackLoop."""
    from agentwrap.feedback.companion import FeedbackLoop, LoopOptions
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.registry import SessionRecord

    paths = Paths.from_env().ensure()
    name = f"bench{int(debounce_s * 1000)}"
    with Service.open(paths) as svc:
        svc.registry.register(SessionRecord(name=name, profile="claude", backend="tmux",
                                            command=["x"], cwd=str(root), started=time.time()))
    queued = threading.Event()

    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("event") == "queued":
            queued.set()

    loop = FeedbackLoop(paths, name, root, options=LoopOptions(
        debounce_s=debounce_s, changes_as="watch", on_event=on_event)).start()
    target = root / "d0000" / "f001.py"
    out = []
    try:
        time.sleep(0.5)
        for i in range(n):
            queued.clear()
            t0 = time.perf_counter()
            target.write_text(f"x = {i}\n")
            if queued.wait(10):
                out.append(time.perf_counter() - t0)
            time.sleep(0.05)
    finally:
        loop.stop()
    return out


WATCHER_CHILD = """
import sys, time
from pathlib import Path
from agentwrap.feedback.watcher import Watcher
root = Path(sys.argv[1])
if sys.argv[2] == "watch":
    t0 = time.perf_counter()
    w = Watcher(root, lambda b: None).start()
    print(f"ready {time.perf_counter() - t0:.3f}", flush=True)
else:
    import watchdog.observers, pathspec  # the same modules, no watch
    print("ready 0", flush=True)
time.sleep(3600)
"""


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def idle_cost(root: Path, mode: str, idle_s: float) -> dict[str, float]:
    proc = subprocess.Popen([sys.executable, "-c", WATCHER_CHILD, str(root), mode],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(UNDER_TEST)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        start_s = float(line[1])
        time.sleep(1.0)  # settle
        c0, t0 = _proc_cpu(proc.pid), time.monotonic()
        time.sleep(idle_s)
        c1, t1 = _proc_cpu(proc.pid), time.monotonic()
        return {"start_s": start_s, "cpu_pct_of_core": 100 * (c1 - c0) / (t1 - t0),
                "rss_mb": _rss_kb(proc.pid) / 1024}
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=40, help="saves per latency series (default 40)")
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--idle", type=float, default=30.0, help="idle seconds measured")
    ap.add_argument("--json", metavar="FILE", help="also write the figures here")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)
    work = Path(tempfile.mkdtemp(prefix="awfb-", dir="/tmp"))
    result: dict[str, Any] = {}
    try:
        _env(work)
        small = work / "small"
        _tree(small, 500)
        base = baseline_latency(small, args.n)
        result["baseline_observer"] = stats_ms(base)
        for debounce in (0.0, 0.3):
            result[f"queued_debounce_{int(debounce * 1000)}ms"] = stats_ms(
                loop_latency(small, args.n, debounce))
        print("save -> event / message queued (ms):")
        b = result["baseline_observer"]
        print(f"  bare watchdog observer (baseline)  p50 {fmt(b['p50_ms'])}  p99 {fmt(b['p99_ms'])}")
        for key in ("queued_debounce_0ms", "queued_debounce_300ms"):
            r = result[key]
            print(f"  {key:34} p50 {fmt(r['p50_ms'])}  p99 {fmt(r['p99_ms'])}"
                  f"  (p50 {fmt(r['p50_ms'] / b['p50_ms'], '.1f')}x baseline;"
                  f" minus baseline and debounce: {fmt(r['p50_ms'] - b['p50_ms'] - int(key.split('_')[2][:-2]))} ms)")
        big = work / "big"
        t0 = time.perf_counter()
        _tree(big, args.files)
        print(f"tree of {args.files} files (+4,000 ignored) made in {time.perf_counter() - t0:.1f} s")
        bare = idle_cost(big, "bare", args.idle)
        watch = idle_cost(big, "watch", args.idle)
        result["idle_bare"] = bare
        result["idle_watcher"] = watch
        result["files"] = args.files
        print(f"idle over {args.idle:.0f} s on {args.files} files:")
        print(f"  watcher: CPU {watch['cpu_pct_of_core']:.3f} % of a core (goal <= 0.2 %),"
              f" RSS {watch['rss_mb']:.1f} MB, started watching in {watch['start_s']:.2f} s")
        print(f"  bare interpreter with the same imports (baseline): CPU"
              f" {bare['cpu_pct_of_core']:.3f} %, RSS {bare['rss_mb']:.1f} MB"
              f" -> the watcher adds {watch['rss_mb'] - bare['rss_mb']:.1f} MB")
        if args.json:
            write_json(args.json, result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
