"""The table of agents: the one place that lists them (pre-commit's ``all_languages.py``).

Adding an agent is its module here (an :class:`~agentwrap.agents.base.Agent`
named ``AGENT``), one row below, and its profile (``patterns/<name>.toml``,
whose ``[channels] hooks``/``mcp`` name it; ``CHANNEL_KINDS`` of
:mod:`agentwrap.detect.profiles` is the profile list that admits the name).
"""

from __future__ import annotations

from . import aider, claude, cline, codex, copilot, gemini, kimi, opencode, pi, qwen
from .base import Agent

#: name -> agent, every agent agentwrap knows.
AGENTS: dict[str, Agent] = {a.name: a for a in (
    claude.AGENT,
    codex.AGENT,
    gemini.AGENT,
    qwen.AGENT,
    copilot.AGENT,
    opencode.AGENT,
    cline.AGENT,
    kimi.AGENT,
    aider.AGENT,
    pi.AGENT,
)}


def get(name: str | None) -> Agent | None:
    """The agent of that name (a profile's ``[channels] hooks``, a hook's AGENT word), or None."""
    return AGENTS.get(name or "")


__all__ = ["AGENTS", "get"]
