"""``agentwrap mcp``: the input queue as MCP tools, for the agent of one session.

A stdio server (the official MCP SDK) that the agent starts itself, with
``AGENTWRAP_SESSION`` in its environment (:mod:`agentwrap.sessions.channels`
renders its entry for the agent's MCP settings). Its tools are thin adapters
over :class:`~agentwrap.service.Service`, like the CLI and the HTTP API: see
:mod:`.server`. Imported only by ``agentwrap mcp``: no other command pays for
the SDK.
"""
