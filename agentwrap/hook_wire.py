"""The hook wire: what every hook client and the supervisor's hook server agree on.

An agent runs its hook as a new process at every event. Two clients speak
for it to the session's supervisor, one protocol (issue 36: there were two,
with two stores): the native ``agentwrap-hook``
(``agentwrap/terminal/_native/hook.c``, a millisecond to start) and, where
that one is not built, the Python hook's own client
(:mod:`agentwrap.surfaces.hooks.client`); the server is
:mod:`agentwrap.surfaces.hooks.server`. Each constant here is written once;
hook.c repeats the ones it needs as ``#define NAME value`` under the same
names, and ``tests/test_hook_wire.py`` parses hook.c and fails when one of
them says otherwise (or hook.c defines one this module lacks).

The exchange (the server's docstring says why each step is so):

1. the client checks the socket (:func:`trusted_socket`) and the peer
   (``SO_PEERCRED``: this user), sends
   ``VERB AGENT EVENT SESSION PROFILE DEADLINE LENGTH\\n`` and the payload;
2. the server answers :data:`OK` if it runs the hook, else closes: the
   client then runs the hook itself (the Python hook, in its own process);
3. then ``REPLY LENGTH\\n`` and the answer, which the client prints whole
   (with a newline) or not at all.

Only the standard library and :mod:`agentwrap.paths` are imported: a hook
loads this module at every event.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .paths import Paths

#: ``agentwrap-hook PROTOCOL SOCKET AGENT EVENT -- PYTHON-HOOK...``: the client's
#: first argument, so a stale build is never registered (it exits
#: :data:`USAGE_EXIT` naming its own).
PROTOCOL = "1"
#: The request's first word.
VERB = "awhook1"
#: The server's word that it runs the hook (the client never runs it again).
OK = "ok\n"
#: The answer's first word: ``v1 LENGTH\n`` then LENGTH bytes.
REPLY = "v1"
#: Most of a hook's stdin sent (or parsed); a bigger payload (a huge tool
#: output) is drained and the hook answers nothing.
MAX_STDIN = 4 * 1024 * 1024
#: Longest answer a client takes.
MAX_ANSWER = 1 << 20
#: Longest request header line the server reads.
MAX_HEADER = 512
#: Longest ``v1 LENGTH`` line a client waits for before it calls it malformed.
MAX_REPLY_HEAD = 16
#: Longest session, agent, event or profile word in the header (``[A-Za-z0-9._-]``).
MAX_WORD = 80
#: The header's profile when the hook has none.
NO_PROFILE = "-"
#: How long a client waits to connect, send and read :data:`OK`.
ACK_WAIT_MS = 1000
#: How long a client waits for the answer (the agents' hook timeout is 10 s);
#: the header's deadline is this far from the request.
ANSWER_WAIT_MS = 9000
#: Mode bits that let group or others write: a socket, or the dir it is in,
#: with one of them set may be anyone's (the client then asks nothing).
UNSAFE_MODE = 0o022
#: The native client's exit status on a wrong command line (and what it
#: prints names :data:`PROTOCOL`).
USAGE_EXIT = 64
#: The session the hook runs for (set in the hook's command).
SESSION_ENV = "AGENTWRAP_SESSION"
#: The session's profile (set in the hook's command: answer rules match it).
PROFILE_ENV = "AGENTWRAP_PROFILE"
#: ``python``: the hooks are registered as the Python hook even where the
#: native client is built, and the native client asks no server (the Python
#: hook, its second client, does).
CLIENT_ENV = "AGENTWRAP_HOOK_CLIENT"
#: :data:`CLIENT_ENV`'s value that picks the Python client.
CLIENT_PYTHON = "python"
#: Set by the native client when it asked the server and was not taken, for the
#: Python hook it runs then: that one runs the hook itself at once (asking
#: again would only wait out the same refusal).
ASKED_ENV = "AGENTWRAP_HOOK_ASKED"
#: Longest unix socket path (``sun_path`` is 108 bytes on Linux, 104 elsewhere).
MAX_SOCKET_PATH = 100


def hook_socket(paths: Paths, session: str) -> Path | None:
    """The session's hook server socket, in a dir of its own in the private
    runtime dir (one per session: a container given the session's runtime
    dir finds it there); a digest names it when the session's name would make
    the path too long, None when even that is. A container's session (issue 39)
    has its socket in the folder its container mounts (``containers.box``)."""
    boxed = paths.runtime_dir / "box" / session
    if boxed.is_dir() and not boxed.is_symlink():
        path = boxed / "hook.sock"
        return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None
    folder = paths.runtime_dir / "hook-servers"
    path = folder / f"{session}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        import hashlib  # here: a hook loads this module, and needs no digest

        path = folder / f"{hashlib.sha256(session.encode()).hexdigest()[:16]}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def trusted_socket(path: Path) -> bool:
    """``path`` is a socket of this user (the effective uid) in a dir of this
    user, neither writable by anyone else: what a client checks before it
    sends its payload or believes an answer (``trusted_path`` in hook.c)."""
    try:
        sock, folder = os.lstat(path), os.stat(path.parent)
    except OSError:
        return False
    uid = os.geteuid()
    return (stat.S_ISSOCK(sock.st_mode) and stat.S_ISDIR(folder.st_mode)
            and sock.st_uid == folder.st_uid == uid
            and not (sock.st_mode | folder.st_mode) & UNSAFE_MODE)


def plain(word: str) -> bool:
    """A word fit for the request header: 1-:data:`MAX_WORD` of ``[A-Za-z0-9._-]``
    (``plain`` in hook.c)."""
    return 0 < len(word) <= MAX_WORD and all(
        c.isascii() and (c.isalnum() or c in "._-") for c in word)


__all__ = [
    "ACK_WAIT_MS", "ANSWER_WAIT_MS", "ASKED_ENV", "CLIENT_ENV", "CLIENT_PYTHON", "MAX_ANSWER",
    "MAX_HEADER", "MAX_REPLY_HEAD", "MAX_SOCKET_PATH", "MAX_STDIN", "MAX_WORD", "NO_PROFILE", "OK",
    "PROFILE_ENV", "PROTOCOL", "REPLY", "SESSION_ENV", "UNSAFE_MODE", "USAGE_EXIT", "VERB",
    "hook_socket", "plain", "trusted_socket",
]
