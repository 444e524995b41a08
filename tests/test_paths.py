"""Privacy of what agentwrap keeps: dirs 0700 and files 0600 from the moment
they exist, repaired in the state dir, refused in a runtime dir that is not
safely ours; files written in it never follow a planted symlink."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import AwEnv
from test_cli import assert_clean_error, fake_session

from agentwrap.audit import AuditLog
from agentwrap.datagram import WakeSocket
from agentwrap.errors import SessionNotFound, SessionNotRunning, UnsafePath
from agentwrap.message import NewMessage
from agentwrap.paths import Paths, write_private
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.sessions.lifecycle import spawn_supervisor
from agentwrap.sessions.registry import Registry

OTHER_UID = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The common 022 umask, under which files used to come out 0644."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def paths() -> Iterator[Paths]:
    base = Path(tempfile.mkdtemp(prefix="awp-", dir="/tmp"))  # short: socket paths
    yield Paths(config_dir=base / "c", state_dir=base / "s", runtime_dir=base / "r")
    shutil.rmtree(base, ignore_errors=True)


def test_everything_is_private_from_creation(paths: Paths, loose_umask: None) -> None:
    paths.ensure()
    for d in (paths.state_dir, paths.logs_dir, paths.runtime_dir):
        assert mode(d) == 0o700, d
    store = SQLiteMessageStore(paths.db_path)
    store.enqueue(NewMessage(session="s1", content="secret"))
    db = paths.db_path
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):  # while the store is open
        assert mode(f) == 0o600, f
    store.close()
    AuditLog(paths.audit_log).write(event="x")
    assert mode(paths.audit_log) == 0o600
    write_private(paths.runtime_dir / "s1.screen", b"screen")
    assert mode(paths.runtime_dir / "s1.screen") == 0o600
    sock = WakeSocket(paths.wake_socket("s1"))
    assert mode(paths.wake_socket("s1")) == 0o600
    sock.close()


def test_supervisor_logs_are_private_from_creation(
    paths: Paths, loose_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Log lines quote message content: the file is 0600 from its first byte,
    # both the one the detached supervisor's stdout/stderr go to and the one
    # its logging writes (a real spawn whose supervisor finds no session).
    base = paths.state_dir.parent
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "c"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "s"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base / "r"))
    paths = Paths.from_env()  # the spawned supervisor finds the same dirs
    paths.ensure()
    registry = Registry(paths.db_path)
    with pytest.raises((SessionNotRunning, SessionNotFound)):
        spawn_supervisor(paths, "nosuch", registry, wait_s=5.0)
    assert mode(paths.supervisor_log("nosuch")) == 0o600
    log = paths.logs_dir / "direct.log"
    subprocess.run(
        [sys.executable, "-c",
         "import logging, sys; from pathlib import Path; from agentwrap.sessions.supervisor import log_to;"
         " log_to(Path(sys.argv[1])); logging.getLogger('t').info('secret')", str(log)],
        check=True,
    )
    assert mode(log) == 0o600
    assert "secret" in log.read_text()


def test_an_old_state_dir_is_repaired_at_start(paths: Paths, loose_umask: None) -> None:
    paths.state_dir.mkdir(parents=True, mode=0o755)
    paths.logs_dir.mkdir(mode=0o755)
    old_files = [paths.db_path, paths.audit_log, paths.supervisor_log("a")]
    for f in old_files:
        f.write_text("x")
        f.chmod(0o644)
    read_only = paths.logs_dir / "kept.log"
    read_only.write_text("x")
    read_only.chmod(0o444)
    paths.ensure()
    assert mode(paths.state_dir) == mode(paths.logs_dir) == 0o700
    assert [mode(f) for f in old_files] == [0o600] * 3
    assert mode(read_only) == 0o400  # owner bits kept


@pytest.mark.parametrize("bad_mode", [0o777, 0o755, 0o1777])
def test_a_runtime_dir_open_to_others_is_refused(paths: Paths, bad_mode: int) -> None:
    paths.runtime_dir.mkdir(parents=True)
    paths.runtime_dir.chmod(bad_mode)
    with pytest.raises(UnsafePath) as info:
        paths.ensure()
    assert f"mode {bad_mode:04o}; it must be 0700" in info.value.message
    assert mode(paths.runtime_dir) == bad_mode  # refused, not silently changed


def test_a_runtime_dir_of_another_user_is_refused(paths: Paths) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can make a dir owned by another user")
    paths.runtime_dir.mkdir(parents=True, mode=0o700)
    os.chown(paths.runtime_dir, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePath, match=f"owned by uid {OTHER_UID}, not by you"):
        paths.ensure()
    with pytest.raises(UnsafePath):
        write_private(paths.runtime_dir / "a.screen", b"x")


def test_a_symlinked_runtime_dir_is_refused_not_followed(paths: Paths, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    paths.runtime_dir.parent.mkdir(parents=True, exist_ok=True)
    paths.runtime_dir.symlink_to(target)
    with pytest.raises(UnsafePath, match="is a symlink"):
        paths.ensure()
    with pytest.raises(OSError):  # O_NOFOLLOW on the dir itself
        write_private(paths.runtime_dir / "a.screen", b"x")
    assert list(target.iterdir()) == []


def test_write_private_never_writes_through_a_planted_link(paths: Paths, tmp_path: Path) -> None:
    paths.ensure()
    victim = tmp_path / "root-only-file"
    victim.write_text("precious")
    screen = paths.runtime_dir / "s1.screen"
    screen.symlink_to(victim)  # the old fixed temp name too
    (paths.runtime_dir / "s1.screen.tmp").symlink_to(victim)
    write_private(screen, b"new screen")
    assert victim.read_text() == "precious"
    assert not screen.is_symlink() and screen.read_bytes() == b"new screen"
    assert mode(screen) == 0o600
    leftovers = {p.name for p in paths.runtime_dir.iterdir()}
    assert leftovers == {"s1.screen", "s1.screen.tmp"}  # no temp file left behind


def test_a_state_file_that_is_a_symlink_is_refused(paths: Paths, tmp_path: Path) -> None:
    paths.ensure()
    victim = tmp_path / "victim"
    victim.write_text("x")
    paths.audit_log.symlink_to(victim)
    with pytest.raises(UnsafePath, match="not a regular file"):
        paths.ensure()
    with pytest.raises(OSError):
        AuditLog(paths.audit_log).write(event="x")
    assert victim.read_text() == "x"


# --- through the CLI ---------------------------------------------------------------------------


def test_cli_refuses_an_unsafe_runtime_dir_in_one_line(aw: AwEnv) -> None:
    fake_session(aw)
    aw.paths.runtime_dir.chmod(0o777)
    res = aw.cli("send", "fake", "hi")
    line = assert_clean_error(res, 77)
    assert str(aw.paths.runtime_dir) in line and "0777" in line
    assert "chmod 700" in res.stderr


def test_doctor_reports_a_wrong_mode(aw: AwEnv) -> None:
    fake_session(aw)
    aw.paths.db_path.chmod(0o644)
    aw.paths.state_dir.chmod(0o755)
    res = aw.cli("doctor", "--json")
    problems = json.loads(res.stdout)["problems"]
    db_problem = next(p for p in problems if str(aw.paths.db_path) in p["problem"])
    assert "0644" in db_problem["problem"] and "chmod 600" in db_problem["fix"]
    assert any("0755" in p["problem"] and "chmod 700" in p["fix"] for p in problems)
    res = aw.cli("doctor", "--json")  # the first run's start repaired them
    problems = json.loads(res.stdout)["problems"]
    assert not any("mode" in p["problem"] for p in problems)


def test_ensure_ignores_a_file_gone_since_it_was_listed(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite removes the -wal and -shm files as the last connection closes: a
    file listed by private_files() may be gone when ensure() checks it (eight
    `agentwrap send` at once crashed on that)."""
    paths = Paths.from_env({"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "r")})
    gone = paths.db_path.with_name(paths.db_path.name + "-wal")
    monkeypatch.setattr(Paths, "private_files", lambda self: [gone])
    paths.ensure()


# --- every dir agentwrap makes for what it keeps: 0700, the dirs above it too (issue 35) -----


def test_the_librarys_write_section_leaves_a_runtime_dir_the_next_command_takes(
    aw: AwEnv, tmp_path: Path, loose_umask: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """write_section() made its lock dir 0700 and the runtime dir above it
    0755 (Path.mkdir's parents), which every command after it refused."""
    from agentwrap.delivery.fallback import FallbackEntry, write_section

    runtime = tmp_path / "xdg-runtime"  # nothing of agentwrap's there yet
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    entry = FallbackEntry(message_id="m1", label="[user:t]", created=0.0, content="hi")
    write_section(aw.project, "CLAUDE.md", [entry])
    made = runtime / "agentwrap"
    assert (mode(runtime), mode(made), mode(made / "locks")) == (0o700, 0o700, 0o700)
    res = aw.cli("ls", check=True, env={"XDG_RUNTIME_DIR": str(runtime)})
    assert "Traceback" not in res.stderr


@pytest.mark.usefixtures("tmux")
def test_the_stores_audit_and_tmux_dirs_are_made_0700_with_their_parents(
    tmp_path: Path, loose_umask: None,
) -> None:
    from agentwrap.queue import db
    from agentwrap.terminal.tmux import TmuxTerminal

    AuditLog(tmp_path / "a" / "b" / "audit.jsonl").write(event="x")
    db.connect(tmp_path / "c" / "d" / "agentwrap.db").close()
    try:
        TmuxTerminal.launch(tmp_path / "e" / "f" / "t.sock", "s", ["sleep", "30"], env={},
                            cwd=tmp_path)
    finally:
        subprocess.run(["tmux", "-S", str(tmp_path / "e" / "f" / "t.sock"), "kill-server"],
                       capture_output=True, check=False)
    for d in ("a", "a/b", "c", "c/d", "e", "e/f"):
        assert mode(tmp_path / d) == 0o700, d


def test_no_module_makes_a_dir_but_through_paths() -> None:
    """The rule as a scan: a ``mkdir`` outside paths.py makes its parents
    0755 (or forgets the mode): every dir of agentwrap's is made by
    :func:`agentwrap.paths.private_dirs` or :func:`private_dir`. The one
    exception makes the dir of a project's own instruction file."""
    root = Path(__file__).resolve().parent.parent / "agentwrap"
    allowed = {("delivery/fallback.py", "path.parent.mkdir(parents=True, exist_ok=True)")}
    found = {(str(p.relative_to(root)), line.strip())
             for p in root.rglob("*.py") if p.name != "paths.py"
             for line in p.read_text(encoding="utf-8").splitlines()
             if ".mkdir(" in line or "os.makedirs(" in line or "os.mkdir(" in line}
    assert found <= allowed, found - allowed
