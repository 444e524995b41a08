"""Surfaces: the ways in, each a thin adapter over the layers below.

Here lives every input surface, one subpackage each: today ``cli`` (the
``agentwrap`` command); HTTP, MCP, hooks and watchers will sit beside it.
This is the top layer: it may import everything below (``sessions``,
``delivery``, ``detect``, ``queue``, ``terminal``, the foundation) and nothing
imports it, except ``agentwrap.__main__``. Surfaces do not import each other.
"""
