#!/usr/bin/env python3
"""Benchmark: pty-backend relay throughput with detection on, against `script`.

For every stream the same command (``sh -c 'printf START; <stream>; printf END'``)
runs under

* ``script -q -c CMD /dev/null`` (the C baseline), and
* ``python -m agentwrap run --backend pty --profile generic -- sh -c CMD``
  (the real relay path: run_pty starts the supervisor thread, which takes
  VirtualScreen snapshots and runs the detector while the relay copies bytes;
  ``--relay native`` (default) is the C helper, ``--relay python`` the
  in-process fallback),

each with its stdin/stdout/stderr on a pty owned by this script, whose master
is read as fast as possible (as a terminal would). Runs are interleaved
(agentwrap and script alternate, order flipped every repetition) and the
median of N repetitions is reported.

Figures per run:

* wall: process start -> end marker read and process exited (what the brief
  calls throughput; it includes agentwrap's start-up);
* stream: start marker read -> end marker read (the relay's steady state);
* CPU: wait4() rusage of the process and everything it reaped (the agent
  command included, for both tools) and, for agentwrap, the CPU of the
  agentwrap process itself (all threads) taken at its exit.

Detection check: unless ``--pure`` is given, agentwrap is started through a
tiny bootstrap that wraps ``VirtualScreen.snapshot`` with a counter (a few
microseconds per call) and writes, at exit, how many snapshots were taken
while the stream was flowing, how many bytes pyte consumed and how many
resyncs happened. With ``--pure`` it is ``python -m agentwrap`` unchanged and
only the supervisor log is checked.

Everything lives in a fresh ``/tmp/awb-*`` directory (isolated XDG dirs),
removed at the end; every process is started in its own session and its
process group is killed if it outlives its run.

    .venv/bin/python scripts/bench_relay.py            # ~1 min
    .venv/bin/python scripts/bench_relay.py --json     # machine-readable
    .venv/bin/python scripts/bench_relay.py --reps 3 --streams plain,yes
    .venv/bin/python scripts/bench_relay.py --relay python   # the fallback relay
    .venv/bin/python scripts/bench_relay.py --relay bare     # the C relay without detection
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import UNDER_TEST, fmt, json_safe

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
START = b"__AWBENCH_START__"
END = b"__AWBENCH_END__"
COLS, ROWS = 200, 50

BOOT = r'''
import atexit, json, os, runpy, sys, time
from agentwrap.terminal import vscreen

_stats = {"snaps": [], "fed": 0, "resyncs": 0}
_orig = vscreen.VirtualScreen.snapshot

def _snapshot(self):
    t0 = time.monotonic()
    before = self.fed_bytes
    snap = _orig(self)
    t1 = time.monotonic()
    _stats["snaps"].append((t0, t1 - t0, self.fed_bytes - before))
    _stats["fed"] = self.fed_bytes
    _stats["resyncs"] = self.resyncs
    return snap

vscreen.VirtualScreen.snapshot = _snapshot

from agentwrap.terminal import pty as _pty

_orig_read = _pty.PtyTerminal._read_agent
_stats["reads"] = 0

def _read_agent(self, stdout_fd):
    _stats["reads"] += 1
    return _orig_read(self, stdout_fd)

_pty.PtyTerminal._read_agent = _read_agent

def _dump():
    t = os.times()
    _stats["cpu_self_s"] = t.user + t.system
    with open(os.environ["AWBENCH_STATS"], "w") as f:
        json.dump(_stats, f)

atexit.register(_dump)
sys.argv = ["agentwrap", *sys.argv[1:]]
runpy.run_module("agentwrap", run_name="__main__", alter_sys=True)
'''

# --relay bare: agentwrap-relay alone, no supervisor and no tee (what the byte
# path costs by itself, for telling it apart from what detection costs).
BARE = r'''
import fcntl, os, pty, subprocess, sys, termios, tty
from agentwrap.terminal.relay_helper import PROTOCOL, helper_status
binary, why = helper_status()
if binary is None:
    sys.exit(f"native relay not built: {why}")
size = fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8)
pid, master = pty.fork()
if pid == 0:
    fcntl.ioctl(1, termios.TIOCSWINSZ, size)
    os.execvp("sh", ["sh", "-c", sys.argv[-1]])
saved = termios.tcgetattr(0)
tty.setraw(0)
try:
    subprocess.run([str(binary), PROTOCOL, str(master), "-1", "-1", "-1", "0", "1"],
                   pass_fds=(master,), check=False)
finally:
    termios.tcsetattr(0, termios.TCSAFLUSH, saved)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
'''


# --- streams ---------------------------------------------------------------------------


def make_plain(path: Path, mb: float) -> int:
    lines = b"".join(
        b"%07d the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnop\n" % i
        for i in range(2000)
    )
    target = int(mb * 1e6)
    with open(path, "wb") as f:
        n = 0
        while n < target:
            chunk = lines[: target - n]
            f.write(chunk)
            n += len(chunk)
    return n


def make_tui(path: Path, mb: float) -> int:
    """Full-screen redraws like an agent TUI: cursor moves, SGR colours, a spinner,
    a box drawn with rules, erase-line; about 8 KB per frame."""
    spin = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    target = int(mb * 1e6)
    n = 0
    frame = 0
    with open(path, "wb") as f:
        while n < target:
            parts = ["\x1b[?25l\x1b[H"]
            for r in range(1, ROWS - 4):
                colour = 31 + (r + frame) % 7
                parts.append(
                    f"\x1b[{r};1H\x1b[2K\x1b[{colour}m●\x1b[0m \x1b[1mline {r:02d}\x1b[22m "
                    f"frame {frame:06d} \x1b[2mdim placeholder\x1b[22m "
                    + "text " * (10 + (r * 7 + frame) % 20)
                )
            parts.append(
                f"\x1b[{ROWS - 4};1H\x1b[2K\x1b[35m{spin[frame % len(spin)]} Working… "
                f"({frame % 60}s · esc to interrupt)\x1b[0m"
            )
            parts.append(f"\x1b[{ROWS - 3};1H" + "─" * COLS)
            parts.append(f"\x1b[{ROWS - 2};1H\x1b[2K❯ ")
            parts.append(f"\x1b[{ROWS - 1};1H" + "─" * COLS)
            parts.append(f"\x1b[{ROWS};1H\x1b[2K\x1b[2m  ? for shortcuts\x1b[22m\x1b[?25h")
            data = "".join(parts).encode()
            f.write(data)
            n += len(data)
            frame += 1
    return n


@dataclass
class Stream:
    name: str
    shell: str  # the part between the markers
    nbytes: int  # payload bytes the agent writes (before ONLCR)


def build_streams(tmp: Path, which: list[str], args: argparse.Namespace) -> list[Stream]:
    out: list[Stream] = []
    for name in which:
        if name == "plain":
            p = tmp / "plain.txt"
            n = make_plain(p, args.plain_mb)
            out.append(Stream(name, f"cat {shlex.quote(str(p))}", n))
        elif name == "tui":
            p = tmp / "tui.bin"
            n = make_tui(p, args.tui_mb)
            out.append(Stream(name, f"cat {shlex.quote(str(p))}", n))
        elif name == "yes":
            n = int(args.yes_mb * 1e6)
            out.append(Stream(name, f"yes | head -c {n}", n))
        elif name == "startup":
            out.append(Stream(name, "true", 0))
        else:
            raise SystemExit(f"unknown stream {name!r}")
    return out


def command(stream: Stream, settle: float) -> str:
    pause = f"sleep {settle}; " if settle > 0 else ""
    return (
        f"{pause}printf '{START.decode()}\\n'; {stream.shell}; printf '\\n{END.decode()}\\n'"
    )


# --- one run -----------------------------------------------------------------------------


@dataclass
class Run:
    tool: str
    stream: str
    ok: bool
    wall_s: float
    stream_s: float
    bytes_read: int
    cpu_tree_s: float  # wait4 rusage: the process and all it reaped
    cpu_self_s: float | None = None  # agentwrap process only (all threads), at exit
    exit_code: int | None = None
    snapshots: int | None = None  # snapshots taken between the markers
    snap_ms_total: float | None = None  # time spent in those snapshots
    snap_ms_max: float | None = None
    fed_bytes: int | None = None  # bytes pyte consumed, whole run
    relay_reads: int | None = None  # reads of the agent's pty, whole run
    resyncs: int | None = None
    note: str = ""
    states: list[str] = field(default_factory=list)


def _pty_pair() -> tuple[int, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    return master, slave


def _kill_group(pid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.2)


def run_once(tool: str, stream: Stream, env: dict[str, str], work: Path, timeout: float,
             pure: bool, seq: int, settle: float, aw_root: Path, relay: str) -> Run:
    cmd = command(stream, settle)
    stats_file = work / f"stats-{seq}.json"
    name = f"b{seq}"
    if tool == "script":
        argv = ["script", "-q", "-c", cmd, "/dev/null"]
    elif relay == "bare":
        argv = [sys.executable, str(work / "bare.py"), cmd]
    else:
        head = [sys.executable, "-m", "agentwrap"] if pure else [sys.executable, str(work / "boot.py")]
        argv = [*head, "run", "--backend", "pty", "--profile", "generic", "--name", name,
                "--", "sh", "-c", cmd]
    run_env = dict(env, AWBENCH_STATS=str(stats_file))
    master, slave = _pty_pair()
    t0 = time.monotonic()
    # cwd = the tree under test: `python -m agentwrap` imports it from there
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=run_env,
                            cwd=str(aw_root if tool == "agentwrap" else work), start_new_session=True)
    os.close(slave)
    got = 0
    tail = b""
    t_start = t_end = None
    deadline = t0 + timeout
    note = ""
    os.set_blocking(master, True)

    while True:
        now = time.monotonic()
        if now > deadline:
            note = f"timed out after {timeout:.0f} s"
            _kill_group(proc.pid)
            break
        r, _, _ = select.select([master], [], [], min(1.0, deadline - now))
        if not r:
            if proc.poll() is not None and t_end is not None:
                break
            continue
        try:
            data = os.read(master, 1 << 20)
        except OSError:  # EIO: every slave fd closed
            break
        if not data:
            break
        got += len(data)
        if t_start is None or t_end is None:
            window = tail + data
            if t_start is None and START in window:
                t_start = time.monotonic()
            if t_start is not None and t_end is None and END in window:
                t_end = time.monotonic()
            tail = window[-64:]
    try:
        _, status, ru = os.wait4(proc.pid, 0)
    except ChildProcessError:
        status, ru = 0, None
    proc.returncode = os.waitstatus_to_exitcode(status)
    t1 = time.monotonic()
    os.close(master)
    _kill_group(proc.pid)  # anything left in its session
    ok = t_start is not None and t_end is not None and not note
    run = Run(
        tool=tool, stream=stream.name, ok=ok, wall_s=t1 - t0 - settle,
        stream_s=(t_end - t_start) if ok else float("nan"), bytes_read=got,
        cpu_tree_s=(ru.ru_utime + ru.ru_stime) if ru else float("nan"),
        exit_code=proc.returncode, note=note,
    )
    if tool == "agentwrap":
        log = Path(env["XDG_STATE_HOME"]) / "agentwrap" / "logs" / f"{name}.log"
        if log.exists():
            run.states = [x.split("state ", 1)[1] for x in log.read_text().splitlines() if " state " in x]
        if not pure and stats_file.exists():
            st = json.loads(stats_file.read_text())
            run.cpu_self_s = st.get("cpu_self_s")
            run.fed_bytes = st.get("fed")
            run.resyncs = st.get("resyncs")
            run.relay_reads = st.get("reads")
            lo, hi = (t_start, t_end) if ok else (t0, t1)
            inside = [s for s in st["snaps"] if lo <= s[0] <= hi]
            run.snapshots = len(inside)
            run.snap_ms_total = sum(s[1] for s in inside) * 1000
            run.snap_ms_max = max((s[1] for s in inside), default=0.0) * 1000
    return run


# --- driver ------------------------------------------------------------------------------


def med(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def summarise(stream: Stream, runs: list[Run]) -> dict[str, object]:
    aw = [r for r in runs if r.tool == "agentwrap" and r.stream == stream.name]
    sc = [r for r in runs if r.tool == "script" and r.stream == stream.name]
    mb = stream.nbytes / 1e6

    def rate(rs: list[Run], key: str) -> float:
        if not mb:
            return float("nan")
        return med([mb / getattr(r, key) if r.ok and getattr(r, key) > 0 else float("nan") for r in rs])

    out: dict[str, object] = {
        "stream": stream.name, "payload_mb": round(mb, 3),
        "runs": {"agentwrap": len(aw), "script": len(sc)},
        "failed_runs": [asdict(r) for r in aw + sc if not r.ok],
        "script_wall_s": med([r.wall_s for r in sc]),
        "agentwrap_wall_s": med([r.wall_s for r in aw]),
        "script_wall_mbps": rate(sc, "wall_s"), "agentwrap_wall_mbps": rate(aw, "wall_s"),
        "script_stream_mbps": rate(sc, "stream_s"), "agentwrap_stream_mbps": rate(aw, "stream_s"),
        "script_cpu_tree_s": med([r.cpu_tree_s for r in sc]),
        "agentwrap_cpu_tree_s": med([r.cpu_tree_s for r in aw]),
        "agentwrap_cpu_self_s": med([r.cpu_self_s for r in aw if r.cpu_self_s is not None]),
        "snapshots_during_stream": med([r.snapshots for r in aw if r.snapshots is not None]),
        "snapshots_per_s": med([r.snapshots / r.stream_s for r in aw if r.snapshots is not None and r.ok and r.stream_s > 0]),
        "snapshot_ms_total": med([r.snap_ms_total for r in aw if r.snap_ms_total is not None]),
        "snapshot_ms_max": med([r.snap_ms_max for r in aw if r.snap_ms_max is not None]),
        "pyte_fed_mb": med([r.fed_bytes / 1e6 for r in aw if r.fed_bytes is not None]),
        "resyncs": med([r.resyncs for r in aw if r.resyncs is not None]),
        "relay_avg_read_bytes": med([r.bytes_read / r.relay_reads for r in aw if r.relay_reads]),
        "states_seen": sorted({s.split(" ")[0] for r in aw for s in r.states}),
    }
    for kind in ("wall", "stream"):
        a, s = out[f"agentwrap_{kind}_mbps"], out[f"script_{kind}_mbps"]
        out[f"ratio_{kind}"] = a / s if isinstance(a, float) and isinstance(s, float) and s else float("nan")
        # paired: each repetition's agentwrap run against the script run next to it
        pairs = [
            (mb / x.__dict__[f"{kind}_s"]) / (mb / y.__dict__[f"{kind}_s"])
            for x, y in zip(aw, sc, strict=False) if x.ok and y.ok and mb
        ]
        out[f"ratio_{kind}_paired_median"] = med(pairs)
    if mb:
        cpu = out["agentwrap_cpu_self_s"]
        out["agentwrap_cpu_self_ms_per_mb"] = cpu * 1000 / mb if isinstance(cpu, float) else None
    return out


def add_streaming_cpu(results: list[dict[str, object]]) -> None:
    """Self CPU per MB *while streaming*: the run's self CPU minus that of
    the empty-stream run (start-up and exit), when that stream was run."""
    startup = next((r for r in results if r["stream"] == "startup"), None)
    base = startup["agentwrap_cpu_self_s"] if startup else None
    for r in results:
        cpu, mb = r["agentwrap_cpu_self_s"], r["payload_mb"]
        ok = isinstance(cpu, float) and isinstance(base, float) and isinstance(mb, float) and mb
        r["agentwrap_cpu_streaming_ms_per_mb"] = (cpu - base) * 1000 / mb if ok else None  # type: ignore[operator]


def print_table(results: list[dict[str, object]], args: argparse.Namespace) -> None:
    what = "without detection" if args.relay == "bare" else "with detection on"
    print(f"\nrelay throughput, pty backend ({args.relay} relay) {what} vs `script -q -c` "
          f"(median of {args.reps}, {COLS}x{ROWS}, MB = 10^6 bytes of payload, settle {args.settle} s)")
    if args.agentwrap_root.resolve() != ROOT:
        print(f"agentwrap under test: {args.agentwrap_root.resolve()}")
    hdr = (f"{'stream':<8} {'MB':>6} | {'script':>7} {'agentw':>7} {'ratio':>6} {'paired':>6} | "
           f"{'script':>7} {'agentw':>7} {'ratio':>6} | {'aw CPU':>7} {'ms/MB':>6} | "
           f"{'snaps':>5} {'/s':>5} {'snap ms':>8} {'pyte MB':>7} {'resync':>6}")
    print(f"{'':<15} | {'stream MB/s (start->end marker)':<30} | {'wall MB/s (spawn->exit)':<23} |"
          f" {'self CPU':<14} | detector during stream")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        if r["stream"] == "startup":
            continue
        print(
            f"{r['stream']:<8} {fmt(r['payload_mb'], '.0f'):>6} | {fmt(r['script_stream_mbps'], '.1f'):>7} "
            f"{fmt(r['agentwrap_stream_mbps'], '.1f'):>7} {fmt(r['ratio_stream'], '.2f'):>6} "
            f"{fmt(r['ratio_stream_paired_median'], '.2f'):>6} | "
            f"{fmt(r['script_wall_mbps'], '.1f'):>7} {fmt(r['agentwrap_wall_mbps'], '.1f'):>7} "
            f"{fmt(r['ratio_wall'], '.2f'):>6} | {fmt(r['agentwrap_cpu_self_s'], '.2f'):>6}s "
            f"{fmt(r.get('agentwrap_cpu_streaming_ms_per_mb'), '.2f'):>6} | "
            f"{fmt(r['snapshots_during_stream'], '.0f'):>5} {fmt(r['snapshots_per_s'], '.1f'):>5} {fmt(r['snapshot_ms_total'], '.0f'):>8} "
            f"{fmt(r['pyte_fed_mb'], '.2f'):>7} {fmt(r['resyncs'], '.0f'):>6}"
        )
    for r in results:
        if r["stream"] == "startup":
            print(f"\nstart-up (empty stream): script {fmt(r['script_wall_s'], '.3f')} s, "
                  f"agentwrap {fmt(r['agentwrap_wall_s'], '.3f')} s wall "
                  f"(agentwrap self CPU {fmt(r['agentwrap_cpu_self_s'], '.3f')} s)")
    for r in results:
        if r["failed_runs"]:
            print(f"{r['stream']}: {len(r['failed_runs'])} failed run(s): "
                  + "; ".join(f"{f['tool']} {f['note'] or 'marker missing'}" for f in r["failed_runs"]))
        if r["stream"] != "startup" and r["states_seen"]:
            print(f"{r['stream']}: detector states logged: {', '.join(r['states_seen'])}")
    print("aw CPU = agentwrap's own process (not the agent, not the C relay); ms/MB = the same"
          " minus the empty stream's (start-up), per MB: what detection costs while streaming")
    print("ratio = median agentwrap / median script (target >= 0.9); paired = median of each"
          " repetition's agentwrap run against the script run next to it (steadier when the"
          " machine's load drifts: on a shared box both tools swing up to 2x between runs)")
    print("snaps = VirtualScreen snapshots taken between the markers (/s: per second; during a"
          " continuous flood only the safety tick fires, stretched to 27x a snapshot's cost);"
          " snap ms = time inside them; pyte MB = bytes the emulator consumed (the rest was"
          " dropped: the relay sends the screen only its latest tail during a flood)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--streams", default="startup,plain,tui,yes",
                    help="comma list of startup,plain,tui,yes")
    ap.add_argument("--plain-mb", type=float, default=150)
    ap.add_argument("--tui-mb", type=float, default=100)
    ap.add_argument("--yes-mb", type=float, default=10)
    ap.add_argument("--timeout", type=float, default=30, help="per run, seconds")
    ap.add_argument("--settle", type=float, default=0.5,
                    help="the command sleeps this long before the start marker, so the stream does not"
                    " overlap agentwrap's start-up (subtracted from wall times of both tools)")
    ap.add_argument("--agentwrap-root", type=Path, default=ROOT,
                    help="source tree of the agentwrap under test (e.g. a patched copy)")
    ap.add_argument("--relay", choices=("native", "python", "bare"), default="native",
                    help="which pty relay agentwrap uses ([run] relay in its config); bare ="
                    " agentwrap-relay alone, without supervisor or detection")
    ap.add_argument("--pure", action="store_true", help="run `python -m agentwrap` without the snapshot counter")
    ap.add_argument("--json", action="store_true", help="print JSON results instead of the table")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (debugging)")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=False)
    if not shutil.which("script"):
        raise SystemExit("`script` (util-linux) is needed for the baseline")

    work = Path(tempfile.mkdtemp(prefix="awb-", dir="/tmp"))
    env = dict(os.environ)
    env.update(
        HOME=str(work / "h"), XDG_CONFIG_HOME=str(work / "c"), XDG_STATE_HOME=str(work / "s"),
        XDG_RUNTIME_DIR=str(work / "r"),
        PYTHONPATH=str(args.agentwrap_root.resolve()) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    for k in ("TMUX", "TMUX_PANE", "AGENTWRAP_SESSION"):
        env.pop(k, None)
    (work / "h").mkdir()
    (work / "c" / "agentwrap").mkdir(parents=True)
    (work / "c" / "agentwrap" / "config.toml").write_text(f'[run]\nrelay = "{args.relay}"\n')
    (work / "boot.py").write_text(BOOT)
    (work / "bare.py").write_text(BARE)
    runs: list[Run] = []
    started = time.monotonic()
    try:
        streams = build_streams(work, [s.strip() for s in args.streams.split(",") if s.strip()], args)
        seq = 0
        for rep in range(args.reps):
            for stream in streams:
                order = ["agentwrap", "script"] if rep % 2 == 0 else ["script", "agentwrap"]
                for tool in order:
                    seq += 1
                    run = run_once(tool, stream, env, work, args.timeout, args.pure, seq,
                                   args.settle, args.agentwrap_root.resolve(), args.relay)
                    runs.append(run)
                    if not args.json:
                        print(f"  rep {rep + 1} {stream.name:<7} {tool:<9} wall {run.wall_s:6.3f} s"
                              f" stream {fmt(run.stream_s, '.3f'):>6} s"
                              f"{'  ' + run.note if run.note else ''}", file=sys.stderr)
        results = [summarise(s, runs) for s in streams]
        add_streaming_cpu(results)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    if args.json:
        json.dump(json_safe({"benchmark": "relay", "relay": args.relay, "cols": COLS, "rows": ROWS, "reps": args.reps,
                   "pure": args.pure, "settle_s": args.settle,
                   "agentwrap_root": str(args.agentwrap_root.resolve()), "elapsed_s": elapsed, "results": results,
                   "runs": [asdict(r) for r in runs]}), sys.stdout, indent=1, default=str)
        print()
    else:
        sys.stderr.flush()
        print_table(results, args)
        print(f"({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
