"""Starting, adopting, attaching to and stopping supervised agent sessions.

Process model (answers to the design notes):

* tmux backend: ``agentwrap run`` registers the session, starts the agent on
  a tmux server of agentwrap's own, one per session (its socket is in the
  record), with the caller's full environment (``-e``),
  spawns a *detached* supervisor process (new session id, logs to the state
  dir) and then attaches the person's terminal. Closing the terminal only
  detaches; the supervisor keeps delivering. If a supervisor dies,
  ``agentwrap adopt NAME`` (or ``attach``) starts a new one on the running
  tmux session; in-flight messages resume from their write-ahead phase, so
  nothing is typed twice.
* pty backend: the ``run`` process is the supervisor and owns the agent's
  pty; the bytes themselves are copied by its child ``agentwrap-relay``
  (C, built at install) or, without it, by a relay loop in this process.
  Its lifetime is the agent's.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, load_config
from ..datagram import send, wake
from ..delivery.fallback import context_file, prepare_context_file
from ..detect.profiles import Profile, load_profile, profile_for_command
from ..errors import (
    AgentNotFound,
    AgentwrapError,
    InvalidRunOption,
    ProfileError,
    SessionNameTaken,
    SessionNotRunning,
)
from ..hook_wire import SESSION_ENV
from ..message import Message, NewMessage, Priority, Source
from ..paths import Paths, check_session_name, open_private_append, private_dir
from ..session_options import SessionOptions, timeout_policy
from ..terminal.proctree import alive, descendants, kill_pids, marked
from ..terminal.tmux import TmuxTerminal, remove_idle_socket, server_for, tmux_binary
from .compose import Companion, build_supervisor, start_companions
from .live import tmux_socket_of
from .registry import Registry, SessionRecord, exit_reason, open_registry
from .supervisor import Supervisor, log_to

if TYPE_CHECKING:  # the pty backend (pyte, ptyprocess) is imported only to run one
    from collections.abc import Sequence

    import libtmux

    from ..continuity.launch import Handoff
    from .boxed import BoxedLaunch


@dataclass
class RunOptions:
    argv: list[str]
    name: str | None = None
    profile: str | None = None
    backend: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    detach: bool = False
    trust_folder: bool | None = None
    require_ack: bool | None = None
    context_files: list[Path] = field(default_factory=list)
    cols: int | None = None
    rows: int | None = None
    channels: bool = True  # register the agent's native hooks and MCP server (run --no-channels)
    continuity: bool = True  # hand over the previous session's handoff (run --no-continuity)
    on_timeout: str | None = None  # run --on-timeout: deny/leave (None: [answers] decides)
    answer_timeout_s: float | None = None  # run --answer-timeout (None: [answers] timeout_s)
    container: str | None = None  # run --container NAME: exec into a running container (issue 39)
    image: str | None = None  # run --image IMAGE: a container started for the session
    keep: bool = False  # run --keep: the --image container is kept at the end


def resolve_profile(opts: RunOptions, paths: Paths) -> Profile:
    auto = profile_for_command(opts.argv, paths)
    if not opts.profile:
        return auto
    chosen = load_profile(opts.profile, paths)
    if auto.shell and not chosen.raw:
        # Under a quoting profile every line of a message would run as a command.
        raise ProfileError(
            f"{Path(opts.argv[0]).name} is a shell: under profile {chosen.name!r} the lines of"
            " every message would run as commands",
            hint=f"leave out --profile (it picks {auto.name!r}), or use a profile with"
            ' framing = "raw"',
        )
    return chosen


def agent_argv(
    argv: list[str], profile: Profile, env: dict[str, str], paths: Paths, name: str,
    inside: bool = False,
) -> list[str]:
    """``inside``: the agent runs in a container (its command is the container's)."""
    exe = shutil.which(argv[0], path=env.get("PATH"))
    if exe is None and not inside:
        raise AgentNotFound(f"command not found: {argv[0]!r}")
    extra = [a for a in profile.launch_args if a not in argv]
    if profile.context_file_arg and profile.instruction_file:
        # The live fallback file (aider --read): it must exist before the agent
        # starts, or the agent skips it for the whole session.
        live = prepare_context_file(context_file(paths.state_dir, name, profile.instruction_file))
        extra += [profile.context_file_arg, str(live)]
    return [argv[0], *extra, *argv[1:]]


def launch_marker(paths: Paths, name: str) -> dict[str, str]:
    """What the agent's environment says about its launch: which session of
    which state dir. Everything it starts inherits it, so stop finds daemons
    that left its process tree (:func:`agentwrap.terminal.proctree.marked`)."""
    return {SESSION_ENV: name, "AGENTWRAP_STATE_DIR": str(paths.state_dir)}


def agent_env(profile: Profile, name: str, paths: Paths) -> dict[str, str]:
    """The caller's environment (API keys, PATH, proxies), plus the profile's
    quiet flags where the caller did not set them, plus where agentwrap is."""
    env = dict(os.environ)
    for key, value in profile.env.items():
        env.setdefault(key, value)
    env.update(launch_marker(paths, name))
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    return env


def pick_name(
    registry: Registry, wanted: str | None, profile: Profile, paths: Paths | None = None
) -> str:
    """The wanted name, or the agent's name made unique: skipping names held by
    a running session and (given ``paths``) by an orphaned agent still in tmux."""
    if wanted:
        return check_session_name(wanted)
    base = check_session_name(profile.name)
    n = 1
    while True:
        candidate = base if n == 1 else f"{base}-{n}"
        rec = registry.find(candidate)
        if rec is None or (rec.liveness != "running" and not _orphaned(paths, rec)):
            return candidate
        n += 1


def _here(registry: Registry, rec: SessionRecord) -> SessionRecord:
    """``rec``, if it runs on this host: only its own host adopts, attaches to
    or stops a session (its pids and tmux server are that machine's)."""
    if not registry.here(rec):
        raise SessionNotRunning(f"{rec.name!r} runs on host {rec.host!r}, not on this one"
                                f" ({registry.host!r})",
                                hint=f"run the command on {rec.host}; `agentwrap ls` shows"
                                " every host's sessions")
    return rec


def _orphaned(paths: Paths | None, rec: SessionRecord) -> bool:
    if paths is None or rec.backend != "tmux" or rec.liveness != "stale":
        return False
    server = server_for(tmux_socket_of(paths, rec))
    return bool(server.is_alive() and server.has_session(rec.name))


def enqueue_context(paths: Paths, cfg: Config, name: str, files: list[Path]) -> list[str]:
    """Startup context: its own priority class, delivered first once ready."""
    from ..queue.backend import configured_store

    ids: list[str] = []
    if not files:
        return ids
    store = configured_store(paths.db_path, cfg, events_dir=paths.events_dir)
    try:
        for f in files:
            text = f.read_text(encoding="utf-8")
            msg, _ = store.enqueue(
                NewMessage(
                    session=name, content=text, source=Source.SYSTEM, source_id=f"context:{f.name}",
                    priority=Priority.STARTUP, ttl_s=cfg.limits.max_ttl_s,
                    metadata={"file": str(f)},
                ),
                internal=True,  # SYSTEM source and STARTUP priority are agentwrap's own
            )
            ids.append(msg.id)
    finally:
        store.close()
    return ids


def with_channels(
    opts: RunOptions, cfg: Config, profile: Profile, paths: Paths, name: str,
    argv: list[str], env: dict[str, str], boxed: BoxedLaunch | None = None,
) -> tuple[list[str], dict[str, object]]:
    """The launch's argv with the native channels registered (env updated in
    place), and what to record of them in the session's options."""
    from .channels import plan

    for stale in (paths.session_started(name), paths.started_batches(name)):
        stale.unlink(missing_ok=True)  # a killed session's: this launch's hook has not run
    if boxed is None:  # a killed boxed session's mounts: this agent's paths are the host's
        from ..containers.box import mounts_file
        from .channels import launch_dir

        mounts_file(launch_dir(paths, name)).unlink(missing_ok=True)
    inside = version = None
    enabled = opts.channels
    if boxed is not None:  # in a container: its paths, its CLI's version (issue 39)
        from .boxed import probe_version

        inside = boxed.inside
        enabled = enabled and boxed.hooks
        if enabled and profile.channels.any:
            version = probe_version(boxed, argv[0], profile.channels.version_arg)
    chans = plan(profile, cfg.run, paths, name, argv, env, enabled=enabled,
                 rules=bool(cfg.for_profile(profile.name).answer_rules), cwd=str(opts.cwd),
                 version=version, inside=inside)
    if boxed is not None:
        chans.notes[:0] = boxed.notes
    env.update(chans.env)
    if chans.notes:
        logging.getLogger("agentwrap.session").info("channels of %s: %s", name, chans.notes)
    return [argv[0], *chans.argv, *argv[1:]], chans.options()


def _handoff(paths: Paths, cfg: Config, opts: RunOptions, name: str) -> Handoff | None:
    """The previous session's handoff for this project, if any (issue 12)."""
    from ..continuity.launch import prepare

    try:
        return prepare(paths, cfg.continuity, opts.cwd, enabled=opts.continuity, session=name)
    except (OSError, AgentwrapError) as exc:  # continuity must never stop a launch
        logging.getLogger("agentwrap.session").warning("no handoff: %s", exc)
        return None


def _begin_continuity(paths: Paths, cfg: Config, rec: SessionRecord, opts: RunOptions,
                      handoff: Handoff | None, profile: Profile) -> None:
    """This launch's handoff record, and the previous one's handoff on its channel
    (never typed into a shell, where every line would run as a command)."""
    from ..continuity.launch import begin
    from .channels import hands_over_at_start

    chans = list(rec.options.channels or ())
    if not hands_over_at_start(profile):  # no start hook (Cline, Kimi): the handoff is typed
        chans = [c for c in chans if c != "hooks"]
    try:
        begin(paths, cfg.continuity, rec.name, rec.profile, opts.cwd, rec.started, handoff,
              chans, enabled=opts.continuity, typed=not profile.shell)
    except (OSError, AgentwrapError) as exc:
        logging.getLogger("agentwrap.session").warning("no handoff record: %s", exc)


def permission_gate(profile: Profile, cfg: Config, env: dict[str, str],
                    argv: list[str] | None = None) -> dict[str, object]:
    """For an agent that runs every tool without asking by default (OpenCode,
    Cline CLI): its ask-first mode when ``[run] ask_first`` is on (the
    environment or the command line ``argv`` updated in place; a value or an
    option the person gave is kept), and what the session's record says of the
    gate (``permission_gate``), for ``state``, the API and the page."""
    spec = profile.permissions
    if spec.asks_by_default:
        return {}
    if not (spec.ask_first_env or spec.ask_first_args):  # pi: nothing makes it ask
        return {"permission_gate": (
            f"none: {profile.description or profile.name} runs every tool without asking"
            " and has no ask-first mode ([run] ask_first cannot change that)")}
    if cfg.run.ask_first and spec.ask_first_env:
        env.setdefault(spec.ask_first_env, spec.ask_first_value)
    if spec.ask_first_env and spec.ask_first_env in env:
        return {"permission_gate": f"asks first ({spec.ask_first_env} set)"}
    if spec.ask_first_args and argv is not None:
        option, wanted = spec.ask_first_args[0], " ".join(spec.ask_first_args)
        given = [a for a in argv[1:] if a == option or a.startswith(f"{option}=")]
        if cfg.run.ask_first and not given:
            argv[1:1] = spec.ask_first_args
        joined = f"{option}={' '.join(spec.ask_first_args[1:])}"
        n = len(spec.ask_first_args)
        if joined in argv[1:] or any(tuple(argv[i:i + n]) == spec.ask_first_args
                                     for i in range(1, len(argv))):
            return {"permission_gate": f"asks first ({wanted})"}
    return {"permission_gate": (
        f"none: {profile.description or profile.name} runs every tool without asking, unless"
        " its own config says to ask; [run] ask_first = true starts it in its ask-first mode")}


def _options(opts: RunOptions, cfg: Config) -> dict[str, object]:
    on_timeout, timeout_s = _timeout_policy(opts, cfg)
    return {
        "trust_folder": cfg.run.trust_folder if opts.trust_folder is None else opts.trust_folder,
        "require_ack": opts.require_ack,
        "supervisor": cfg.run.supervisor,
        **({} if on_timeout is None else {"on_timeout": on_timeout}),
        **({} if timeout_s is None else {"answer_timeout_s": timeout_s}),
    }


def _timeout_policy(opts: RunOptions, cfg: Config) -> tuple[str | None, float | None]:
    """The session's own ``on_timeout`` / ``timeout_s`` (None: the config's), checked
    before anything starts: :class:`InvalidRunOption` for a value they do not take,
    or for ``deny`` with no time to deny after (here or in ``[answers]``)."""
    on_timeout, timeout_s = timeout_policy(opts.on_timeout, opts.answer_timeout_s)
    effective = SessionOptions(on_timeout=on_timeout, answer_timeout_s=timeout_s) \
        .answers(cfg.answers)
    if on_timeout == "deny" and effective.timeout_s <= 0:
        raise InvalidRunOption(
            "--on-timeout deny: no timeout to deny after (--answer-timeout is"
            f" {'0' if timeout_s is not None else 'not given'} and [answers] timeout_s is"
            f" {cfg.answers.timeout_s:g})", hint="add --answer-timeout SECONDS, e.g. 300")
    return on_timeout, timeout_s


# --- tmux ----------------------------------------------------------------------------


def start_tmux(paths: Paths, opts: RunOptions) -> SessionRecord:
    """Launch the agent in tmux and a detached supervisor; return the record."""
    paths.ensure()
    tmux_binary()
    cfg = load_config(paths, opts.cwd)
    profile = resolve_profile(opts, paths)
    cfg = cfg.for_profile(profile.name)
    _timeout_policy(opts, cfg)  # a bad value starts nothing
    registry = open_registry(paths, cfg)
    try:
        name = pick_name(registry, opts.name, profile, paths)
        _refuse_orphan(paths, registry, name)
        env = agent_env(profile, name, paths)
        boxed = _open_box(paths, cfg, opts, name, env)
        try:
            argv = agent_argv(opts.argv, profile, env, paths, name, inside=boxed is not None)
            handoff = _handoff(paths, cfg, opts, name)
            before = dict(env)
            argv, channel_opts = with_channels(opts, cfg, profile, paths, name, argv, env, boxed)
            channel_opts.update(permission_gate(profile, cfg, env, argv))
            if boxed is None:
                argv = _on_native_channel(cfg, profile, paths, name, argv, env, opts.cwd,
                                          channel_opts)
            else:
                from .boxed import exec_line

                names = {*profile.env, *launch_marker(paths, name), *cfg.container.env,
                         *(k for k, v in env.items() if before.get(k) != v)}
                argv = exec_line(boxed, name, argv, [n for n in names if n in env])
                channel_opts.update(boxed.options())
        except BaseException:
            if boxed is not None:
                _drop_box(paths, boxed, name)
            raise
        socket = paths.tmux_socket_for(name)
        registry.register(
            SessionRecord(
                name=name, profile=profile.name, backend="tmux", command=argv,
                cwd=str(opts.cwd), started=time.time(), tmux_socket=str(socket),
                options=SessionOptions.from_json({**_options(opts, cfg), **channel_opts}),
            )
        )
        enqueue_context(paths, cfg, name, opts.context_files)
        _begin_continuity(paths, cfg, registry.get(name), opts, handoff, profile)
        try:
            TmuxTerminal.launch(
                socket, name, argv, env=env, cwd=opts.cwd,
                cols=opts.cols or cfg.run.cols, rows=opts.rows or cfg.run.rows,
            )
        except BaseException:
            registry.mark_ended(name, None)
            if boxed is not None:
                _drop_box(paths, boxed, name)
            raise
        try:
            supervise_elsewhere(paths, registry.get(name), registry)
        except SessionNotRunning as exc:
            _stop_unsupervised(paths, registry, name, socket)
            raise SessionNotRunning(exc.message, hint="its agent was stopped (nothing runs"
                                    f" unsupervised); {exc.hint}") from None
        except BaseException:
            _stop_unsupervised(paths, registry, name, socket)
            raise
        return registry.get(name)
    finally:
        registry.close()


def _open_box(paths: Paths, cfg: Config, opts: RunOptions, name: str,
              env: dict[str, str]) -> BoxedLaunch | None:
    """The container of a ``run --container``/``--image`` launch (None: on the host)."""
    if not (opts.container or opts.image):
        if opts.keep:
            raise InvalidRunOption("--keep keeps the container --image starts: there is none")
        return None
    if opts.container and opts.image:
        raise InvalidRunOption("--container and --image: give one (exec into a running"
                               " container, or start one from an image)")
    from .boxed import open_box
    from .channels import launch_dir

    return open_box(paths, cfg, name, opts.cwd, launch_dir(paths, name),
                    container=opts.container, image=opts.image, keep=opts.keep, env=env)


def _drop_box(paths: Paths, boxed: BoxedLaunch, name: str) -> None:
    """A launch that failed: the container it started goes (even with --keep)."""
    from ..containers.box import remove_box

    if boxed.box.owned:
        replace(boxed.box, keep=False).finish()
    remove_box(paths, name)


def _stop_unsupervised(paths: Paths, registry: Registry, name: str, socket: Path) -> None:
    """A launch whose supervisor did not start: its agent is stopped (the
    tmux server's whole tree and what the launch detached), never left to
    run with nobody delivering, answering or recording its end; then its end
    is recorded, if the store lets us (a store that is down is the usual
    reason the supervisor did not start: the agent is stopped all the same)."""
    server = server_for(socket)
    pids = _tmux_server_tree(server) if server.is_alive() else []
    kill_pids([*pids, *marked(launch_marker(paths, name))], signal.SIGTERM, grace=2.0)
    remove_idle_socket(server)
    with contextlib.suppress(AgentwrapError):  # the cause is what the person must read
        _record_end(paths, registry, registry.get(name))


def _refuse_orphan(paths: Paths, registry: Registry, name: str) -> None:
    """A stale entry whose tmux session still runs its agent is not free:
    taking the name over would fail in tmux and mark the live agent ended."""
    old = registry.find(name)
    if old is not None and _orphaned(paths, old):
        raise SessionNameTaken(
            f"a session named {name!r} is still running in tmux (its supervisor is gone)",
            hint=f"`agentwrap adopt {name}` to supervise it again, or `agentwrap stop {name}`",
        )


def spawn_supervisor(paths: Paths, name: str, registry: Registry, wait_s: float = 10.0) -> int:
    """Start ``agentwrap _supervise NAME`` detached from this terminal."""
    log = paths.supervisor_log(name)
    since = _log_size(log)
    proc = _spawn_detached(["_supervise", name], log)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        rec = registry.get(name)
        if rec.supervisor_pid == proc.pid and rec.supervisor_alive:
            return proc.pid
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    raise SessionNotRunning(
        f"the supervisor of {name!r} did not start{_cause(log, since, name)}",
        hint=f"see its log: {log}",
    )


def _log_size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:
        return 0


def _cause(log: Path, since: int, name: str) -> str:
    """``": CAUSE"``: why a supervisor did not start, as it wrote it to ``log``
    after offset ``since`` (the supervisor host's "cannot supervise NAME: ...",
    a supervisor process's "error: ..."), else "" (its log says more)."""
    try:
        with log.open("rb") as f:
            f.seek(since)
            text = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return ""
    found = ""
    for line in text.splitlines():
        _, sep, why = line.partition(f" cannot supervise {name}: ")
        if sep or line.startswith("error: "):
            found = why if sep else line.removeprefix("error: ")
    return f": {found.strip()}" if found.strip() else ""


def supervise_elsewhere(paths: Paths, rec: SessionRecord, registry: Registry) -> int:
    """Have a running tmux session supervised, as its record says: by the
    supervisor host (one process for all sessions) or by a process of its own."""
    if rec.options.supervisor == "host":
        return hand_to_host(paths, rec.name, registry)
    return spawn_supervisor(paths, rec.name, registry)


def host_socket(paths: Paths) -> Path:
    """Where the supervisor host takes commands (``adopt NAME``)."""
    return paths.runtime_dir / "host.sock"


def host_log(paths: Paths) -> Path:
    return paths.logs_dir / "host.log"


def hand_to_host(paths: Paths, name: str, registry: Registry, wait_s: float = 10.0,
                 start_s: float = 120.0) -> int:
    """Ask the supervisor host to supervise ``name``, starting the host if none
    runs; returns its pid once it has claimed the session.

    ``wait_s`` bounds the wait for a host that serves (its socket takes the
    request). A host this call started that is alive and not serving yet is
    still starting: its imports take about a core-second, over 10 s at a load
    of 15 on 2 cores, and a fixed 10 s failed ``run --detach`` there ("did not
    take", bench_notify at load 15-28, both commits); the wait goes on while
    it lives, up to ``start_s``, and ends as soon as it dies."""
    deadline = time.monotonic() + wait_s
    cap = time.monotonic() + start_s
    since = _log_size(host_log(paths))
    last_ask = last_spawn = -math.inf
    spawned: list[subprocess.Popen[bytes]] = []
    serving = False
    while True:
        now = time.monotonic()
        starting = not serving and any(p.poll() is None for p in spawned)
        if now >= (cap if starting else deadline):
            break
        rec = registry.get(name)
        if rec.supervisor_alive and rec.supervisor_pid:
            return rec.supervisor_pid
        if now - last_ask >= 0.25:
            last_ask = now
            # A host that is starting has not bound its socket yet: a second one
            # started meanwhile finds the host lock taken and leaves at once.
            if send(host_socket(paths), b"adopt " + name.encode()):
                if not serving:  # up now: the usual wait from here
                    serving, deadline = True, max(deadline, now + wait_s)
            elif now - last_spawn >= 2.0:
                last_spawn = now
                spawned.append(spawn_host(paths))
        time.sleep(0.01)
    raise SessionNotRunning(
        f"the supervisor host did not take {name!r}{_cause(host_log(paths), since, name)}",
        hint=f"see its log: {host_log(paths)}",
    )


def spawn_host(paths: Paths) -> subprocess.Popen[bytes]:
    """Start ``agentwrap _host`` detached from this terminal (see sessions.host)."""
    return _spawn_detached(["_host"], host_log(paths))


def _spawn_detached(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``agentwrap ARGS`` in a session of its own (closing the terminal does not
    end it), output to ``log``, 0600 from the start: logs quote message content."""
    private_dir(log.parent, repair=True)
    out = open_private_append(log)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "agentwrap", *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            env=dict(os.environ), cwd="/",
        )
    finally:
        os.close(out)


def tmux_supervisor(paths: Paths, name: str, registry: Registry) -> Supervisor:
    """The supervisor of a running tmux session, ready to run (in a process of
    its own or on a thread of the supervisor host)."""
    rec = registry.get(name)
    cfg = load_config(paths, Path(rec.cwd)).for_profile(rec.profile)
    profile = load_profile(rec.profile, paths)
    term = TmuxTerminal.adopt(tmux_socket_of(paths, rec), name)
    env = agent_env(profile, name, paths)
    return build_supervisor(paths, cfg, rec, term, profile, registry, env,
                            serving=hub_serving(paths))


def supervise(paths: Paths, name: str, companions: Sequence[Companion] = ()) -> int:
    """Entry point of the detached supervisor process (also re-adoption);
    ``companions`` run beside it (see :data:`agentwrap.sessions.compose.Companion`)."""
    log_to(paths.supervisor_log(name))
    sup = tmux_supervisor(paths, name, open_registry(paths))
    signal.signal(signal.SIGTERM, lambda *_: sup.stop())
    started = start_companions(companions, paths, name)
    try:
        sup.run()
    finally:
        for c in started:
            c.stop()
    return 0


def adopt(paths: Paths, name: str) -> int:
    """Start a new supervisor for a tmux session whose supervisor is gone."""
    registry = open_registry(paths)
    try:
        rec = _here(registry, registry.get(registry.resolve(name)))  # NAME or HOST/NAME
        name = rec.name  # this host's session: its tmux session and files here
        if rec.supervisor_alive:
            return rec.supervisor_pid or 0
        if rec.backend != "tmux":
            raise SessionNotRunning(f"{name!r} ran under the pty backend and cannot be re-adopted")
        server = server_for(tmux_socket_of(paths, rec))
        if not (server.is_alive() and server.has_session(name)):
            _record_end(paths, registry, rec)
            raise SessionNotRunning(f"the agent of {name!r} is no longer running")
        registry.update(name, ended=None)
        return supervise_elsewhere(paths, rec, registry)
    finally:
        registry.close()


def attach(paths: Paths, name: str) -> int | None:
    """Put the person's terminal on the session; return the agent's exit
    code if it ended while attached, else None (detached: the agent runs on)."""
    registry = open_registry(paths)
    try:
        address = registry.resolve(name)  # NAME or HOST/NAME: what adopt takes again
        rec = _here(registry, registry.get(address))
        name = rec.name  # this host's session: its tmux session here
        if rec.backend != "tmux":
            raise SessionNotRunning(
                f"{name!r} runs under the pty backend: it is attached to the terminal that started it"
            )
        if rec.ended is not None:
            raise SessionNotRunning(f"{name!r} has ended (exit code {rec.exit_code})")
    finally:
        registry.close()
    adopt(paths, address)
    socket = str(tmux_socket_of(paths, rec))
    env = dict(os.environ)
    env.pop("TMUX", None)  # attaching from inside another tmux is fine: it's another server
    # The attach's own exit status says nothing about the agent: see wait_for_end.
    subprocess.run(
        [tmux_binary(), "-S", socket, "attach-session", "-t", f"={name}"], env=env, check=False
    )
    return wait_for_end(paths, name, grace_s=3.0)


def wait_for_end(paths: Paths, name: str, grace_s: float) -> int | None:
    """After the tmux client returns: the agent's exit code if it ended, None
    if the person detached and it runs on (an exit code of 0 says neither)."""
    registry = open_registry(paths)
    try:
        deadline = time.monotonic() + grace_s
        while True:
            rec = registry.get(name)
            if rec.ended is not None:
                return rec.exit_code if rec.exit_code is not None else 1
            socket = tmux_socket_of(paths, rec)
            server = server_for(socket)
            gone = not (server.is_alive() and server.has_session(name))
            if not gone:
                # the backend's judgement, not pane_dead alone (tmux 3.3a can
                # leave it at 0 for a killed agent)
                gone = TmuxTerminal(server, name, socket.parent).exiting()
            if not gone:
                return None  # detached; the agent runs on
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.05)
    finally:
        registry.close()


# --- pty -------------------------------------------------------------------------------


def run_pty(
    paths: Paths, opts: RunOptions, interactive: bool = True,
    companions: Sequence[Companion] = (),
) -> int:
    """Relay the person's terminal to the agent; supervise in a thread, with
    ``companions`` beside it as a tmux session has them in its supervisor
    (:data:`agentwrap.sessions.compose.Companion`: the project's feedback sources)."""
    paths.ensure()
    cfg = load_config(paths, opts.cwd)
    profile = resolve_profile(opts, paths)
    cfg = cfg.for_profile(profile.name)
    _timeout_policy(opts, cfg)  # a bad value starts nothing
    registry = open_registry(paths, cfg)
    name = pick_name(registry, opts.name, profile, paths)
    env = agent_env(profile, name, paths)
    argv = agent_argv(opts.argv, profile, env, paths, name)
    handoff = _handoff(paths, cfg, opts, name)
    argv, channel_opts = with_channels(opts, cfg, profile, paths, name, argv, env)
    channel_opts.update(permission_gate(profile, cfg, env, argv))
    argv = _on_native_channel(cfg, profile, paths, name, argv, env, opts.cwd, channel_opts)
    from ..terminal.pty import PtyTerminal, terminal_size

    size = terminal_size(sys.stdout.fileno()) if interactive else None
    cols, rows = size or (opts.cols or cfg.run.cols, opts.rows or cfg.run.rows)
    rec = registry.register(
        SessionRecord(
            name=name, profile=profile.name, backend="pty", command=argv, cwd=str(opts.cwd),
            started=time.time(),
            options=SessionOptions.from_json({**_options(opts, cfg), **channel_opts}),
        )
    )
    enqueue_context(paths, cfg, name, opts.context_files)
    _begin_continuity(paths, cfg, rec, opts, handoff, profile)
    term = PtyTerminal(argv, env=env, cwd=opts.cwd, cols=cols, rows=rows, relay=cfg.run.relay)
    try:
        sup = build_supervisor(paths, cfg, rec, term, profile, open_registry(paths, cfg), env,
                               serving=hub_serving(paths))
    except BaseException:  # no supervisor (its store down, say): no agent left running
        term.close()
        with contextlib.suppress(AgentwrapError):  # the cause is what the person must read
            registry.mark_ended(name, None)
        registry.close()
        raise
    log_to(paths.supervisor_log(name))
    logging.getLogger("agentwrap.session").info("pty relay: %s", term.relay_kind)
    thread = threading.Thread(target=sup.run, name=f"supervisor-{name}", daemon=True)
    thread.start()
    started = start_companions(companions, paths, name)
    try:
        code = term.relay(
            sys.stdin.fileno() if interactive else None,
            sys.stdout.fileno() if interactive else None,
        )
    finally:
        # The relay returns when the agent is gone: tell the supervisor now
        # rather than let it notice on its next tick (it records the exit).
        for c in started:
            c.stop()
        sup.stop()
        thread.join(timeout=5.0)
        term.close()
        registry.mark_ended(name, term.exit_code())
        registry.close()
    return code


# --- stopping ------------------------------------------------------------------------


def stop(paths: Paths, name: str, timeout_s: float = 5.0) -> SessionRecord:
    return stop_many(paths, [name], timeout_s)[0]


def hub_serving(paths: Paths) -> Callable[[str], Callable[[str, dict[str, Any]], Any]]:
    """What a supervisor's link runs of the hub's requests: this host's own
    sessions' screens and stops (:class:`~.hub_requests.HostRequests`)."""
    from .hub_requests import HostRequests

    return lambda host: HostRequests(paths, host, stop=stop_many)


def stop_many(paths: Paths, names: list[str], timeout_s: float = 5.0) -> list[SessionRecord]:
    """Stop the agents of ``names`` (their whole process trees) together.

    Every name is checked before anything is signalled. All trees get SIGTERM
    at once (SIGKILL after a grace), then the supervisors record the exits;
    a session whose end was not recorded within ``timeout_s`` is told to stop,
    its tmux session killed and its end recorded here.
    """
    registry = open_registry(paths)
    try:
        # NAME or HOST/NAME; every one checked, else nothing happens
        recs = [_here(registry, registry.get(registry.resolve(name))) for name in names]
        pids: list[int] = []
        for rec in recs:
            pid: int | None = None
            host: list[int] = []  # the session's own tmux server and its helpers
            if rec.backend == "tmux":
                server = server_for(tmux_socket_of(paths, rec))
                if server.is_alive():
                    host = _tmux_server_tree(server)
                if server.is_alive() and server.has_session(rec.name):
                    pid = TmuxTerminal.adopt(tmux_socket_of(paths, rec), rec.name).agent_pid()
            elif rec.agent_pid and alive(rec.agent_pid):
                pid = rec.agent_pid
            if pid is not None:
                pids += [pid, *descendants(pid)]
            # and what it detached from its tree (Cline's hub daemon); the tmux
            # server carries the marker too, and ends with the session
            pids += [p for p in marked(launch_marker(paths, rec.name))
                     if p not in pids and p not in host]
        from .boxed import stop_inside

        for rec in recs:  # in a container: the agent's group there (the exec client's death
            stop_inside(rec.options, rec.name)  # would not end it: issue 39)
        kill_pids(pids, signal.SIGTERM, grace=2.0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(
            registry.get(rec.name).liveness == "running" for rec in recs
        ):
            time.sleep(0.05)
        for rec in recs:
            _finish_stop(paths, registry, registry.get(rec.name))
            got = registry.get(rec.name)
            if rec.ended is None:  # this stop ended it: say so beside what the exit code says
                registry.note_end(rec.name, f"stopped by `agentwrap stop` ({got.state_reason})"
                                  if got.state_reason else "stopped by `agentwrap stop`")
        return [registry.get(rec.name) for rec in recs]
    finally:
        registry.close()


def _tmux_server_tree(server: libtmux.Server) -> list[int]:
    """The tmux server's pid and everything under it (the agent's pane, a
    pipe-pane reader), or nothing when tmux does not say."""
    proc = server.cmd("display-message", "-p", "#{pid}")
    out = proc.stdout[0].strip() if proc.returncode == 0 and proc.stdout else ""
    return [int(out), *descendants(int(out))] if out.isdigit() else []


def _finish_stop(paths: Paths, registry: Registry, rec: SessionRecord) -> None:
    """Record the end of a session its supervisor did not record."""
    name = rec.name
    if rec.liveness == "running":
        wake(paths, name, b"stop")
        time.sleep(0.2)
    if registry.get(name).ended is None:
        if rec.backend == "tmux":
            server = server_for(tmux_socket_of(paths, rec))
            if server.is_alive():
                server.cmd("kill-session", "-t", f"={name}")
            remove_idle_socket(server)
        _record_end(paths, registry, rec)


def _on_native_channel(
    cfg: Config, profile: Profile, paths: Paths, name: str, argv: list[str],
    env: dict[str, str], cwd: Path, channel_opts: dict[str, object],
) -> list[str]:
    """The agent's argv on its native channel (Codex's private app-server, issue
    24), what its options record of it added to ``channel_opts``; ``argv`` as
    it is for an agent without one. Its code is loaded only for such a launch."""
    from .native import native_channel

    native = native_channel(profile.name)
    if native is None:
        return argv
    argv, server_opts = native.launch(cfg.run, profile, paths, name, argv, env, cwd)
    channel_opts.update(server_opts)
    return argv


def _record_end(paths: Paths, registry: Registry, rec: SessionRecord,
                reason: str | None = None) -> None:
    """The end of a session whose supervisor is gone, and what its launch left
    that outlives the agent: the hook/MCP/read files, Codex's private
    app-server (its own process group: a SIGKILLed supervisor left it running),
    the container it started. ``reason``: why, as the person reads it in the
    Ended list."""
    from . import boxed
    from .channels import remove_launch_files
    from .native import native_channels

    box = boxed.end_reason(rec.options)  # a container's end (issue 39)
    if reason is None and box:
        reason = f"{exit_reason(rec.exit_code)}: {box}"
    if reason is None and not rec.supervisor_alive and rec.ended is None:
        reason = (f"its supervisor was gone and the agent with it (noticed"
                  f" {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())})")
    registry.mark_ended(rec.name, rec.exit_code, reason)
    if not rec.supervisor_alive:  # a live one (slow to record the end) abandons its own
        _end_queue(paths, rec)
    remove_launch_files(paths, rec.name)
    for native in native_channels():
        native.stop(paths, rec.name, rec.options)
    boxed.finish(paths, rec.options, rec.name)  # the container it started, last


def _end_queue(paths: Paths, rec: SessionRecord) -> None:
    """What still waits for a session whose supervisor is gone gets its end, as
    the supervisor would have given it (:func:`~agentwrap.delivery.engine.end_queue`):
    nobody else will (its TTL is swept by a running supervisor only), and a
    ``send --wait`` would wait on it forever. A store that cannot be opened
    leaves the queue as it is: the session's end is recorded all the same."""
    from ..audit import AuditLog
    from ..delivery.engine import end_queue
    from ..message import UNACKNOWLEDGED, Attempt
    from ..queue.backend import configured_store

    def unacknowledged(msgs: list[Message], why: str) -> None:
        now = time.time()
        for m in msgs:
            if m.require_ack:  # an ACK was asked and never seen: senders are told so
                store.record_attempt(Attempt(m.id, m.batch_id or "", m.attempts + 1, now, now,
                                             "none", UNACKNOWLEDGED, why))

    try:
        cfg = load_config(paths, Path(rec.cwd))
        store = configured_store(paths.db_path, cfg, events_dir=paths.events_dir)
    except (OSError, AgentwrapError) as exc:
        logging.getLogger("agentwrap.session").warning("queue of %s left as is: %s", rec.name, exc)
        return
    try:
        store.expire_overdue()  # past its TTL: expired, as a supervisor's sweep would say
        end_queue(store, AuditLog(paths.audit_log), rec.name,
                  "session ended (stopped while its supervisor was not running)",
                  unacknowledged=unacknowledged)
    finally:
        store.close()
