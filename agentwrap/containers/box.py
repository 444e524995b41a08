"""A session's box: what of agentwrap its container sees, and the container's lifecycle.

**What is mounted.** Only the session's own box folder, ``<runtime>/box/<session>/``
(0700), at :data:`INSIDE` (``/run/agentwrap``): its hook socket (the supervisor's hook
server binds there for a boxed session: :func:`agentwrap.hook_wire.hook_socket`),
the native hook client copied in (the statically linked build where there is one, so
it runs on any libc), and the answer folder (mounted at ``/run/agentwrap/answers``).
Never the whole runtime dir: other sessions' sockets, the event bus, the API token.
``run --image`` mounts it; a container given by ``--container`` must have been
started with it (``-v BOX:/run/agentwrap``), else its agent gets no hooks (a note says
why) and is typed to, as any agent without hooks.

**The agent's line.** The pane runs ``ENGINE exec -it --detach-keys "" [-w CWD] -e
NAME... CONTAINER sh -c 'echo $$ >PIDFILE; exec "$@"' agentwrap AGENT...``: the
engine's ``exec`` returns the agent's own exit status (``exec`` keeps the pid and
the status), variables go by name only (values from the engine's environment, never
argv), and the pid file inside names the agent's process group, which ``stop`` ends
(killing the ``exec`` client would not: the engine's monitor owns the exec's pty).

**The end.** :meth:`Box.end_reason` says why the session ended when the container
is what stopped (killed, stopped, its engine gone); a container the session started
(``--image``) is removed then, unless ``--keep``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import ContainerProblem, PathNotMounted
from ..paths import Paths, check_session_name, private_dir
from ..terminal.relay_helper import BINARY as RELAY_BINARY
from .engine import Engine
from .mounts import Mounts

#: Where a session's box folder is seen inside its container.
INSIDE = PurePosixPath("/run/agentwrap")
HOOK_CLIENT = "agentwrap-hook"
HOOK_SOCKET = "hook.sock"
ANSWERS = "answers"
#: The native hook clients, the static one first (hatch_build.py builds both).
CLIENT_BUILDS = (RELAY_BINARY.parent / "agentwrap-hook-static", RELAY_BINARY.parent / "agentwrap-hook")
#: The container's mounts as the launch read them, beside the session's launch folder
#: (never in it: the container mounts that folder writable, for the agents that write
#: in the private home it holds, Qwen's; the mounts must stay out of the agent's reach:
#: the hooks translate the agent's paths through them). :func:`mounts_file`.
MOUNTS_FILE = "container-mounts.json"
#: How long the end looks for the container's own end (see :meth:`Box.end_reason`).
SETTLE_S = 3.0
#: How long ``stop`` lets the agent's group end on SIGTERM before SIGKILL.
STOP_GRACE_S = 3


def box_dir(paths: Paths, session: str) -> Path:
    """The session's box folder on the host (see the module doc)."""
    return paths.runtime_dir / "box" / check_session_name(session)


def pid_file(session: str) -> str:
    """Inside the container: the agent's pid (its process group's leader)."""
    return f"/tmp/agentwrap-{check_session_name(session)}.pid"


def prepare_box(paths: Paths, session: str) -> Path:
    """The box folder made anew (0700), the hook client copied in, the answer folder made."""
    folder = box_dir(paths, session)
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)  # a previous launch's of this name
    private_dir(folder.parent, repair=True)
    private_dir(folder, repair=True)
    for build in CLIENT_BUILDS:
        if build.is_file() and os.access(build, os.X_OK):
            shutil.copy2(build, folder / HOOK_CLIENT)
            os.chmod(folder / HOOK_CLIENT, 0o755)
            break
    private_dir(paths.answers_root, repair=True)
    private_dir(paths.answers_dir(session), repair=True)
    return folder


def client_missing(paths: Paths, session: str) -> str | None:
    """Why the agent's hooks could not run inside (None: they can): the box
    folder holds no native hook client (neither build was made: no C compiler,
    or no ``libc.a`` for the static one). The hooks are then not registered at
    all, so the agent is typed to: hook commands naming a client that is not
    there would fail at every event. The Python hook is no fallback inside, even
    in an image with python3: it is ``python -m agentwrap hook``, which needs
    agentwrap installed in the image and the session's store (the state dir),
    and the container is given neither (only the box folder: mounting the state
    dir would hand the agent every session's store and the API token)."""
    client = box_dir(paths, session) / HOOK_CLIENT
    if client.is_file() and not client.is_symlink() and os.access(client, os.X_OK):
        return None
    return (f"no native hook client was built ({CLIENT_BUILDS[0].name}: `apt-get install"
            " libc6-dev` and reinstall agentwrap); the Python hook cannot stand in inside a"
            " container: it is `python -m agentwrap hook`, which needs agentwrap in the image"
            " and the session's store, and the container sees only the session's box folder"
            " (never the state dir, other sessions' sockets or the API token); the agent is"
            " typed to, without hooks")


def remove_box(paths: Paths, session: str) -> None:
    """The session's box folder gone (its end, or a launch that failed)."""
    shutil.rmtree(box_dir(paths, session), ignore_errors=True)


def box_mounts(paths: Paths, session: str, cwd: Path, launch: Path) -> list[str]:
    """The ``-v`` flags of a container started for ``session``: the project at its
    own path, the box folder, the answer folder, and the launch files (at their own
    path: the agent's argv and environment name them; writable, for an agent writes
    in the private home they hold: Qwen Code its ``output-language.md`` at every
    first start, which a read-only mount made a crash. The container's mounts are
    kept beside that folder, never in it: :func:`mounts_file`)."""
    folder = box_dir(paths, session)
    private_dir(launch, repair=True)
    return ["-v", f"{cwd}:{cwd}", "-v", f"{folder}:{INSIDE}",
            "-v", f"{paths.answers_dir(session)}:{INSIDE / ANSWERS}",
            "-v", f"{launch}:{launch}"]


def mounts_file(launch: Path) -> Path:
    """Where a session's launch keeps its container's mounts (see :data:`MOUNTS_FILE`):
    ``<state>/launch/NAME.container-mounts.json``, beside the launch folder."""
    return launch.parent / f"{launch.name}.{MOUNTS_FILE}"


def save_mounts(launch: Path, mounts: Mounts) -> None:
    """Keep the container's mounts for the hooks (see :data:`MOUNTS_FILE`)."""
    private_dir(launch, repair=True)
    path = mounts_file(launch)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(mounts.to_json())
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def saved_mounts(launch: Path) -> Mounts | None:
    """The mounts a boxed session's launch kept; None for a session on the host
    (no file). A file that is not a regular one, or unreadable, is refused:
    a boxed session's paths are never taken as the host's untranslated."""
    path = mounts_file(launch)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise PathNotMounted(f"{path} is not a regular file: the container's mounts are unknown")
    try:
        return Mounts.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PathNotMounted(f"{path}: the container's mounts are unreadable ({exc})") from None


def hooks_reach(mounts: Mounts, paths: Paths, session: str) -> bool:
    """Whether the container mounts this session's box folder at :data:`INSIDE`."""
    try:
        return mounts.to_container(box_dir(paths, session) / HOOK_SOCKET) == str(INSIDE / HOOK_SOCKET)
    except PathNotMounted:
        return False


def write_guard(program: str, container: str) -> Callable[[Path], str]:
    """For a file agentwrap writes for the container's agent (the instruction-file
    fallback, issue 39): its path inside, or :class:`PathNotMounted` when no
    writable mount holds it (the container's mounts read once, on first use)."""
    seen: list[Mounts] = []

    def inside(path: Path) -> str:
        if not seen:
            try:
                seen.append(Box(Engine(program, Path(program).name), container).mounts())
            except ContainerProblem as exc:
                raise PathNotMounted(f"{path}: the mounts of container {container} are unknown"
                                     f" ({exc.message})") from None
        return seen[0].to_container(path, write=True)

    return inside


@dataclass(frozen=True)
class Box:
    """One session's container: ``owned`` when the session started it (``--image``)."""

    engine: Engine
    container: str
    owned: bool = False
    keep: bool = False

    @classmethod
    def start(cls, engine: Engine, image: str, session: str, run_args: Sequence[str],
              mounts: Sequence[str], *, keep: bool = False) -> Box:
        """``ENGINE run -d --init`` a container for ``session`` (its name ``agentwrap-SESSION``)."""
        name = f"agentwrap-{check_session_name(session)}"
        if engine.inspect(name) is not None:
            raise ContainerProblem(f"a container named {name} already exists",
                                   hint=f"`{engine.kind} rm -f {name}` (a kept one), or pick"
                                   " another session name with --name")
        engine.run(["run", "-d", "--init", "--name", name, *mounts, *run_args, image,
                    "sleep", "infinity"], timeout=300)
        return cls(engine, name, owned=True, keep=keep)

    def exec_argv(self, session: str, argv: Sequence[str], env_names: Sequence[str],
                  workdir: str | None) -> list[str]:
        """The pane's command (see the module doc)."""
        line = ["exec", "-it", "--detach-keys", ""]
        if workdir:
            line += ["-w", workdir]
        for name in sorted(set(env_names)):
            line += ["-e", name]
        wrapper = f"echo $$ >{shlex.quote(pid_file(session))}; exec \"$@\""
        return [self.engine.program, *line, self.container, "sh", "-c", wrapper, "agentwrap",
                *argv]

    def mounts(self) -> Mounts:
        info = self.engine.inspect(self.container)
        if info is None:
            raise ContainerProblem(f"no container named {self.container}")
        return Mounts.from_inspect(self.container, info)

    def stop_agent(self, session: str) -> None:
        """End the agent's process group inside: SIGTERM, then SIGKILL after a grace."""
        script = (f"p=$(cat {shlex.quote(pid_file(session))} 2>/dev/null) || exit 0; "
                  f'kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; '
                  f"i=0; while kill -0 \"$p\" 2>/dev/null && [ $i -lt {STOP_GRACE_S * 10} ]; do"
                  " sleep 0.1; i=$((i+1)); done; "
                  'kill -KILL -- "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; exit 0')
        with contextlib.suppress(ContainerProblem):
            self.engine.run(["exec", self.container, "sh", "-c", script], check=False,
                            timeout=STOP_GRACE_S + 30)

    def end_reason(self, settle_s: float = SETTLE_S) -> str | None:
        """Why the session ended if its container is what stopped, else None. The
        ``exec`` client ends as the container is killed, before the engine records
        the container's end: a container still running is looked at again, for at
        most ``settle_s``."""
        deadline = time.monotonic() + settle_s
        while True:
            try:
                info = self.engine.inspect(self.container)
            except ContainerProblem as exc:
                return (f"container {self.container}: its engine did not answer ({exc.message});"
                        " the container may still run")
            if info is None:
                return f"container {self.container} is gone"
            state = info.get("State") or {}
            if not state.get("Running") or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if state.get("Running"):
            return None
        said = state.get("Status") or "stopped"
        code = state.get("ExitCode")
        oom = ", out of memory" if state.get("OOMKilled") else ""
        return f"container {self.container} {said} (exit code {code}{oom})"

    def finish(self) -> None:
        """The session ended: the container it started goes, unless kept."""
        if self.owned and not self.keep:
            with contextlib.suppress(ContainerProblem):
                self.engine.run(self.engine.remove_args(self.container), check=False,
                                timeout=120)


__all__ = ["ANSWERS", "HOOK_CLIENT", "HOOK_SOCKET", "INSIDE", "MOUNTS_FILE", "SETTLE_S",
           "STOP_GRACE_S", "Box", "box_dir", "box_mounts", "client_missing", "hooks_reach", "mounts_file", "pid_file", "prepare_box",
           "remove_box", "save_mounts", "saved_mounts", "write_guard"]
