#!/usr/bin/env python3
"""Capture the hook JSON the real agent CLIs send, as test fixtures.

Each real agent (installed by scripts/install_agents.sh) runs in tmux against the
loopback model server (tests/e2e/model_server.py) in a throwaway HOME, with hooks
registered for that launch only, the way ``agentwrap run`` will register them:

* Claude Code: ``--settings '<json>'`` (a settings layer of its own; merges with the
  person's hooks);
* Codex: ``-c hooks.<Event>=[...]`` overrides (inline ``[hooks]`` tables), plus
  ``--dangerously-bypass-hook-trust`` when ``--codex-bypass-trust`` is given;
* Gemini CLI: ``GEMINI_CLI_SYSTEM_DEFAULTS_PATH`` naming a settings file of ours;
* Qwen Code: a private ``QWEN_HOME`` (its user settings.json with the hooks, the
  rest of the home's ``.qwen`` linked): it runs no hooks from any other file;
* Copilot CLI: ``--plugin-dir DIR``, a plugin of ours for this launch
  (``DIR/plugin.json`` and ``DIR/hooks/hooks.json``: ``{"version": 1, "hooks":
  {event: [{"type": "command", "bash": ..., "timeoutSec": ...}]}}``);
* Cline CLI: a private ``CLINE_DIR`` whose ``hooks/`` holds one executable per
  event named after it (``hooks/PostToolUse``, a shell script), the rest of the
  home's ``.cline`` linked and ``CLINE_DATA_DIR`` at its ``data``;
* Kimi Code: a private ``KIMI_CODE_HOME`` (its config.toml with ``[[hooks]]``
  added, the rest of the home's ``.kimi-code`` linked): no flag takes hooks.

Every hook is ``python3 capture.py EVENT OUT`` (below): it appends its event name
and its stdin as one JSON line to OUT and prints nothing. The model is scripted to
call two read-only tools in one turn (``[[script]]``), then a shell command that
asks for permission (``[[tool]]``); Claude is then left idle long enough for its
``idle_prompt`` notification when ``--idle`` is given.

Usage (from the repo root; one agent at a time on a busy machine):

    .venv/bin/python scripts/capture_hooks.py --agents claude --idle
    .venv/bin/python scripts/capture_hooks.py --agents codex --codex-bypass-trust
    .venv/bin/python scripts/capture_hooks.py --agents gemini --save
    .venv/bin/python scripts/capture_hooks.py --agents copilot --save
    .venv/bin/python scripts/capture_hooks.py --agents cline,kimi --cancel --save

``--deliver`` also registers the real handler (``python -m agentwrap hook AGENT
EVENT``) for the between-tool-calls event, with one message queued in an
agentwrap store of the throwaway HOME, and checks that the message reached the
model in the request after the first tool result, delivered once through
channel ``hook``.

``--ask`` (Claude) adds a turn that calls AskUserQuestion with two questions (the
second multi-select); its payloads are saved as ``<Event>.AskUserQuestion.json``.
``--only NAMES`` saves just those fixtures (the others stay as captured before).

``--save`` writes the first payload of each event to
tests/fixtures/hooks/<agent>/<Event>.json (a Notification as
``Notification.<type>.json``), the throwaway root replaced by ``/tmp/capture``;
every run prints all payloads and keeps them in ``<root>/events.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import import_path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "hooks"


screens = import_path("agentwrap_capture_screens", REPO / "scripts" / "capture_screens.py")
agents_mod = screens.agents_mod
ms = import_path("agentwrap_e2e_model_server", REPO / "tests" / "e2e" / "model_server.py")

CAPTURE_PY = """\
import json, sys, time
event, out = sys.argv[1], sys.argv[2]
raw = sys.stdin.read()
try:
    payload = json.loads(raw)
except ValueError:
    payload = {"_unparsed": raw}
with open(out, "a", encoding="utf-8") as f:
    f.write(json.dumps({"event": event, "t": time.time(), "stdin": payload}) + "\\n")
"""

EVENTS: dict[str, tuple[str, ...]] = {
    "claude": ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
               "PostToolUse", "PostToolBatch", "Stop", "Notification", "SessionEnd"),
    "codex": ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
              "PermissionRequest", "Stop"),
    "gemini": ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent",
               "Notification", "SessionEnd"),
    "qwen": ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
             "PostToolUse", "Stop", "Notification", "SessionEnd"),
    "copilot": ("sessionStart", "userPromptSubmitted", "preToolUse", "permissionRequest",
                "postToolUse", "postToolUseFailure", "agentStop", "notification",
                "errorOccurred", "sessionEnd"),
    "cline": ("TaskStart", "TaskResume", "UserPromptSubmit", "PreToolUse", "PostToolUse",
              "TaskComplete", "TaskCancel", "TaskError", "SessionShutdown"),
    "kimi": ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
             "PermissionResult", "PostToolUse", "PostToolUseFailure", "Stop", "StopFailure",
             "Interrupt", "Notification", "SessionEnd"),
}
TURN_END = {"claude": "Stop", "codex": "Stop", "gemini": "AfterAgent", "qwen": "Stop",
            "copilot": "agentStop", "cline": "TaskComplete", "kimi": "Stop"}
READY = {"claude": "? for shortcuts", "codex": "? for shortcuts", "gemini": "Type your message",
         "qwen": "Type your message", "copilot": "Interactive", "cline": "What can I do for you?",
         "kimi": "│ >"}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class ScriptedServer(ms.ModelServer):  # type: ignore[misc]
    """``[[script]]`` makes the model call each of ``calls`` in turn, one a request,
    then answer ``done``; everything else is the stock server."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._next = -1

    def _plan(self, api: str, body: Any, turn: Any, tools: list[Any], side: Any) -> Any:
        if side is None:
            step = None
            if "[[script]]" in turn.text:
                step = 0
            elif turn.tool_result and 0 < self._next < len(self.calls):
                step = self._next
            if step is not None and self.calls:
                name, args = self.calls[step]
                tool = next((t for t in tools if t.name == name), None)
                if tool is None:  # NAME is a command for the agent's shell tool
                    tool = ms.pick_shell_tool(tools)
                    args = {k: _swap(v, name)  # a justification asks for escalation
                            for k, v in ms.build_tool_args(tool, False).items()
                            if k != "justification"}
                self._next = step + 1
                return ms.Plan(tool=tool, tool_args=args)
        return super()._plan(api, body, turn, tools, side)


def _swap(value: Any, command: str) -> Any:
    if value == ms.TOOL_COMMAND:
        return command
    if isinstance(value, list):
        return [_swap(v, command) for v in value]
    return value


#: The AskUserQuestion call ``--ask`` scripts: two questions, the second multi-select.
ASK = {"questions": [
    {"question": "Which database should the service use?", "header": "Database",
     "multiSelect": False,
     "options": [{"label": "SQLite", "description": "One file, no server to run"},
                 {"label": "Postgres", "description": "A server; what production runs"}]},
    {"question": "Which checks should run before each commit?", "header": "Checks",
     "multiSelect": True,
     "options": [{"label": "Lint", "description": "ruff over the whole tree"},
                 {"label": "Types", "description": "mypy --strict"},
                 {"label": "Tests", "description": "the fast unit tests"}]},
]}


def hook_entry(event: str, capture: Path, out: Path, timeout: int = 10) -> dict[str, Any]:
    """``timeout``: seconds for Claude and Codex, milliseconds for Gemini."""
    return {"hooks": [{"type": "command", "command": f"python3 {capture} {event} {out}",
                       "timeout": timeout}]}


#: The event at the safe point between tool calls, per agent.
BETWEEN_TOOLS = {"claude": "PostToolBatch", "codex": "PostToolUse", "gemini": "AfterTool",
                 "qwen": "PostToolUse", "copilot": "postToolUse", "cline": "PostToolUse",
                 "kimi": "PostToolUse"}


def register(agent: str, launch: Any, root: Path, capture: Path, out: Path,
             bypass_trust: bool, deliver: bool = False) -> None:
    """Add the capture hooks to ``launch`` for this launch only (and with
    ``deliver`` agentwrap's own handler for the between-tool-calls event)."""
    events = EVENTS[agent]

    def entries(e: str, timeout: int = 10) -> list[dict[str, Any]]:
        group = hook_entry(e, capture, out, timeout)
        if deliver and e == BETWEEN_TOOLS[agent]:
            group["hooks"].append({"type": "command", "timeout": timeout,
                                   "command": f"{sys.executable} -m agentwrap hook {agent} {e}"})
        return [group]

    if agent == "claude":
        settings = {"hooks": {e: entries(e) for e in events}}
        launch.argv.extend(["--settings", json.dumps(settings)])
    elif agent == "codex":
        for e in events:
            hooks = ",".join(f'{{type="command",command={json.dumps(h["command"])},timeout=10}}'
                             for h in entries(e)[0]["hooks"])
            launch.argv.extend(["-c", f"hooks.{e}=[{{hooks=[{hooks}]}}]"])
        if bypass_trust:
            launch.argv.append("--dangerously-bypass-hook-trust")
    elif agent == "qwen":
        # Qwen Code 0.15.10 runs hooks of the user's settings.json and the project's
        # only (not of its system or system-defaults files): a private QWEN_HOME whose
        # settings.json is the user's plus these hooks, the rest linked to the user's
        private = root / "qwen-home"
        private.mkdir(mode=0o700)
        own = Path(launch.env.get("HOME", str(Path.home()))) / ".qwen"
        for entry in own.iterdir() if own.is_dir() else ():
            if entry.name != "settings.json":
                (private / entry.name).symlink_to(entry)
        settings = json.loads((own / "settings.json").read_text(encoding="utf-8"))
        settings["hooks"] = {e: entries(e, 10_000) for e in events}
        (private / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
        launch.env.update(QWEN_HOME=str(private), QWEN_RUNTIME_DIR=str(own))
    elif agent == "copilot":
        # a plugin loaded for this launch only: its manifest and hooks/hooks.json
        # (Copilot's own hook format: a flat list per event, "bash", "timeoutSec")
        plugin = root / "copilot-plugin"
        (plugin / "hooks").mkdir(mode=0o700, parents=True)
        (plugin / "plugin.json").write_text(json.dumps(
            {"name": "agentwrap-capture", "description": "capture", "version": "0.0.1"}))
        hooks = {e: [{"type": "command", "bash": h["command"], "timeoutSec": 10}
                     for h in entries(e)[0]["hooks"]] for e in events}
        (plugin / "hooks" / "hooks.json").write_text(
            json.dumps({"version": 1, "hooks": hooks}, indent=2))
        launch.argv.extend(["--plugin-dir", str(plugin)])
    elif agent == "cline":
        # Cline 3.0.65 runs the executables in $CLINE_DIR/hooks (and a workspace's
        # .clinerules/hooks), one per event named after it (no extension: bash);
        # --hooks-dir only sets CLINE_HOOKS_DIR, which nothing reads. So a private
        # CLINE_DIR: the home's .cline linked but for hooks/, CLINE_DATA_DIR at its data
        own = Path(launch.env.get("HOME", str(Path.home()))) / ".cline"
        private = root / "cline-dir"
        folder = private / "hooks"
        folder.mkdir(mode=0o700, parents=True)
        for entry in own.iterdir() if own.is_dir() else ():
            if entry.name != "hooks":
                (private / entry.name).symlink_to(entry)
        for e in events:
            script = folder / e
            runs = "".join(f"{h['command']} <\"$in\"\n" for h in entries(e)[0]["hooks"])
            script.write_text(f"#!/bin/sh\nin=$(mktemp); cat >\"$in\"\n{runs}rm -f \"$in\"\n")
            script.chmod(0o700)
        launch.env.update(CLINE_DIR=str(private), CLINE_DATA_DIR=str(own / "data"))
    elif agent == "kimi":
        # a private KIMI_CODE_HOME: the home's config.toml plus [[hooks]], the rest linked
        private = root / "kimi-home"
        private.mkdir(mode=0o700)
        own = Path(launch.env.get("HOME", str(Path.home()))) / ".kimi-code"
        for entry in own.iterdir() if own.is_dir() else ():
            if entry.name != "config.toml":
                (private / entry.name).symlink_to(entry)
        text = (own / "config.toml").read_text(encoding="utf-8")
        for e in events:
            for h in entries(e)[0]["hooks"]:
                text += f"\n[[hooks]]\nevent = {json.dumps(e)}\ncommand = {json.dumps(h['command'])}\ntimeout = 10\n"
        (private / "config.toml").write_text(text, encoding="utf-8")
        launch.env["KIMI_CODE_HOME"] = str(private)
    else:
        # Gemini 0.61 loads a system settings file only if it and every directory
        # above it are owned by root and not writable by group or others: not
        # under /tmp (mode 1777). Run as root, the repo's test-artifacts/ fits.
        secure = REPO / "test-artifacts" / f"hooks-capture-{root.name}"
        secure.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = secure / "gemini-system-defaults.json"
        settings = {"hooksConfig": {"enabled": True},
                    "hooks": {e: entries(e, 10_000) for e in events}}
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")
        launch.env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"] = str(path)


def read_events(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line]


def wait_for(cond: Any, timeout: float, step: float = 0.3) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def run_agent(agent: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    root = Path(tempfile.mkdtemp(prefix=f"awhooks-{agent}-"))
    home, work = root / "home", root / "work"
    capture, out = root / "capture.py", root / "events.jsonl"
    capture.write_text(CAPTURE_PY, encoding="utf-8")
    server = ScriptedServer().start()
    pane = None
    try:
        launch = agents_mod.prepare_agent(agent, home, work, server.url)
        (work / "README.md").write_text("# scratch project for agentwrap tests\n", encoding="utf-8")
        (work / "notes.txt").write_text("hello from notes\n", encoding="utf-8")
        server.calls = {
            "claude": [("Read", {"file_path": str(work / "README.md")}),
                       ("Read", {"file_path": str(work / "notes.txt")})],
            "codex": [("cat README.md", {"command": "cat README.md"}),
                      ("ls", {"command": "ls"})],
            "gemini": [("read_file", {"file_path": "README.md"}),
                       ("list_directory", {"dir_path": "."})],
            "qwen": [("read_file", {"absolute_path": str(work / "README.md")}),
                     ("list_directory", {"path": str(work)})],
            "copilot": [("view", {"path": str(work / "README.md")}),
                        ("cat notes.txt", {"command": "cat notes.txt"})],
            "cline": [("cat README.md", {}), ("cat notes.txt", {})],
            "kimi": [("Read", {"path": str(work / "README.md")}),
                     ("Glob", {"pattern": "*.txt"})],
        }[agent]
        register(agent, launch, root, capture, out, args.codex_bypass_trust, args.deliver)
        probe = f"HOOKPROBE {agent}: the nightly build is green"
        message_id = ""
        if args.deliver:
            message_id = queue_probe(agent, launch, root, work, probe)
        log(f"{agent}: argv {launch.argv}")
        pane = screens.Pane(launch=launch, cols=160, rows=45, log_path=root / "pane.log")
        pane.start()
        if not wait_for(lambda: READY[agent] in pane.capture(), 40):
            log(f"{agent}: not ready:\n{pane.capture()}")
        time.sleep(1.0)

        def turn(text: str, wait_event: str, timeout: float) -> bool:
            n = len(read_events(out))
            pane.paste(text)
            time.sleep(0.4)
            pane.keys("Enter")
            return wait_for(lambda: any(e["event"] == wait_event
                                        for e in read_events(out)[n:]), timeout)

        ok = turn("Please look around. [[script]]", TURN_END[agent], 60)
        log(f"{agent}: scripted turn ended: {ok}")
        if args.deliver:
            check_delivery(agent, launch, server, probe, message_id)
        time.sleep(1.0)
        if args.permission_wait > 0:
            n = len(read_events(out))
            pane.paste("Make a file. [[tool]]")
            time.sleep(0.4)
            pane.keys("Enter")
            time.sleep(args.permission_wait)
            log(f"{agent}: permission screen:\n{pane.capture()}")
            log(f"{agent}: events since: {[e['event'] for e in read_events(out)[n:]]}")
            pane.keys("Escape")
            time.sleep(2.0)
        if args.cancel:  # a slow reply cancelled with Escape (Cline TaskCancel, Kimi Interrupt)
            n = len(read_events(out))
            pane.paste("Take your time. [[delay: 8]]")
            time.sleep(0.4)
            pane.keys("Enter")
            time.sleep(2.5)
            pane.keys("Escape")
            time.sleep(3.0)
            log(f"{agent}: events after the cancel: {[e['event'] for e in read_events(out)[n:]]}")
        if args.ask and agent == "claude":
            n = len(read_events(out))
            pane.paste(f"Ask me. [[call: AskUserQuestion {json.dumps(ASK)}]]")
            time.sleep(0.4)
            pane.keys("Enter")
            time.sleep(args.permission_wait or 8.0)
            log(f"{agent}: question screen:\n{pane.capture()}")
            log(f"{agent}: events since: {[e['event'] for e in read_events(out)[n:]]}")
            pane.keys("Escape")
            time.sleep(2.0)
        if args.idle and agent == "claude":
            log(f"claude: idle for up to {args.idle_wait:.0f} s (idle_prompt)")
            wait_for(lambda: any(e["stdin"].get("notification_type") == "idle_prompt"
                                 for e in read_events(out)), args.idle_wait, 1.0)
        for key in screens_quit(agent):
            pane.keys(key)
            time.sleep(0.3)
        time.sleep(2.0)
        events = read_events(out)
    finally:
        if pane is not None:
            pane.close()
        server.stop()
    for e in events:
        print(json.dumps(e)[:600])
    if args.save:
        save(agent, events, root, frozenset(filter(None, args.only.split(","))))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(REPO / "test-artifacts" / f"hooks-capture-{root.name}", ignore_errors=True)
    else:
        log(f"{agent}: kept {root}")
    return events


def queue_probe(agent: str, launch: Any, root: Path, work: Path, probe: str) -> str:
    """An agentwrap store in the agent's HOME with its session and one message,
    found by the hook through the environment ``agentwrap run`` would give."""
    from agentwrap.message import NewMessage, Source
    from agentwrap.paths import Paths
    from agentwrap.service import Service
    from agentwrap.sessions.registry import SessionRecord

    runtime = root / "run"
    runtime.mkdir(mode=0o700)
    launch.env.update(XDG_RUNTIME_DIR=str(runtime), AGENTWRAP_SESSION=f"cap-{agent}",
                      PYTHONPATH=str(REPO))  # this checkout's handler, not an installed one
    paths = Paths.from_env(launch.env).ensure()
    with Service.open(paths) as svc:
        svc.registry.register(SessionRecord(name=f"cap-{agent}", profile=agent, backend="tmux",
                                            command=[agent], cwd=str(work),
                                            started=time.time()))
        return svc.send(NewMessage(session=f"cap-{agent}", content=probe, source=Source.WEBHOOK,
                                   source_id="ci")).message.id


def check_delivery(agent: str, launch: Any, server: Any, probe: str, message_id: str) -> None:
    from agentwrap.paths import Paths
    from agentwrap.service import Service

    bodies = [b for b in server.request_bodies(include_side=False)]
    first = next((i for i, b in enumerate(bodies) if probe in b), None)
    with Service.open(Paths.from_env(launch.env)) as svc:
        entry = svc.message(message_id)
    log(f"{agent}: DELIVER: message {entry.message.status} via "
        f"{[a.channel for a in entry.attempts]}; first model request carrying it: "
        f"#{first} of {len(bodies)}")
    if first is not None:
        body = bodies[first]
        at = body.index(probe)
        log(f"{agent}: DELIVER: ...{body[max(0, at - 300):at + 200]!r}")


def screens_quit(agent: str) -> list[str]:
    return {"claude": ["C-c", "C-c"], "codex": ["C-c", "C-c"], "gemini": ["C-c", "C-c"],
            "qwen": ["C-c", "C-c"], "copilot": ["C-c", "C-c"], "cline": ["C-c"],
            "kimi": ["C-c", "C-c"]}[agent]


def scrub(value: Any, root: str) -> Any:
    if isinstance(value, str):  # Claude names its project dir after the path, "/" and "_" as "-"
        dashed = root.replace("/", "-").replace("_", "-")
        return value.replace(root, "/tmp/capture").replace(dashed, "-tmp-capture")
    if isinstance(value, list):
        return [scrub(v, root) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, root) for k, v in value.items()}
    return value


def save(agent: str, events: list[dict[str, Any]], root: Path,
         only: frozenset[str] = frozenset()) -> None:
    folder = FIXTURES / agent
    folder.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for e in events:
        payload = e["stdin"]
        name = e["event"]
        if name in ("Notification", "notification"):
            kind = payload.get("notification_type") or payload.get("notificationType") or "other"
            name = f"{name}.{kind}"
        elif payload.get("tool_name") == "AskUserQuestion":  # beside the event's other tools
            name = f"{name}.AskUserQuestion"
        elif name == "UserPromptSubmit" and payload.get("prompt") == "":
            name = f"{name}.continuation"  # Qwen: a tool result going back to the model
        if name in seen or (only and name not in only):
            continue
        seen.add(name)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(scrub(payload, str(root)), indent=2) + "\n", encoding="utf-8")
        log(f"saved {path.relative_to(REPO)}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default="claude,codex,gemini")
    p.add_argument("--save", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the throwaway root")
    p.add_argument("--idle", action="store_true", help="Claude: wait for idle_prompt")
    p.add_argument("--idle-wait", type=float, default=75.0, help="seconds (default 75)")
    p.add_argument("--codex-bypass-trust", action="store_true")
    p.add_argument("--deliver", action="store_true",
                   help="also run agentwrap's handler between tool calls; check the message")
    p.add_argument("--permission-wait", type=float, default=8.0,
                   help="seconds to leave the permission dialog open; 0: no [[tool]] turn")
    p.add_argument("--cancel", action="store_true",
                   help="a slow turn cancelled with Escape (its cancel/interrupt event)")
    p.add_argument("--ask", action="store_true",
                   help="Claude: a turn that calls AskUserQuestion (two questions)")
    p.add_argument("--only", default="",
                   help="with --save: write only these fixture names (e.g."
                        " PermissionRequest,PreToolUse.AskUserQuestion); default all")
    args = p.parse_args()
    for agent in args.agents.split(","):
        run_agent(agent.strip(), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
