#!/usr/bin/env python3
"""Benchmark: a tap on a one-tap answer link -> the dialog closed on the agent's screen (issue 40).

A stand-in agent (tests/support/standin_agent.py, the dashboard tests' agent)
runs under ``agentwrap run --detach`` on tmux, and ``agentwrap serve`` on a
loopback port. Each run has the stand-in open its permission dialog, waits for
the question in the registry, mints the notice's links
(:meth:`LinkMaker.links_for <agentwrap.answers.links.LinkMaker.links_for>`),
GETs the Approve link's page (what a phone shows first), then measures from
the tap (the POST the page's button sends, with its token) to:

* **tap -> response**: the POST answered (the server waits up to 10 s for the
  supervisor to type the answer and see the dialog close);
* **tap -> dialog gone**: the first poll of the pane (``tmux capture-pane``
  every ``--poll`` s) without the dialog's line: what the person would see on
  the agent's screen;
* **tap -> applied**: the answer's ``finished`` time in the store (the
  supervisor saw the dialog close).

    .venv/bin/python scripts/bench_tap.py                # 20 runs
    .venv/bin/python scripts/bench_tap.py --runs 50 --json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote

from bench_against import add_arguments as add_against
from bench_against import main as against
from benchlib import (
    UNDER_TEST,
    Poller,
    fmt,
    isolated_env,
    json_safe,
    stats_ms,
    teardown_agentwrap,
    wait_until,
)

ROOT = UNDER_TEST  # this checkout, or the tree --against runs this on
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"
DIALOG = re.compile(r"Do you want to proceed\?")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--poll", type=float, default=0.01, help="pane poll interval, seconds")
    ap.add_argument("--json", action="store_true")
    add_against(ap)
    args = ap.parse_args()
    if args.against:
        return against(__file__, args, json_file=False)

    import httpx

    from agentwrap.answers.links import TAP_PATH, LinkMaker, load_or_create_key
    from agentwrap.answers.store import AnswerStore
    from agentwrap.paths import Paths
    from agentwrap.sessions.registry import Registry

    work = Path(tempfile.mkdtemp(prefix="awtap-", dir="/tmp"))
    env = isolated_env(work, ROOT)
    paths = Paths.from_env(env).ensure()
    paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROFILE, paths.user_patterns_dir / "standin.toml")
    paths.config_file.write_text("[limits]\nrate_per_minute = 1000\n", encoding="utf-8")
    log = work / "received.jsonl"
    name = "tap"
    samples: dict[str, list[float]] = {"response": [], "gone": [], "applied": []}
    serve: subprocess.Popen[str] | None = None
    poller: Poller | None = None
    try:
        serve = subprocess.Popen([sys.executable, "-m", "agentwrap", "serve", "--port", "0"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True)
        assert serve.stdout is not None
        line = serve.stdout.readline()
        url = line.split("listening on ", 1)[1].split()[0]
        subprocess.run([sys.executable, "-m", "agentwrap", "run", "--detach", "--name", name,
                        "--profile", "standin", "--cols", "100", "--rows", "30", "--",
                        sys.executable, str(STANDIN), "--log", str(log), "--dialog-on",
                        "OPENDIALOG"], env=env, check=True, capture_output=True, timeout=90)
        reg = Registry(paths.db_path)
        store = AnswerStore(paths.db_path)
        maker = LinkMaker(load_or_create_key(paths), url)
        wait_until(lambda: reg.get(name).state == "ready", 60, "the stand-in ready", poll=0.05)
        poller = Poller(str(paths.tmux_socket_for(name)), f"={name}:0.0", args.poll)
        client = httpx.Client(timeout=60)
        for i in range(args.runs):
            wait_until(lambda: reg.get(name).state == "ready", 60, "ready", poll=0.02)
            subprocess.run([sys.executable, "-m", "agentwrap", "send", name,
                            f"please OPENDIALOG {i}", "--no-ack"], env=env, check=True,
                           capture_output=True, timeout=60)
            rec = wait_until(lambda: (r := reg.get(name)).question and r, 60, "the question",
                             poll=0.01)
            q = rec.question
            approve = maker.links_for(name, "", q["id"], q["questions"][0]["options"])[0][1]
            page = client.get(approve)
            assert page.status_code == 200, page.text
            token = unquote(approve.split(TAP_PATH, 1)[1])
            t0 = time.time()
            r = client.post(approve, data={"token": token}, headers={"Origin": url})
            t_resp = time.time()
            assert r.status_code == 200, r.text
            gone = wait_until(lambda t0=t0: poller is not None and poller.first(t0, DIALOG, present=False), 30,
                              "the dialog gone", poll=0.005)
            applied = next(a for a in store.recent(name, 1))
            samples["response"].append(t_resp - t0)
            samples["gone"].append(gone - t0)
            samples["applied"].append((applied.finished or t_resp) - t0)
        client.close()
        store.close()
        reg.close()
    finally:
        if poller is not None:
            poller.close()
        if serve is not None:
            serve.terminate()
            serve.wait(timeout=30)
        teardown_agentwrap(env, str(work))
        shutil.rmtree(work, ignore_errors=True)
    result = {k: stats_ms(v) for k, v in samples.items()}
    if args.json:
        print(json.dumps(json_safe(result), indent=2))
    else:
        print(f"tap -> ... over {args.runs} runs (stand-in agent, tmux, loopback serve), ms:")
        for k, label in (("response", "tap -> response"), ("gone", "tap -> dialog gone"),
                         ("applied", "tap -> applied")):
            s = result[k]
            print(f"  {label:22} p50 {fmt(s['p50_ms'], '.0f'):>6}  p99 {fmt(s['p99_ms'], '.0f'):>6}"
                  f"  (min {fmt(s['min_ms'], '.0f')}, max {fmt(s['max_ms'], '.0f')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
