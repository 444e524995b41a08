#!/usr/bin/env python3
"""Benchmark: the dashboard's live terminal (issue 42's Latency and Benchmarks).

An isolated environment (own XDG dirs under a short ``/tmp/awpt-*``), a real
``agentwrap serve --port 0`` and one tmux session running a streamer (below)
in place of an agent; a real headless Chromium (the distribution's, as in
tests/support/browser.py) logs in with the one-time link and shows that
session's live terminal. Measured:

1. Screen change -> rendered: the streamer writes a filler line every
   ``--filler-ms`` (it streams, as an agent replying does) and, every
   ``--mark-ms``, a line ``MARK n``, logging ``time.time()`` just before the
   write. In the page, a ``requestAnimationFrame`` loop reads the terminal's
   rows (``agentwrapTerminal.text()``) and notes ``Date.now()`` when each
   mark is first on screen: a frame the browser drew, as a person sees it.
   Latency = seen - written (one machine, one wall clock; ``Date.now()`` is
   whole milliseconds). Goal: p99 <= 100 ms.
2. Key in page -> pty: the page takes over ("Type"), then presses
   ``--keys`` keys one at a time (``agentwrapTerminal.press``: xterm.js's own
   input path, what a key press goes through after the keyboard event),
   noting ``Date.now()``; the streamer, in raw mode, logs ``time.time()``
   when each byte is read from its pty. The next key goes once the previous
   one arrived. Goal: p99 <= 50 ms.
3. Bytes per second to the browser while the streamer streams: the
   WebSocket's text received by the page (``stats.wire``, characters of the
   JSON frames) over the streaming time, and the frames per second.

Also printed: the serve process's CPU while one page watches (from /proc),
and the load average before and after.

4. Page CPU with ``--pages N`` sessions open (default 10): N streamers, each
   streaming, N browser windows each showing one of them; Chromium's own
   performance metrics (CDP ``Performance.getMetrics``: ``TaskDuration`` and
   ``ScriptDuration``, seconds of main-thread work) per second of wall time,
   summed over the windows, and serve's CPU over the same time.

``--busy`` keeps every core busy (one spinning process per core) while it
measures; ``--against REV`` runs the same measurements on git revision REV's
tree too, turn about with this one (scripts/bench_against.py: REV's tree with
its own native helpers, built once and cached), and prints the ratios: before
and after in one run, on one machine, at one load.

    .venv/bin/python scripts/bench_page_terminal.py                # ~2 min
    .venv/bin/python scripts/bench_page_terminal.py --busy --against 6b594c1 --json out.json
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from bench_against import add_arguments as add_against  # noqa: E402
from bench_against import main as against  # noqa: E402
from benchlib import (  # noqa: E402
    UNDER_TEST,
    isolated_env,
    stats_ms,
    teardown_agentwrap,
    wait_until,
    write_json,
)

STREAMER = r'''
import os, sys, termios, time, tty, select
marks_log, keys_log, mark_s, filler_s, marks = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
fd = sys.stdin.fileno()
tty.setraw(fd)
out = sys.stdout
ml = open(marks_log, "a", buffering=1)
kl = open(keys_log, "a", buffering=1)
out.write("streamer ready\r\n"); out.flush()
n = 0
start = time.monotonic()
next_mark = start + 2.0
next_fill = start
go = False
while True:
    now = time.monotonic()
    wait = max(0.0, min(next_fill, next_mark) - now) if go else 0.5
    r, _, _ = select.select([fd], [], [], wait)
    if r:
        data = os.read(fd, 1024)
        t = time.time()
        for b in data:
            kl.write(f"{b} {t}\n")
        if b"\x07" in data:  # BEL: start streaming
            go = True
            next_mark = time.monotonic() + 0.5
    if not go:
        continue
    now = time.monotonic()
    if now >= next_fill:
        out.write(f"stream {now:.3f} " + "lorem ipsum dolor sit amet " * 2 + "\r\n"); out.flush()
        next_fill = now + filler_s
    if now >= next_mark and n < marks:
        n += 1
        t = time.time()
        ml.write(f"{n} {t}\n")
        out.write(f"\x1b[1;32mMARK {n:06d}\x1b[0m\r\n"); out.flush()
        next_mark = now + mark_s
'''

WATCH = """
window.__seen = {};
const re = /MARK (\\d{6})/g;
function look() {
  const text = window.agentwrapTerminal.text();
  const now = Date.now();
  for (const m of text.matchAll(re)) { if (!(m[1] in window.__seen)) window.__seen[m[1]] = now; }
  requestAnimationFrame(look);
}
requestAnimationFrame(look);
"""


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spin() -> None:  # a busy core
    while True:
        pass


def load_avg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


class Front:
    """What the page logs in to and who runs the streamer's session: this
    host's ``agentwrap serve``, or (``--hub``) an ``agentwrap hub`` with one
    joined host whose supervisor host runs it, the page reaching its pane
    through the host's link."""

    def __init__(self, work: Path, env: dict[str, str], hub: bool) -> None:
        self.work, self.env, self.hub = work, env, hub
        self.procs: list[subprocess.Popen[str]] = []
        self.flags: tuple[str, ...] = ()
        self.front_env = env  # who serves the page: serve's (this host), or the hub's
        self.row = '#session-list li[data-session="{name}"] button'
        self.url = ""

    def cli(self, *a: str, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentwrap", *a], env=env or self.env,
                              text=True, capture_output=True, check=True, cwd=self.work,
                              input=stdin)

    def start(self) -> None:
        if not self.hub:
            serve = subprocess.Popen([sys.executable, "-m", "agentwrap", "serve", "--port", "0"],
                                     env=self.env, cwd=self.work, stdout=subprocess.PIPE,
                                     stderr=(self.work / "serve.log").open("w"), text=True)
            self.procs.append(serve)
            assert serve.stdout is not None
            self.url = serve.stdout.readline().split("listening on ", 1)[1].split()[0]
            return
        from support.hub_kit import free_port, make_cert, spki_pin

        cert = make_cert(self.work / "tls")
        hub_work = self.work / "hb"
        hub_work.mkdir()
        self.front_env = isolated_env(hub_work, UNDER_TEST)
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "hub", "--listen", f"127.0.0.1:{port}",
             "--tls-cert", str(cert.cert), "--tls-key", str(cert.key)], env=self.front_env,
            cwd=hub_work, stdout=subprocess.DEVNULL, stderr=(self.work / "hub.log").open("w"),
            text=True))
        import ssl
        import urllib.request

        ctx = ssl.create_default_context(cafile=str(cert.ca))

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(self.url + "/healthz", context=ctx, timeout=2) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        wait_until(healthy, 60, "the hub's /healthz", poll=0.2)
        code = self.cli("hub", "invite", "alpha", "--tls-cert", str(cert.cert), "--ttl", "600",
                        env=self.front_env).stdout.strip()
        self.cli("join", self.url, "--host", "alpha", stdin=code + "\n")
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "_host"], env=self.env, cwd="/",
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, text=True))
        wait_until(lambda: (self.work / "r" / "agentwrap" / "host.sock").exists()
                   or any((self.work / "r").rglob("host.sock")), 120, "the supervisor host")
        self.flags = (f"--ignore-certificate-errors-spki-list={spki_pin(cert.cert)}",)
        self.row = '#session-list li[data-host="alpha"][data-session="{name}"] button'

    def link(self) -> str:
        return self.cli("token", "--link", "--url", self.url, env=self.front_env).stdout.strip()

    def cpu_pid(self) -> int:
        return self.procs[0].pid  # serve, or the hub

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)  # at a load of 25 a serve can take more than 10 s to go
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.front_env is not self.env:
            teardown_agentwrap(self.front_env, str(self.work))


def measure(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One serve (or hub and host) from ``tree``: latency, bytes, serve CPU;
    then page CPU with --pages sessions."""
    from support.browser import chromium

    work = Path(tempfile.mkdtemp(prefix="awpt-"))
    env = isolated_env(work, tree)
    marks_log, keys_log = work / "marks.log", work / "keys.log"
    streamer = work / "streamer.py"
    streamer.write_text(STREAMER)
    marks_log.touch()
    keys_log.touch()
    front = Front(work, env, args.hub)
    cli = front.cli

    def start_streaming(name: str) -> None:
        subprocess.run(["tmux", "-S", str(next((work / "r").rglob(f"tmux/{name}.sock"))),
                        "send-keys", "-t", f"={name}:0.0", "-H", "07"], check=True)

    res: dict[str, Any] = {"nproc": os.cpu_count(), "load_before": load_avg(),
                           "through": "hub" if args.hub else "serve"}
    try:
        front.start()
        cli("run", "--detach", "--name", "st", "--cols", "120", "--rows", "40", "--",
            sys.executable, str(streamer), str(marks_log), str(keys_log), str(args.mark_ms / 1000),
            str(args.filler_ms / 1000), str(args.marks))
        browser = chromium("bench-page-terminal", flags=front.flags)
        page = next(browser)
        try:
            d = page.driver
            page.open(front.link())
            page.wait(lambda: page.shown("#main") and page.text("#conn") == "live", "logged in")
            row = front.row.format(name="st")
            page.wait(lambda: page.one(row), "the session listed", timeout=60)
            page.click(row)
            page.wait(lambda: "streamer ready" in d.execute_script("return agentwrapTerminal.text()"),
                      "the live terminal")

            # 2. keys first (the streamer is quiet): page -> pty
            page.click("#term-type")
            page.wait(lambda: d.execute_script("return agentwrapTerminal.typing()"), "typing")
            pressed: list[float] = []
            arrived: list[float] = []
            for i in range(args.keys):
                ch = "abcdefghijklmnopqrstuvwxyz"[i % 26]
                at = d.execute_script(f"const t = Date.now(); agentwrapTerminal.press('{ch}'); return t")
                pressed.append(at / 1000)
                lines = wait_until(lambda n=i: (x := keys_log.read_text().splitlines())[n:] and x,
                                   10, f"key {i}", poll=0.001)
                arrived.append(float(lines[i].split()[1]))
            res["key_to_pty"] = stats_ms([a - p for a, p in zip(arrived, pressed, strict=True)])
            page.click("#term-type")
            page.wait(lambda: not d.execute_script("return agentwrapTerminal.typing()"), "read-only")

            # 1 and 3. stream, and see the marks drawn
            d.execute_script(WATCH)
            w0 = d.execute_script("return [agentwrapTerminal.stats.wire, agentwrapTerminal.stats.frames]")
            c0, t0 = cpu_s(front.cpu_pid()), time.monotonic()
            start_streaming("st")
            wait_until(lambda: len(marks_log.read_text().splitlines()) >= args.marks, 600, "the marks",
                       poll=0.2)
            time.sleep(0.5)
            t1, c1 = time.monotonic(), cpu_s(front.cpu_pid())
            w1 = d.execute_script("return [agentwrapTerminal.stats.wire, agentwrapTerminal.stats.frames]")
            seen = d.execute_script("return window.__seen")
            written = {int(n): float(t) for n, t in (x.split() for x in marks_log.read_text().splitlines())}
            lat = [seen[f"{n:06d}"] / 1000 - t for n, t in written.items() if f"{n:06d}" in seen]
            res["change_to_rendered"] = stats_ms(lat)
            res["marks_missed"] = len(written) - len(lat)
            res["stream_s"] = round(t1 - t0, 2)
            res["bytes_per_s"] = round((w1[0] - w0[0]) / (t1 - t0))
            res["frames_per_s"] = round((w1[1] - w0[1]) / (t1 - t0), 1)
            res["serve_cpu_pct"] = round(100 * (c1 - c0) / (t1 - t0), 1)
            if args.pages:
                res["pages"] = page_cpu(page, cli, front, start_streaming, streamer, work, args)
        finally:
            browser.close()
    finally:
        front.stop()
        teardown_agentwrap(env, str(work))
        shutil.rmtree(work, ignore_errors=True)
    res["load_after"] = load_avg()
    return res


def page_cpu(page: Any, cli: Any, front: Front, start_streaming: Any, streamer: Path, work: Path,
             args: argparse.Namespace) -> dict[str, Any]:
    """``args.pages`` streaming sessions, a window on each: Chromium's main-thread
    work per second (CDP Performance.getMetrics) and serve's CPU."""
    d = page.driver
    names = [f"p{i}" for i in range(args.pages)]
    with ThreadPoolExecutor(len(names)) as pool:  # started together; each streams, no marks
        list(pool.map(lambda name: cli(
            "run", "--detach", "--name", name, "--cols", "120", "--rows", "40", "--",
            sys.executable, str(streamer), str(work / f"{name}.marks"), str(work / f"{name}.keys"),
            "3600", str(args.filler_ms / 1000), "0"), names))
    handles = []
    for name in names:
        d.switch_to.new_window("window")
        # again when a load failed: a page of a tree without the retry of a dropped fetch, or
        # a script Chromium dropped with ERR_NETWORK_CHANGED (another process adding a network
        # interface: containers on a shared machine)
        for tries in range(3):
            try:
                d.get(front.link())  # a login of its own
                page.wait(lambda: page.shown("#main") and page.text("#conn") == "live", "logged in")
                page.wait(lambda n=name: page.one(front.row.format(name=n)),
                          f"{name} listed", timeout=20)
                page.click(front.row.format(name=name))
                page.wait(lambda: "streamer ready" in d.execute_script(
                    "return agentwrapTerminal.text()"), f"the terminal of {name}", timeout=30)
                break
            except AssertionError:
                if tries == 2:
                    raise
        d.execute_cdp_cmd("Performance.enable", {})
        handles.append(d.current_window_handle)
    for name in names:
        start_streaming(name)
    time.sleep(2.0)  # every stream going

    def metrics() -> tuple[float, float]:
        task = script = 0.0
        for h in handles:
            d.switch_to.window(h)
            got = {m["name"]: m["value"] for m in d.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
            task += got["TaskDuration"]
            script += got["ScriptDuration"]
        return task, script

    def wire() -> list[int]:  # characters each window's terminal socket received
        out = []
        for h in handles:
            d.switch_to.window(h)
            out.append(int(d.execute_script("return agentwrapTerminal.stats.wire")))
        return out

    wire0 = wire()
    serve_pid = front.cpu_pid()
    (task0, script0), c0, t0 = metrics(), cpu_s(serve_pid), time.monotonic()
    time.sleep(args.cpu_s)
    (task1, script1), c1, t1 = metrics(), cpu_s(serve_pid), time.monotonic()
    wire1 = wire()
    frames = []
    for h in handles:
        d.switch_to.window(h)
        frames.append(d.execute_script("return agentwrapTerminal.stats.frames"))
    span = t1 - t0
    task_pct = 100 * (task1 - task0) / span
    serve_pct = 100 * (c1 - c0) / span
    return {"sessions": args.pages, "span_s": round(span, 1),
            "page_task_pct": round(task_pct, 1),
            "page_script_pct": round(100 * (script1 - script0) / span, 1),
            "per_page_task_pct": round(task_pct / len(handles), 2),
            "serve_cpu_pct": round(serve_pct, 1),
            "serve_cpu_per_session_pct": round(serve_pct / len(names), 2),
            "bytes_per_s_per_page": round((sum(wire1) - sum(wire0)) / span / len(handles)),
            "frames_per_page": frames}


def report(label: str, res: dict[str, Any]) -> None:
    r, k = res["change_to_rendered"], res["key_to_pty"]
    print(f"[{label}] through {res.get('through', 'serve')}: load {res['load_before']:.1f} ->"
          f" {res['load_after']:.1f} on {res['nproc']} cores")
    print(f"[{label}] screen change -> rendered: n={r['n']} p50 {r['p50_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms"
          f"  max {r['max_ms']:.1f} ms  (missed {res['marks_missed']})")
    print(f"[{label}] key in page -> pty:        n={k['n']} p50 {k['p50_ms']:.1f} ms  p99 {k['p99_ms']:.1f} ms"
          f"  max {k['max_ms']:.1f} ms")
    print(f"[{label}] to the browser while streaming: {res['bytes_per_s']} B/s, {res['frames_per_s']} frames/s;"
          f" serve CPU {res['serve_cpu_pct']} % of a core")
    if "pages" in res:
        p = res["pages"]
        print(f"[{label}] {p['sessions']} sessions open, all streaming: pages' main thread"
              f" {p['page_task_pct']} % of a core (script {p['page_script_pct']} %),"
              f" serve {p['serve_cpu_pct']} % of a core; per page {p['per_page_task_pct']} %,"
              f" serve per session {p['serve_cpu_per_session_pct']} %,"
              f" {p['bytes_per_s_per_page']} B/s to each page")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--marks", type=int, default=200)
    ap.add_argument("--mark-ms", type=float, default=97.0)
    ap.add_argument("--filler-ms", type=float, default=20.0)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--pages", type=int, default=10, help="sessions open for page CPU (0: skip)")
    ap.add_argument("--cpu-s", type=float, default=20.0, help="how long page CPU is measured")
    ap.add_argument("--busy", action="store_true", help="keep every core busy while measuring")
    ap.add_argument("--hub", action="store_true",
                    help="the page on an `agentwrap hub`, the session on a joined host (its"
                         " pane through the host's link); 'serve CPU' is the hub's")
    ap.add_argument("--json", default="")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=True)

    spinners = [multiprocessing.Process(target=spin, daemon=True)
                for _ in range(os.cpu_count() or 1)] if args.busy else []
    for sp in spinners:
        sp.start()
    out: dict[str, Any] = {"busy": args.busy}
    try:
        out["after"] = measure(UNDER_TEST, args)
    finally:
        for sp in spinners:
            sp.kill()
    report("after", out["after"])
    a = out["after"]
    r, k = a["change_to_rendered"], a["key_to_pty"]
    print(("PASS" if r["p99_ms"] <= 100 else "FAIL") + " screen change -> rendered p99 <= 100 ms")
    print(("PASS" if k["p99_ms"] <= 50 else "FAIL") + " key in page -> pty p99 <= 50 ms")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
