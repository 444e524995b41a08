"""An agent that runs every tool without asking (OpenCode, issue 22): the session
says it has no permission gate, and ``[run] ask_first`` starts it asking first.

The e2e side (tests/e2e/test_copilot_opencode_qwen.py) checks the same on the real
OpenCode: ``state`` says "none" by default, and with ``ask_first`` its
permission dialog opens and is answered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentwrap.config import Config, RunConfig
from agentwrap.detect.profiles import load_profile, parse_profile
from agentwrap.errors import ProfileError
from agentwrap.session_options import SessionOptions
from agentwrap.sessions.lifecycle import permission_gate
from agentwrap.sessions.registry import SessionRecord
from agentwrap.surfaces.cli.inspection import _gate_of, _state_json

ASK = "OPENCODE_PERMISSION"


def test_only_opencode_cline_and_pi_run_tools_without_asking() -> None:
    oc = load_profile("opencode").permissions
    assert not oc.asks_by_default and oc.ask_first_env == ASK
    assert '"bash": "ask"' in oc.ask_first_value
    cline = load_profile("cline").permissions
    assert not cline.asks_by_default and cline.ask_first_args == ("--auto-approve", "false")
    for name in ("claude", "codex", "gemini", "aider", "copilot", "qwen", "kimi"):
        assert load_profile(name).permissions.asks_by_default, name


def test_an_agent_with_no_ask_first_mode_says_ask_first_cannot_help() -> None:
    """pi (issue 36) has no permission dialogs and no mode that asks: its gate
    must not promise that ``[run] ask_first`` makes it ask, and the setting
    changes neither its environment nor its command line."""
    pi = load_profile("pi")
    assert not pi.permissions.asks_by_default
    assert not (pi.permissions.ask_first_env or pi.permissions.ask_first_args)
    for cfg in (Config(), Config(run=RunConfig(ask_first=True))):
        env: dict[str, str] = {}
        argv = ["pi"]
        gate = str(permission_gate(pi, cfg, env, argv)["permission_gate"])
        assert gate.startswith("none: pi runs every tool without asking"), gate
        assert "has no ask-first mode" in gate and "starts it in its ask-first mode" not in gate
        assert env == {} and argv == ["pi"]


def test_an_ask_first_variable_needs_its_value() -> None:
    data = {"name": "x", "input": {"input_region": "last_line"},
            "permissions": {"asks_by_default": False, "ask_first_env": "X_ASK"}}
    with pytest.raises(ProfileError, match="ask_first_env and ask_first_value go together"):
        parse_profile(data, Path("x.toml"))


def test_without_ask_first_the_session_has_no_gate_and_says_so() -> None:
    env: dict[str, str] = {}
    got = permission_gate(load_profile("opencode"), Config(), env)
    assert str(got["permission_gate"]).startswith("none: OpenCode runs every tool without asking")
    assert "[run] ask_first = true" in str(got["permission_gate"])
    assert ASK not in env


def test_ask_first_sets_the_agents_own_switch() -> None:
    env: dict[str, str] = {}
    got = permission_gate(load_profile("opencode"), Config(run=RunConfig(ask_first=True)), env)
    assert got == {"permission_gate": f"asks first ({ASK} set)"}
    assert env[ASK] == load_profile("opencode").permissions.ask_first_value


def test_the_persons_own_setting_is_kept_and_counts_as_a_gate() -> None:
    env = {ASK: '{"bash": "deny"}'}
    got = permission_gate(load_profile("opencode"), Config(run=RunConfig(ask_first=True)), env)
    assert env[ASK] == '{"bash": "deny"}'
    assert got == {"permission_gate": f"asks first ({ASK} set)"}
    assert permission_gate(load_profile("opencode"), Config(), dict(env)) == got


def test_agents_that_ask_record_nothing() -> None:
    env: dict[str, str] = {}
    assert permission_gate(load_profile("claude"), Config(run=RunConfig(ask_first=True)), env) == {}
    assert env == {}


def test_state_and_doctor_tell_it() -> None:
    rec = SessionRecord(name="oc", profile="opencode", backend="tmux", command=["opencode"],
                        cwd="/tmp", started=0.0,
                        options=SessionOptions(permission_gate="none: runs all"))
    assert _state_json(rec)["permission_gate"] == "none: runs all"
    rec = SessionRecord(name="c", profile="claude", backend="tmux", command=["claude"],
                        cwd="/tmp", started=0.0)
    assert _state_json(rec)["permission_gate"] is None
    oc = load_profile("opencode")
    assert _gate_of(oc, ask_first=False).startswith("none: runs every tool without asking")
    assert _gate_of(oc, ask_first=True).startswith(f"asks first ({ASK} set by [run] ask_first")


def test_cline_has_no_gate_unless_asked_first_by_config() -> None:
    """Cline CLI runs every tool without asking by default: the session says so;
    [run] ask_first adds --auto-approve false to its command line."""
    cline = load_profile("cline")
    argv = ["/bin/cline"]
    got = permission_gate(cline, Config(), {}, argv)
    assert str(got["permission_gate"]).startswith("none: Cline CLI runs every tool without asking")
    assert argv == ["/bin/cline"]
    argv = ["/bin/cline", "fix the tests"]
    got = permission_gate(cline, Config(run=RunConfig(ask_first=True)), {}, argv)
    assert argv == ["/bin/cline", "--auto-approve", "false", "fix the tests"]
    assert got == {"permission_gate": "asks first (--auto-approve false)"}


@pytest.mark.parametrize(("given", "gate"), [
    (["--auto-approve", "true"], "none"),
    (["--auto-approve=true"], "none"),
    (["--auto-approve", "false"], "asks first"),
    (["--auto-approve=false"], "asks first"),
])
def test_clines_own_auto_approve_option_is_kept(given: list[str], gate: str) -> None:
    for ask_first in (False, True):
        argv = ["/bin/cline", *given]
        got = permission_gate(load_profile("cline"), Config(run=RunConfig(ask_first=ask_first)),
                              {}, argv)
        assert argv == ["/bin/cline", *given]  # the person's choice, as given
        assert str(got["permission_gate"]).startswith(gate), (given, ask_first, got)


def test_doctor_tells_clines_gate() -> None:
    cline = load_profile("cline")
    assert _gate_of(cline, ask_first=False).startswith("none: runs every tool without asking")
    assert _gate_of(cline, ask_first=True) == \
        "asks first (--auto-approve false added by [run] ask_first)"
