"""Surfaces: the ways in, each a thin adapter over the layers below.

Here lives every input surface, one subpackage each: ``cli`` (the
``agentwrap`` command), ``http`` (the HTTP API and the dashboard, ``agentwrap
serve``), ``chat`` (a chat channel both ways, ``agentwrap chat telegram``),
``mcp`` (the queue as MCP tools for one session's agent) and
``hooks`` (the handler an agent's native hooks run).
This is the top layer: it may import everything below (``sessions``,
``delivery``, ``detect``, ``queue``, ``terminal``, the foundation) and nothing
imports it, except ``agentwrap.__main__``. Surfaces do not import each other.
"""
