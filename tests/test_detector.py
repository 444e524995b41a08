"""The detector's verdicts on hand-made screens, with a controlled clock.

Real captured screens are tested in test_profile_screens.py; these pin the
rules that are about the *absence* of evidence (quiet, unknown) and the
generic profile's prompt handling.
"""

from __future__ import annotations

from agentwrap.detect.detector import UNKNOWN_AFTER_MS, Detector
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import State
from agentwrap.paths import Paths
from agentwrap.terminal.screen import Snapshot


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _profile(name: str, tmp_path: object) -> object:
    return load_profile(name, Paths.from_env({"HOME": str(tmp_path)}))


def test_generic_prompts_only_line_is_ready_not_a_draft(tmp_path: object) -> None:
    # A cooked-mode REPL fed several lines prints a prompt per line, on one line.
    clock = Clock()
    det = Detector(_profile("generic", tmp_path), clock=clock)  # type: ignore[arg-type]
    snap = Snapshot.from_text("out\n> > > >\n", cols=80, rows=5)
    det.update(snap)
    clock.t += 1.0
    reading = det.update(snap)
    assert reading.state is State.READY, reading
    assert det.draft is False
    typed = Snapshot.from_text("out\n> > > > make test\n", cols=80, rows=5)
    det.update(typed)
    clock.t += 1.0
    assert det.update(typed).state is State.DRAFT
    assert det.update(Snapshot.from_text(">>> x = 1\n", cols=80, rows=5)).state is State.DRAFT


def test_still_screen_no_rule_explains_is_unknown_after_being_ready(tmp_path: object) -> None:
    clock = Clock()
    det = Detector(_profile("aider", tmp_path), clock=clock)  # type: ignore[arg-type]
    rule = "─" * 40
    ready = Snapshot.from_text(f"hello\n{rule}\n>\n", cols=40, rows=6)
    det.update(ready)
    clock.t += 5.0
    assert det.update(ready).state is State.READY
    dialog = Snapshot.from_text("Allow reading /etc/hostname?\n  Allow once\n  Deny\n", cols=40, rows=6)
    assert det.update(dialog).state is State.BUSY  # it just changed: could be a reply
    clock.t += UNKNOWN_AFTER_MS / 1000 + 0.1
    reading = det.update(dialog)
    assert reading.state is State.UNKNOWN, reading
    assert "no rule matched" in reading.reason


def test_unknown_is_not_used_before_the_agent_was_ever_ready(tmp_path: object) -> None:
    clock = Clock()
    det = Detector(_profile("aider", tmp_path), clock=clock)  # type: ignore[arg-type]
    banner = Snapshot.from_text("Aider v0.86.2\nloading...\n", cols=40, rows=6)
    det.update(banner)
    clock.t += 60.0
    assert det.update(banner).state is State.STARTING


def test_aider_prompt_below_its_list_of_files_in_the_chat(tmp_path: object) -> None:
    # agentwrap launches aider with --read of its own context file, so aider
    # lists it above the prompt ("Readonly: ..."), as it lists any chat files.
    clock = Clock()
    det = Detector(_profile("aider", tmp_path), clock=clock)  # type: ignore[arg-type]
    rule = "─" * 60
    files = "Readonly: ../.local/state/agentwrap/context/aider/CONVENTIONS.md\nEditable: app.py"
    ready = Snapshot.from_text(f"hi\n{rule}\n{files}\n>\n", cols=80, rows=8)
    det.update(ready)
    clock.t += 5.0
    assert det.update(ready).state is State.READY
    draft = Snapshot.from_text(f"hi\n{rule}\n{files}\n> fix the bug\n", cols=80, rows=8)
    det.update(draft)
    clock.t += 5.0
    assert det.update(draft).state is State.DRAFT
    reply = Snapshot.from_text(f"hi\n{rule}\n{files}\n> fix the bug\n\nSure, here is\n", cols=80, rows=8)
    det.update(reply)
    clock.t += 5.0
    assert det.update(reply).state is not State.DRAFT


def test_ready_waits_for_the_agents_own_start_up(tmp_path: object) -> None:
    """Gemini draws its prompt before its SessionStart hook has run: a
    message sent on that first `ready` raced the hook (issue 25). Until the
    start-up is complete the ready screen reads `starting`, saying why; once
    it is, ready as before, and the gate is never asked again."""
    clock = Clock()
    pending = ["its SessionStart hook has not run yet"]
    asked = []

    def start_pending() -> str | None:
        asked.append(1)
        return pending[0] if pending else None

    det = Detector(_profile("generic", tmp_path), clock=clock,  # type: ignore[arg-type]
                   start_pending=start_pending)
    snap = Snapshot.from_text("out\n> \n", cols=80, rows=5)
    det.update(snap)
    clock.t += 1.0
    reading = det.update(snap)
    assert reading.state is State.STARTING, reading
    assert reading.reason.endswith("but its SessionStart hook has not run yet")
    pending.clear()
    assert det.update(snap).state is State.READY
    calls = len(asked)
    det.update(Snapshot.from_text("out\nmore\n> \n", cols=80, rows=5))
    clock.t += 1.0
    assert det.update(snap).state in (State.BUSY, State.READY)
    clock.t += 1.0
    assert det.update(snap).state is State.READY and len(asked) == calls


def test_dialog_since_is_when_the_dialog_was_first_seen(tmp_path: object) -> None:
    """The answerer waits out a dialog's ``settle_ms`` from this moment (Claude Code
    2.1.332 drops Tab for about 0.2 s after AskUserQuestion is drawn): switching its
    tabs keeps it, a screen without the dialog clears it."""
    clock = Clock()
    profile = _profile("claude", tmp_path)
    det = Detector(profile, clock=clock)  # type: ignore[arg-type]
    ask = next(d for d in profile.dialogs if d.name == "question")  # type: ignore[attr-defined]
    assert ask.settle_ms > 0
    footer = "Enter to select · Tab/Arrow keys to navigate · Esc to cancel"
    tab = "←  ☐ Database  ☐ Features  ✔ Submit  →\n\n{q}\n\n❯ 1. A\n  2. B\n\n" + footer + "\n"
    first = Snapshot.from_text(tab.format(q="Which database?"), cols=80, rows=12)
    assert det.dialog_since is None
    assert det.update(first).state is State.WAITING_INPUT
    assert det.dialog_since == 1000.0
    clock.t += 2.0
    det.update(Snapshot.from_text(tab.format(q="Which features?"), cols=80, rows=12))
    assert det.dialog_since == 1000.0  # another tab of the same dialog
    det.update(Snapshot.from_text("● done\n", cols=80, rows=12))
    assert det.dialog_since is None
    clock.t += 1.0
    det.update(first)
    assert det.dialog_since == 1003.0
