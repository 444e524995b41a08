"""The answer folder: a JSON file dropped in it answers the stand-in's dialog.

End to end with a real tmux session and the supervisor: the file is taken
(inotify wakes the supervisor), checked by the same rules as ``agentwrap
answer``, typed, and removed; a bad one is moved aside with its error next to
it and nothing is typed. Waits are deadlines only.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import AwEnv
from support.delivery_kit import write_config
from support.waiting import wait_for
from test_answer import answered_events, choices, dialog_on_screen, open_dialog

from agentwrap.answers.folder import is_answer_file, parse
from agentwrap.errors import InvalidAnswer


def drop(folder: Path, name: str, doc: Any) -> Path:
    """Write ``doc`` the way the contract asks: a dot temp file, then a rename."""
    tmp = folder / f".{name}.tmp"
    tmp.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    os.replace(tmp, folder / name)
    return folder / name


def answer_dir(aw: AwEnv) -> Path:
    res = aw.cli("state", "sa", "--json", check=True)
    return Path(json.loads(res.stdout)["answer_dir"])


def rejected(folder: Path, name: str) -> dict[str, Any]:
    """The error written next to a refused file (once it is there)."""
    err = folder / f"{name}.error"
    wait_for(err.exists, 15, f"{err.name}")
    assert (folder / f"{name}.rejected").exists() and not (folder / name).exists()
    data: dict[str, Any] = json.loads(err.read_text(encoding="utf-8"))
    return data


def test_parse_takes_exactly_the_documented_shapes() -> None:
    assert parse(b'{"answers": {"option": 2}}').answers == {"option": 2}
    got = parse(b'{"questionId": "3f2a9c0d1b7e", "answers": {"option": "Yes"}}')
    assert (got.question_id, got.answers) == ("3f2a9c0d1b7e", {"option": "Yes"})
    assert parse(b'{"answers": {"deny": true}}').answers == {"deny": True}
    assert parse('{"answers": {"text": "in memory ✓"}}'.encode()).answers == {
        "text": "in memory ✓"}
    assert parse(b'{"answers": {"options": [1, "Metrics"]}}').answers == {
        "options": [1, "Metrics"]}
    several = b'{"answers": {"questions": {"Database": "SQLite", "Features": ["Search", 3]}}}'
    assert parse(several).answers == {"questions": {"Database": "SQLite",
                                                    "Features": ["Search", 3]}}
    for bad, words in ((b"", "not a JSON document"), (b"{", "not a JSON document"),
                       (b"[1]", "JSON object"), (b"\xff\xfe", "not a JSON document"),
                       (b'{"answers": {}}', "exactly one"),
                       (b'{"answers": {"option": 1, "deny": true}}', "exactly one"),
                       (b'{"answers": {"option": true}}', "number or a label"),
                       (b'{"answers": {"deny": false}}', "deny must be true"),
                       (b'{"answers": {"yes": 1}}', "unknown answer 'yes'"),
                       (b'{"answers": {"options": []}}', "list of numbers or labels"),
                       (b'{"answers": {"options": [true]}}', "list of numbers or labels"),
                       (b'{"answers": {"questions": {}}}', "maps each question"),
                       (b'{"answers": {"questions": {"A": [[1]]}}}', "maps each question"),
                       (b'{"answers": {"questions": ["A"]}}', "maps each question"),
                       (b'{"answer": {"option": 1}}', "unknown key 'answer'"),
                       (b'{"questionId": 5, "answers": {"option": 1}}', "questionId"),
                       (b'{"answers": [1]}', 'needs "answers"'),
                       (b" " * 70000, "at most")):
        with pytest.raises(InvalidAnswer, match=words):
            parse(bad)
    assert [n for n in ("a.json", ".a.json", "a.json.tmp", "a.json.rejected", ".json",
                        "b.JSON", "x.json.error") if is_answer_file(n)] == ["a.json"]


def test_a_file_answers_the_dialog_and_is_removed(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    folder = answer_dir(aw)
    assert folder == aw.paths.answers_dir("sa") and folder.is_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    q = open_dialog(aw)
    path = drop(folder, "phone.json", {"questionId": q["id"], "answers": {"option": 2}})
    wait_for(lambda: choices(aw), 15, "the stand-in's choice")
    assert [c["choice"] for c in choices(aw)] == ["chose 2. No"]
    wait_for(lambda: not path.exists(), 15, "the file removed")
    assert sorted(p.name for p in folder.iterdir()) == []
    events = answered_events(aw)
    assert [(e.data["status"], e.data["source"], e.data["by"]) for e in events] == [
        ("pending", "file", "person"), ("applied", "file", "person")]
    # a label and a deny, without a questionId
    open_dialog(aw, 2)
    drop(folder, "b.json", {"answers": {"deny": True}})
    wait_for(lambda: len(choices(aw)) == 2, 15, "the second choice")
    assert choices(aw)[-1]["choice"] == "cancelled"
    assert sorted(p.name for p in folder.iterdir()) == []


def test_bad_files_are_moved_aside_and_nothing_is_typed(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    folder = answer_dir(aw)
    drop(folder, "early.json", {"answers": {"option": 1}})  # nothing asked yet
    assert rejected(folder, "early.json")["error"] == "NoOpenQuestion"
    open_dialog(aw)
    before = dialog_on_screen(aw)
    drop(folder, "broken.json", '{"answers": {"option": 1')
    err = rejected(folder, "broken.json")
    assert err["error"] == "InvalidAnswer" and "not a JSON document" in err["message"]
    assert err["hint"]
    drop(folder, "seven.json", {"answers": {"option": 7}})
    assert "no option 7" in rejected(folder, "seven.json")["message"]
    drop(folder, "stale.json", {"questionId": "0123456789ab", "answers": {"option": 1}})
    err = rejected(folder, "stale.json")
    assert err["error"] == "StaleAnswer" and "asks something else now" in err["message"]
    drop(folder, "hostile.json", {"answers": {"text": "ok\x1b[201~\rrm -rf /"}})
    assert rejected(folder, "hostile.json")["error"] == "InvalidAnswer"
    target = folder.parent / "elsewhere.json"  # a symlink is never followed
    target.write_text('{"answers": {"option": 1}}', encoding="utf-8")
    (folder / "link.json").symlink_to(target)
    drop(folder, "poke.json", "[]")  # wakes the folder: the link is looked at too
    assert rejected(folder, "link.json")["error"] == "UnsafePath"
    assert rejected(folder, "poke.json")["error"] == "InvalidAnswer"
    time.sleep(0.3)  # a supervisor turn would have typed by now (not a timing assertion)
    assert choices(aw) == [] and dialog_on_screen(aw) == before
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    assert sorted(a["file"] for a in audit if a["event"] == "answer_file_rejected") == [
        "broken.json", "early.json", "hostile.json", "link.json", "poke.json", "seven.json",
        "stale.json"]


def test_a_file_moved_in_from_another_folder_is_taken(aw: AwEnv) -> None:
    # Issue 25.6: inotify reports a file moved in from an unwatched folder as
    # created, and no close follows: it stayed in the folder forever, neither
    # taken nor refused. Now a complete file is taken however it appeared.
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    folder = answer_dir(aw)
    staging = folder.parent.parent / "staging"  # elsewhere, on the same file system
    staging.mkdir(mode=0o700)
    assert staging.stat().st_dev == folder.stat().st_dev
    broken = staging / "broken.json"
    broken.write_text('{"answers": {"option": 1', encoding="utf-8")
    os.rename(broken, folder / "broken.json")
    err = rejected(folder, "broken.json")
    assert err["error"] == "InvalidAnswer" and "not a JSON document" in err["message"]
    q = open_dialog(aw)
    good = staging / "phone.json"
    good.write_text(json.dumps({"questionId": q["id"], "answers": {"option": 2}}),
                    encoding="utf-8")
    os.rename(good, folder / "phone.json")
    wait_for(lambda: choices(aw), 15, "the stand-in's choice")
    assert [c["choice"] for c in choices(aw)] == ["chose 2. No"]
    wait_for(lambda: not (folder / "phone.json").exists(), 15, "the file removed")
    assert sorted(p.name for p in folder.iterdir()) == ["broken.json.error",
                                                        "broken.json.rejected"]


def test_held_open_tells_a_file_being_written(tmp_path: Path) -> None:
    """What tells a file moved in (complete) from one being written in place."""
    from agentwrap.answers.folder import _held_open

    path = tmp_path / "a.json"
    with open(path, "w", encoding="utf-8") as writer:
        writer.write("{")
        writer.flush()
        assert _held_open(str(path)) is True
        with open(path, encoding="utf-8"):  # a reader is no writer
            assert _held_open(str(path)) is True
    assert _held_open(str(path)) is False
    with open(path, encoding="utf-8"):
        assert _held_open(str(path)) is False
    (tmp_path / "link.json").symlink_to(path)
    assert _held_open(str(tmp_path / "link.json")) is None  # never followed
    assert _held_open(str(tmp_path / "gone.json")) is None


def test_a_file_being_written_is_not_read_half_way(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    folder = answer_dir(aw)
    q = open_dialog(aw)
    whole = json.dumps({"questionId": q["id"], "answers": {"option": 2}})
    half = len(whole) // 2
    tmp = folder / ".slow.json.tmp"  # the contract: a temp name, renamed when complete
    direct = open(folder / "inplace.json", "w", encoding="utf-8")  # noqa: SIM115
    try:
        with open(tmp, "w", encoding="utf-8") as slow:
            slow.write(whole[:half])
            slow.flush()
            direct.write(whole[:half])  # a writer that ignores the contract: still open
            direct.flush()
            drop(folder, "other.json", {"answers": {"option": 9}})  # the folder is looked at
            rejected(folder, "other.json")
            assert tmp.exists() and (folder / "inplace.json").exists()
            assert not (folder / "inplace.json.rejected").exists()
            assert choices(aw) == []
            slow.write(whole[half:])
        os.replace(tmp, folder / "slow.json")
        wait_for(lambda: choices(aw), 15, "the stand-in's choice")
        assert [c["choice"] for c in choices(aw)] == ["chose 2. No"]
        assert not (folder / "slow.json").exists()
        assert (folder / "inplace.json").exists()  # still open: still not taken
        direct.write(whole[half:])
    finally:
        direct.close()
    # complete once closed; it answers a question no longer open: moved aside
    assert rejected(folder, "inplace.json")["error"] in ("StaleAnswer", "NoOpenQuestion")
    assert choices(aw) == [{**choices(aw)[0]}] and len(choices(aw)) == 1


def test_a_file_answers_every_question_of_a_tabbed_dialog(aw: AwEnv) -> None:
    """``{"answers": {"questions": {...}}}`` is `agentwrap answer --answer ...` in a
    file: taken by the intake (every question answered, by header or number) and
    removed; one naming a question the dialog does not have is moved aside. No
    supervisor runs here, so the answer is stored, not typed (the typing is proven on
    the real Claude Code in tests/e2e/test_answering.py)."""
    from support.http_kit import register
    from test_answer import _features_tab, _waiting

    from agentwrap.answers.folder import AnswerFolder
    from agentwrap.answers.intake import AnswerIntake
    from agentwrap.answers.store import AnswerStore
    from agentwrap.audit import AuditLog
    from agentwrap.detect.profiles import load_profile
    from agentwrap.sessions.registry import Registry

    register(aw, "cc", profile="claude")
    q = _waiting(aw.paths, "cc", _features_tab())
    store, registry = AnswerStore(aw.paths.db_path), Registry(aw.paths.db_path)
    audit = AuditLog(aw.paths.audit_log)
    intake = AnswerIntake(aw.paths, registry, lambda: store, audit,
                          lambda _name: load_profile("claude", aw.paths))
    folder = AnswerFolder(aw.paths, "cc", intake, audit).open()
    try:
        good = {"questionId": q.id,
                "answers": {"questions": {"Database": "SQLite", "2": [1, "Metrics"]}}}
        bad = {"answers": {"questions": {"Database": 1, "Colour": 2}}}
        for name, doc in (("a.json", good), ("b.json", bad)):
            (folder.path / ".tmp").write_text(json.dumps(doc), encoding="utf-8")
            (folder.path / ".tmp").rename(folder.path / name)  # atomically, as documented
        taken: dict[str, Any] = {}
        wait_for(lambda: taken.update(folder.step()) or len(taken) == 2, 15, "both files taken")
        a, b = taken["a.json"], taken["b.json"]
        assert not isinstance(a, Exception), a
        assert a.answer.source == "file" and a.answer.answer.to_json() == {
            "how": "answers", "tabs": ["Database", "Features"], "answers": [
                {"tab": 0, "header": "Database", "values": ["SQLite"]},
                {"tab": 1, "header": "Features", "values": ["1", "Metrics"]}]}
        assert isinstance(b, InvalidAnswer) and "no question 'Colour'" in b.message
        assert sorted(p.name for p in folder.path.iterdir()) == [
            "b.json.error", "b.json.rejected"]
    finally:
        folder.close()
        store.close()
        registry.close()
