"""Native hooks: ``agentwrap hook AGENT EVENT``, the handler an agent runs itself.

Claude Code, Codex and Gemini CLI run commands at points of their loop and read
what the command prints. ``agentwrap run`` registers this handler for the
launch it starts; it then hands queued messages to the model at the session
start and between tool calls (the safe point inside a busy turn), and tells
the supervisor when a turn ends, a prompt is submitted or a permission
question opens. :mod:`.protocol` says which event is which, per agent, and the
answer each expects; :mod:`.handler` runs one hook; :mod:`.transcript` reads
the agent's reply at a turn's end from its transcript file; and
:mod:`.server` is the supervisor's side of the native hook client (issue 27),
which runs the hooks in the supervisor instead of a new Python process;
:mod:`.client` is the Python hook's own client of that server (issue 36: one
protocol, :mod:`agentwrap.hook_wire`, whichever client the agent runs).

A hook runs once per event, in a new process the agent waits for: start-up is
most of its cost. ``python -m agentwrap hook`` reaches :func:`main` before the
rest of the CLI (rich, argparse tables) is imported (see ``agentwrap/__main__``),
and this package imports the store only for the events that need it.
"""

from .handler import main

__all__ = ["main"]
