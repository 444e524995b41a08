"""The page terminal's persistent reader: one tmux control-mode client per watched session.

Real tmux servers and a stand-in agent. The reader must cost no ``tmux``
process per look or key, must not be a person to the supervisor's idle check
(queued messages would wait for nobody), must not size the window, and a
person at a real terminal must still be seen beside it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import AwEnv
from support.delivery_kit import type_keys

from agentwrap.terminal.control import ControlClient, quote
from agentwrap.terminal.tmux import TmuxTerminal, persons_in


def test_a_client_without_a_terminal_is_not_a_person() -> None:
    assert persons_in("") == 0
    assert persons_in("client-1280") == 0
    assert persons_in("/dev/pts/3,client-99") == 1
    assert persons_in("/dev/pts/3,/dev/pts/4") == 2


def test_a_word_is_quoted_for_tmux_whatever_it_holds() -> None:
    assert quote("a'b") == "'a'\"'\"'b'"
    assert quote("#{pane_dead}") == "'#{pane_dead}'"


def _socket(aw: AwEnv, name: str) -> Path:
    from agentwrap.sessions.live import tmux_socket_of

    return tmux_socket_of(aw.paths, aw.registry().get(name))


def _size(socket: Path, name: str) -> str:
    out = subprocess.run(["tmux", "-S", str(socket), "display-message", "-p", "-t", f"={name}:0",
                          "#{window_width}x#{window_height}"], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def test_the_reader_is_no_person_sizes_nothing_and_a_real_terminal_still_counts(
    aw: AwEnv,
) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    sock = _socket(aw, "sa")
    term = TmuxTerminal.adopt(sock, "sa")
    assert term.user_idle_s() is None and _size(sock, "sa") == "100x30"

    reader = ControlClient(sock, "sa")
    try:
        assert reader.alive
        answer = reader.cmd("display-message", "-p", "-t", "=sa:0",
                            "#{session_attached} #{window_width}x#{window_height}")
        assert answer.stdout == ["1 100x30"]  # attached, and the window kept its size
        assert term.user_idle_s() is None  # ...but nobody is at the keyboard
        assert _size(sock, "sa") == "100x30"

        # a person in a real terminal (a pty of the same size) is still a person
        master, slave = os.openpty()
        subprocess.run(["stty", "cols", "100", "rows", "30"], stdin=slave, check=True)
        person = subprocess.Popen(["tmux", "-S", str(sock), "attach-session", "-t", "=sa"],
                                  stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                  env={k: v for k, v in os.environ.items() if k != "TMUX"}
                                  | {"TERM": "xterm-256color"})
        try:
            aw.wait_for(lambda: term.user_idle_s() is not None, 20, "the person seen")
        finally:
            person.kill()
            person.wait()
            os.close(master)
            os.close(slave)
        aw.wait_for(lambda: term.user_idle_s() is None, 20, "the person gone")
    finally:
        reader.close()
    assert not reader.alive


def test_a_look_and_a_key_cost_no_tmux_process_and_output_wakes_the_watcher(aw: AwEnv) -> None:
    from agentwrap.terminal.live import LivePane

    aw.start_standin()
    aw.wait_state("sa", "ready")
    sock = _socket(aw, "sa")
    pane = LivePane.adopt(sock, "sa")
    spawned: list[tuple[str, ...]] = []
    real = pane.term.server.cmd

    def counted(*args: str) -> object:
        spawned.append(args)
        return real(*args)

    pane.term.server.cmd = counted  # type: ignore[method-assign]
    try:
        first = pane.capture()
        assert (first.cols, first.rows) == (100, 30)
        seen = pane.changes()
        pane.keys("hello reader")
        got = pane.wait_change(seen, 20)
        assert got != seen  # the pane's %output woke the watcher
        aw.wait_for(lambda: "hello reader" in "\n".join(pane.capture().lines), 20, "the echo")
        assert spawned == []  # every look and key went through the one control client
        assert _size(sock, "sa") == "100x30"
        assert TmuxTerminal.adopt(sock, "sa").user_idle_s() is None
    finally:
        pane.close()
    assert pane.control is not None and not pane.control.alive
    type_keys(aw, "after")  # the session itself goes on without its reader


# --- a long take-over is a wait (issue 42): no attempt spent, in once after ------------------


def test_a_long_take_over_is_a_wait_and_the_message_goes_in_once_after(aw: AwEnv) -> None:
    """The person holds the keyboard from a page far longer than the typing
    grace and the readiness timeout, pressing nothing (thinking): the message
    waits as for an open overlay (no failed attempt toward the fallback, not
    typed over their keys), and goes in once after they give it back."""
    import json
    import time

    from support.delivery_kit import get, queue_json, send, write_config

    from agentwrap.audit import AuditLog
    from agentwrap.terminal.live import LivePane
    from agentwrap.terminal.takeover import Takeover

    write_config(aw, typing_grace_ms=200, readiness_timeout_s=1, fallback_after=1)
    aw.start_standin()
    aw.wait_state("sa", "ready")
    pane = LivePane.adopt(_socket(aw, "sa"), "sa")
    take = Takeover(pane, AuditLog(aw.paths.audit_log), "sa", "test", "local", idle_s=600)
    try:
        sent_at = time.time()
        mid = send(aw, "sa", "queued while the page holds the keyboard")
        aw.wait_for(lambda: "a person took over" in json.dumps(queue_json(aw, "sa")), 30,
                    "the queue saying why it waits")
        # several readiness timeouts (and typing graces) pass while the page holds it
        aw.wait_for(lambda: aw.registry().get("sa").heartbeat > sent_at + 5, 60, "heartbeats")
        held = get(aw, mid)
        assert aw.received() == []
        assert held.status.value == "pending" and held.attempts == 0, held
    finally:
        take.end("given back")
        pane.close()
    aw.wait_for(lambda: len(aw.received()) == 1, 60, "delivered after the take-over")
    aw.wait_for(lambda: get(aw, mid).status.value == "delivered", 60, "its receipt")
    got = aw.received()
    assert len(got) == 1 and "queued while the page holds the keyboard" in got[0], got
    assert get(aw, mid).attempts <= 1


def test_a_marker_left_by_a_serve_that_died_holds_nothing_past_its_limit(aw: AwEnv) -> None:
    import os
    import time

    from agentwrap.terminal.live import takeover_marker

    aw.start_standin()
    aw.wait_state("sa", "ready")
    sock = _socket(aw, "sa")
    term = TmuxTerminal.adopt(sock, "sa")
    marker = takeover_marker(sock.parent, "sa")
    assert not term.held()
    marker.write_text("30\n")
    assert term.held()
    old = time.time() - 40  # 30 s limit + the slack, passed
    os.utime(marker, (old, old))
    assert not term.held()
    marker.unlink()


def test_pages_watching_one_session_share_its_one_client_until_the_last_leaves(
    aw: AwEnv,
) -> None:
    from agentwrap.audit import AuditLog
    from agentwrap.terminal.live import LivePane
    from agentwrap.terminal.takeover import Takeover

    aw.start_standin()
    aw.wait_state("sa", "ready")
    sock = _socket(aw, "sa")
    first, second = LivePane.adopt(sock, "sa"), LivePane.adopt(sock, "sa")
    assert first.control is second.control and first.control is not None
    take = Takeover(LivePane.adopt(sock, "sa"), AuditLog(aw.paths.audit_log), "sa", "t", "local")
    take.end("given back")  # the take-over's own hold goes with it
    first.close()
    assert second.control is not None and second.control.alive
    second.close()
    assert not first.control.alive
