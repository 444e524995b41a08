"""The typed values that cross packages (issue 21): answer actions and statuses,
a session's options and state. Each keeps the JSON stored before it existed."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import pytest
from conftest import AwEnv

from agentwrap.answers.actions import (
    AnswerStatus,
    DenyAnswer,
    HookAnswer,
    OptionAnswer,
    OptionsAnswer,
    TabAnswer,
    TabsAnswer,
    TextAnswer,
    UnreadAnswer,
    from_json,
)
from agentwrap.answers.store import AnswerStore
from agentwrap.detect.states import State
from agentwrap.session_options import SessionOptions
from agentwrap.sessions.registry import SessionRecord

# --- answer actions -----------------------------------------------------------------------

#: Every shape as the intake (and the supervisor, for a hook's answer) stored it
#: before the actions were typed.
STORED: list[tuple[Any, dict[str, Any]]] = [
    (OptionAnswer(2, 2, "No"), {"how": "option", "option": 2, "number": 2, "label": "No"}),
    (OptionAnswer(1, None, "Yes", "y"),
     {"how": "option", "option": 1, "number": None, "label": "Yes", "key": "y"}),
    (OptionsAnswer((1, 3), ("Search", "Metrics")),
     {"how": "options", "numbers": [1, 3], "labels": ["Search", "Metrics"]}),
    (TabsAnswer(("Database", "Features"), (TabAnswer(0, "Database", ("SQLite",)),
                                           TabAnswer(1, "Features", ("1", "Metrics")))),
     {"how": "answers", "tabs": ["Database", "Features"], "answers": [
         {"tab": 0, "header": "Database", "values": ["SQLite"]},
         {"tab": 1, "header": "Features", "values": ["1", "Metrics"]}]}),
    (TextAnswer("use the cache", 4, 4, "Type something."),
     {"how": "text", "text": "use the cache", "option": 4, "number": 4,
      "label": "Type something."}),
    (DenyAnswer(), {"how": "deny"}),
    (HookAnswer("allow"), {"decision": "allow", "via": "hook"}),
]


@pytest.mark.parametrize(("action", "stored"), STORED, ids=lambda x: getattr(x, "how", None))
def test_each_action_is_the_json_stored_before(action: Any, stored: dict[str, Any]) -> None:
    assert action.to_json() == stored
    assert json.dumps(action.to_json()) == json.dumps(stored)  # the same order of keys too
    assert from_json(stored) == action


def test_a_shape_this_agentwrap_does_not_know_is_kept_as_stored() -> None:
    for data in ({"how": "voice", "clip": "x.wav"}, {"how": "option"}, {}):
        action = from_json(data)
        assert isinstance(action, UnreadAnswer) and action.to_json() == data
        assert action.how == data.get("how", "")


def test_statuses_are_stored_and_printed_as_their_words(aw: AwEnv) -> None:
    assert [s.value for s in AnswerStatus] == ["pending", "applied", "stale", "failed"]
    assert [s.ended for s in AnswerStatus] == [False, True, True, True]
    assert f"answer_{AnswerStatus.STALE}" == "answer_stale"
    store = AnswerStore(aw.paths.db_path, events_dir=aw.paths.events_dir)
    try:
        a = store.request("s", "q1", OptionAnswer(1, 1, "Yes"), source="cli")
        assert a.status is AnswerStatus.PENDING and not a.ended
        with pytest.raises(ValueError):
            store.conclude(a.id, AnswerStatus.PENDING, "")
        assert store.conclude(a.id, AnswerStatus.APPLIED, "typed")
        done = store.get(a.id)
        assert done.status is AnswerStatus.APPLIED and done.ended
        out = done.to_json()
        assert type(out["status"]) is str and out["status"] == "applied"
        assert out["answer"] == {"how": "option", "option": 1, "number": 1, "label": "Yes"}
    finally:
        store.close()
    with sqlite3.connect(aw.paths.db_path) as conn:
        row = conn.execute("SELECT answer, status FROM answers").fetchone()
    assert row == ('{"how":"option","option":1,"number":1,"label":"Yes"}', "applied")


# --- session options -----------------------------------------------------------------------


def test_options_a_launch_writes_read_back_as_written() -> None:
    written = {"trust_folder": False, "require_ack": None, "supervisor": "host",
               "channels": ["hooks", "mcp"], "channel_notes": ["no read file"],
               "agent_version": "2.1.197", "permission_gate": "asks first (X set)"}
    opts = SessionOptions.from_json(written)
    assert (opts.trust_folder, opts.require_ack, opts.supervisor) == (False, None, "host")
    assert opts.channels == ("hooks", "mcp") and opts.has("hooks") and not opts.has("read-file")
    assert opts.channel_notes == ("no read file",) and opts.agent_version == "2.1.197"
    assert opts.permission_gate == "asks first (X set)"
    assert json.dumps(opts.to_json()) == json.dumps(written)


def test_old_rows_and_unknown_keys_parse() -> None:
    old = SessionOptions.from_json({})  # launched before any option was recorded
    assert old == SessionOptions() and old.to_json() == {}
    assert old.channels is None and not old.has("hooks") and old.trust_folder is False
    assert old.require_ack is None and old.supervisor == "" and old.permission_gate is None
    assert SessionOptions.from_json(None) == SessionOptions()
    newer = {"require_ack": True, "channels": [], "colour": "blue", "limits": {"n": 1}}
    opts = SessionOptions.from_json(newer)
    assert opts.require_ack is True and opts.channels == () and opts.extra == {
        "colour": "blue", "limits": {"n": 1}}
    assert json.dumps(opts.to_json()) == json.dumps(newer)
    # a value of the wrong type reads as the default
    bad = SessionOptions.from_json({"require_ack": "yes", "trust_folder": 1, "channels": "hooks"})
    assert (bad.require_ack, bad.trust_folder, bad.channels) == (None, False, None)


def test_options_built_in_code_write_what_differs_from_the_defaults() -> None:
    assert SessionOptions(channels=(), require_ack=True).to_json() == {
        "require_ack": True, "channels": []}


def _record(**kw: Any) -> SessionRecord:
    return SessionRecord(name="s", profile="standin", backend="tmux", command=["x"], cwd="/",
                         started=time.time(), **kw)


def test_the_registry_keeps_options_and_state_typed(aw: AwEnv) -> None:
    reg = aw.registry()
    try:
        written = {"trust_folder": True, "require_ack": None, "supervisor": "process",
                   "channels": ["read-file"], "future": 1}
        reg.register(_record(options=SessionOptions.from_json(written)))
        rec = reg.get("s")
        assert rec.state is State.STARTING and rec.options.trust_folder
        assert rec.options.has("read-file") and rec.options.extra == {"future": 1}
        out = rec.to_json()
        assert json.dumps(out["options"]) == json.dumps(written)
        assert type(out["state"]) is str and out["state"] == "starting"
        reg.set_state("s", State.WAITING_INPUT, signal="screen", rule="r", reason="asks",
                      evidence="", quiet_ms=0, draft=False, changed=True)
        assert reg.get("s").state is State.WAITING_INPUT
    finally:
        reg.close()
    with sqlite3.connect(aw.paths.db_path) as conn:
        state, options = conn.execute("SELECT state, options FROM sessions").fetchone()
    assert state == "waiting_input" and json.loads(options) == written
