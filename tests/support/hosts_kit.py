"""Simulated hosts of one shared store (issue 23): an environment of
:func:`conftest.make_aw` made a host by its name, the store's URL and a quick
heartbeat, and what the tests read of them."""

from __future__ import annotations

import json
from typing import Any

from conftest import AwEnv

from agentwrap.queue.backend import ENV as STORE_ENV
from agentwrap.sessions.hosts import ENV as HOST_ENV


def as_host(aw: AwEnv, name: str, url: str, heartbeat_s: float = 0.3) -> AwEnv:
    """``aw`` becomes host ``name`` of the store at ``url``, beating every ``heartbeat_s``."""
    aw.env.update({STORE_ENV: url, HOST_ENV: name})
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f"[host]\nheartbeat_s = {heartbeat_s}\n")
    return aw


def ls(aw: AwEnv) -> dict[str, dict[str, Any]]:
    """``ls --json`` on this host, by session name."""
    return {d["name"]: d for d in json.loads(aw.cli("ls", "--json", check=True).stdout)}


def history(aw: AwEnv, name: str) -> dict[str, dict[str, Any]]:
    """``history --json NAME`` on this host, by message content."""
    out = json.loads(aw.cli("history", name, "--json", check=True).stdout)
    rows = out["messages"] if isinstance(out, dict) else out
    return {r["content"]: r for r in rows}
