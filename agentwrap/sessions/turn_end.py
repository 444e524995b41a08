"""A turn's end the agent announces by running a command (Aider's bell).

Aider 0.86.2 streams its reply with no busy marker, so from the screen alone a
pause and an end look the same: its ``ready`` waited for the profile's
``quiet_ms`` (1 s) of stillness after the prompt was drawn (issue 37: +0.90 s
median after the reply, every other agent about -0.2 s). But Aider itself
knows: ``InputOutput.ring_bell`` (``aider/io.py``) runs its
``--notifications-command`` once after each model reply, at the first input it
asks for next, synchronously (``subprocess.run(cmd, shell=True)``) right after
the rule above the prompt and before ``prompt_toolkit`` draws the prompt (or
before a y/n question, whose dialog the detector reads first anyway).

So agentwrap launches Aider with ``--notifications --notifications-command
CMD``, where CMD appends one byte to a file in the session's launch dir
(:func:`command`; the dir is 0700, the file made empty and 0600 before the
launch). The command is a fixed string: the file's path shell-quoted, no
secret, nothing of any message. :class:`TurnEndMark` reads the file's size and
mtime as the detector's :class:`~agentwrap.detect.detector.HookSource`: a
``ready`` with ``box_follows``, so it counts only once the prompt is on screen
(a ready rule matches) and, until then, the screen decides (busy). The
detector's rules for a hook's turn end apply as for any hook: text in the box
makes it ``draft``, text seen since voids it, a screen changed more than
:data:`~agentwrap.detect.detector.HOOK_GRACE_MS` after it voids it.

The person's own notifications are never replaced: when their command line,
environment or any ``.aider.conf.yml`` Aider reads sets ``notifications`` or
``notifications-command``, nothing is registered (:func:`own_setting`) and the
quiet window decides as before; the session's notes say why.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..detect.detector import HookReading

#: The file in the launch dir (:func:`agentwrap.sessions.channels.launch_dir`) the command marks.
TURN_END_FILE = "turn-end"

#: The channel's name in the session's options.
TURN_END_CHANNEL = "turn-end"

# argparse takes a long option's unique prefix too (``--notifications-c``)
_OWN_OPTION = re.compile(r"\A--(?:no-)?notif[a-z-]*(?:=|\Z)")
_OWN_ENV = ("AIDER_NOTIFICATIONS", "AIDER_NOTIFICATIONS_COMMAND")
_OWN_KEY = re.compile(r"^\s*notifications(?:-command)?\s*:", re.MULTILINE)
_CONF = ".aider.conf.yml"


def command(path: Path) -> str:
    """The shell command the agent runs at a turn's end: one byte appended to
    ``path`` by the shell's own ``printf`` (no process to start). Silent and
    successful whatever happens (Aider prints a warning into the session for a
    failing command with output on stderr)."""
    return f"printf . 2>/dev/null >>{shlex.quote(str(path))} || :"


def _git_root(cwd: Path) -> Path | None:
    for d in (cwd, *cwd.parents):
        if (d / ".git").exists():
            return d
    return None


def own_setting(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> str | None:
    """Where the person set Aider's notifications themselves (their argv, the
    environment, a config file Aider reads: ``--config``, the git root's, the
    working dir's, the home dir's), or None."""
    args = list(argv[1:])
    for a in args:
        if _OWN_OPTION.match(a):
            return f"the command line sets {a.split('=', 1)[0]}"
    for var in _OWN_ENV:
        if var in env:
            return f"the environment sets {var}"
    files: list[Path] = []
    for i, a in enumerate(args):
        if a in ("-c", "--config") and i + 1 < len(args):
            files.append(Path(args[i + 1]))
        elif a.startswith("--config="):
            files.append(Path(a.split("=", 1)[1]))
    here = Path(cwd) if cwd else None
    root = _git_root(here) if here is not None else None
    files += [d / _CONF for d in (root, here) if d is not None]
    home = env.get("HOME")  # the agent's, as it will read ~
    if home:
        files.append(Path(home) / _CONF)
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _OWN_KEY.search(text):
            return f"{f} sets notifications"
    return None


class TurnEndMark:
    """The detector's view of the turn-end file (a
    :class:`~agentwrap.detect.detector.HookSource`): ``ready`` as old as the
    file's last mark, or None before the first. Its (size, mtime) is read with
    one ``stat`` per look."""

    def __init__(self, path: Path, agent: str,
                 wall: Callable[[], float] = time.time) -> None:
        self.path, self.agent, self.wall = path, agent, wall

    def read(self) -> HookReading | None:
        from ..detect.detector import HookReading
        from ..detect.states import State

        try:
            st = os.stat(self.path)
        except OSError:
            return None
        if st.st_size == 0:
            return None
        return HookReading(
            State.READY, f"{self.agent} ran its notifications command: the reply is done",
            max(0.0, self.wall() - st.st_mtime_ns / 1e9), box_follows=True)


__all__ = ["TURN_END_CHANNEL", "TURN_END_FILE", "TurnEndMark", "command", "own_setting"]
