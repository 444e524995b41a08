"""Agents in containers (issue 39), the parts that need no engine: paths through the
mounts (and the refusal outside them), the pane's exec line, the config, the hook
commands with the container's paths, the hook socket in the session's box folder."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pytest

from agentwrap.config import CONTAINER_ENGINES, Config, _apply, load_config
from agentwrap.containers import box as boxes
from agentwrap.containers.box import INSIDE, Box
from agentwrap.containers.engine import Engine, find_engine
from agentwrap.containers.mounts import Mount, Mounts
from agentwrap.errors import ConfigError, ContainerEngineMissing, PathNotMounted
from agentwrap.hook_wire import hook_socket
from agentwrap.paths import Paths
from agentwrap.sessions.channels import hook_command

INSPECT = {"Mounts": [
    {"Type": "bind", "Source": "/home/me/proj", "Destination": "/home/me/proj", "RW": True},
    {"Type": "bind", "Source": "/run/user/0/agentwrap/box/s1", "Destination": "/run/agentwrap",
     "RW": True},
    {"Type": "bind", "Source": "/srv/data", "Destination": "/data", "RW": False},
    {"Type": "bind", "Source": "/home/me/proj/vendor", "Destination": "/vendor", "RW": True},
    {"Type": "volume", "Name": "cache", "Source": "/var/lib/containers/v/cache",
     "Destination": "/cache"},
]}


def mounts() -> Mounts:
    return Mounts.from_inspect("box1", INSPECT)


def test_paths_go_through_the_longest_mount_both_ways() -> None:
    m = mounts()
    assert m.to_container("/home/me/proj/src/a.py") == "/home/me/proj/src/a.py"
    assert m.to_container("/home/me/proj/vendor/x") == "/vendor/x"  # the longer mount wins
    assert m.to_host("/vendor/x") == "/home/me/proj/vendor/x"
    assert m.to_host("/data/f") == "/srv/data/f"
    assert m.to_container("/run/user/0/agentwrap/box/s1/hook.sock") == "/run/agentwrap/hook.sock"


@pytest.mark.parametrize("path", [
    "/etc/passwd",                       # mounted nowhere
    "/home/me/proj/../secret",           # climbs out of the mount
    "/home/me/projX/file",               # a prefix of the name is no mount
    "/var/lib/containers/v/cache/f",     # a volume: no host path of the person's
    "relative/path",
])
def test_a_path_outside_the_mounts_is_refused(path: str) -> None:
    with pytest.raises(PathNotMounted) as exc:
        mounts().to_container(path)
    assert exc.value.hint and exc.value.exit_code == 77


def test_writing_through_a_read_only_mount_is_refused() -> None:
    assert mounts().to_container("/srv/data/f") == "/data/f"
    with pytest.raises(PathNotMounted, match="read-only"):
        mounts().to_container("/srv/data/f", write=True)


def test_a_path_inside_the_container_only_is_no_host_file() -> None:
    with pytest.raises(PathNotMounted):
        mounts().to_host("/root/.claude/projects/x.jsonl")
    with pytest.raises(PathNotMounted):
        mounts().to_host("/data/../etc/shadow")


def test_the_pane_runs_exec_it_with_no_detach_keys_and_variables_by_name() -> None:
    box = Box(Engine("/usr/bin/podman", "podman"), "agentwrap-s1", owned=True)
    argv = box.exec_argv("s1", ["claude", "--settings", "/x/y.json"],
                         ["ANTHROPIC_AUTH_TOKEN", "HOME"], "/home/me/proj")
    assert argv[:6] == ["/usr/bin/podman", "exec", "-it", "--detach-keys", "", "-w"]
    assert argv[argv.index("-w") + 1] == "/home/me/proj"
    at = argv.index("ANTHROPIC_AUTH_TOKEN")
    assert argv[at - 1] == "-e"
    assert not [a for a in argv if "=" in a]  # no value of any variable on the command line
    rest = argv[argv.index("agentwrap-s1") + 1:]
    assert rest[:2] == ["sh", "-c"] and rest[3:] == ["agentwrap", "claude", "--settings",
                                                       "/x/y.json"]
    assert "exec \"$@\"" in rest[2] and boxes.pid_file("s1") in rest[2]


def test_container_config_is_one_table_of_the_users_file(tmp_path: Path) -> None:
    cfg = _apply(Config(), {"container": {"engine": "podman", "run_args": ["--network", "host"],
                                          "env": ["ANTHROPIC_BASE_URL"]}}, "")
    assert cfg.container.engine == "podman" and cfg.container.run_args == ("--network", "host")
    with pytest.raises(ConfigError, match=r"container\.engine"):
        _apply(Config(), {"container": {"engine": "lxc"}}, "")
    with pytest.raises(ConfigError, match="unknown key"):
        _apply(Config(), {"container": {"mounts": []}}, "")
    # a project's file may not add flags or mounts to a container
    (tmp_path / ".agentwrap.toml").write_text('[container]\nrun_args = ["--privileged"]\n')
    paths = Paths(tmp_path / "c", tmp_path / "s", tmp_path / "r")
    with pytest.raises(ConfigError):
        load_config(paths, tmp_path)


def test_no_engine_on_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ContainerEngineMissing) as exc:
        find_engine(Config().container, path=str(tmp_path))
    assert exc.value.exit_code == 69 and "podman" in exc.value.message
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_engine(Config().container, path=str(tmp_path)).kind == "docker"


def test_a_boxed_session_hooks_name_the_container_paths(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "c", tmp_path / "s", tmp_path / "r")
    assert hook_socket(paths, "s1") == paths.runtime_dir / "hook-servers" / "s1.sock"
    boxes.prepare_box(paths, "s1")
    # the supervisor's hook server binds in the box folder the container mounts
    assert hook_socket(paths, "s1") == boxes.box_dir(paths, "s1") / boxes.HOOK_SOCKET
    assert (boxes.box_dir(paths, "s1") / boxes.HOOK_CLIENT).is_file()
    assert boxes.box_dir(paths, "s1").stat().st_mode & 0o077 == 0
    cmd = hook_command("claude", "Stop", "s1", paths, "python3", "claude",
                       Path(INSIDE / boxes.HOOK_CLIENT), PurePosixPath(INSIDE / boxes.HOOK_SOCKET))
    words = shlex.split(cmd)
    front = words[words.index("exec") + 1:]
    assert front[:3] == ["/run/agentwrap/agentwrap-hook", "1", "/run/agentwrap/hook.sock"]
    assert str(paths.runtime_dir) not in " ".join(front[:6])  # no host runtime path for the client
    boxes.remove_box(paths, "s1")
    assert hook_socket(paths, "s1") == paths.runtime_dir / "hook-servers" / "s1.sock"


def test_only_the_sessions_own_folders_are_mounted(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "c", tmp_path / "s", tmp_path / "r")
    flags = boxes.box_mounts(paths, "s1", tmp_path / "proj", paths.state_dir / "launch" / "s1")
    sources = [f.split(":")[0] for f in flags[1::2]]
    assert str(paths.runtime_dir) not in sources  # never the whole runtime dir
    assert all(s.startswith((str(boxes.box_dir(paths, "s1")), str(paths.answers_dir("s1")),
                             str(tmp_path / "proj"), str(paths.state_dir / "launch" / "s1")))
               for s in sources), sources
    # the launch files are writable to the agent (Qwen writes in its private home there):
    # the container's mounts, which the host's translations trust, are kept outside them
    launch = paths.state_dir / "launch" / "s1"
    assert flags[-1] == f"{launch}:{launch}"
    kept = boxes.mounts_file(launch)
    assert not any(kept.is_relative_to(Path(s)) for s in sources), (kept, sources)


def test_the_record_keeps_the_container() -> None:
    from agentwrap.session_options import SessionOptions

    stored = {"container": "agentwrap-s1", "container_engine": "/usr/bin/podman",
              "container_owned": True, "container_keep": False}
    opts = SessionOptions.from_json(stored)
    assert (opts.container, opts.container_engine, opts.container_owned) == (
        "agentwrap-s1", "/usr/bin/podman", True)
    assert SessionOptions.from_json(opts.to_json()) == opts


def test_the_fallback_is_refused_outside_the_containers_mounts(svc, aw_no_tmux) -> None:  # type: ignore[no-untyped-def]
    """The instruction-file fallback of a container's agent goes through its mounts:
    a project the container does not mount is refused (PathNotMounted, nothing
    written); one it mounts is written, at the path the agent sees."""
    from agentwrap.audit import AuditLog
    from agentwrap.config import DeliveryConfig
    from agentwrap.delivery.engine import DeliveryEngine
    from agentwrap.detect.profiles import load_profile
    from agentwrap.message import NewMessage

    aw = aw_no_tmux
    store = svc.store
    engine = DeliveryEngine(store, DeliveryConfig(), load_profile("standin", aw.paths), "fake",
                            aw.project, AuditLog(aw.paths.audit_log), lock_dir=aw.root / "locks")
    m, _ = store.enqueue(NewMessage(session="fake", content="deploy frozen"))
    elsewhere = Mounts("box1", (Mount(PurePosixPath("/srv/other"), PurePosixPath("/w")),))
    engine.escalation.guard = lambda p: elsewhere.to_container(p, write=True)
    with pytest.raises(PathNotMounted):
        engine.escalation.write_fallback("AGENTS.md", [store.get(m.id)])
    assert not (aw.project / "AGENTS.md").exists()
    mounted = Mounts("box1", (Mount(PurePosixPath(str(aw.project)),
                                          PurePosixPath(str(aw.project))),))
    engine.escalation.guard = lambda p: mounted.to_container(p, write=True)
    engine.escalation.write_fallback("AGENTS.md", [store.get(m.id)])
    assert b"deploy frozen" in (aw.project / "AGENTS.md").read_bytes()


@pytest.mark.parametrize("kind", sorted(CONTAINER_ENGINES))
def test_every_engine_removes_with_flags_its_own_cli_takes(kind: str) -> None:
    """A table over every engine: docker's ``rm`` has no ``-t`` (with it the Docker CLI
    refused the whole command and the session's container stayed)."""
    args = Engine(f"/usr/bin/{kind}", kind).remove_args("agentwrap-s1")
    assert args[:2] == ["rm", "-f"] and args[-1] == "agentwrap-s1"
    assert ("-t" in args) == (kind == "podman")


# --- a boxed agent's paths, as the host reads them (the hooks' payloads) -----------------

def _work_mounts(host_project: Path, host_home: Path) -> Mounts:
    """A --container started with the project at /work and HOME at /root."""
    return Mounts("devbox", (Mount(PurePosixPath(str(host_project)), PurePosixPath("/work")),
                             Mount(PurePosixPath(str(host_home)), PurePosixPath("/root"))))


def test_a_payloads_paths_go_to_the_host_and_outside_ones_are_dropped(tmp_path: Path) -> None:
    from agentwrap.containers.mounts import host_payload

    mounts = _work_mounts(tmp_path / "proj", tmp_path / "home")
    told: list[str] = []
    payload = {"cwd": "/work/src", "transcript_path": "/root/.claude/projects/t.jsonl",
               "tool_input": {"file_path": "/work/a.py", "command": "/bin/ls -l /etc"},
               "tool_calls": [{"tool_name": "Edit", "tool_input": {"file_path": "/etc/passwd"}}]}
    host = host_payload(mounts, payload, told.append)
    assert host["cwd"] == str(tmp_path / "proj" / "src")
    assert host["transcript_path"] == str(tmp_path / "home" / ".claude/projects/t.jsonl")
    assert host["tool_input"] == {"file_path": str(tmp_path / "proj" / "a.py"),
                                  "command": "/bin/ls -l /etc"}  # a command is words, kept
    assert host["tool_calls"][0]["tool_input"] == {}  # /etc/passwd of the container: no host file
    assert len(told) == 1 and "/etc/passwd" in told[0]
    outside = host_payload(mounts, {"cwd": "/", "transcript_path": "/tmp/t.jsonl"}, told.append)
    assert "cwd" not in outside and "transcript_path" not in outside
    assert payload["cwd"] == "/work/src"  # the agent's own payload is unchanged
    assert Mounts.from_json(mounts.to_json()) == mounts


def test_a_boxed_sessions_hooks_note_the_host_paths(aw_no_tmux) -> None:  # type: ignore[no-untyped-def]
    """Issue 39: continuity's notes (transcript path, tool targets) and the feedback's
    edited files of an agent in a container are the host's, through the mounts its
    launch kept; a path no mount holds is refused, never kept as a host path."""
    import json

    from agentwrap.agents.launch import launch_dir
    from agentwrap.containers.box import save_mounts
    from agentwrap.continuity.hooks import notes_file
    from agentwrap.feedback.edit_hook import edited_paths, on_host
    from agentwrap.surfaces.hooks.handler import handle

    aw = aw_no_tmux
    (aw.paths.state_dir / "continuity").mkdir(mode=0o700, exist_ok=True)
    mounts = _work_mounts(aw.project, aw.root / "home")
    save_mounts(launch_dir(aw.paths, "fake"), mounts)
    env = {**aw.env, "AGENTWRAP_SESSION": "fake"}
    tool = {"session_id": "s", "hook_event_name": "PostToolUse", "cwd": "/work",
            "transcript_path": "/root/.claude/projects/-work/s.jsonl", "tool_name": "Edit",
            "tool_input": {"file_path": "/work/app.py", "old_string": "a", "new_string": "b"},
            "tool_response": {}}
    handle("claude", "PostToolUse", json.dumps(tool).encode(), env)
    notes = json.loads(notes_file(aw.paths, "fake").read_text())
    assert notes["transcript_path"] == str(aw.root / "home/.claude/projects/-work/s.jsonl")
    assert notes["tools"][-1]["target"] == str(aw.project / "app.py")
    # feedback: the edited files as the host's; one outside the mounts is not checked
    logged: list[str] = []
    edited = edited_paths("claude", {**tool, "tool_input": {"file_path": "/opt/x.py"}}) + \
        edited_paths("claude", tool)
    files, host = on_host(edited, tool, mounts.to_host, logged.append)
    assert files == [aw.project / "app.py"] and host["cwd"] == str(aw.project)
    assert len(logged) == 1 and "/opt/x.py" in logged[0]
    # a transcript outside the mounts: refused, the notes keep the last host path
    handle("claude", "Stop", json.dumps({**tool, "hook_event_name": "Stop",
                                         "transcript_path": "/tmp/evil.jsonl"}).encode(), env)
    notes = json.loads(notes_file(aw.paths, "fake").read_text())
    assert notes["transcript_path"] == str(aw.root / "home/.claude/projects/-work/s.jsonl")


def test_without_a_native_client_in_the_box_no_hooks_are_registered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No build of agentwrap-hook (no C compiler, no libc.a): the hook commands would
    name a client that is not in the box and fail at every event; the launch then
    registers none (the agent is typed to) and says why."""
    paths = Paths(tmp_path / "c", tmp_path / "s", tmp_path / "r")
    boxes.prepare_box(paths, "s1")
    assert boxes.client_missing(paths, "s1") is None  # this tree's build is copied in
    monkeypatch.setattr(boxes, "CLIENT_BUILDS", (tmp_path / "none-static", tmp_path / "none"))
    boxes.prepare_box(paths, "s2")
    why = boxes.client_missing(paths, "s2")
    assert why is not None and "libc6-dev" in why and "Python hook" in why
    # exactly why the Python hook is no fallback there, and what the agent gets instead
    assert "agentwrap in the image" in why and "store" in why and "API token" in why, why
    assert "typed to" in why, why


# --- what the host writes for a boxed agent, and what it reads of it ----------------------

def test_text_for_the_agent_names_the_containers_paths() -> None:
    """A table over the kinds of mount: moved (the project at /work, HOME at /root),
    nested (the longer wins), at its own path (kept), and a path no mount holds or one
    that only starts like a mount (kept as it is: nothing is made up)."""
    m = Mounts("devbox", (Mount(PurePosixPath("/home/me/proj"), PurePosixPath("/work")),
                          Mount(PurePosixPath("/home/me/proj/vendor"), PurePosixPath("/vendor")),
                          Mount(PurePosixPath("/home/me"), PurePosixPath("/root")),
                          Mount(PurePosixPath("/opt/agents"), PurePosixPath("/opt/agents"))))
    cases = {
        "/home/me/proj/app.py:3:1: F401 unused": "/work/app.py:3:1: F401 unused",
        "see /home/me/proj.": "see /work.",
        "'/home/me/proj/vendor/x.py'": "'/vendor/x.py'",
        "in /home/me/.config and /home/me/proj/a": "in /root/.config and /work/a",
        "/opt/agents/bin/x": "/opt/agents/bin/x",
        "/home/me/project/a.py": "/root/project/a.py",  # /home/me holds it: the HOME mount
        "/home/mex/a.py and /srv/a.py and x/home/me/proj/a": "/home/mex/a.py and /srv/a.py and"
                                                              " x/home/me/proj/a",
    }
    for host, inside in cases.items():
        assert m.text_inside(host) == inside, host
    same = Mounts("b", (Mount(PurePosixPath("/p"), PurePosixPath("/p")),))
    assert same.text_inside("/p/a.py") == "/p/a.py"


def _boxed(svc, aw, mounts: Mounts) -> None:  # type: ignore[no-untyped-def]
    """Session "fake" made a boxed one: its record names a container, its launch the mounts."""
    from agentwrap.agents.launch import launch_dir
    from agentwrap.containers.box import save_mounts
    from agentwrap.session_options import SessionOptions

    save_mounts(launch_dir(aw.paths, "fake"), mounts)
    rec = svc.registry.get("fake")
    svc.registry.register(replace(rec, options=SessionOptions.from_json(
        {**rec.options.to_json(), "container": "devbox", "container_engine": "/usr/bin/podman"})))


def test_feedback_text_names_the_agents_paths_for_a_project_mounted_elsewhere(
        svc, aw_no_tmux) -> None:  # type: ignore[no-untyped-def]
    """Issue 39: a check runs on the host, so its output names the host's files; an
    agent whose project is mounted at /work must read /work/..., in a check's report
    and in a change list alike (before: the host's paths, no file of the agent's)."""
    from agentwrap.feedback.emit import Ran, report, report_changes
    from agentwrap.feedback.runner import RunResult
    from agentwrap.feedback.sources import FeedbackSource

    aw = aw_no_tmux
    _boxed(svc, aw, _work_mounts(aw.project, aw.root / "home"))
    host_file = aw.project / "app.py"
    out = f"{host_file}:3:1: F401 `os` imported but unused\nFound 1 error."
    ran = Ran(FeedbackSource("lint", ("ruff", "{files}")),
              RunResult("lint", ("ruff", "app.py"), 1, out), "edit", ("app.py",))
    sent = report(svc, "fake", [ran], budget_tokens=1000)
    assert len(sent) == 1
    assert "/work/app.py:3:1: F401" in sent[0].content, sent[0].content
    assert str(aw.project) not in sent[0].content, sent[0].content
    changed = report_changes(svc, "fake", [(str(host_file), "modified")], name="watch",
                             root=str(aw.project))
    assert changed is not None and "files changed in /work" in changed.content
    assert str(aw.project) not in changed.content, changed.content


def test_a_checks_whole_output_is_spilled_where_the_agent_inside_can_read_it(
        svc, aw_no_tmux) -> None:  # type: ignore[no-untyped-def]
    """Issue 39: output too long for the message is kept in a file the message names.
    For a boxed agent that file is in the session's box folder, named at the path the
    container mounts it (before: under the host's state dir, which no container sees)."""
    from agentwrap.containers.box import INSIDE, box_dir
    from agentwrap.feedback.emit import Ran, report
    from agentwrap.feedback.runner import RunResult
    from agentwrap.feedback.sources import FeedbackSource

    aw = aw_no_tmux
    box = box_dir(aw.paths, "fake")
    box.mkdir(parents=True, mode=0o700)
    mounts = _work_mounts(aw.project, aw.root / "home")
    _boxed(svc, aw, Mounts(mounts.container, (*mounts.mounts,
                                              Mount(PurePosixPath(str(box)), INSIDE))))
    out = "\n".join(f"{aw.project}/t.py:{i}: assert {i} == {i + 1}" for i in range(2000))
    ran = Ran(FeedbackSource("tests", ("pytest",)), RunResult("tests", ("pytest",), 1, out),
              "edit", ("t.py",))
    (sent,) = report(svc, "fake", [ran], budget_tokens=300)
    named = re.search(r"full output \(\d+ characters\): (\S+)\]", sent.content)
    assert named is not None, sent.content
    inside = PurePosixPath(named.group(1))
    assert inside.parent == INSIDE / "feedback", sent.content
    kept = box / "feedback" / inside.name
    assert kept.read_text().count("assert") == 2000 and oct(kept.stat().st_mode & 0o777) == "0o600"
    assert str(aw.paths.state_dir) not in sent.content and str(aw.project) not in sent.content


def test_feedback_text_of_a_session_on_the_host_is_unchanged(svc, aw_no_tmux) -> None:  # type: ignore[no-untyped-def]
    from agentwrap.feedback.emit import report_changes

    aw = aw_no_tmux
    changed = report_changes(svc, "fake", [(str(aw.project / "a.py"), "modified")],
                             name="watch", root=str(aw.project))
    assert changed is not None and f"files changed in {aw.project}" in changed.content


def test_claudes_conversation_is_read_with_home_mounted_at_another_path(
        svc, aw_no_tmux) -> None:  # type: ignore[no-untyped-def]
    """Issue 39: Claude inside files its transcript under its own HOME and its own
    project path (``/root/.claude/projects/-work/``); the host has that HOME at
    another folder. The reader is given the agent's view (its cwd as the container
    names it, its HOME where the host has it): the hooks' transcript path (already
    the host's) and, without it, the newest transcript there are both found (before:
    the host's slug and the host's HOME, so neither, and the screen was the source)."""
    import json
    import os

    from agentwrap.continuity.hooks import notes_file
    from agentwrap.service.conversation import Conversations
    from agentwrap.service.profiles import ProfileCache

    aw = aw_no_tmux
    home = aw.root / "home-of-the-box"
    mounts = replace(_work_mounts(aw.project, home), home=PurePosixPath("/root"))
    _boxed(svc, aw, mounts)
    svc.registry.register(replace(svc.registry.get("fake"), profile="claude"))
    folder = home / ".claude" / "projects" / "-work"
    folder.mkdir(parents=True)
    line = {"type": "assistant", "timestamp": "2026-12-02T03:00:00Z", "uuid": "u1",
            "message": {"role": "assistant", "content": [{"type": "text",
                                                            "text": "reply from the box"}]}}
    (folder / "t1.jsonl").write_text(json.dumps(line) + "\n")
    reader = Conversations(aw.paths, svc.store, svc.registry, ProfileCache(aw.paths))
    got = reader.read("fake")  # no hint: the newest transcript of the agent's own folder
    assert got.source == "transcript", got
    assert any(e.text == "reply from the box" for e in got.entries), got
    old = folder / "t0.jsonl"  # older than the session: only the hooks' path names it
    old.write_text(json.dumps({**line, "message": {"role": "assistant", "content": [
        {"type": "text", "text": "the hooks named this one"}]}}) + "\n")
    os.utime(old, (1, 1))
    notes_file(aw.paths, "fake").parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    notes_file(aw.paths, "fake").write_text(json.dumps(
        {"transcript_path": str(old)}))  # as the hooks translated it to the host's
    got = reader.read("fake")
    assert got.source == "transcript", got
    assert [e.text for e in got.entries] == ["the hooks named this one"], got


@pytest.mark.parametrize(("said", "gone"), [
    ("Error: no such container agentwrap-s1", True),                       # podman
    ("Error: No such container: agentwrap-s1", True),                      # docker
    ("Error response from daemon: No such object: agentwrap-s1", True),    # docker, older
    ("Cannot connect to the Docker daemon at unix:///x/docker.sock. Is the docker daemon"
     " running?", False),
    ("Error: unable to connect to Podman socket: connection refused", False),
])
def test_an_engine_that_does_not_answer_is_not_a_container_gone(
        tmp_path: Path, said: str, gone: bool) -> None:
    """Only the engine's "no such container" means gone; any other failure of
    ``inspect`` (its daemon restarting) raises, and the end's reason says so
    (before: every failure read "container ... is gone", the container still running)."""
    from agentwrap.errors import ContainerProblem

    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\necho {shlex.quote(said)} >&2\nexit 1\n")
    fake.chmod(0o755)
    engine = Engine(str(fake), "docker")
    if gone:
        assert engine.inspect("agentwrap-s1") is None
        assert Box(engine, "agentwrap-s1").end_reason(0) == "container agentwrap-s1 is gone"
    else:
        with pytest.raises(ContainerProblem):
            engine.inspect("agentwrap-s1")
        why = Box(engine, "agentwrap-s1").end_reason(0)
        assert why is not None and "did not answer" in why and "may still run" in why


def test_a_box_without_a_native_client_fails_closed_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch through :func:`open_box` (an engine that reports the container's
    mounts: the box folder, the launch files, the project at /work, HOME at /root):
    with no native client to copy in, no hooks are registered and the note says
    exactly why; the agent's HOME inside is kept for its conversation reader."""
    import json

    from agentwrap.containers.box import saved_mounts
    from agentwrap.sessions.boxed import open_box

    paths = Paths(tmp_path / "c", tmp_path / "s", tmp_path / "r")
    cwd, launch, home = tmp_path / "proj", paths.state_dir / "launch" / "s1", tmp_path / "home"
    info = [{"State": {"Running": True}, "Config": {"Env": ["PATH=/usr/bin", "HOME=/root"]},
             "Mounts": [
                 {"Type": "bind", "Source": str(boxes.box_dir(paths, "s1")),
                  "Destination": str(INSIDE), "RW": True},
                 {"Type": "bind", "Source": str(launch), "Destination": str(launch), "RW": False},
                 {"Type": "bind", "Source": str(cwd), "Destination": "/work", "RW": True},
                 {"Type": "bind", "Source": str(home), "Destination": "/root", "RW": True}]}]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(info)}\nEOF\n")
    (bin_dir / "podman").chmod(0o755)
    cfg = _apply(Config(), {"container": {"engine": "podman"}}, "")
    launch.mkdir(parents=True)
    monkeypatch.setattr(boxes, "CLIENT_BUILDS", (tmp_path / "none-static", tmp_path / "none"))
    boxed = open_box(paths, cfg, "s1", cwd, launch, container="devbox", image=None, keep=False,
                     env={"PATH": str(bin_dir)})
    assert not boxed.hooks and boxed.inside is None
    assert any("Python hook cannot stand in" in n for n in boxed.notes), boxed.notes
    assert boxed.workdir == "/work"
    kept = saved_mounts(launch)
    assert kept is not None and kept.home == PurePosixPath("/root")
    assert kept.reader_view(str(cwd)) == ("/work", {"HOME": str(home)})
