"""The first program of a tmux pane: it gives the agent its environment, then becomes it.

The agent must get exactly the environment of the ``agentwrap run`` that
started it (API keys among it), and tmux hands a pane only what its server
holds or what the command line says (``new-session -e KEY=VALUE``). A command
line is public: every local user reads it with ``ps`` for as long as the
process lives, and the tmux server *is* a fork of the client that started it,
with that client's argv for the whole session. So no value is ever put in an
argv: :meth:`agentwrap.terminal.tmux.TmuxTerminal.launch` writes the
environment into a file of its own (0600, created exclusively in the 0700
tmux dir of the runtime dir) and starts this program in the pane as
``python -I -S launcher.py FILE -- ARGV...``; it reads the file, removes it
before anything else can fail, lays the variables over what tmux gave the pane
(tmux's own ``TERM``, ``TMUX``, ``TMUX_PANE``, ``PWD``... are not in the file:
tmux's win, as they did over ``-e``) and ``exec``s the agent, which keeps this
process's pid (the pane's). On any failure it says why on the pane and exits
127: an agent never runs with an environment other than the one asked for.

It imports nothing of agentwrap (``-I -S``: no site, no ``PYTHON*`` of the
environment, a few milliseconds), and the file holds ``KEY=VALUE`` records
separated by NUL bytes, which no variable may hold.
"""

from __future__ import annotations

import os
import sys

#: What the launcher exits with when the agent cannot be started (a shell's "not found").
FAILED = 127


def encode(env: dict[str, str]) -> bytes:
    """The file's bytes for ``env`` (names with ``=`` or a NUL, and values
    with a NUL, cannot be in an environment: left out, as tmux's ``-e`` did)."""
    records = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()
               if k and "=" not in k and "\0" not in k and "\0" not in v]
    return b"\0".join(records)


def decode(data: bytes) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for record in data.split(b"\0"):
        key, sep, value = record.partition(b"=")
        if sep and key:
            out[key] = value
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("agentwrap launcher: usage: launcher.py ENV-FILE -- ARGV...\n")
        return FAILED
    path, command = argv[1], argv[3:]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        sys.stderr.write(f"agentwrap launcher: the environment file is gone: {exc.strerror}\n")
        return FAILED
    try:
        try:
            os.unlink(path)  # first: whatever happens next, the file does not outlive this
        except OSError:
            pass  # the launch removes what is left of its session's files
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            sys.stderr.write("agentwrap launcher: the environment file is not private\n")
            return FAILED
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    env = {**os.environb, **decode(b"".join(chunks))}
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        sys.stderr.write(f"agentwrap launcher: cannot run {command[0]!r}: {exc.strerror}\n")
    return FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
