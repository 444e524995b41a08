"""OpenCode (``patterns/opencode.toml``): agentwrap's own JS plugin, named by ``OPENCODE_CONFIG``.

No command hooks, only JS plugins, so agentwrap writes its own
(agentwrap/agents/opencode_plugin.js, the hook commands filled in) in the
launch dir and names it in an extra config, ``OPENCODE_CONFIG`` (1.18.33
merges that file over the person's global config and under the project's; its
``plugin`` entries add to theirs). Not ``OPENCODE_CONFIG_DIR`` (OpenCode
installs ``@opencode-ai/plugin`` into every config dir) nor
``OPENCODE_CONFIG_CONTENT`` (it outranks the project's config). A variable the
person set is left alone: then nothing is registered. The plugin runs
agentwrap's hook at a prompt (``chat.message``), after each tool call
(``tool.execute.after``: the hand-over, appended to the tool's result), at the
turn's end (``session.idle``) and when a permission or question dialog opens.
Cost: with any plugin configured, OpenCode waits at start for its own install
of ``@opencode-ai/plugin`` into ``~/.config/opencode`` (which it starts at
every launch anyway) until that dir has it; offline, npm's retries make that
about a minute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from .base import CONTEXT, TYPED, Agent, StartContext

if TYPE_CHECKING:
    from .launch import Launch

NAME = "opencode"
CONFIG_ENV = "OPENCODE_CONFIG"
#: agentwrap's OpenCode plugin, filled in per launch (its COMMANDS).
PLUGIN = Path(__file__).with_name("opencode_plugin.js")
COMMANDS_MARK = "/*AGENTWRAP_COMMANDS*/ {}"


def register(launch: Launch) -> None:
    """agentwrap's plugin in the launch dir, named by an extra config in ``OPENCODE_CONFIG``."""
    from ..paths import private_dir, write_private

    out = launch.out
    if not launch.hooks:
        return
    if launch.env.get(CONFIG_ENV):
        out.notes.append(f"hooks: not registered for OpenCode: {CONFIG_ENV} is already"
                         " set (your own config file is left alone)")
        return
    folder = launch.folder / "opencode"
    commands = {e: launch.command(e) for e in AGENT.hook_events}
    source = PLUGIN.read_text(encoding="utf-8")
    if COMMANDS_MARK not in source:  # a broken install: say so, register nothing
        out.notes.append(f"hooks: not registered for OpenCode: {PLUGIN} has no"
                         " commands mark")
        return
    plugin = folder / "agentwrap-plugin.js"
    if not out.dry_run:
        private_dir(launch.folder, repair=True)
        private_dir(folder, repair=True)
        write_private(plugin, source.replace(COMMANDS_MARK, json.dumps(
            commands, indent=2, ensure_ascii=True)).encode("utf-8"))
    config = launch.write_json(folder / "opencode.json", {"plugin": [plugin.as_uri()]})
    out.files += [plugin, config]
    out.env[CONFIG_ENV] = str(config)
    out.channels.insert(0, "hooks")


AGENT = Agent(
    name=NAME,
    hook_events=("tool.execute.after", "chat.message", "session.idle", "permission.asked",
                 "question.asked"),
    events={  # agentwrap's own plugin's names: OpenCode's plugin events (1.18.33)
        "chat.message": "prompt_submitted",  # a person's prompt goes to the model
        "tool.execute.after": CONTEXT,  # the plugin appends it to the tool's result
        "session.idle": "turn_end",  # no reply in it: no ACKs from it
        "permission.asked": "permission_prompt",  # its permission dialog opens
        "question.asked": "permission_prompt",  # its question tool's dialog opens
    },
    flat_context="additionalContext",
    start_context=StartContext("typed",
                               f"{TYPED}: agentwrap's plugin has no session-start event"),
    register=register,
)

__all__ = ["AGENT", "COMMANDS_MARK", "CONFIG_ENV", "NAME", "PLUGIN", "register"]
