"""Helpers for the delivery tests: config files, the person at the keyboard
(direct tmux commands on the test's own server), the supervisor process, and
reading end states through the CLI and the store.

Every wait here is a generous deadline, never a timing assertion: the test
machine is shared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from conftest import STANDIN_PROFILE, AwEnv

from agentwrap.message import Message, Status
from support.waiting import wait_for

T = TypeVar("T")

CHILD_AGENT = Path(__file__).resolve().parent / "child_agent.py"

# Short backoffs and timeouts so failures and retries happen within seconds.
FAST_DELIVERY: dict[str, Any] = {
    "backoff_s": [0.2, 0.4],
    "ack_timeout_s": 0.5,
    "readiness_timeout_s": 2.0,
    "typing_grace_ms": 0,
    "paste_timeout_s": 3.0,
    "submit_timeout_s": 2.0,
    "notify_on_failure": False,  # no desktop notifications from tests
}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def write_config(aw: AwEnv, **delivery: Any) -> dict[str, Any]:
    """The user config of this test: FAST_DELIVERY with ``delivery`` on top."""
    values = {**FAST_DELIVERY, **delivery}
    lines = ["[delivery]"] + [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return values


def override_profile_input(aw: AwEnv, **values: Any) -> None:
    """Change [input] keys of this test's own copy of the standin profile
    (the fixture file itself is untouched)."""
    text = STANDIN_PROFILE.read_text(encoding="utf-8")
    for key, value in values.items():
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if line.startswith(f"{key} ="):
                lines[i] = f"{key} = {_toml_value(value)}"
                break
        else:
            raise KeyError(key)
        text = "\n".join(lines)
    (aw.paths.user_patterns_dir / "standin.toml").write_text(text, encoding="utf-8")


# --- waiting -----------------------------------------------------------------------


def wait_soft(cond: Callable[[], object], timeout: float, interval: float = 0.02) -> bool:
    """Like wait_for, but a miss is not a failure (for optional orderings)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return bool(cond())


# --- the person, via the test's own tmux server ------------------------------------


def tmux(aw: AwEnv, *args: str, name: str = "sa") -> subprocess.CompletedProcess[str]:
    """A tmux command on the server of session ``name`` (one server each)."""
    return subprocess.run(
        ["tmux", "-S", str(aw.paths.tmux_socket_for(name)), *args],
        capture_output=True, text=True, timeout=30, check=False,
    )


def pane_text(aw: AwEnv, name: str = "sa") -> str:
    return tmux(aw, "capture-pane", "-p", "-t", f"={name}:0.0", name=name).stdout


def pane_title(aw: AwEnv, name: str = "sa") -> str:
    return tmux(aw, "display-message", "-p", "-t", f"={name}:0.0", "#{pane_title}", name=name).stdout.strip()


def box_line(aw: AwEnv, name: str = "sa") -> str:
    """The stand-in's input box: the line(s) between the last two rules."""
    lines = pane_text(aw, name).rstrip("\n").split("\n")
    rules = [i for i, x in enumerate(lines) if x.startswith("─" * 10)]
    if len(rules) < 2:
        return ""
    return "\n".join(lines[rules[-2] + 1 : rules[-1]])


def type_keys(aw: AwEnv, text: str, name: str = "sa") -> None:
    """The person types literal text (no Enter)."""
    res = tmux(aw, "send-keys", "-t", f"={name}:0.0", "-l", text, name=name)
    assert res.returncode == 0, res.stderr


def press(aw: AwEnv, *keys: str, name: str = "sa") -> None:
    res = tmux(aw, "send-keys", "-t", f"={name}:0.0", *keys, name=name)
    assert res.returncode == 0, res.stderr


def agent_pid(aw: AwEnv, name: str = "sa") -> int:
    out = tmux(aw, "display-message", "-p", "-t", f"={name}:0.0", "#{pane_pid}", name=name).stdout.strip()
    return int(out)


def child_pid(pid: int) -> int:
    """The one child of ``pid`` (the agent under child_agent.py)."""
    def find() -> int:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            kids = f.read().split()
        return int(kids[0]) if len(kids) == 1 else 0

    return wait_for(find, 20, f"the child of {pid}")


# --- the supervisor -------------------------------------------------------------------


def ls_json(aw: AwEnv) -> list[dict[str, Any]]:
    res = aw.cli("ls", "--json", "--all", check=True)
    data: list[dict[str, Any]] = json.loads(res.stdout)
    return data


def supervisor_pid(aw: AwEnv, name: str = "sa") -> int:
    rec = next(r for r in ls_json(aw) if r["name"] == name)
    pid = rec["supervisor_pid"]
    assert isinstance(pid, int) and rec["liveness"] == "running", rec
    return pid


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), 20, f"supervisor {pid} to die", 0.01)


def supervisor_log(aw: AwEnv, name: str = "sa") -> str:
    path: Path = aw.paths.supervisor_log(name)
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


# --- messages -----------------------------------------------------------------------------


def send(aw: AwEnv, name: str, content: str, *flags: str) -> str:
    """``agentwrap send`` (no --wait); returns the message id."""
    res = aw.cli("send", name, content, "--json", *flags, check=True)
    mid: str = json.loads(res.stdout)["id"]
    return mid


def send_async(aw: AwEnv, name: str, content: str, *flags: str) -> subprocess.Popen[str]:
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "send", name, content, "--json", *flags],
        env=aw.env, cwd=aw.project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def popen_id(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, dict[str, Any]]:
    out, err = proc.communicate(timeout=timeout)
    assert out.strip(), f"no output (rc {proc.returncode}): {err}"
    data: dict[str, Any] = json.loads(out)
    return proc.returncode, data


def get(aw: AwEnv, mid: str) -> Message:
    store = aw.store()
    try:
        return store.get(mid)
    finally:
        store.close()


def wait_terminal(aw: AwEnv, mid: str, timeout: float = 60) -> Message:
    return wait_for(lambda: _terminal(aw, mid), timeout, f"message {mid[:8]} to end")


def _terminal(aw: AwEnv, mid: str) -> Message | None:
    m = get(aw, mid)
    return m if m.status.terminal else None


def wait_phase(aw: AwEnv, mid: str, phases: Sequence[str], timeout: float = 30) -> Message:
    """Poll the store (cheaply, often) until the message is in one of ``phases``."""
    store = aw.store()
    try:
        def hit() -> Message | None:
            m = store.get(mid)
            if m.status.terminal:
                raise AssertionError(f"{mid[:8]} ended ({m.status}: {m.detail}) before {phases}")
            return m if m.phase is not None and m.phase.value in phases else None

        return wait_for(hit, timeout, f"message {mid[:8]} in phase {phases}", 0.005)
    finally:
        store.close()


def history(aw: AwEnv, name: str = "sa") -> dict[str, dict[str, Any]]:
    """``agentwrap history NAME --json`` keyed by message id."""
    res = aw.cli("history", name, "--json", "--limit", "500", check=True)
    return {m["id"]: m for m in json.loads(res.stdout)}


def queue_json(aw: AwEnv, name: str = "sa") -> list[dict[str, Any]]:
    res = aw.cli("queue", name, "--json", check=True)
    data: list[dict[str, Any]] = json.loads(res.stdout)
    return data


def arrivals_of(aw: AwEnv, needle: str) -> int:
    """How many submitted messages contain ``needle`` (each counted per occurrence)."""
    return sum(text.count(needle) for text in aw.received())


def header(token: str) -> str:
    return f"[agentwrap context {token}:"


def is_terminal(status: str) -> bool:
    return Status(status).terminal


def audit_events(aw: AwEnv) -> list[Mapping[str, Any]]:
    path = aw.paths.audit_log
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
