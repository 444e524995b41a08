"""A session whose agent runs in a container (issue 39): its launch, stop and end.

The container itself (engine, mounts, lifecycle) is :mod:`agentwrap.containers`;
this module ties it into a session: :func:`launch` gets or starts the container,
decides whether the agent's hooks can reach the supervisor from inside (the box
folder mounted, the launch files visible), registers them with the in-container
paths, and gives the pane's ``exec`` line and what the session's record keeps;
:func:`box_of` reads that back; :func:`stop_inside` ends the agent's process group
inside (``agentwrap stop``); :func:`finish` says why the session ended when the
container stopped, and removes the container it started (unless kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from ..config import Config
from ..containers.box import (
    HOOK_CLIENT,
    HOOK_SOCKET,
    INSIDE,
    Box,
    box_dir,
    box_mounts,
    client_missing,
    hooks_reach,
    prepare_box,
    remove_box,
    save_mounts,
)
from ..containers.engine import Engine, find_engine
from ..errors import ContainerProblem, PathNotMounted
from ..paths import Paths
from ..session_options import SessionOptions


@dataclass
class BoxedLaunch:
    """What :func:`open_box` found: the box, where the agent works inside, whether
    its hooks reach the supervisor, and why not."""

    box: Box
    workdir: str | None
    hooks: bool
    notes: list[str] = field(default_factory=list)

    @property
    def inside(self) -> tuple[PurePosixPath, PurePosixPath] | None:
        """The hook client and socket as the agent sees them (None: no hooks)."""
        return (INSIDE / HOOK_CLIENT, INSIDE / HOOK_SOCKET) if self.hooks else None

    def options(self) -> dict[str, object]:
        return {"container": self.box.container, "container_engine": self.box.engine.program,
                "container_owned": self.box.owned, "container_keep": self.box.keep}


def open_box(paths: Paths, cfg: Config, name: str, cwd: Path, launch: Path, *,
             container: str | None, image: str | None, keep: bool,
             env: Mapping[str, str]) -> BoxedLaunch:
    """The session's container: ``image`` started for it, or ``container`` (running)."""
    engine = find_engine(cfg.container, env.get("PATH"))
    prepare_box(paths, name)
    try:
        if image:
            box = Box.start(engine, image, name, cfg.container.run_args,
                            box_mounts(paths, name, cwd, launch), keep=keep)
        else:
            assert container is not None
            if not engine.running(container):
                raise ContainerProblem(f"container {container!r} is not running",
                                       hint=f"`{engine.kind} start {container}`, or"
                                       " `agentwrap run --image IMAGE` to start one for the session")
            box = Box(engine, container)
        mounts = box.mounts()
        if "HOME" in cfg.container.env and env.get("HOME", "").startswith("/"):
            mounts = replace(mounts, home=PurePosixPath(env["HOME"]))  # handed in by name
        save_mounts(launch, mounts)  # the hooks translate the agent's paths through them
    except BaseException:
        remove_box(paths, name)
        raise
    notes: list[str] = []
    try:
        workdir: str | None = mounts.to_container(cwd)
    except PathNotMounted:
        workdir = None
        notes.append(f"the project {cwd} is not mounted in {box.container}: the agent works"
                     " in the container's own directory")
    hooks = hooks_reach(mounts, paths, name) and mounts.holds([launch])
    missing = client_missing(paths, name)
    if not hooks:
        notes.append(f"hooks: not registered: {box.container} does not mount the session's box"
                     f" folder at {INSIDE} (start it with -v {box_dir(paths, name)}:{INSIDE}"
                     f" -v {launch}:{launch})")
    elif missing:
        hooks = False
        notes.append(f"hooks: not registered: {missing}")
    return BoxedLaunch(box, workdir, hooks, notes)


def probe_version(boxed: BoxedLaunch, argv0: str, arg: str) -> str | None:
    """The agent's version, asked inside the container (its CLI is the container's)."""
    from ..agents.launch import parse_version

    try:
        done = boxed.box.engine.run(["exec", boxed.box.container, argv0, arg], check=False)
    except ContainerProblem:
        return None
    found = parse_version(done.stdout or done.stderr or "") if done.returncode == 0 else None
    return ".".join(str(n) for n in found) if found else None


def exec_line(boxed: BoxedLaunch, name: str, argv: list[str], env_names: list[str]) -> list[str]:
    return boxed.box.exec_argv(name, argv, env_names, boxed.workdir)


def box_of(options: SessionOptions) -> Box | None:
    """The box a session's record names (None: its agent runs on the host)."""
    if not options.container or not options.container_engine:
        return None
    program = options.container_engine
    return Box(Engine(program, Path(program).name), options.container,
               owned=options.container_owned, keep=options.container_keep)


def stop_inside(options: SessionOptions, name: str) -> None:
    """``stop``: the agent's process group inside ends (killing ``exec`` would not end it)."""
    box = box_of(options)
    if box is not None:
        box.stop_agent(name)


def end_reason(options: SessionOptions) -> str | None:
    """Why the session ended, if its container is what stopped (the engine's
    word: one ``inspect``), before anything is removed."""
    box = box_of(options)
    return None if box is None else box.end_reason()


def finish(paths: Paths, options: SessionOptions, name: str) -> None:
    """The session ended: the container it started removed (unless kept) and
    the box folder gone. Last of a session's end: removing a container takes
    the engine seconds at load, and the session's messages end first."""
    box = box_of(options)
    if box is None:
        return
    box.finish()
    remove_box(paths, name)


__all__ = ["BoxedLaunch", "box_of", "end_reason", "exec_line", "finish", "open_box", "probe_version",
           "stop_inside"]
