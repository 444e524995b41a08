#!/usr/bin/env python3
"""Hook wall time: the native client and ``python -m agentwrap hook`` against ``python3 -c pass``.

An agent runs a hook in a new process at every event and waits for it, so a
hook's cost is its whole run: interpreter start, imports, the store, the
answer. This measures, interleaved in the same run (the machine's load hits
every case alike), the wall time of:

* ``python3 -c pass`` (the floor the issue names: the base interpreter, and
  ``python3`` as PATH finds it, which may be a pyenv shim) and ``<venv python> -c pass``;
* ``hook claude Stop`` (a signal: a file in the runtime dir, no store);
* ``hook claude PostToolBatch`` with nothing queued (opens the store, answers nothing);
* ``hook claude PostToolBatch`` with one message queued before each run,
  handed over by the session's supervisor (the Python hook is a client of its
  hook server, as the native client is: :mod:`agentwrap.surfaces.hooks.client`;
  here the server runs in a thread of this process, as in the supervisor's;
  before issue 36 the hook asked the supervisor's loop over its wake socket,
  which a commit of then still gets here), and by the hook itself when no
  supervisor listens (it opens the store: peek, claim, record delivered,
  frame, answer);
* ``hook claude PermissionRequest`` without answer rules (the exact request
  kept for the supervisor, a signal; no config loaded) and with a rule that
  approves it (config and policy loaded, the request kept twice, an audit
  line, the decision printed);
* the same through the native hook client (``agentwrap-hook``, issue 27), as
  the hooks are registered when it is built: the session's supervisor runs the
  hook (its hook server, here in a thread of this process as in the
  supervisor's), and with no supervisor the client runs the Python hook.

Each hook gets the captured payload (tests/fixtures/hooks/claude/) on stdin, in
an isolated agentwrap environment with one registered session. Prints p50/p99
per case and each case's ratio to ``python3 -c pass``; ``--json`` for a file.

``--against REF`` measures the same cases on commit REF too, in the same run
(scripts/bench_against.py: REF's tree and interpreter built once, cached under
``~/.cache/agentwrap/bench-against``): each tree's part runs in a process of
its own, by that tree's interpreter (the supervisor's side runs in the
process), ``--rounds`` times each, taking turns
(A B, B A, ...) so the machine's load hits both alike; it prints both trees'
p50/p99 per case, the median CPU time of the hook's process (user + system: far
steadier than the wall time on a loaded machine, though it leaves out the
supervisor's side) and the ratios this / REF. ``--agentwrap-root`` measures
another source tree alone.

    .venv/bin/python scripts/bench_hooks.py --runs 60
    .venv/bin/python scripts/bench_hooks.py --runs 60 --against a27e8eb
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_against import Tree, interleaved, ratio, this_tree
from benchlib import fmt, pct, stats_ms, write_json

if TYPE_CHECKING:
    from agentwrap.paths import Paths

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "hooks" / "claude"


def timed(argv: list[str], data: bytes, env: dict[str, str]) -> tuple[float, float, bytes]:
    """One run: (wall, CPU of the hook's process, its output). The CPU time
    (user + system, from the reaped child's rusage) moves far less with the
    machine's load than the wall time; it excludes what the supervisor's side
    does in this process. Run in HOME: ``python -m`` puts its working
    directory first on the path, which must not put another agentwrap before
    ``--agentwrap-root``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, input=data, env=env, capture_output=True, check=True,
                          cwd=env["HOME"])
    took = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return took, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, proc.stdout


Case = tuple[list[str], bytes, object, dict[str, str]]


def run_cases(cases: dict[str, Case], times: dict[str, list[float]], runs: int,
              cpu: dict[str, list[float]]) -> None:
    """Every case once per round, ``runs`` rounds: interleaved, so the
    machine's load hits each case alike."""
    for _ in range(runs):
        for name, (argv, data, before, case_env) in cases.items():
            if callable(before):
                before()
            took, used, out = timed(argv, data, case_env)
            if callable(before) and b"additionalContext" not in out:
                raise SystemExit(f"{name}: no context in {out!r}")
            if before == "allow" and b'"behavior": "allow"' not in out:
                raise SystemExit(f"{name}: not approved: {out!r}")
            times[name].append(took)
            cpu[name].append(used)


def hook_socket_of(paths: Paths, session: str) -> Path | None:
    """The session's hook socket, wherever the tree under test keeps the
    function (agentwrap.hook_wire since issue 36)."""
    try:
        from agentwrap.hook_wire import hook_socket
    except ImportError:
        from agentwrap.sessions.hook_requests import (  # type: ignore[import-not-found,no-redef]
            hook_socket,
        )
    found: Path | None = hook_socket(paths, session)
    return found


@contextmanager
def supervisor(paths: Paths, session: str) -> Iterator[None]:
    """``session``'s hook server, as the supervisor runs it beside its loop;
    and, for a commit from before issue 36, its wake socket answered from a
    thread as that supervisor's loop answered the Python hook's hand-over
    datagrams (the same server, store and socket; only the screen watching
    around it is missing)."""
    from agentwrap.datagram import WakeSocket
    from agentwrap.surfaces.hooks.server import HookServer

    stop = threading.Event()
    sock = hook_socket_of(paths, session)
    assert sock is not None
    hooks = HookServer(paths, session, sock).start()  # both clients' (the native one's before 36)
    try:
        from agentwrap.sessions.hook_requests import HandoverServer  # type: ignore[import-not-found]
    except ImportError:  # one hook path (issue 36): the server above is all
        try:
            yield
        finally:
            hooks.stop()
        return
    from agentwrap.audit import AuditLog
    from agentwrap.delivery.handover import ack_rule
    from agentwrap.message import QueueLimits
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(paths.db_path, QueueLimits(rate_per_minute=1_000_000))
    server = HandoverServer(paths, session, store, AuditLog(paths.audit_log),
                            ack_rule(False, "ACK {token}"))
    with WakeSocket(paths.wake_socket(session)) as wake:
        def loop() -> None:
            while not stop.is_set():
                ready, _, _ = select.select([wake], [], [], 0.05)
                if ready:
                    server.serve(wake.drain())

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(5)
            hooks.stop()
            store.close()


def measure(aw_root: Path, runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every case ``runs`` times, interleaved, with the agentwrap of the source
    tree ``aw_root`` (imported here, and first on the hooks' PYTHONPATH):
    (wall times, CPU times of the hook's process) per case."""
    sys.path.insert(0, str(aw_root))
    from agentwrap.message import NewMessage, QueueLimits, Source
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.channels import hook_client
    from agentwrap.sessions.registry import SessionRecord

    root = Path(tempfile.mkdtemp(prefix="awbh-"))
    try:
        env = dict(os.environ, HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "c"),
                   XDG_STATE_HOME=str(root / "s"), XDG_RUNTIME_DIR=str(root / "r"),
                   AGENTWRAP_SESSION="bench", PYTHONPATH=str(aw_root))
        (root / "home").mkdir()
        paths = Paths.from_env(env).ensure()
        svc = Service.open(paths, limits=QueueLimits(rate_per_minute=1_000_000))
        for name in ("bench", "alone", "ruled"):  # "alone": no supervisor listens for it
            svc.registry.register(SessionRecord(name=name, profile="claude", backend="tmux",
                                                command=["claude"], cwd=str(root),
                                                started=time.time()))
        alone = dict(env, AGENTWRAP_SESSION="alone")
        hook = [sys.executable, "-m", "agentwrap", "hook", "claude"]
        client = hook_client()
        if client is None:
            raise SystemExit("the native hook client is not built (no C compiler at install?)")

        def native(event: str, session: str = "bench") -> list[str]:
            sock = hook_socket_of(paths, session)
            return [str(client), "1", str(sock), "claude", event, "--", *hook, event]
        batch = (FIXTURES / "PostToolBatch.json").read_bytes()
        stop = (FIXTURES / "Stop.json").read_bytes()
        asks = (FIXTURES / "PermissionRequest.json").read_bytes()
        ruled = dict(env, XDG_CONFIG_HOME=str(root / "c-rules"))  # same store, one rule
        ruled_native = dict(ruled, AGENTWRAP_SESSION="ruled")  # its supervisor has the rule
        (root / "c-rules" / "agentwrap").mkdir(parents=True)
        (root / "c-rules" / "agentwrap" / "config.toml").write_text(
            '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\nanswer = { option = 1 }\n',
            encoding="utf-8")
        # `python3` on PATH may be a pyenv shim (a shell script: ~10x the cost of
        # the interpreter); the floor is the interpreter itself, the shim shown too
        python3 = getattr(sys, "_base_executable", "") or shutil.which("python3") or "python3"
        shim = shutil.which("python3") or "python3"

        def enqueue(session: str) -> Callable[[], None]:
            def one() -> None:
                svc.send(NewMessage(session=session, content="CI failed on main: test_login",
                                    source=Source.WEBHOOK, source_id="ci"))
            return one

        cases: dict[str, Case] = {
            "python3 -c pass": ([python3, "-c", "pass"], b"", None, env),
            "python3 -c pass (PATH's python3)": ([shim, "-c", "pass"], b"", None, env),
            "venv python -c pass": ([sys.executable, "-c", "pass"], b"", None, env),
            "hook Stop (signal)": ([*hook, "Stop"], stop, None, env),
            "hook PostToolBatch, empty queue": ([*hook, "PostToolBatch"], batch, None, env),
            "hook PostToolBatch, 1 message": ([*hook, "PostToolBatch"], batch,
                                              enqueue("bench"), env),
            "  empty queue, no supervisor": ([*hook, "PostToolBatch"], batch, None, alone),
            "  1 message, no supervisor": ([*hook, "PostToolBatch"], batch, enqueue("alone"),
                                           alone),
            "hook PermissionRequest, no rules": ([*hook, "PermissionRequest"], asks, None, env),
            "hook PermissionRequest, rule allows": ([*hook, "PermissionRequest"], asks, "allow",
                                                    ruled_native),
            "native Stop (signal)": (native("Stop"), stop, None, env),
            "native PostToolBatch, empty queue": (native("PostToolBatch"), batch, None, env),
            "native PostToolBatch, 1 message": (native("PostToolBatch"), batch,
                                                enqueue("bench"), env),
            "native PermissionRequest, no rules": (native("PermissionRequest"), asks, None, env),
            "native PermissionRequest, rule allows": (native("PermissionRequest", "ruled"), asks,
                                                      "allow", ruled_native),
            "  native, no supervisor (Python hook)": (native("Stop", "alone"), stop, None, alone),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for argv, data, _, case_env in cases.values():  # warm the page cache once
            timed(argv, data, case_env)
        with supervisor(paths, "bench"), supervisor(Paths.from_env(ruled), "ruled"):
            run_cases(cases, times, runs, cpu)
        svc.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return times, cpu


def against(args: argparse.Namespace) -> int:
    """This tree and REF's, ``--rounds`` turns each of ``--runs / --rounds``
    runs per case, each in a process of its own; pooled per tree."""
    rounds = max(1, args.rounds)
    per_round = max(1, math.ceil(args.runs / rounds))

    def argv(tree: Tree, _group: str, out: Path) -> list[str]:
        return [tree.python, str(Path(__file__).resolve()), "--runs", str(per_round),
                "--agentwrap-root", str(tree.root), "--json", str(out)]

    def read(proc: subprocess.CompletedProcess[str], out: Path) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return got

    def progress(r: int, _group: str, tree: Tree, res: dict[str, Any]) -> None:
        if r == 0 or res.get("errors"):
            print(f"{tree.label}: agentwrap from {res.get('agentwrap')}"
                  f" {' '.join(res.get('errors', []))}", flush=True)

    runs = interleaved(args.against, rounds, argv, read, this=this_tree(args.agentwrap_root),
                       progress=progress)
    if runs.failed:
        raise SystemExit(f"{runs.failed} run(s) failed (above)")
    labels = {side: tree.label for side, tree in runs.trees.items()}
    times: dict[str, dict[str, list[float]]] = {"this": {}, "ref": {}}
    cpu: dict[str, dict[str, list[float]]] = {"this": {}, "ref": {}}
    p50s: dict[str, dict[str, list[float]]] = {"this": {}, "ref": {}}
    for side, groups in runs.results.items():
        for got in groups[""]:
            for name, s in got["cases"].items():
                times[side].setdefault(name, []).extend(s["samples_ms"])
                cpu[side].setdefault(name, []).extend(s["cpu_samples_ms"])
                p50s[side].setdefault(name, []).append(s["p50_ms"])
    print(f"\nthis = {labels['this']}, ref = {labels['ref']}: {rounds} rounds x {per_round} runs"
          f" per tree, turn about, {os.cpu_count()} cpus, {runs.load_range()}")
    print(f"{'':38} {'wall time, ms':^43}   {'CPU of the hook process, ms':^27}")
    print(f"{'case':38} {'this p50 / p99':>15} {'ref p50 / p99':>15} {'this / ref':>11}"
          f"   {'this':>6} {'ref':>6} {'ratio':>6}   wall p50 ratio per round")
    results: dict[str, Any] = {"against": args.against, "this": labels["this"],
                               "ref": labels["ref"], "rounds": rounds, "runs_per_round": per_round,
                               "loads": runs.loads, "cases": {}}
    for name, xs in times["this"].items():
        ys = times["ref"].get(name, [])
        a = {"p50_ms": pct(xs, 50), "p99_ms": pct(xs, 99)}
        b = {"p50_ms": pct(ys, 50), "p99_ms": pct(ys, 99)}
        r50, r99 = ratio(a["p50_ms"], b["p50_ms"]), ratio(a["p99_ms"], b["p99_ms"])
        paired = [ratio(x, y) for x, y in zip(p50s["this"][name], p50s["ref"].get(name, []),
                                              strict=False)]
        c_this, c_ref = pct(cpu["this"][name], 50), pct(cpu["ref"].get(name, []), 50)
        a["cpu_p50_ms"], b["cpu_p50_ms"] = c_this, c_ref
        results["cases"][name] = {"this": a, "ref": b, "ratio_p50": r50, "ratio_p99": r99,
                                  "ratio_cpu_p50": ratio(c_this, c_ref), "paired_p50": paired}
        print(f"{name:38} {fmt(a['p50_ms'], '.1f'):>7} / {fmt(a['p99_ms'], '.1f'):<5}"
              f" {fmt(b['p50_ms'], '.1f'):>7} / {fmt(b['p99_ms'], '.1f'):<5}"
              f" {fmt(r50):>5} / {fmt(r99):<4}   {fmt(c_this, '.1f'):>6} {fmt(c_ref, '.1f'):>6}"
              f" {fmt(ratio(c_this, c_ref)):>6}   {' '.join(fmt(x) for x in paired)}")
    if args.json:
        write_json(args.json, results)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=60, help="runs per case (default 60)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--agentwrap-root", type=Path, default=REPO,
                   help="source tree of the agentwrap under test (default: this one)")
    p.add_argument("--against", metavar="REF",
                   help="also measure commit REF in the same run, turn about, and print ratios")
    p.add_argument("--rounds", type=int, default=6,
                   help="with --against: turns per tree, --runs split among them (default 6)")
    args = p.parse_args()
    if args.against:
        return against(args)

    aw_root = args.agentwrap_root.resolve()
    times, cpu = measure(aw_root, args.runs)
    floor = stats_ms(times["python3 -c pass"])
    results: dict[str, Any] = {}
    print(f"{'case':36} {'p50 ms':>8} {'p99 ms':>8} {'x p50':>6} {'x p99':>6}   ({args.runs} runs,"
          f" {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    for name, xs in times.items():
        s: dict[str, Any] = dict(stats_ms(xs))
        s["ratio_p50"] = s["p50_ms"] / floor["p50_ms"]
        s["ratio_p99"] = s["p99_ms"] / floor["p99_ms"]
        s["samples_ms"] = [x * 1000 for x in xs]
        s["cpu_samples_ms"] = [x * 1000 for x in cpu[name]]
        s["cpu_p50_ms"] = pct(s["cpu_samples_ms"], 50)
        results[name] = s
        print(f"{name:36} {fmt(s['p50_ms'], '8.1f')} {fmt(s['p99_ms'], '8.1f')}"
              f" {fmt(s['ratio_p50'], '6.1f')} {fmt(s['ratio_p99'], '6.1f')}")
    if args.json:
        import agentwrap

        write_json(args.json, {"agentwrap": str(Path(agentwrap.__file__).resolve().parent),
                               "cases": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
