"""The app-server state source across a server restart (issue 24).

A scripted stand-in for the connection: the real server's behaviour is proven
by tests/e2e/test_codex_app_server_launch.py (the server SIGKILLed during a
turn); this pins the part that raced there, deterministically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentwrap.codex_server.client import AppServerClient
from agentwrap.codex_server.protocol import Notification
from agentwrap.detect import app_server_state
from agentwrap.detect.app_server_state import AppServerState
from agentwrap.detect.states import State


class FakeClient:
    """What AppServerState asks of a connection: one thread, its status."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        self.closed = False
        self.close_reason = "gone"
        self.handlers: list[Any] = []

    def on_message(self, handler: Any) -> None:
        self.handlers.append(handler)

    def loaded_threads(self) -> list[str]:
        return ["t1"]

    def read_thread(self, thread_id: str) -> dict[str, Any]:
        return {"id": thread_id, "ephemeral": False, "status": self.status}

    def close(self) -> None:
        self.closed = True


def test_a_server_started_again_replaces_what_the_dead_one_last_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    servers = [FakeClient({"type": "idle"}), FakeClient({"type": "idle"})]
    monkeypatch.setattr(AppServerClient, "connect", classmethod(lambda cls, *a, **k: servers.pop(0)))
    monkeypatch.setattr(app_server_state, "RECONNECT_EVERY_S", 0.0)
    state = AppServerState(tmp_path / "s.sock")
    first = state.client()
    assert isinstance(first, FakeClient)
    # a turn runs, and the server dies in it
    first.handlers[0](Notification("thread/status/changed",
                                   {"threadId": "t1", "status": {"type": "active", "activeFlags": []}}))
    got = state.read()
    assert got is not None and got.state is State.BUSY
    first.closed = True
    # the keeper starts it again; the TUI resumed the thread (idle) before this
    # connection, which hears no change: the dead server's "active" must not stay
    got = state.read()
    assert got is not None and got.state is State.READY, got
