"""How an agent launches agentwrap's MCP server for its session.

``agentwrap mcp`` (:mod:`agentwrap.surfaces.mcp`) is a stdio server the agent
starts itself; what it needs is the session it serves and where agentwrap
keeps its state. :func:`server_spec` says both in the shape the agents' MCP
settings share (``command``, ``args``, ``env``): the Python running agentwrap
now, ``-m agentwrap mcp``, ``AGENTWRAP_SESSION`` and the XDG dirs of
``paths``, so the server finds the same store whatever environment the agent
hands its servers. :func:`config_json` wraps it as Claude Code's
``--mcp-config`` (and Gemini's ``mcpServers`` setting) expects.

Nothing here imports the MCP SDK: a launch that registers the server pays
for a few strings only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..paths import Paths, check_session_name

#: The server's name in the agent's MCP settings (its tools show as
#: ``mcp__agentwrap__check_input_queue`` in Claude Code).
SERVER_NAME = "agentwrap"


def server_env(session: str, paths: Paths) -> dict[str, str]:
    """``AGENTWRAP_SESSION`` and the XDG dirs that make :meth:`Paths.from_env`
    give back ``paths``."""
    env = {
        "AGENTWRAP_SESSION": check_session_name(session),
        "XDG_CONFIG_HOME": str(paths.config_dir.parent),
        "XDG_STATE_HOME": str(paths.state_dir.parent),
    }
    if paths.runtime_dir.name == "agentwrap":  # else the /tmp fallback, found without it
        env["XDG_RUNTIME_DIR"] = str(paths.runtime_dir.parent)
    return env


def server_spec(session: str, paths: Paths, *, python: str | None = None) -> dict[str, Any]:
    """One stdio MCP server entry: ``{"command", "args", "env"}``."""
    return {
        "type": "stdio",
        "command": python or sys.executable,
        "args": ["-m", "agentwrap", "mcp"],
        "env": server_env(session, paths),
    }


def config_json(session: str, paths: Paths, *, python: str | None = None) -> str:
    """``{"mcpServers": {"agentwrap": ...}}``: a file for ``claude --mcp-config``."""
    return json.dumps(
        {"mcpServers": {SERVER_NAME: server_spec(session, paths, python=python)}}, indent=2
    )
