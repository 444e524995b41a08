"""Every profile against the real screens captured from the real CLIs.

Each fixture's file name says the state a person would name for that screen
(``<state>__<what>__<cols>x<rows>.txt``). ``exited`` screens are decided by
the process, not the screen, so they are checked for not looking ready.
Screens of streaming output that carry no busy marker (Codex, Aider) are
checked the way the detector sees them live: the screen is still changing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentwrap.detect.detector import Detector
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import State
from agentwrap.terminal.screen import Snapshot

SCREENS = Path(__file__).parent / "fixtures" / "screens"
NAME_RE = re.compile(r"^(?P<state>[a-z_]+)__(?P<what>[^_].*?)__(?P<cols>\d+)x(?P<rows>\d+)\.txt$")


def fixtures() -> list[pytest.param]:
    out = []
    for f in sorted(SCREENS.glob("*/*.txt")):
        m = NAME_RE.match(f.name)
        if m and m["state"] != "exited":  # decided by the exit status, see below
            out.append(pytest.param(f, m, id=f"{f.parent.name}/{f.stem}"))
    return out


def snapshot_of(f: Path, m: re.Match[str]) -> Snapshot:
    """From the SGR capture when there is one: dim placeholders matter."""
    ansi = f.with_suffix(".ansi")
    size = {"cols": int(m["cols"]), "rows": int(m["rows"])}
    if ansi.exists():
        return Snapshot.from_ansi(ansi.read_text(encoding="utf-8"), **size)
    return Snapshot.from_text(f.read_text(encoding="utf-8"), **size)


def settled(profile_name: str, snap: Snapshot, *, changing: bool = False) -> Detector:
    """A detector that has seen the agent ready before and now sees ``snap``,
    either long unchanged (settled) or just changed (changing)."""
    t = [1000.0]
    det = Detector(load_profile(profile_name), clock=lambda: t[0])
    det._seen_ready = True
    det.update(Snapshot.from_text("placeholder"))
    t[0] += 5
    det.update(snap)
    if not changing:
        t[0] += 30
        det.update(snap)
    return det


@pytest.mark.parametrize(("path", "m"), fixtures())
def test_screen_state(path: Path, m: re.Match[str]) -> None:
    agent, expected = path.parent.name, m["state"]
    snap = snapshot_of(path, m)
    if expected == "starting":
        det = Detector(load_profile(agent))
        det.update(snap)
        assert det.state in (State.STARTING, State.WAITING_INPUT), det.reading
        return
    streaming = expected == "busy" and "streaming" in m["what"]
    det = settled(agent, snap, changing=streaming)
    assert det.state.value == expected, f"{det.reading} / evidence: {det.evidence!r}"


@pytest.mark.parametrize(("path", "m"), [p for p in fixtures() if "typing-while-busy" in p.id])
def test_draft_seen_while_busy(path: Path, m: re.Match[str]) -> None:
    """The person's queued text must block delivery even while busy."""
    det = settled(path.parent.name, snapshot_of(path, m))
    assert det.draft, det.reading


# The profile dialog that must decide a waiting_input screen, by agent and the
# fixture's <what> (any size). Screens not listed need some dialog, not a rule.
DIALOG_OF = {
    ("claude", "read-outside-project"): "read_outside_project",
    ("claude", "create-file"): "file_edit",
    ("claude", "edit-file"): "file_edit",
    ("claude", "ask-user-question"): "question",
    ("claude", "web-fetch"): "web_fetch",
    # 2.1.332 in its ask-first mode (--permission-mode default), with a model its auto
    # mode supports: a "Tip:" line under the title (issue 35)
    ("claude", "bash-ask-first"): "permission",
    ("claude", "bash-pipe-ask-first"): "permission",
    ("claude", "bash-long-ask-first"): "permission",
    ("claude", "read-outside-project-ask-first"): "read_outside_project",
    ("claude", "create-file-ask-first"): "file_edit",
    ("claude", "edit-file-ask-first"): "file_edit",
    ("claude", "api-key"): "api_key",
    ("codex", "edit-approval"): "permission",
    ("codex", "plan-mode-question"): "question",
    ("codex", "implement-plan"): "implement_plan",
    ("aider", "add-file-to-chat"): "add_file",
    ("aider", "edit-file-not-in-chat"): "edit_file",
    ("aider", "run-shell-command"): "shell_command",
    ("gemini", "at-file-outside-workspace"): "read_outside_workspace",
    ("gemini", "create-file"): "file_edit",
    ("gemini", "edit-file"): "file_edit",
    ("gemini", "ask-user"): "question",
    ("gemini", "web-fetch"): "permission",
    ("copilot", "permission"): "permission",
    ("copilot", "create-file"): "file_edit",
    ("copilot", "folder-trust"): "trust_folder",
    ("copilot", "ask-user"): "question",
    ("opencode", "permission"): "permission",
    ("opencode", "question"): "question",
    ("opencode", "edit-file"): "file_edit",
    ("opencode", "web-fetch"): "web_fetch",
    ("qwen", "permission"): "permission",
    ("qwen", "create-file"): "file_edit",
    ("qwen", "web-fetch"): "web_fetch",
    ("qwen", "folder-trust"): "trust_folder",
    ("cline", "permission-ask-first"): "permission",
    ("cline", "edit-file"): "permission",
    ("cline", "ask-question"): "question",
    ("cline", "onboarding"): "onboarding",
    ("kimi", "permission"): "permission",
    ("kimi", "folder-trust"): "trust_folder",
    ("kimi", "ask-user-question"): "question",
    ("kimi", "onboarding"): "onboarding",
    ("pi", "onboarding"): "onboarding",   # no model configured: pi has no other dialog
}


@pytest.mark.parametrize(("path", "m"), [p for p in fixtures() if "/waiting_input__" in p.id])
def test_waiting_input_is_decided_by_a_dialog(path: Path, m: re.Match[str]) -> None:
    """A dialog says what the person must answer; a rule or the title would not."""
    agent = path.parent.name
    det = settled(agent, snapshot_of(path, m))
    assert det.reading.rule.startswith("dialog:"), det.reading
    assert det.reading.reason, det.reading
    want = DIALOG_OF.get((agent, m["what"]))
    if want is not None:
        assert det.reading.rule == f"dialog:{want}", det.reading


def test_every_listed_dialog_has_a_fixture() -> None:
    have = {(f.parent.name, f.name.split("__")[1]) for f in SCREENS.glob("*/*.txt")}
    assert set(DIALOG_OF) <= have


def test_exited_is_decided_by_the_process() -> None:
    det = Detector(load_profile("claude"))
    reading = det.exited(3)
    assert reading.state is State.EXITED and "code 3" in reading.reason


def test_builtin_profiles_load_with_their_names() -> None:
    from agentwrap.detect.profiles import load_all_profiles

    profiles = load_all_profiles()
    assert {"claude", "codex", "aider", "gemini", "generic"} <= set(profiles)
    for name, prof in profiles.items():
        assert prof.name == name


#: Dialogs a profile claims that no real capture shows yet, and why: every other
#: claimed dialog must decide at least one fixture captured from the pinned CLI.
UNCAPTURED = {
    ("codex", "confirm"): "a catch-all for Codex's 'Press enter to confirm' questions: every one"
                          " captured so far is decided by a more specific dialog first",
    ("qwen", "onboarding"): "Qwen Code's first-run auth picker: the captures start it configured",
}


def test_every_dialog_a_profile_claims_is_captured() -> None:
    """A dialog shape a profile claims is read off a real screen of the pinned CLI
    (issue 35: Claude Code 2.1.332's dialogs were claimed from 2.1.197's)."""
    decided: set[tuple[str, str]] = set()
    for path, m in (p.values for p in fixtures()):
        det = settled(path.parent.name, snapshot_of(path, m))
        if det.reading.rule.startswith("dialog:"):
            decided.add((path.parent.name, det.reading.rule.removeprefix("dialog:")))
    claimed = {(agent, d.name) for agent in {p.parent.name for p in SCREENS.glob("*/*.txt")}
               for d in load_profile(agent).dialogs}
    assert claimed - decided == set(UNCAPTURED), sorted(claimed - decided)
