"""``agentwrap run codex`` on a private app-server (issue 24), on the real Codex
0.169.0: ``[run] codex_app_server = true`` (the default; written out here all the same).

On: the TUI runs as ``codex --remote
unix://SOCKET`` with the socket in agentwrap's 0700 runtime dir; ``state
--explain`` says so; the session works as before (ready, a message delivered
and acknowledged); the server goes when the session stops. Off: the launch is
today's. A Codex without the app-server: today's launch, and ``state
--explain`` and ``doctor`` say why. A server killed mid-session: started again,
the session keeps delivering.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agentwrap.terminal import alive

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

#: The switch, on (the default since the whole Codex e2e set passed on it).
ON = "[run]\ncodex_app_server = true\n\n"

Make = Callable[..., AgentSession]


def test_codex_runs_on_a_private_app_server_and_a_message_goes_as_a_turn_acknowledged_once(
    make_session: Make,
) -> None:
    """On: the socket in agentwrap's 0700 runtime dir, said by ``state --explain``;
    a message goes through the server as a turn (its syntax inert) and is
    acknowledged once, the server's ids its receipt; the server goes at the stop.
    (One start for what were two tests with the same launch.)"""
    s = make_session("codex")
    s.write_config(ON)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"].startswith("on: the TUI runs on unix://"), st
    sock = Path(st["app_server"].split("unix://", 1)[1].split(" ", 1)[0])
    runtime = Path(s.env["XDG_RUNTIME_DIR"])
    assert runtime in sock.parents and stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    explain = s.cli("state", s.name, "--explain").stdout
    assert "app-server: on" in explain, explain
    pid = int(st["app_server"].rsplit("pid ", 1)[1].rstrip(")"))
    assert alive(pid)
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"check $skill-installer {marker}", "--ack", "--wait", "--timeout", "90")
    # the server's answer (the turn id) is the attempt's receipt; the ACK is read from
    # the thread's agent message items
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()
    got = s.wait_received(marker)
    assert len(got) == 1
    assert "$skill-installer" not in got[0] and "\uff04skill-installer" in got[0]  # inert
    msg = next(m for m in s.history() if marker in m["content"])
    assert msg["status"] == "acknowledged" and "through app-server" in msg["detail"], msg
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(s._paths().db_path)
    try:
        attempts = store.attempts(msg["id"])
    finally:
        store.close()
    assert [(a.channel, a.outcome) for a in attempts] == [("app-server", "acknowledged")]
    assert attempts[0].evidence.startswith("turn "), attempts  # the receipt: the server's ids
    s.wait_until(lambda: marker in s.screen(), 30, "the block shown in the TUI as input")
    assert not any((s.home / ".codex").glob("*.sock"))  # nothing of it in the person's ~/.codex
    s.cli("stop", s.name)
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid) and not sock.exists()


def test_codex_launch_is_todays_with_the_switch_off(make_session: Make) -> None:
    s = make_session("codex")
    s.write_config("[run]\ncodex_app_server = false\n")
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"] is None
    assert "app-server" not in s.cli("state", s.name, "--explain").stdout
    assert not list(Path(s.env["XDG_RUNTIME_DIR"]).rglob("codex-*.sock"))


def test_a_codex_without_the_app_server_gets_todays_launch_and_says_why(
    make_session: Make,
) -> None:
    """An older Codex (here: the real one behind a ``codex`` on PATH that
    refuses ``app-server``, as releases before it did): the person's Codex
    starts as today, messages are typed and acknowledged off the screen, and
    ``state --explain`` and ``doctor`` name the reason."""
    s = make_session("codex")
    s.write_config(ON)
    real = s.argv[0]
    bin_dir = s.root / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = app-server ]; then\n'
        "  echo \"error: unrecognized subcommand 'app-server'\" >&2; exit 2\n"
        "fi\n"
        f'exec {shlex.quote(real)} "$@"\n',
        encoding="utf-8",
    )
    fake.chmod(0o700)
    s.env["PATH"] = f"{bin_dir}:{s.env.get('PATH', os.defpath)}"
    s.argv[0] = "codex"
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"] and st["app_server"].startswith("off: this Codex has no"), st
    explain = s.cli("state", s.name, "--explain").stdout
    assert "app-server: off: this Codex has no" in explain and "typed" in explain, explain
    assert st["signal"] != "structured" or "app-server" not in st["reason"], st
    assert not list(Path(s.env["XDG_RUNTIME_DIR"]).rglob("codex-*.sock"))
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()
    assert len(s.wait_received(marker)) == 1
    msg = next(m for m in s.history() if marker in m["content"])
    assert "through app-server" not in msg["detail"], msg  # typed, as today
    doctor = json.loads(s.cli("doctor", "--json", timeout=300).stdout)  # probes every agent CLI
    said = doctor["agents"]["codex"]["app_server"]
    assert "falls back to typing and the screen: this Codex has no" in said, said


def test_a_message_whose_ack_never_comes_is_delivered_once_and_not_retyped(
    make_session: Make,
) -> None:
    """The server's receipt proves the model got the message (unlike typing,
    where a missing ACK may mean the Enter never landed): a model that never
    acknowledges gets it once, the sender hears "delivered (not
    acknowledged)", and nothing is sent again or written to AGENTS.md."""
    s = make_session("codex")
    s.write_config(
        ON + "[delivery]\nbackoff_s = [0.5]\nfallback_after = 2\nack_timeout_s = 2\n"
        "notify_on_failure = false\n"
    )
    s.server.auto_ack = False
    s.start()
    s.wait_state("ready", timeout=90)
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"deploy freeze until 5pm {marker}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 15 and "not acknowledged" in res.stdout, res.stdout + res.stderr
    assert "through app-server" in res.stdout, res.stdout
    msg = next(m for m in s.history() if marker in m["content"] and m["source"] == "user")
    assert msg["status"] == "delivered", msg
    assert len(s.wait_received(marker, settle=3.0)) == 1
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(s._paths().db_path)
    try:
        attempts = store.attempts(msg["id"])
    finally:
        store.close()
    # one attempt, ended unacknowledged: never typed, never sent again
    assert [(a.channel, a.outcome) for a in attempts] == [("app-server", "unacknowledged")], attempts
    agents_md = s.workdir / "AGENTS.md"
    assert not agents_md.exists() or marker not in agents_md.read_text()


def test_the_persons_slash_command_and_escape_work_on_the_server(make_session: Make) -> None:
    """The person's own TUI on the server: a `/status` typed by them runs
    (Codex's own command, the model not asked), Esc interrupts a running turn,
    and agentwrap delivers afterwards as usual."""
    s = make_session("codex")
    s.write_config(ON)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"].startswith("on:"), st
    asked = len(s.server.user_texts())
    s.type_keys("/status")
    s.wait_until(lambda: "/status" in s.screen(), 20, "the command typed")
    s.press("Enter")
    s.wait_until(lambda: "Model" in s.screen() and "gpt" in s.screen().lower(), 30,
                 "Codex's status panel")
    assert len(s.server.user_texts()) == asked  # a command of Codex's own: no model turn
    slow = f"E2E{uuid.uuid4().hex[:8]}"
    s.send(f"[[delay: 20]] a long one {slow}")
    s.wait_until(lambda: s.received_with(slow), 60, "the long turn at the model")
    s.wait_state("busy", timeout=30)
    s.press("Escape")  # Codex interrupts its turn before the model answers
    s.wait_until(lambda: "interrupted" in s.screen(), 30, "Codex's turn interrupted")
    s.wait_state("ready", timeout=60)
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    # (the model server reads the history's delay again: this turn waits 20 s too)
    res = s.send(f"after the person's keys {marker}", "--ack", "--wait", "--timeout", "150",
                 timeout=160)
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()
    assert len(s.wait_received(marker)) == 1


def test_an_untrusted_project_gets_codexs_own_launch_and_its_trust_dialog(
    make_session: Make,
) -> None:
    """Codex 0.169.0's remote TUI shows no folder-trust dialog (its local TUI
    does): a project the person's Codex has no trust decision for is launched
    as Codex's own, so the person is asked as before; `state --explain` says
    why the app-server is off, and nothing trusted the project behind the
    person's back. Once the person has decided, the next launch is on the
    server."""
    s = make_session("codex", trusted=False)
    s.write_config(ON)
    config = s.home / ".codex" / "config.toml"
    s.start()
    st = s.wait_state("waiting_input", timeout=90)
    assert st["rule"] == "dialog:trust_folder", st
    assert st["app_server"].startswith("off: Codex has no trust decision"), st
    assert "trust_level" not in config.read_text() and str(s.workdir) not in config.read_text()
    t = make_session("codex", trusted=False)
    t.name = "codex-decided"
    t.write_config(ON)
    decided = t.home / ".codex" / "config.toml"
    decided.write_text(decided.read_text()
                       + f'\n[projects."{t.workdir}"]\ntrust_level = "untrusted"\n')
    t.start()
    st = t.wait_state("ready", timeout=90)
    assert st["app_server"].startswith("on:"), st


def test_state_comes_from_the_app_server_and_its_death_mid_turn_ends_the_message_once(
    make_session: Make,
) -> None:
    """A turn the person types is seen busy, then ready from the app-server's own
    word (``structured``). Then the app-server dies while the model works on a
    message agentwrap started as a turn: that message ends in exactly one
    terminal state (it reached the model once and is never sent again), the
    server is started again, the next message is delivered through it and
    acknowledged, once, and the state comes from the server again. (One start
    for what were two tests with the same launch.)"""
    s = make_session("codex")
    s.write_config(ON)
    s.start()
    s.wait_state("ready", timeout=90)
    s.type_keys("[[delay: 2]] [[reply: from the server]]")
    time.sleep(0.4)
    s.press("Enter")
    busy = s.wait_state("busy", timeout=60)
    st = s.wait_state("ready", timeout=60)
    assert st["signal"] == "structured" and "app-server" in st["reason"], st
    assert "app-server says the thread is idle" in s.cli("state", s.name, "--explain").stdout
    print(f"codex busy via {busy['signal']}: {busy['reason']}")
    pid = int(st["app_server"].rsplit("pid ", 1)[1].rstrip(")"))
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    mid = s.send_id(f"[[delay: 30]] slow one {marker}", "--ack")
    s.wait_until(lambda: s.received_with(marker), 60, "the message at the model")
    os.killpg(pid, signal.SIGKILL)
    s.wait_until(lambda: not alive(pid), 30, "the app-server gone")
    again = s.wait_until(
        lambda: (a := s.state()["app_server"]) and f"(pid {pid})" not in a and a, 60,
        "the app-server started again")
    assert alive(int(again.rsplit("pid ", 1)[1].rstrip(")")))
    ended = s.wait_until(
        lambda: (m := s.message(mid))["status"] not in ("pending", "delivering") and m, 120,
        "the first message's end")
    print(f"killed mid-turn: {ended['status']}: {ended.get('detail')}")
    assert ended["status"] in ("delivered", "acknowledged", "escalated", "failed"), ended
    second = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"after the crash {second}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()
    assert len(s.wait_received(second)) == 1
    # never sent again: one request asked with it on its own; the turn it started
    # got no reply, so the next turn's request carries it once more as history
    alone = [t for t in s.received_with(marker) if second not in t]
    assert len(alone) == 1, alone
    assert all(t.count(marker) == 1 for t in s.received_with(marker))
    s.wait_until(lambda: s.state()["signal"] == "structured", 30, "the server deciding again")
