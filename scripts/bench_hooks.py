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
  handed over by the session's supervisor (the hook asks it over the wake
  socket: :mod:`agentwrap.sessions.hook_requests`; here its server runs in a thread
  of this process, answering as the supervisor's loop does), and by the hook
  itself when no supervisor listens (it opens the store: peek, claim, record
  delivered, frame, answer);
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

    .venv/bin/python scripts/bench_hooks.py --runs 60
"""

from __future__ import annotations

import argparse
import json
import os
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

from benchlib import fmt, json_safe, stats_ms

from agentwrap.audit import AuditLog
from agentwrap.datagram import WakeSocket
from agentwrap.delivery.handover import ack_rule
from agentwrap.message import NewMessage, QueueLimits, Source
from agentwrap.paths import Paths
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.service import Service
from agentwrap.sessions.channels import hook_client
from agentwrap.sessions.hook_requests import HandoverServer, hook_socket
from agentwrap.sessions.registry import SessionRecord
from agentwrap.surfaces.hooks.server import HookServer

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "hooks" / "claude"


def timed(argv: list[str], data: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    t = time.perf_counter()
    proc = subprocess.run(argv, input=data, env=env, capture_output=True, check=True)
    return time.perf_counter() - t, proc.stdout


Case = tuple[list[str], bytes, object, dict[str, str]]


def run_cases(cases: dict[str, Case], times: dict[str, list[float]], runs: int) -> None:
    """Every case once per round, ``runs`` rounds: interleaved, so the
    machine's load hits each case alike."""
    for _ in range(runs):
        for name, (argv, data, before, case_env) in cases.items():
            if callable(before):
                before()
            took, out = timed(argv, data, case_env)
            if callable(before) and b"additionalContext" not in out:
                raise SystemExit(f"{name}: no context in {out!r}")
            if before == "allow" and b'"behavior": "allow"' not in out:
                raise SystemExit(f"{name}: not approved: {out!r}")
            times[name].append(took)


@contextmanager
def supervisor(paths: Paths, session: str) -> Iterator[None]:
    """``session``'s wake socket answered from a thread as the supervisor's
    loop answers it (the same server, store and socket; only the screen
    watching around it is missing)."""
    store = SQLiteMessageStore(paths.db_path, QueueLimits(rate_per_minute=1_000_000))
    server = HandoverServer(paths, session, store, AuditLog(paths.audit_log),
                            ack_rule(False, "ACK {token}"))
    stop = threading.Event()
    sock = hook_socket(paths, session)
    assert sock is not None
    hooks = HookServer(paths, session, sock).start()  # the native client's
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=60, help="runs per case (default 60)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = p.parse_args()

    root = Path(tempfile.mkdtemp(prefix="awbh-"))
    try:
        env = dict(os.environ, HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "c"),
                   XDG_STATE_HOME=str(root / "s"), XDG_RUNTIME_DIR=str(root / "r"),
                   AGENTWRAP_SESSION="bench", PYTHONPATH=str(REPO))
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
            sock = hook_socket(paths, session)
            return [str(client), "1", str(sock), "claude", event, "--", *hook, event]
        batch = (FIXTURES / "PostToolBatch.json").read_bytes()
        stop = (FIXTURES / "Stop.json").read_bytes()
        asks = (FIXTURES / "PermissionRequest.json").read_bytes()
        ruled = dict(env, XDG_CONFIG_HOME=str(root / "c-rules"))  # same store, one rule
        ruled_native = dict(ruled, AGENTWRAP_SESSION="ruled")
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
                                                    ruled),
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
        for argv, data, _, case_env in cases.values():  # warm the page cache once
            timed(argv, data, case_env)
        with supervisor(paths, "bench"), supervisor(Paths.from_env(ruled), "ruled"):
            run_cases(cases, times, args.runs)
        svc.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    floor = stats_ms(times["python3 -c pass"])
    results = {}
    print(f"{'case':36} {'p50 ms':>8} {'p99 ms':>8} {'x p50':>6} {'x p99':>6}   ({args.runs} runs,"
          f" {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    for name, xs in times.items():
        s = stats_ms(xs)
        s["ratio_p50"] = s["p50_ms"] / floor["p50_ms"]
        s["ratio_p99"] = s["p99_ms"] / floor["p99_ms"]
        results[name] = s
        print(f"{name:36} {fmt(s['p50_ms'], '8.1f')} {fmt(s['p99_ms'], '8.1f')}"
              f" {fmt(s['ratio_p50'], '6.1f')} {fmt(s['ratio_p99'], '6.1f')}")
    if args.json:
        Path(args.json).write_text(json.dumps(json_safe(results), indent=2) + "\n",
                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
