#!/usr/bin/env python3
"""Capture real agent screens in every state as test fixtures.

Runs each real agent CLI (installed by scripts/install_agents.sh) in tmux on an
isolated server socket (``tmux -L awcap-<pid> -f /dev/null``) against the loopback
model server (tests/e2e/model_server.py), drives it with send-keys / bracketed
paste, and saves ``capture-pane -p`` (``.txt``) and ``capture-pane -p -e``
(``.ansi``) into tests/fixtures/screens/<agent>/ as

    <state>__<short-desc>__<cols>x<rows>.txt   (+ .ansi)

Usage (from the repo root):

    .venv/bin/python scripts/capture_screens.py                 # everything
    .venv/bin/python scripts/capture_screens.py --agents claude --sizes 160x45
    .venv/bin/python scripts/capture_screens.py --only draft    # scenario-name filter
    .venv/bin/python scripts/capture_screens.py --probe         # titles, 2004, timings
    .venv/bin/python scripts/capture_screens.py --only dialogs --sizes 160x45,80x24

The ``dialogs`` scenario opens, in a fresh agent each, every other dialog that a
person's message or the model's reply can open (``DIALOG_CASES``: a read outside
the project, a file edit, a question to the person, ...). The model server's
``[[call: NAME {JSON}]]`` directive makes the model call the named tool.

Every tmux server and agent process started here is torn down (the pane's whole
process tree is killed by pid: Claude and Gemini outlive kill-session).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import import_path

from agentwrap.terminal.proctree import descendants, kill_pids

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "screens"


agents_mod = import_path("agentwrap_e2e_agents", REPO / "tests" / "e2e" / "agents.py")

SGR_RE = re.compile(r"\x1b\[[0-9;:]*m")
LOG = print


def log(msg: str) -> None:
    LOG(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- process tree


def process_tree(pid: int) -> list[int]:
    return [pid, *descendants(pid)]


def kill_tree(pids: list[int], grace: float = 2.0) -> None:
    kill_pids(pids, signal.SIGTERM, grace)


# --------------------------------------------------------------------------- tmux pane


class TmuxServer:
    """One isolated tmux server (``-L awcap-<pid>-<n>``, ``-f /dev/null``)."""

    _counter = 0

    def __init__(self) -> None:
        TmuxServer._counter += 1
        self.socket = f"awcap-{os.getpid()}-{TmuxServer._counter}"

    def tmux(self, *args: str, check: bool = True, input_: bytes | None = None) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            input=input_,
            capture_output=True,
            check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {proc.stderr.decode(errors='replace')}")
        return proc.stdout.decode("utf-8", errors="replace")

    def kill(self) -> None:
        self.tmux("kill-server", check=False)
        # tmux 3.3 leaves the socket file behind after kill-server
        tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        sock = Path(tmpdir) / f"tmux-{os.getuid()}" / self.socket
        for _ in range(20):
            try:
                sock.unlink()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


@dataclass
class Pane:
    launch: Any  # agents.AgentLaunch
    cols: int
    rows: int
    log_path: Path
    server: TmuxServer = field(default_factory=TmuxServer)
    pid: int = 0
    t_launch: float = 0.0
    pids_seen: list[int] = field(default_factory=list)

    target = "cap:0.0"

    def start(self) -> None:
        env_args = [f"{k}={v}" for k, v in self.launch.env.items()]
        # the sleep gives pipe-pane time to attach before the agent writes anything
        cmd = ["sh", "-c", 'sleep 0.4; exec "$@"', "sh", "env", "-i", *env_args, *self.launch.argv]
        self.server.tmux(
            "new-session",
            "-d",
            "-s",
            "cap",
            "-x",
            str(self.cols),
            "-y",
            str(self.rows),
            "-c",
            str(self.launch.cwd),
            "--",
            *cmd,
        )
        self.server.tmux("set-option", "-t", "cap", "remain-on-exit", "on")
        self.server.tmux("set-option", "-g", "history-limit", "5000")
        self.server.tmux("pipe-pane", "-O", "-t", self.target, f"cat >> '{self.log_path}'")
        self.pid = int(self.server.tmux("display", "-p", "-t", self.target, "#{pane_pid}").strip())
        self.t_launch = time.monotonic() + 0.4

    def fmt(self, f: str) -> str:
        return self.server.tmux("display", "-p", "-t", self.target, f, check=False).rstrip("\n")

    def title(self) -> str:
        return self.fmt("#{pane_title}")

    def dead(self) -> bool:
        return self.fmt("#{pane_dead}") == "1"

    def capture(self, ansi: bool = False) -> str:
        args = ["capture-pane", "-p", "-t", self.target]
        if ansi:
            args.append("-e")
        return self.server.tmux(*args, check=False)

    def keys(self, *keys: str) -> None:
        self.server.tmux("send-keys", "-t", self.target, *keys)

    def text(self, s: str) -> None:
        self.server.tmux("send-keys", "-t", self.target, "-l", s)

    def paste(self, s: str) -> None:
        self.server.tmux("load-buffer", "-b", "awcap", "-", input_=s.encode())
        self.server.tmux("paste-buffer", "-p", "-d", "-b", "awcap", "-t", self.target)

    def remember_pids(self) -> None:
        if self.pid:
            for p in process_tree(self.pid):
                if p not in self.pids_seen:
                    self.pids_seen.append(p)

    def close(self) -> None:
        self.remember_pids()
        self.server.tmux("kill-session", "-t", "cap", check=False)
        kill_tree(self.pids_seen)
        self.server.kill()

    def raw_log(self) -> bytes:
        try:
            return self.log_path.read_bytes()
        except OSError:
            return b""


# --------------------------------------------------------------------------- screen helpers


def nonblank_lines(screen: str) -> list[str]:
    return [ln for ln in screen.splitlines() if ln.strip()]


def wait_for(
    pane: Pane, pred: Callable[[str], bool], timeout: float, poll: float = 0.05
) -> str | None:
    deadline = time.monotonic() + timeout
    while True:
        scr = pane.capture()
        if pred(scr):
            return scr
        if time.monotonic() > deadline:
            return None
        pane.remember_pids()
        time.sleep(poll)


def wait_stable(
    pane: Pane, pred: Callable[[str], bool], timeout: float, quiet: float = 1.5
) -> str | None:
    """Wait until pred holds and the screen (with attributes) is unchanged for ``quiet`` s."""
    deadline = time.monotonic() + timeout
    last = ""
    since = time.monotonic()
    while time.monotonic() < deadline:
        scr = pane.capture(ansi=True)
        if scr != last:
            last, since = scr, time.monotonic()
        elif pred(SGR_RE.sub("", scr)) and time.monotonic() - since >= quiet:
            return SGR_RE.sub("", scr)
        pane.remember_pids()
        time.sleep(0.1)
    return None


# --------------------------------------------------------------------------- agent profiles

NBSP = "\u00a0"


# spinner line above the box: "<glyph> <Verb>…" (optionally "(4s · ↓ 13 tokens)")
_CLAUDE_SPINNER = re.compile(r"^[·✢*✶✻✽✳] \S+…", re.MULTILINE)


def _claude_busy(s: str) -> bool:
    return "esc to interrupt" in s or bool(_CLAUDE_SPINNER.search(s))


def _claude_ready(s: str) -> bool:
    return (
        bool(re.search(r"^❯[\s\u00a0]", s, re.MULTILINE))
        and not _claude_busy(s)
        and "Do you want" not in s
    )


def _codex_ready(s: str) -> bool:
    # "› " also starts the selected option of a dialog: require the idle footer too
    return (
        bool(re.search(r"^› ", s, re.MULTILINE))
        and "esc to interrupt" not in s
        and "? for shortcuts" in s
        and "\n     loading" not in s
    )


def _codex_busy(s: str) -> bool:
    return "esc to interrupt" in s


def _aider_ready(s: str) -> bool:
    # "> ", or "diff> " / "ask> " / "multi> " when the edit format is not the model's own
    lines = nonblank_lines(s)
    return bool(lines) and re.fullmatch(r"[a-z -]*>", lines[-1].strip()) is not None


def _aider_busy(s: str) -> bool:
    # aider can leave a stale "Waiting for" spinner line in the transcript: look at the bottom
    lines = nonblank_lines(s)
    return bool(lines) and "Waiting for" in lines[-1]


def _gemini_ready(s: str) -> bool:
    return "Type your message" in s and "esc to cancel" not in s


def _gemini_busy(s: str) -> bool:
    return "esc to cancel" in s


def _copilot_busy(s: str) -> bool:
    return bool(re.search(r"^\s*\S?\s*Working\b.*\besc\b", s, re.MULTILINE))


def _copilot_ready(s: str) -> bool:
    return bool(re.search(r"^─{10,}\n❯", s, re.MULTILINE)) and not _copilot_busy(s)


def _opencode_busy(s: str) -> bool:
    return "esc interrupt" in s


def _opencode_ready(s: str) -> bool:
    return "╹▀▀▀" in s and "Permission required" not in s and not _opencode_busy(s)


def _qwen_ready(s: str) -> bool:
    return "Type your message" in s and "esc to cancel" not in s \
        and "Waiting for user confirmation" not in s


def _cline_busy(s: str) -> bool:
    return "esc to cancel" in s or bool(re.search(r"^ [\u2801-\u28ff] \S", s, re.MULTILINE))


def _cline_ready(s: str) -> bool:
    return bool(re.search(r"^\s*❯ (?:What can I do for you\?|Ask anything\.\.\.)?\s*$", s,
                          re.MULTILINE)) and not _cline_busy(s)


def _kimi_busy(s: str) -> bool:
    return bool(re.search(r"^\s*(?:[\u2801-\u28ff]|[\U0001F311-\U0001F318]) (?:Working…|·)", s,
                          re.MULTILINE))


def _kimi_ready(s: str) -> bool:
    return bool(re.search(r"^\s*│ >\s*│\s*$", s, re.MULTILINE)) and not _kimi_busy(s)


def _pi_busy(s: str) -> bool:
    return bool(re.search(r"^ [\u2801-\u28ff] Working\.\.\.", s, re.MULTILINE))


def _pi_ready(s: str) -> bool:
    # the editor: one empty line between the last two rules, then the footer
    return bool(re.search(r"^─{10,}\n *\n─{10,}$", s, re.MULTILINE)) and not _pi_busy(s)


@dataclass(frozen=True)
class Profile:
    name: str
    ready: Callable[[str], bool]
    busy: Callable[[str], bool]
    newline_keys: tuple[str, ...]
    quit_keys: tuple[tuple[str, ...], ...]


PROFILES: dict[str, Profile] = {
    "claude": Profile("claude", _claude_ready, _claude_busy, ("C-j",), (("C-c",), ("C-c",))),
    "codex": Profile("codex", _codex_ready, _codex_busy, ("C-j",), (("C-c",), ("C-c",))),
    "aider": Profile(
        "aider", _aider_ready, _aider_busy, ("Escape", "Enter"), (("/exit",), ("Enter",))
    ),
    "gemini": Profile("gemini", _gemini_ready, _gemini_busy, ("C-j",), (("C-c",), ("C-c",))),
    "copilot": Profile("copilot", _copilot_ready, _copilot_busy, ("C-j",), (("C-c",), ("C-c",))),
    "opencode": Profile("opencode", _opencode_ready, _opencode_busy, ("C-j",), (("C-c",),)),
    "qwen": Profile("qwen", _qwen_ready, _gemini_busy, ("C-j",), (("C-c",), ("C-c",))),
    "cline": Profile("cline", _cline_ready, _cline_busy, ("C-j",), (("C-c",),)),
    "kimi": Profile("kimi", _kimi_ready, _kimi_busy, ("C-j",), (("C-c",), ("C-c",))),
    "pi": Profile("pi", _pi_ready, _pi_busy, ("C-j",), (("C-c",), ("C-c",))),
}


# --------------------------------------------------------------------------- session


class Capturer:
    def __init__(self, out: Path, server_url: str, workroot: Path, dry: bool = False) -> None:
        self.out = out
        self.server_url = server_url
        self.workroot = workroot
        self.dry = dry
        self.saved: list[Path] = []
        self.notes: dict[str, Any] = {}
        self.dialog: str | None = None  # only this dialog case (--dialog)

    @contextmanager
    def run(
        self,
        agent: str,
        cols: int,
        rows: int,
        *,
        trusted: bool = True,
        onboarded: bool = True,
        tag: str = "",
        extra_args: tuple[str, ...] = (),
        extra_env: tuple[tuple[str, str], ...] = (),
    ) -> Iterator[Pane]:
        base = Path(tempfile.mkdtemp(prefix=f"{agent}-{tag}-", dir=self.workroot))
        launch = agents_mod.prepare_agent(
            agent,
            base / "home",
            base / "project",
            self.server_url,
            trusted=trusted,
            onboarded=onboarded,
        )
        if extra_args:
            launch = dataclasses.replace(launch, argv=[*launch.argv, *extra_args])
        launch.env.update(extra_env)
        if agent == "opencode":  # it asks nothing by default: its ask-first mode, for dialogs
            from agentwrap.detect.profiles import load_profile

            gate = load_profile("opencode").permissions
            launch.env[gate.ask_first_env] = gate.ask_first_value
        pane = Pane(launch, cols, rows, base / "pane.log")
        pane.start()
        try:
            yield pane
        finally:
            pane.close()

    def save(
        self, pane: Pane, agent: str, state: str, desc: str, *, plain: str | None = None
    ) -> None:
        ansi = pane.capture(ansi=True)
        if plain is None:
            plain = pane.capture()
        name = f"{state}__{desc}__{pane.cols}x{pane.rows}"
        d = self.out / agent
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.txt").write_text(plain, encoding="utf-8")
        (d / f"{name}.ansi").write_text(ansi, encoding="utf-8")
        self.saved.append(d / f"{name}.txt")
        title = pane.title()
        self.notes.setdefault(agent, {}).setdefault("titles", {})[name] = title
        if agent == "claude":
            self.notes[agent].setdefault("session_files", {})[name] = {
                "pane_pid": pane.pid,
                "files": claude_session_file(pane),
            }
        log(f"saved {agent}/{name} (title={title!r})")


def claude_session_file(pane: Pane) -> Any:
    sess = Path(pane.launch.env["HOME"]) / ".claude" / "sessions"
    result: dict[str, Any] = {}
    try:
        for f in sorted(sess.glob("*.json")):
            try:
                result[f.name] = json.loads(f.read_text())
            except (OSError, ValueError) as exc:
                result[f.name] = f"<unreadable: {exc}>"
    except OSError:
        pass
    return result


# --------------------------------------------------------------------------- scenarios

LONG_PASTE = (
    "\n".join(
        f"{i:02d}. def handler_{i}(request): return process(request, retries={i}, timeout=30)"
        for i in range(1, 31)
    )
    + "\n"
)


@dataclass(frozen=True)
class DialogCase:
    """One dialog to open: ``prompt`` (``{cwd}`` = the project dir) sent after ``before``.

    ``files`` are written into the project before the agent starts; ``paste`` sends the
    prompt as one bracketed paste (aider submits every typed line on its own);
    ``args`` are added to the agent's command line, ``keys`` pressed once it is ready
    (Codex: Shift+Tab for Plan mode), ``after`` once the dialog shows (Claude's
    question tabs: Tab to the next, Space to tick). ``expect`` is text of the dialog:
    seeing it ends the wait (some dialogs animate, and a question's ``❯ 1.`` looks
    like Claude's prompt to this script's crude ready test).
    """

    desc: str
    prompt: str
    files: tuple[tuple[str, str], ...] = ()
    before: tuple[str, ...] = ()
    paste: bool = False
    args: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    expect: str = ""
    after: tuple[str, ...] = ()  # keys pressed once the dialog shows (another tab, a tick)
    env: tuple[tuple[str, str], ...] = ()  # added to the agent's environment


NOTES = ("notes.md", "# Notes\n\nfirst line\n")
ASK = (
    '{"questions": [{"question": "Which database should I use?", "header": "Database",'
    ' "options": [{"label": "SQLite", "description": "One file, no server"},'
    ' {"label": "Postgres", "description": "A server"}]%s}]}'
)
ASK_TWO = json.dumps({"questions": [
    {"question": "Which database should I use?", "header": "Database",
     "options": [{"label": "SQLite", "description": "One file, no server"},
                 {"label": "Postgres", "description": "A server"}], "multiSelect": False},
    {"question": "Which features do you want?", "header": "Features",
     "options": [{"label": "Search", "description": "Full-text search"},
                 {"label": "Backups", "description": "Nightly copies"},
                 {"label": "Metrics", "description": "Prometheus"}], "multiSelect": True}]})
OUTSIDE_PATCH = (
    "*** Begin Patch\n*** Add File: /var/tmp/agentwrap-capture-never/notes.txt\n+hello\n"
    "*** End Patch\n"
)
#: Claude Code 2.1.332's ask-first permission mode (it starts in its auto mode) ...
ASK_FIRST = ("--permission-mode", "default")
#: ... with a model its auto mode supports: then every permission dialog offers to
#: switch to auto mode, and draws a "Tip:" line about it (claude-sonnet-4-5, the
#: test model's name elsewhere, is not supported: no tip, no such option).
AUTO_MODEL = (("ANTHROPIC_MODEL", "claude-opus-4-6"), ("ANTHROPIC_SMALL_FAST_MODEL", "claude-opus-4-6"))
#: A command wider than any captured screen: the dialog wraps it.
LONG_COMMAND = "touch tool_ran.txt && echo " + "-".join(f"part{i:02d}" for i in range(40))
DIALOG_CASES: dict[str, tuple[DialogCase, ...]] = {
    "claude": (
        DialogCase(
            "read-outside-project",
            '[[call: Read {"file_path": "/etc/hostname"}]] What is in /etc/hostname?',
            expect="Do you want to proceed?",
        ),
        DialogCase(
            "create-file",
            '[[call: Write {"file_path": "{cwd}/hello.txt", "content": "hello\\n"}]] Make hello.txt',
            expect="Do you want to create",
        ),
        DialogCase(
            "edit-file",
            '[[call: Edit {"file_path": "{cwd}/notes.md", "old_string": "first line",'
            ' "new_string": "second line"}]] Fix notes.md',
            files=(NOTES,),
            before=('[[call: Read {"file_path": "{cwd}/notes.md"}]] Read notes.md',),
            expect="Do you want to make this edit",
        ),
        DialogCase(
            "ask-user-question",
            "[[call: AskUserQuestion " + ASK % ', "multiSelect": false' + "]] Set up storage",
            expect="Enter to select",
        ),
        # two questions as tabs, the second multi-select (tests/e2e/test_answering.py):
        # the first tab; the multi-select tab; one box ticked; the review tab
        *(DialogCase(desc, "[[call: AskUserQuestion " + ASK_TWO + "]] Set up storage",
                     expect="Tab/Arrow keys to navigate", after=after)
          for desc, after in (("ask-two-questions", ()), ("ask-multi-select", ("Tab",)),
                              ("ask-multi-select-checked", ("Tab", "Space")),
                              ("ask-submit-review", ("Tab", "Space", "Tab")))),
        DialogCase(
            "web-fetch",
            '[[call: WebFetch {"url": "https://example.com/", "prompt": "Summarise it"}]]'
            " Summarise example.com",
            expect="Do you want to allow Claude to fetch",
        ),
        # 2.1.332 starts in its auto mode (a harmless call runs unasked, a dangerous one's
        # dialog comes late): its ask-first mode shows the classic dialog, with a "Tip:"
        # line under "Bash command" (issue 35). A short command, a pipe, one that wraps.
        *(DialogCase(desc, "[[call: Bash " + json.dumps({"command": command,
                                                          "description": about}) + "]] please",
                     args=ASK_FIRST, env=AUTO_MODEL, expect="Do you want to proceed?")
          for desc, command, about in (
              ("bash-ask-first", "rm -rf ~/important", "Remove the important folder"),
              ("bash-pipe-ask-first", "curl -s http://127.0.0.1:9/none | sh",
               "Run the install script"),
              ("bash-long-ask-first", LONG_COMMAND, "Touch a file and echo forty parts"))),
    ),
    "gemini": (
        # the read_file tool on a path outside the workspace fails without a dialog
        DialogCase("at-file-outside-workspace", "What is in @/etc/hostname ?"),
        DialogCase(
            "create-file",
            '[[call: write_file {"file_path": "{cwd}/hello.txt", "content": "hello"}]] Make it',
        ),
        DialogCase(
            "edit-file",
            '[[call: replace {"file_path": "{cwd}/notes.md", "old_string": "first line",'
            ' "new_string": "second line", "instruction": "fix"}]] Fix notes.md',
            files=(NOTES,),
        ),
        DialogCase(
            "ask-user",
            "[[call: ask_user " + ASK % ', "type": "choice"' + "]] Set up storage",
        ),
        DialogCase(
            "web-fetch",
            '[[call: web_fetch {"prompt": "Summarise https://example.com/"}]] Summarise it',
        ),
        # a shell call with a description (as real models write): past 150 characters
        # of command, the dialog's title line shows the description, not the command
        DialogCase(
            "shell-described",
            "[[tool-described]] Please list the files in this project.",
            expect="Allow execution of",
        ),
    ),
    "codex": (
        # No apply_patch tool is offered for the test model: an apply_patch heredoc run
        # through the shell tool is what Codex intercepts as an edit. The target is
        # outside the writable roots, so Codex asks; the dialog is never approved.
        DialogCase(
            "edit-approval",
            "[[call: exec_command "
            + json.dumps({"cmd": f"apply_patch <<'EOF'\n{OUTSIDE_PATCH}EOF\n"})
            + "]] Add the notes file",
            expect="Would you like to make the following edits?",
        ),
        # request_user_input is offered in Plan mode only (Shift+Tab)
        DialogCase(
            "plan-mode-question",
            "[[call: request_user_input " + ASK.replace('"question"', '"id": "db", "question"')
            % "" + "]] Set up storage",
            keys=("BTab",),
            expect="enter to submit answer",
        ),
        DialogCase(
            "implement-plan",
            "[[reply: Here is the plan.\n<proposed_plan>\n# Plan\n\n1. Add a flag\n2. Test it\n"
            "</proposed_plan>\n]] Plan a --verbose flag",
            keys=("BTab",),
            paste=True,
            expect="Implement this plan?",
        ),
    ),
    "copilot": (
        DialogCase(
            "create-file",
            '[[call: create {"path": "{cwd}/hello.txt", "file_text": "hello\\n"}]] Make hello.txt',
            expect="Do you want",
        ),
        DialogCase(  # ask_user takes an elicitation: a message and a JSON schema
            "ask-user",
            "[[call: ask_user " + json.dumps({
                "message": "Which database should I use?",
                "requestedSchema": {"type": "object", "required": ["database"], "properties": {
                    "database": {"type": "string", "title": "Database",
                                 "enum": ["SQLite", "Postgres"]}}}}) + "]] Set up storage",
            expect="Copilot needs information",
        ),
    ),
    "opencode": (
        DialogCase(
            "question",
            "[[call: question " + ASK % "" + "]] Set up storage",
        ),
        DialogCase(
            "web-fetch",
            '[[call: webfetch {"url": "https://example.com/", "format": "text"}]] Fetch it',
            expect="Permission required",
        ),
        DialogCase(
            "edit-file",
            '[[call: edit {"filePath": "{cwd}/notes.md", "oldString": "first line",'
            ' "newString": "second line"}]] Fix notes.md',
            files=(NOTES,),
            expect="Permission required",
        ),
    ),
    "qwen": (
        DialogCase(
            "create-file",
            '[[call: write_file {"file_path": "{cwd}/hello.txt", "content": "hello"}]] Make it',
        ),
        DialogCase(
            "edit-file",
            '[[call: edit {"file_path": "{cwd}/notes.md", "old_string": "first line",'
            ' "new_string": "second line"}]] Fix notes.md',
            files=(NOTES,),
        ),
        DialogCase(
            "web-fetch",
            '[[call: web_fetch {"url": "https://example.com/", "prompt": "Summarise it"}]] Do it',
        ),
    ),
    "cline": (
        DialogCase("permission-ask-first", "[[tool]] Please list the files.",
                   args=("--auto-approve", "false"), expect="Cline needs permission"),
        DialogCase(
            "edit-file",
            '[[call: editor {"path": "{cwd}/notes.md", "old_text": "first line",'
            ' "new_text": "second line"}]] Fix notes.md',
            files=(NOTES,), args=("--auto-approve", "false"), expect="Cline needs permission",
        ),
        DialogCase(
            "web-fetch",
            '[[call: fetch_web_content {"requests": [{"url": "https://example.com/",'
            ' "prompt": "Summarise it"}]}]] Fetch it',
            args=("--auto-approve", "false"), expect="Cline needs permission",
        ),
        DialogCase(
            "ask-question",
            '[[call: ask_question {"question": "Which database should I use?",'
            ' "options": ["SQLite", "Postgres"]}]] Set up storage',
            expect="Cline is asking a question",
        ),
    ),
    # Kimi Code 2.1.0 writes files in the project without asking (a Write there
    # opened no dialog), and its AskUserQuestion refuses a "multiSelect" field
    "kimi": (
        DialogCase(
            "ask-user-question",
            "[[call: AskUserQuestion " + ASK % "" + "]] Set up storage",
        ),
    ),
    "aider": (
        DialogCase("add-file-to-chat", "[[reply: Done.]] Please look at README.md first"),
        DialogCase(
            "edit-file-not-in-chat",
            # "./README.md": a bare README.md in the message would ask "Add file" first
            "[[reply: Editing.\n\n./README.md\n```\n<<<<<<< SEARCH\n"
            "# scratch project for agentwrap tests\n=======\n# renamed\n>>>>>>> REPLACE\n```\n]]"
            "\nRename the project",
            paste=True,
        ),
        DialogCase(
            "run-shell-command",
            "[[reply: Run this:\n\n```bash\nls -la\n```\n]]\nHow do I list the files?",
            paste=True,
            # shell commands are only proposed in the diff formats; with no model
            # metadata aider picks "whole" for the test model
            args=("--edit-format", "diff"),
        ),
    ),
}
#: Claude Code 2.1.332's other dialogs in its ask-first mode, with the auto-mode model
#: (the same cases, named ``<desc>-ask-first``): whatever "Tip:" line they draw too.
#: (Not WebFetch: with that model Claude defers it behind ToolSearch, so the request
#: offers no such tool.)
DIALOG_CASES["claude"] += tuple(
    dataclasses.replace(case, desc=f"{case.desc}-ask-first", args=ASK_FIRST, env=AUTO_MODEL)
    for case in DIALOG_CASES["claude"]
    if case.desc in ("read-outside-project", "create-file", "edit-file"))



@dataclass(frozen=True)
class OverlayCase:
    """A picker, menu or help overlay the person opens with the agent's own keys.

    ``keys``: each entry is pressed as one ``send-keys`` (``text:...`` is typed
    literally), 0.5 s apart; ``turn``: one short turn first (a rewind picker lists
    earlier prompts); ``state``: what the detector must say (the fixture's prefix:
    ``unknown`` for an overlay over or instead of the input box, ``draft`` where
    the keys left text in the box the menu completes). ``expect``: text of the
    overlay that ends the wait. ``close``: the keys that close it again; the
    screen after them is saved as ``ready__after-<desc>`` (nothing the overlay
    drew may be left to read as one).
    """

    desc: str
    keys: tuple[str, ...]
    state: str = "unknown"
    turn: bool = False
    expect: str = ""
    close: tuple[str, ...] = ("Escape",)


_SLASH = OverlayCase("slash-menu", ("text:/",), state="draft", close=("Escape", "BSpace"))
_AT = OverlayCase("at-file-picker", ("text:@",), state="draft", close=("Escape", "BSpace"))
_HELP = OverlayCase("shortcuts-help", ("text:?",))
_SEARCH = OverlayCase("history-search", ("C-r",))
_MODEL = OverlayCase("model-picker", ("text:/model", "Enter"))
# Gemini, Qwen: the first Enter takes the completion the menu offers, the second runs it
_MODEL_2 = OverlayCase("model-picker", ("text:/model", "Enter", "Enter"))
_SETTINGS_2 = OverlayCase("settings", ("text:/settings", "Enter", "Enter"))
OVERLAY_CASES: dict[str, tuple[OverlayCase, ...]] = {
    "claude": (OverlayCase("rewind-picker", ("Escape", "Escape"), turn=True),
               _SLASH, _AT, _HELP, _SEARCH, _MODEL),
    "codex": (OverlayCase("backtrack", ("Escape", "Escape"), turn=True),
              _SLASH, _AT, _HELP, _SEARCH, _MODEL),
    "gemini": (_SLASH, _AT, _HELP, _SEARCH, _MODEL_2, _SETTINGS_2),
    "qwen": (_SLASH, _AT, _SEARCH, _MODEL_2, _SETTINGS_2),
    "aider": (_SEARCH, OverlayCase("slash-completion", ("text:/", "Tab"), state="draft",
                                   close=("C-u",))),
    "copilot": (_SLASH, _AT, _HELP, _SEARCH, _MODEL),
    "opencode": (_SLASH, _AT, OverlayCase("command-palette", ("C-p",)),
                 OverlayCase("model-picker", ("text:/models", "Enter"))),
    "cline": (_SLASH, _AT, _SEARCH, _MODEL),
    "kimi": (_SLASH, _AT, _SEARCH, _MODEL),
    "pi": (_SLASH, _AT, _MODEL, OverlayCase("settings", ("text:/settings", "Enter"))),
}


def submit(pane: Pane, text: str) -> None:
    """Type text, then Enter as a separate burst (Codex/Gemini treat a fast Enter as newline)."""
    pane.text(text)
    time.sleep(0.4)
    pane.keys("Enter")


def wait_ready(pane: Pane, prof: Profile, timeout: float = 40.0, quiet: float = 1.5) -> str:
    scr = wait_stable(pane, lambda s: prof.ready(s) and not prof.busy(s), timeout, quiet)
    if scr is None:
        raise TimeoutError(f"{prof.name}: not ready within {timeout}s:\n{pane.capture()}")
    return scr


def wait_reply(pane: Pane, text: str, baseline: int, timeout: float = 30.0) -> None:
    """Wait until ``text`` shows more often than ``baseline`` (the prompt echo holds it too)."""
    if wait_for(pane, lambda s: s.count(text) > baseline, timeout) is None:
        log(f"reply {text!r} not seen within {timeout}s")


def wait_busy(pane: Pane, prof: Profile, timeout: float = 15.0) -> str:
    scr = wait_for(pane, prof.busy, timeout)
    if scr is None:
        raise TimeoutError(f"{prof.name}: never busy:\n{pane.capture()}")
    return scr


class Scenarios:
    def __init__(self, cap: Capturer, agent: str, cols: int, rows: int) -> None:
        self.c = cap
        self.agent = agent
        self.prof = PROFILES[agent]
        self.cols = cols
        self.rows = rows

    def save(self, pane: Pane, state: str, desc: str) -> None:
        self.c.save(pane, self.agent, state, desc)

    def run(self, **kw: Any) -> Any:
        return self.c.run(self.agent, self.cols, self.rows, tag=f"{self.cols}x{self.rows}", **kw)

    # -- no model reply needed -------------------------------------------------------

    def start_and_ready(self) -> None:
        with self.run() as p:
            first: tuple[str, str] | None = None
            last: tuple[str, str] | None = None
            t_ready = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                plain, ansi = p.capture(), p.capture(ansi=True)
                if plain.strip():
                    if self.prof.ready(plain):
                        t_ready = time.monotonic() - p.t_launch
                        break
                    if first is None:
                        first = (plain, ansi)
                    last = (plain, ansi)
                time.sleep(0.01)
            for desc, snap in (("first-frame", first), ("last-before-prompt", last)):
                if snap is None or (desc == "last-before-prompt" and snap == first):
                    continue
                self._write_snapshot(p, "starting", desc, snap)
            wait_ready(p, self.prof)
            self.save(p, "ready", "fresh")
            probe = self.c.notes.setdefault(self.agent, {}).setdefault("probe", {})
            probe[f"{self.cols}x{self.rows}"] = {
                "first_ready_frame_s": None if t_ready is None else round(t_ready, 2),
                "bracketed_paste_2004h": b"\x1b[?2004h" in p.raw_log(),
                "title_ready": p.title(),
            }

    def _write_snapshot(self, p: Pane, state: str, desc: str, snap: tuple[str, str]) -> None:
        name = f"{state}__{desc}__{self.cols}x{self.rows}"
        d = self.c.out / self.agent
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.txt").write_text(snap[0], encoding="utf-8")
        (d / f"{name}.ansi").write_text(snap[1], encoding="utf-8")
        self.c.saved.append(d / f"{name}.txt")
        log(f"saved {self.agent}/{name}")

    def drafts(self) -> None:
        with self.run() as p:
            wait_ready(p, self.prof)
            p.text("Please add a --verbose flag to the command line interface")
            wait_stable(p, lambda s: "--verbose flag" in s, 10)
            self.save(p, "draft", "one-line")
            for line in ("and print every request it sends,", "then update the README"):
                p.keys(*self.prof.newline_keys)
                time.sleep(0.2)
                p.text(line)
            wait_stable(p, lambda s: "update the README" in s, 10)
            self.save(p, "draft", "multi-line")

    def paste(self) -> None:
        with self.run() as p:
            wait_ready(p, self.prof)
            p.paste(LONG_PASTE)
            wait_stable(p, lambda s: True, 10, quiet=1.0)
            self.save(p, "draft", "pasted-multiline")
            if self.agent == "claude":
                time.sleep(9)  # "paste again to expand" footer lasts ~8 s
                wait_stable(p, lambda s: True, 10, quiet=1.0)
                self.save(p, "draft", "pasted-multiline-settled")

    def trust(self) -> None:
        if self.agent == "aider":
            return
        with self.run(trusted=False) as p:
            scr = wait_stable(p, lambda s: "trust" in s.lower(), 20)
            if scr is None:
                log(f"{self.agent}: no trust dialog seen")
                return
            self.save(p, "waiting_input", "folder-trust")

    def api_key(self) -> None:
        """Claude only: ``ANTHROPIC_API_KEY`` in the environment asks whether to use it
        (2.1.332: unnumbered options, "No (recommended)" preselected)."""
        if self.agent != "claude":
            return
        key = (("ANTHROPIC_API_KEY", "sk-ant-agentwrap-capture-0000000000"),)
        with self.run(extra_env=key) as p:
            scr = wait_stable(p, lambda s: "Do you want to use this API key?" in s, 40)
            if scr is None:
                log(f"{self.agent}: no API key dialog seen")
                return
            self.save(p, "waiting_input", "api-key")

    def onboarding(self) -> None:
        with self.run(onboarded=False) as p:
            scr = wait_stable(p, lambda s: bool(s.strip()), 20, quiet=2.0)
            if scr is None:
                return
            self.save(p, "waiting_input", "onboarding")
            if self.agent == "claude":
                # walk the first-run screens: theme -> (login method / api key) -> ...
                for i in range(1, 6):
                    p.keys("Enter")
                    scr = wait_stable(p, lambda s: True, 10, quiet=1.5)
                    if scr is None or self.prof.ready(scr):
                        break
                    self.save(p, "waiting_input", f"onboarding-step{i + 1}")

    def quit_at_prompt(self) -> None:
        with self.run() as p:
            wait_ready(p, self.prof)
            for keys in self.prof.quit_keys:
                p.keys(*keys)
                time.sleep(0.3)
            if wait_for(p, lambda s: p.dead(), 15) is None:
                log(f"{self.agent}: still running after quit keys")
                return
            time.sleep(1.0)
            self.save(p, "exited", "quit-at-prompt")

    # -- need the model server ---------------------------------------------------

    def conversation(self) -> None:
        prof = self.prof
        with self.run() as p:
            wait_ready(p, prof)
            submit(p, "[[delay: 8]] [[reply: The answer is 4.]] What is 2+2?")
            wait_busy(p, prof)
            base = p.capture().count("The answer is 4.")
            time.sleep(2.0)
            if p.capture().count("The answer is 4.") == base:
                self.save(p, "busy", "before-first-token")
            wait_reply(p, "The answer is 4.", base)
            wait_ready(p, prof)
            self.save(p, "ready", "after-reply")

            # [[slow: S]] streams 40 lines "Line N: streaming slowly, a few words." then the reply
            submit(p, "[[slow: 16]] [[reply: Streaming finished.]] Explain the parser.")
            wait_for(p, lambda s: "streaming slowly" in s, 20)
            base = p.capture().count("Streaming finished.")
            time.sleep(5.0)
            if p.capture().count("Streaming finished.") == base:
                self.save(p, "busy", "streaming")
            wait_for(p, lambda s: "Line 40:" in s, 30)
            wait_ready(p, prof)

            submit(p, "[[reply: Third answer, short.]] And one more question.")
            wait_ready(p, prof)
            self.save(p, "ready", "several-turns")

            submit(p, "[[delay: 12]] [[reply: Fourth answer.]] Run the slow check.")
            wait_busy(p, prof)
            base = p.capture().count("Fourth answer.")
            time.sleep(1.5)
            p.text("also look at the failing tests")
            time.sleep(1.0)
            self.save(p, "busy", "typing-while-busy")
            time.sleep(0.3)
            if self.agent == "codex":
                p.keys("Tab")  # Tab queues; Enter would steer
            else:
                p.keys("Enter")
            time.sleep(1.5)
            if p.capture().count("Fourth answer.") == base:
                self.save(p, "busy", "queued-message")
            wait_reply(p, "Fourth answer.", base)
            wait_ready(p, prof, timeout=60, quiet=3.0)
            self.save(p, "ready", "after-queued")
            self.permission_then_exit(p)

    def permission_then_exit(self, p: Pane, exit_too: bool = True) -> None:
        prof = self.prof
        submit(p, "[[tool]] Please list the files in this project.")
        scr = wait_stable(p, lambda s: not prof.ready(s) and not prof.busy(s), 30, quiet=2.0)
        if scr is None:
            log(f"{self.agent}: no permission prompt; screen:\n{p.capture()}")
        else:
            self.save(p, "waiting_input", "permission")
        if not exit_too:
            return
        # decline / dismiss and quit
        p.keys("Escape")
        time.sleep(1.0)
        if self.agent == "aider":
            p.keys("n")
            p.keys("Enter")
        wait_stable(p, lambda s: True, 20, quiet=1.5)
        for keys in prof.quit_keys:
            p.keys(*keys)
            time.sleep(0.3)
        if wait_for(p, lambda s: p.dead(), 15) is None:
            log(f"{self.agent}: still running after quit keys; not saving an exited screen")
            return
        time.sleep(1.0)
        self.save(p, "exited", "after-quit")

    def dialogs(self) -> None:
        """Open each of ``DIALOG_CASES[agent]`` in a fresh agent and save the dialog."""
        for case in DIALOG_CASES.get(self.agent, ()):
            if self.c.dialog and case.desc not in self.c.dialog.split(","):
                continue
            with self.run(extra_args=case.args, extra_env=case.env) as p:
                for name, content in case.files:
                    (p.launch.cwd / name).write_text(content, encoding="utf-8")
                wait_ready(p, self.prof)
                for key in case.keys:
                    p.keys(key)
                    time.sleep(1.0)
                for text in case.before:
                    submit(p, text.replace("{cwd}", str(p.launch.cwd)))
                    time.sleep(1.0)
                    wait_ready(p, self.prof, quiet=2.0)
                prompt = case.prompt.replace("{cwd}", str(p.launch.cwd))
                if case.paste:
                    p.paste(prompt)
                    time.sleep(0.5)
                    p.keys("Enter")
                else:
                    submit(p, prompt)
                time.sleep(1.0)
                if case.expect:
                    scr = wait_for(p, lambda s, want=case.expect: want in s, 30)
                    if scr is not None:  # settle, but save an animated dialog anyway
                        scr = wait_stable(p, lambda s: True, 6, quiet=2.0) or p.capture()
                    if scr is not None and case.after:
                        for key in case.after:
                            p.keys(key)
                            time.sleep(1.0)
                        scr = wait_stable(p, lambda s: True, 6, quiet=2.0) or p.capture()
                else:
                    scr = wait_stable(
                        p, lambda s: not self.prof.ready(s) and not self.prof.busy(s), 30, 2.0
                    )
                if scr is None:
                    log(f"{self.agent}: no dialog for {case.desc}; screen:\n{p.capture()}")
                    continue
                self.save(p, "waiting_input", case.desc)

    def overlays(self) -> None:
        """Open each of ``OVERLAY_CASES[agent]`` (pickers, menus, help) in a fresh
        agent and save it: none of these may ever read as ``ready``."""
        for case in OVERLAY_CASES.get(self.agent, ()):
            if self.c.dialog and case.desc != self.c.dialog:
                continue
            with self.run() as p:
                wait_ready(p, self.prof, timeout=120)  # OpenCode starts slowly on a loaded machine
                if case.turn:
                    submit(p, "[[reply: Done.]] Say done.")
                    time.sleep(1.0)
                    wait_ready(p, self.prof, quiet=2.0)
                before = p.capture()
                for key in case.keys:
                    if key.startswith("text:"):
                        p.text(key[len("text:"):])
                    else:
                        p.keys(key)
                    time.sleep(0.5)
                if case.expect:
                    wait_for(p, lambda s, want=case.expect: want in s, 10)
                scr = wait_stable(p, lambda s, was=before: s != was, 10, quiet=1.5)
                if scr is None:
                    log(f"{self.agent}: {case.desc} changed nothing; screen:\n{p.capture()}")
                    continue
                shown = p.capture()
                self.save(p, case.state, case.desc)
                # closed again: the agent's own screen comes back, and whatever the
                # overlay drew must not be left to read as one
                for key in case.close:
                    p.keys(key)
                    time.sleep(0.5)
                try:
                    wait_ready(p, self.prof, timeout=10)
                except TimeoutError:
                    log(f"{self.agent}: not ready after closing {case.desc}:\n{p.capture()}")
                    continue
                if p.capture() == shown:  # the keys opened nothing of their own
                    log(f"{self.agent}: {case.desc} drew nothing; not kept")
                    for path in self.c.saved[-1:]:
                        path.unlink()
                        path.with_suffix(".ansi").unlink()
                    self.c.saved.pop()
                    continue
                self.save(p, "ready", f"after-{case.desc}")

    def edit_format_prompt(self) -> None:
        """Aider only: the prompt reads ``diff> `` when the edit format is not the model's."""
        if self.agent != "aider":
            return
        with self.run(extra_args=("--edit-format", "diff")) as p:
            wait_ready(p, self.prof)
            self.save(p, "ready", "edit-format-prompt")
            p.text("Please add a --verbose flag")
            wait_stable(p, lambda s: "--verbose flag" in s, 10)
            self.save(p, "draft", "edit-format-prompt")

    def busy_and_permission(self) -> None:
        prof = self.prof
        with self.run() as p:
            wait_ready(p, prof)
            self.save(p, "ready", "fresh")
            submit(p, "[[delay: 8]] [[reply: Done waiting.]] Check the build.")
            wait_busy(p, prof)
            base = p.capture().count("Done waiting.")
            time.sleep(2.0)
            if p.capture().count("Done waiting.") == base:
                self.save(p, "busy", "before-first-token")
            wait_reply(p, "Done waiting.", base)
            wait_ready(p, prof)
            self.save(p, "ready", "after-reply")
            self.permission_then_exit(p, exit_too=False)


def run_agent(
    cap: Capturer, agent: str, sizes: list[tuple[int, int]], only: str | None, have_server: bool
) -> list[str]:
    errors: list[str] = []
    for cols, rows in sizes:
        sc = Scenarios(cap, agent, cols, rows)
        full = (cols, rows) == (160, 45)
        steps: list[tuple[str, Callable[[], None], bool]] = []
        if full:
            steps += [
                ("start", sc.start_and_ready, False),
                ("drafts", sc.drafts, False),
                ("paste", sc.paste, False),
                ("trust", sc.trust, False),
                ("api_key", sc.api_key, False),
                ("onboarding", sc.onboarding, False),
                ("quit", sc.quit_at_prompt, False),
                ("conversation", sc.conversation, True),
                ("dialogs", sc.dialogs, True),
                ("edit_format_prompt", sc.edit_format_prompt, False),
                ("overlays", sc.overlays, True),
            ]
        else:
            steps += [
                ("drafts", sc.drafts, False),
                ("trust", sc.trust, False),
                ("api_key", sc.api_key, False),
                ("paste", sc.paste, False),
                ("busy_and_permission", sc.busy_and_permission, True),
                ("dialogs", sc.dialogs, True),
                ("edit_format_prompt", sc.edit_format_prompt, False),
                ("overlays", sc.overlays, True),
            ]
        for name, fn, needs_server in steps:
            if only and only not in name:
                continue
            if needs_server and not have_server:
                log(f"skip {agent} {name} {cols}x{rows}: no model server")
                continue
            log(f"=== {agent} {name} {cols}x{rows}")
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - keep going, report at the end
                errors.append(f"{agent} {name} {cols}x{rows}: {exc}")
                log(f"ERROR {errors[-1]}")
    return errors


def start_server(module_path: Path | None) -> Any:
    path = module_path or (REPO / "tests" / "e2e" / "model_server.py")
    mod = import_path("agentwrap_e2e_model_server", path)
    return mod.ModelServer().start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--agents", default=",".join(agents_mod.AGENT_NAMES))
    ap.add_argument("--sizes", default="160x45,80x24,200x50")
    ap.add_argument("--only", default=None, help="run only scenarios whose name contains this")
    ap.add_argument("--dialog", default=None,
                    help="with the dialogs scenario: capture only the dialog cases of these names"
                         " (comma-separated)")
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument(
        "--server-module",
        type=Path,
        default=None,
        help="path of a module with ModelServer (default tests/e2e/model_server.py)",
    )
    ap.add_argument("--no-server", action="store_true", help="only states needing no reply")
    ap.add_argument("--notes", type=Path, default=None, help="write titles/session files JSON")
    ap.add_argument(
        "--keep-work", action="store_true", help="keep the temp homes/projects and pane logs"
    )
    args = ap.parse_args(argv)

    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    srv = None
    url = "http://127.0.0.1:9"
    if not args.no_server:
        srv = start_server(args.server_module)
        url = srv.url
    workroot = Path(tempfile.mkdtemp(prefix="awcap-"))
    cap = Capturer(args.out, url, workroot)
    cap.dialog = args.dialog
    errors: list[str] = []
    try:
        for agent in args.agents.split(","):
            if agents_mod.find_agent(agent) is None:
                errors.append(f"{agent}: not installed (run scripts/install_agents.sh)")
                continue
            errors += run_agent(cap, agent, [(c, r) for c, r in sizes], args.only, srv is not None)
    finally:
        if srv is not None:
            srv.stop()
        if args.keep_work:
            log(f"work files kept in {workroot}")
        else:
            shutil.rmtree(workroot, ignore_errors=True)
    if args.notes:
        args.notes.write_text(json.dumps(cap.notes, indent=2, ensure_ascii=False))
    log(f"saved {len(cap.saved)} fixtures under {args.out}")
    for e in errors:
        log(f"FAILED: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
