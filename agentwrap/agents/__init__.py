"""One module per agent CLI behind one record, and the table of them (issue 36).

Modules: ``base`` (the :class:`Agent` record every agent module fills in, and
:class:`StartContext`), ``launch`` (what every launch registration shares: the
:class:`~.launch.Launch` given, the :class:`~.launch.LaunchChannels` filled in,
the MCP server's entry), ``all_agents`` (the table: the one place that lists
the agents), ``conversation`` (what a conversation is made of and the
protocol of every agent's reader), and one module per agent: ``claude``, ``codex``, ``gemini``,
``qwen``, ``copilot``, ``opencode``, ``cline``, ``kimi``, ``aider``, ``pi``.

What an agent is to agentwrap lives in its module: its launch registration
(hooks, MCP server, the files a launch writes), its hook events and what they
mean, how its hook requests read as questions, the files its edit tools
touched, how its start-up context reaches the model. Callers look it up in the
table (``all_agents.get``) and never name an agent (``tests/test_agents_table.py``).
Layer: above ``detect``/``queue`` (it reads a :class:`~agentwrap.detect.profiles.Profile`),
below ``delivery``/``continuity``, ``answers``, ``sessions`` and the hooks'
surface, which all read it. A hook process imports the table: the agent
modules import only :mod:`.base` until a launch registers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .all_agents import AGENTS as AGENTS
    from .all_agents import get as get
    from .base import CONTEXT as CONTEXT
    from .base import NO_HOOKS as NO_HOOKS
    from .base import NOTIFICATION as NOTIFICATION
    from .base import QUESTION as QUESTION
    from .base import Agent as Agent
    from .base import StartContext as StartContext
    from .conversation import ConversationReader as ConversationReader
    from .conversation import Entry as Entry
    from .conversation import EntryKind as EntryKind
    from .conversation import Query as Query
    from .conversation import cut as cut
    from .conversation import tail_lines as tail_lines
    from .launch import ALLOWED_MCP_TOOLS as ALLOWED_MCP_TOOLS
    from .launch import SIGNAL_CHANNEL as SIGNAL_CHANNEL
    from .launch import Launch as Launch
    from .launch import LaunchChannels as LaunchChannels
    from .launch import config_json as config_json
    from .launch import launch_dir as launch_dir
    from .launch import parse_version as parse_version
    from .launch import python_args as python_args
    from .launch import server_env as server_env
    from .launch import server_spec as server_spec
    from .launch import version_at_least as version_at_least

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "all_agents": ("AGENTS", "get"),
    "base": ("CONTEXT", "NOTIFICATION", "NO_HOOKS", "QUESTION", "Agent", "StartContext"),
    "conversation": ("ConversationReader", "Entry", "EntryKind", "Query", "cut", "tail_lines"),
    "launch": (
        "ALLOWED_MCP_TOOLS",
        "SIGNAL_CHANNEL",
        "Launch",
        "LaunchChannels",
        "config_json",
        "launch_dir",
        "parse_version",
        "python_args",
        "server_env",
        "server_spec",
        "version_at_least",
    ),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
