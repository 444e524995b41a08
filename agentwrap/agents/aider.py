"""Aider (``patterns/aider.toml``): no hooks; its ``--read`` file is its native channel.

What Aider gets is the profile's ``[channels] read_file`` option
(:mod:`agentwrap.delivery.read_channel`, registered for any profile that names
one by :func:`agentwrap.sessions.channels.plan`), and its turn end is the
profile's ``[channels] turn_end`` option (:mod:`agentwrap.sessions.turn_end`:
its notifications command marks a file), so its record here is only its name:
its start-up context is typed, and its edits are the watcher's.
"""

from __future__ import annotations

from .base import Agent

NAME = "aider"
AGENT = Agent(name=NAME)

__all__ = ["AGENT", "NAME"]
