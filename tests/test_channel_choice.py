"""Which channel takes which message: one function, held as a table (issue 36).

Rows: the agent (as the channels its launch registered), its state, the
message's kind (and priority), the channels available -> the channel that takes
it now, or None (it waits). The delivery engine's typing window
(``busy_channel_of``), Codex's app-server part (``server_takes``, its steering)
and ``agentwrap queue`` all ask :func:`agentwrap.delivery.choice.channel_for`.
"""

from __future__ import annotations

import itertools

import pytest

from agentwrap.delivery.choice import (
    APP_SERVER,
    BUSY_CHANNELS,
    TYPING,
    AgentState,
    busy_channel_of,
    channel_for,
)
from agentwrap.message import Kind, Priority
from agentwrap.session_options import SessionOptions

IDLE, BUSY, DIALOG = AgentState.IDLE, AgentState.BUSY, AgentState.DIALOG
C, INS, CMD, NOTE = Kind.CONTENT, Kind.INSTRUCTION, Kind.COMMAND, Kind.FALLBACK_NOTICE
HIGH = frozenset({Priority.HIGH, Priority.CRITICAL})

#: What each agent's launch registers (agentwrap.agents.*; the app-server when
#: ``[run] codex_app_server``): the channels a session record holds.
CLAUDE = {"hooks", "mcp"}
CODEX_TUI = {"mcp"}  # hooks untrusted by default
CODEX_SERVER = {APP_SERVER, "mcp"}
CODEX_SERVER_HOOKS = {APP_SERVER, "hooks", "mcp"}
AIDER = {"read-file"}
KIMI = {"hook-signals"}  # signals only: nothing is handed over through them
NONE: set[str] = set()  # no native channel (Gemini not as root, --no-channels)

ROWS = [
    # agent, state, kind, priority, steer, server dead -> channel
    ("claude", CLAUDE, IDLE, C, Priority.NORMAL, (), False, TYPING),
    ("claude", CLAUDE, BUSY, C, Priority.NORMAL, (), False, "hooks"),
    ("claude", CLAUDE, BUSY, INS, Priority.CRITICAL, (), False, "hooks"),
    ("claude", CLAUDE, BUSY, CMD, Priority.NORMAL, (), False, None),  # a command is typed
    ("claude", CLAUDE, BUSY, NOTE, Priority.NORMAL, (), False, None),  # the supervisor's own
    ("claude", CLAUDE, DIALOG, C, Priority.NORMAL, (), False, None),
    ("codex tui", CODEX_TUI, IDLE, C, Priority.NORMAL, (), False, TYPING),
    ("codex tui", CODEX_TUI, BUSY, C, Priority.NORMAL, (), False, None),  # MCP: the agent asks
    ("codex server", CODEX_SERVER, IDLE, C, Priority.NORMAL, (), False, APP_SERVER),
    ("codex server", CODEX_SERVER, IDLE, INS, Priority.LOW, (), False, APP_SERVER),
    ("codex server", CODEX_SERVER, IDLE, CMD, Priority.NORMAL, (), False, TYPING),
    ("codex server", CODEX_SERVER, IDLE, NOTE, Priority.NORMAL, (), False, TYPING),
    ("codex server", CODEX_SERVER, BUSY, C, Priority.NORMAL, (), False, None),  # turn's end
    ("codex server", CODEX_SERVER, BUSY, C, Priority.HIGH, HIGH, False, APP_SERVER),  # steer
    ("codex server", CODEX_SERVER, BUSY, C, Priority.NORMAL, HIGH, False, None),
    ("codex server", CODEX_SERVER, BUSY, C, Priority.LOW, frozenset(Priority), False, APP_SERVER),
    ("codex server", CODEX_SERVER, DIALOG, C, Priority.HIGH, HIGH, False, None),
    ("codex server", CODEX_SERVER, IDLE, C, Priority.NORMAL, (), True, TYPING),  # dead: typed
    ("codex server", CODEX_SERVER, BUSY, C, Priority.HIGH, HIGH, True, None),
    ("codex server+hooks", CODEX_SERVER_HOOKS, BUSY, C, Priority.NORMAL, (), False, "hooks"),
    ("codex server+hooks", CODEX_SERVER_HOOKS, BUSY, C, Priority.HIGH, HIGH, False, APP_SERVER),
    ("codex server+hooks", CODEX_SERVER_HOOKS, IDLE, C, Priority.NORMAL, (), False, APP_SERVER),
    ("aider", AIDER, IDLE, C, Priority.NORMAL, (), False, TYPING),
    ("aider", AIDER, BUSY, INS, Priority.NORMAL, (), False, "read-file"),
    ("aider", AIDER, BUSY, CMD, Priority.NORMAL, (), False, None),
    ("aider", AIDER, DIALOG, C, Priority.NORMAL, (), False, None),
    ("kimi", KIMI, IDLE, C, Priority.NORMAL, (), False, TYPING),
    ("kimi", KIMI, BUSY, C, Priority.NORMAL, (), False, None),  # typed after the turn
    ("none", NONE, IDLE, CMD, Priority.NORMAL, (), False, TYPING),
    ("none", NONE, BUSY, C, Priority.NORMAL, (), False, None),
    ("both readers", {"hooks", "read-file"}, BUSY, C, Priority.NORMAL, (), False, "hooks"),
]


@pytest.mark.parametrize(("agent", "available", "state", "kind", "priority", "steer", "dead",
                          "want"), ROWS, ids=[f"{r[0]}-{r[2].value}-{r[3].value}-{i}"
                                              for i, r in enumerate(ROWS)])
def test_the_channel_each_message_takes(agent: str, available: set[str], state: AgentState,
                                        kind: Kind, priority: Priority, steer: frozenset[Priority],
                                        dead: bool, want: str | None) -> None:
    assert channel_for(available, state, kind, priority, server_dead=dead, steer=steer) == want


ALL = ("hooks", "read-file", "mcp", "hook-signals", APP_SERVER)


def test_the_typing_windows_busy_channel_is_the_choice_and_as_before() -> None:
    """``busy_channel_of`` (the engine's window, ``agentwrap queue``'s reason) for
    every set of channels: the choice's, and what it was before the choice
    (aae88cc: the first of BUSY_CHANNELS the session has)."""
    for n in range(len(ALL) + 1):
        for chans in itertools.combinations(ALL, n):
            options = SessionOptions(channels=list(chans))
            before = next((c for c in BUSY_CHANNELS if c in chans), None)
            assert busy_channel_of(options) == before, chans


def test_the_app_server_takes_the_kinds_the_choice_gives_it() -> None:
    """``server_takes`` (the kinds the typing engine leaves to the app-server)
    and its steering ask the same function: alive, every kind a reader may take;
    declared dead, none."""
    from agentwrap.app_server.delivery import server_takes

    class State:
        def __init__(self, dead: bool) -> None:
            self._dead = dead

        def dead(self) -> bool:
            return self._dead

    assert server_takes(State(False)) == {k for k in Kind if channel_for(  # type: ignore[arg-type]
        {APP_SERVER}, IDLE, k) == APP_SERVER} == {C, INS}
    assert server_takes(State(True)) == frozenset()  # type: ignore[arg-type]
