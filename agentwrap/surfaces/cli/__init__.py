"""The ``agentwrap`` command, split by command group.

``app`` builds the parser and runs a command (the console script and
``python -m agentwrap`` enter through :func:`app.main`); ``sessions`` holds
run, attach, adopt, stop and ls; ``messages`` send, queue, history, metrics
and cancel; ``inspection`` state, doctor and profiles; ``answer`` answer;
``context`` context; ``events`` events; ``feedback`` watch and schedule;
``hosts`` hosts; ``hub`` hub and join (issue 38); ``store`` store; ``serve`` serve and token; ``chat`` chat
telegram (the chat bridge); ``mcp`` the MCP server an agent starts for its session; ``common`` what they
share (the consoles, tables of untrusted text, JSON output). Command modules
import ``common`` and the layers below, never each other; only ``app``
imports the command modules.
"""
