"""``agentwrap mcp``: the MCP server an agent starts for its session.

Thin: it hands over to :mod:`agentwrap.surfaces.mcp`, imported only when the
command runs (the MCP SDK costs every other command nothing).
"""

from __future__ import annotations

import argparse

from .common import out, user_paths

MCP_HELP = """\
Serve the input queue of one session as MCP tools over stdin/stdout, for the
agent of that session to call: check_input_queue, wait_for_input,
send_message, acknowledge and list_sessions. The session is the one named by
AGENTWRAP_SESSION, which `agentwrap run` sets for the agent it starts.
Messages the agent takes this way are delivered once, through "mcp" (see
`agentwrap history`), and never typed into its terminal as well.
"""

MCP_EPILOG = """\
examples:
  agentwrap mcp --print-config api > api-mcp.json   # the server entry for session api
  claude --mcp-config api-mcp.json                  # (inside `agentwrap run --name api`)
"""


def cmd_mcp(args: argparse.Namespace) -> int:
    paths = user_paths()
    if args.print_config:
        from ...sessions.channels import config_json

        out.file.write(config_json(args.print_config, paths) + "\n")
        return 0
    from ..mcp.server import run

    return run(paths)
