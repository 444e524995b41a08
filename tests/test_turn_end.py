"""Aider's turn end from its notifications command (issue 37), on captured screens.

Aider streams with no busy marker, so from the screen alone its ``ready`` waits
the profile's ``quiet_ms`` after the prompt is drawn. Its notifications command
runs just before the prompt is drawn: with agentwrap's command marking a file,
the prompt's first frame is ``ready`` (signal ``hook``), and the frame between
the command and the prompt (the rule, nothing under it) stays ``busy``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from agentwrap.config import RunConfig
from agentwrap.detect.detector import Detector
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import Signal, State
from agentwrap.paths import Paths
from agentwrap.sessions.channels import plan, turn_end_path
from agentwrap.sessions.turn_end import TURN_END_CHANNEL, TurnEndMark, command, own_setting
from agentwrap.terminal.screen import Snapshot

SCREENS = Path(__file__).parent / "fixtures" / "screens" / "aider"


def _screen(stem: str) -> Snapshot:
    cols, rows = (int(n) for n in stem.rsplit("__", 1)[1].split("x"))
    return Snapshot.from_ansi((SCREENS / f"{stem}.ansi").read_text(encoding="utf-8"),
                              cols=cols, rows=rows)


def _before_prompt() -> Snapshot:
    """The frame between the command and the prompt: the captured ready screen
    with its prompt line not drawn yet (the rule is the last line)."""
    lines = (SCREENS / "ready__after-reply__160x45.txt").read_text(encoding="utf-8").rstrip("\n")
    head, last = lines.rsplit("\n", 1)
    assert last.strip() == ">", last
    return Snapshot.from_text(head + "\n", cols=160, rows=45)


class Clock:
    """The detector's clock and the mark's wall clock, as one."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def _ring(path: Path, clock: Clock | None = None) -> None:
    """What Aider does: ``subprocess.run(cmd, shell=True)`` (aider/io.py ring_bell);
    the mark then dated ``clock``'s now."""
    done = subprocess.run(command(path), shell=True, capture_output=True, check=False)
    assert done.returncode == 0 and done.stderr == b""
    if clock is not None:
        os.utime(path, ns=(int(clock.t * 1e9), int(clock.t * 1e9)))


def _mid_reply(tmp_path: Path, *, rung: bool = True) -> tuple[Detector, Clock, Path]:
    """A detector of Aider with its turn-end mark, ready once (the fresh screen,
    settled), now seeing a reply stream; then (``rung``) Aider runs its
    notifications command."""
    clock, mark = Clock(), tmp_path / "turn-end"
    mark.write_bytes(b"")  # made at launch
    det = Detector(load_profile("aider"), clock=clock, hooks=TurnEndMark(mark, "aider", wall=clock))
    fresh = _screen("ready__fresh__160x45")
    det.update(fresh)
    clock.t += 5
    assert det.update(fresh).state is State.READY
    det.update(_screen("busy__streaming__160x45"))
    clock.t += 0.05
    if rung:
        _ring(mark, clock)
    return det, clock, mark


def test_the_turn_end_mark_makes_the_prompt_ready_at_its_first_frame(tmp_path: Path) -> None:
    det, clock, _ = _mid_reply(tmp_path)
    between = det.update(_before_prompt())
    assert between.state is State.BUSY, between  # not an overlay: the prompt comes next
    clock.t += 0.02
    reading = det.update(_screen("ready__after-reply__160x45"))
    assert (reading.state, reading.signal, reading.rule) == (State.READY, Signal.HOOK, "hook"), reading
    assert reading.quiet_ms == 0  # the prompt's own first frame: no quiet window


def test_without_the_mark_the_prompt_waits_for_the_quiet_window(tmp_path: Path) -> None:
    det, clock, _ = _mid_reply(tmp_path, rung=False)  # Aider has not rung
    first = det.update(_screen("ready__after-reply__160x45"))
    assert (first.state, first.signal) == (State.BUSY, Signal.QUIET), first
    clock.t += det.profile.quiet_ms / 1000
    assert det.update(_screen("ready__after-reply__160x45")).state is State.READY


def test_text_typed_after_the_mark_is_a_draft_and_then_voids_it(tmp_path: Path) -> None:
    det, clock, _ = _mid_reply(tmp_path)
    assert det.update(_screen("ready__after-reply__160x45")).state is State.READY
    clock.t += 0.1
    assert det.update(_screen("draft__one-line__160x45")).state is State.DRAFT
    clock.t += 0.1
    # submitted: the box is empty again, but that turn's end says nothing now
    after = det.update(_screen("ready__after-reply__160x45"))
    assert after.signal is not Signal.HOOK and after.state is not State.READY, after


def test_a_dialog_wins_over_the_mark(tmp_path: Path) -> None:
    # Aider rings before a y/n question too (the first input after a reply)
    det, _, _ = _mid_reply(tmp_path)
    reading = det.update(_screen("waiting_input__add-file-to-chat__160x45"))
    assert reading.state is State.WAITING_INPUT, reading


def test_the_command_is_fixed_quoted_and_silent(tmp_path: Path) -> None:
    hostile = tmp_path / "a dir; touch $(echo pwned) `x` 'q\"" / "turn-end"
    hostile.parent.mkdir()
    hostile.write_bytes(b"")
    cmd = command(hostile)
    assert shlex.split(cmd)[:1] == ["printf"]
    _ring(hostile)
    _ring(hostile)
    assert hostile.read_bytes() == b".."
    assert not (Path.cwd() / "pwned").exists()
    _ring(tmp_path / "gone" / "turn-end")  # the launch dir removed: no warning in Aider


def _paths(tmp_path: Path) -> Paths:
    return Paths.from_env({"HOME": str(tmp_path / "home"),
                           "XDG_STATE_HOME": str(tmp_path / "state")})


def test_the_launch_gets_the_command_and_an_empty_private_file(tmp_path: Path) -> None:
    paths, home = _paths(tmp_path), tmp_path / "home"
    home.mkdir()
    out = plan(load_profile("aider"), RunConfig(), paths, "s1", ["aider"], {"HOME": str(home)},
               version="0.86.2", cwd=str(tmp_path))
    assert TURN_END_CHANNEL in out.channels
    i = out.argv.index("--notifications-command")
    assert out.argv[i - 1] == "--notifications"
    path = turn_end_path(paths, "s1")
    assert out.argv[i + 1] == command(path)
    assert path.read_bytes() == b"" and path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("where", ["argv", "prefix", "env", "home", "project", "config"])
def test_the_persons_own_notifications_are_left_alone(tmp_path: Path, where: str) -> None:
    paths, home, project = _paths(tmp_path), tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (project / "sub").mkdir(parents=True)
    (project / ".git").mkdir()
    argv, env = ["aider"], {"HOME": str(home)}
    if where == "argv":
        argv.append("--notifications-command=notify-send done")
    elif where == "prefix":
        argv += ["--no-notif"]
    elif where == "env":
        env["AIDER_NOTIFICATIONS"] = "true"
    elif where == "home":
        (home / ".aider.conf.yml").write_text("model: x\nnotifications: true\n")
    elif where == "project":
        (project / ".aider.conf.yml").write_text("notifications-command: say done\n")
    else:
        (tmp_path / "mine.yml").write_text("notifications: true\n")
        argv += ["--config", str(tmp_path / "mine.yml")]
    assert own_setting(argv, env, str(project / "sub")) is not None
    out = plan(load_profile("aider"), RunConfig(), paths, "s1", argv, env, version="0.86.2",
               cwd=str(project / "sub"))
    assert TURN_END_CHANNEL not in out.channels
    assert "--notifications-command" not in out.argv and "--notifications" not in out.argv
    assert any(n.startswith("turn-end: not registered") for n in out.notes), out.notes
