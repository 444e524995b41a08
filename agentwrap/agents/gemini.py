"""Gemini CLI (``patterns/gemini.toml``): a system-defaults settings file.

``GEMINI_CLI_SYSTEM_DEFAULTS_PATH`` naming a settings file with ``hooks``
(timeouts in milliseconds) and ``mcpServers``. Gemini reads that file only if
it and every directory above it are root's and not writable by group or
others, so this works only when agentwrap runs as root (the file then goes in
the state dir if that chain is root-private, else in ``/run/agentwrap``);
otherwise Gemini gets nothing and the session's notes say why. A variable the
person set themselves is left alone. Gemini waits for every hook, so only the
events that give what nothing else does are registered: not ``BeforeAgent``,
which held every prompt's request back (:data:`SKIPPED` says the trade). Its
permission requests come only as a ``ToolPermission`` notification
(``details``: text, never an answer).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, NOTIFICATION, SEEN, Agent, StartContext

if TYPE_CHECKING:
    from ..paths import Paths
    from .launch import Launch

NAME = "gemini"
#: Gemini events agentwrap understands but does not register (issue 27).
#: Gemini CLI 0.61 waits for every hook (no async hooks) and shows each as
#: "Executing Hook: <command>" with a spinner for at least 3 s
#: (``WARNING_PROMPT_DURATION_MS``), redrawing its screen all that time.
#: ``BeforeAgent`` runs after Enter and before the model request, so every
#: prompt paid a hook process (Enter -> request 1.27x ``--no-channels``, and
#: Enter -> dialog with it); what it gave is had elsewhere: ``busy`` from the
#: screen (the box empties, "Thinking..." follows; a turn end's ``ready`` no
#: longer holds once text was typed and sent since, agentwrap.detect.detector),
#: the prompt for the handoff notes from ``AfterAgent`` (which carries it), the
#: start's hand-over counted delivered at the first ``AfterTool`` or
#: ``AfterAgent``. What stays is what only a hook gives: ``SessionStart`` (the
#: start's context), ``AfterTool`` (the hand-over between tool calls),
#: ``AfterAgent`` (the turn's end at once, its ACKs; it runs as the turn ends,
#: not on the way to a request or a dialog) and ``Notification`` (the exact
#: command of a permission dialog, and ``waiting_input`` before it is drawn;
#: its dialog waits for it: the price of the exact text).
SKIPPED = ("BeforeAgent",)
DEFAULTS_ENV = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
#: Where a root-owned Gemini settings file goes when the state dir is not root-private.
ROOT_RUN_DIR = Path("/run/agentwrap")


def root_private_chain(path: Path) -> str | None:
    """None when ``path`` and every dir above it are root's and not writable
    by group or others (what Gemini asks of a system settings file), else why not."""
    p = Path(os.path.realpath(path))
    for part in [p, *p.parents]:
        try:
            st = os.stat(part)
        except OSError as exc:
            return f"{part}: {exc.strerror}"
        if st.st_uid != 0:
            return f"{part} is owned by uid {st.st_uid}, not root"
        if stat.S_IMODE(st.st_mode) & 0o022:
            return f"{part} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def root_run_dir(paths: Paths, session: str) -> Path:
    """The session's dir under :data:`ROOT_RUN_DIR` (a root run whose state dir is not root-private)."""
    digest = hashlib.sha256(str(paths.state_dir).encode()).hexdigest()[:12]
    return ROOT_RUN_DIR / f"{digest}-{session}"


def defaults_dir(paths: Paths, session: str, euid: int | None = None) -> tuple[Path | None, str]:
    """A dir for Gemini's system-defaults file that Gemini will read, or
    (None, why not)."""
    from .launch import launch_dir

    if (os.geteuid() if euid is None else euid) != 0:
        return None, ("Gemini reads a system-defaults file only if root owns it and every dir"
                      " above it; agentwrap does not run as root")
    own = launch_dir(paths, session)
    why = root_private_chain(paths.state_dir)
    if why is None:
        return own, ""
    alt = root_run_dir(paths, session)
    why_run = root_private_chain(ROOT_RUN_DIR.parent)
    if why_run is not None:
        return None, f"no root-private dir for Gemini's settings file ({why}; {why_run})"
    return alt, ""


def register(launch: Launch) -> None:
    """The system-defaults file with agentwrap's hooks and MCP server, if Gemini will read it."""
    from ..paths import private_dir
    from .launch import ALLOWED_MCP_TOOLS, HOOK_TIMEOUT_S, SERVER_NAME, hook_group

    out = launch.out
    if launch.env.get(DEFAULTS_ENV):
        out.notes.append(f"hooks, mcp: not registered for Gemini: {DEFAULTS_ENV} is"
                         " already set (your own system defaults are left alone)")
        return
    folder, why = defaults_dir(launch.paths, launch.session, launch.euid)
    if folder is None:
        out.notes.append(f"hooks, mcp: not registered for Gemini: {why}")
        return
    settings: dict[str, Any] = {}
    if launch.hooks:
        settings["hooksConfig"] = {"enabled": True}
        settings["hooks"] = {
            e: hook_group(launch.command(e, named=False), HOOK_TIMEOUT_S * 1000)
            for e in AGENT.hook_events
        }
    if launch.mcp:
        spec = launch.mcp_spec()
        settings["mcpServers"] = {
            SERVER_NAME: {"command": spec["command"], "args": spec["args"], "env": spec["env"]}
        }
        # the read-only tools run without Gemini's confirmation (send_message still asks)
        settings["tools"] = {"allowed": [f"mcp_{SERVER_NAME}_{t}" for t in ALLOWED_MCP_TOOLS]}
    if not settings:
        return
    if folder.parent == ROOT_RUN_DIR and not out.dry_run:
        private_dir(ROOT_RUN_DIR, repair=True)
    path = launch.write_json(folder / "gemini-system-defaults.json", settings)
    unusable = None if out.dry_run else root_private_chain(path)
    if unusable is not None:  # e.g. a mount made it unusable: say so, register nothing
        out.notes.append(f"hooks, mcp: not registered for Gemini: {unusable}")
        return
    out.files.append(path)
    out.env[DEFAULTS_ENV] = str(path)
    out.channels += [c for c, on in (("hooks", launch.hooks), ("mcp", launch.mcp)) if on]


AGENT = Agent(
    name=NAME,
    hook_events=("SessionStart", "AfterTool", "AfterAgent", "Notification"),  # not SKIPPED
    events={
        "SessionStart": CONTEXT,
        "AfterTool": CONTEXT,
        "BeforeAgent": "prompt_submitted",
        "AfterAgent": "turn_end",
        "Notification": NOTIFICATION,
    },
    # its confirmation's ``details.type`` -> the tool its dialog names, and the
    # field that holds what the screen shows after it
    notification_details={"exec": ("Shell", "command"), "edit": ("Edit", "filePath")},
    edit_tools={"write_file": ("file_path", "absolute_path"),
                "replace": ("file_path", "absolute_path")},
    edits_by_hook=True,
    start_context=StartContext("hook", SEEN),
    register=register,
    outside_dir=root_run_dir,
)

__all__ = ["AGENT", "DEFAULTS_ENV", "NAME", "ROOT_RUN_DIR", "SKIPPED", "defaults_dir",
           "register", "root_private_chain", "root_run_dir"]
