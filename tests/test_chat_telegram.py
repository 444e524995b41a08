"""The Telegram bridge (issue 40, "a chat channel both ways"), over real HTTP.

A Telegram Bot API fake on loopback (tests/support/telegram_fake.py) stands
in for api.telegram.org; ``agentwrap chat telegram`` runs as a real process
against it and a stand-in agent under tmux that asks a permission. The test
plays the person: it presses the fake's buttons and writes in the chat.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import AwEnv
from support import secret_scan
from support.delivery_kit import send, wait_terminal, write_config
from support.telegram_fake import TelegramFake
from support.waiting import wait_for

from agentwrap.config import load_config
from agentwrap.errors import ChatTokenProblem, ChatUnreachable, ConfigError
from agentwrap.paths import Paths
from agentwrap.surfaces.chat.bridge import TOKEN_ENV, read_token
from agentwrap.surfaces.chat.ledger import Ledger
from agentwrap.surfaces.chat.telegram_api import TelegramApi

ME = 4242  # the person's chat id, configured
STRANGER = 9999  # a chat nobody configured


@dataclass
class Bridge:
    fake: TelegramFake
    proc: subprocess.Popen[bytes] | None
    log: Path
    token: str

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def logged(self, words: str, n: int = 1) -> None:
        wait_for(lambda: self.text().count(words) >= n, 20, f"the bridge to log {words!r}",
                 on_timeout=self.text)

    def start(self, aw: AwEnv) -> None:
        """(Re)start ``agentwrap chat telegram``, its output appended to :attr:`log`."""
        polls = len(self.fake.called("getUpdates"))
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "agentwrap", "chat", "telegram"],
                                         env=aw.env, cwd=aw.project, stdout=out,
                                         stderr=subprocess.STDOUT)
        wait_for(lambda: len(self.fake.called("getUpdates")) > polls, 20,
                 "the bridge's first poll", on_timeout=self.text)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=20) in (0, 128 + signal.SIGTERM, -signal.SIGTERM)

    def callbacks(self) -> list[str]:
        return [c["text"] for c in self.fake.called("answerCallbackQuery")]


def _config(aw: AwEnv, fake: TelegramFake, token_file: Path) -> None:
    write_config(aw, readiness_timeout_s=60)
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write(f'\n[chat.telegram]\ntoken_file = "{token_file}"\nchat_ids = [{ME}]\n'
                f'api_url = "{fake.url}"\npoll_timeout_s = 2\n')


@pytest.fixture
def bridge(aw: AwEnv) -> Iterator[Bridge]:
    token = f"123456:{secret_scan.token()}"
    fake = TelegramFake(token)
    token_file = aw.root / "telegram.token"
    token_file.write_text(token + "\n", encoding="utf-8")
    token_file.chmod(0o600)
    _config(aw, fake, token_file)
    log = aw.root / "chat.log"
    log.write_bytes(b"")
    b = Bridge(fake, None, log, token)
    with secret_scan.ArgvWatch([token.encode()]) as watch:
        try:
            b.start(aw)
            yield b
        finally:
            if b.proc is not None and b.proc.poll() is None:
                b.stop()
            fake.close()
    # the token: in no command line, log, error or file but its own
    assert watch.scans > 0 and watch.found == []
    assert token not in b.text()
    assert [p for p in secret_scan.files_holding(aw.root, [token.encode()])
            if p != str(token_file)] == []


def choices(aw: AwEnv) -> list[str]:
    path = aw.log.with_name(aw.log.name + ".answers")
    if not path.exists():
        return []
    return [json.loads(x)["choice"] for x in path.read_text(encoding="utf-8").splitlines() if x]


def asked(aw: AwEnv, b: Bridge) -> dict[str, Any]:
    """Open the stand-in's dialog; the one notice the bridge sends about it."""
    mid = send(aw, "sa", "please OPENDIALOG")
    assert wait_terminal(aw, mid).status.value == "delivered"
    sent = wait_for(lambda: b.fake.sent_to(ME), 20, "the question in the chat", on_timeout=b.text)
    assert len(sent) == 1
    return sent[0]


def test_a_press_approves_once_and_nothing_else_does(aw: AwEnv, bridge: Bridge) -> None:
    command = "touch <b>bold</b> *stars* [x](http://e.example)"
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-command", command)
    aw.wait_state("sa", "ready")
    msg = asked(aw, bridge)
    # the session, the host, the exact command, as plain text; the options as buttons
    assert "sa on " in msg["text"] and f"command:\n{command}" in msg["text"], msg["text"]
    assert msg["parse_mode"] is None
    ids = bridge.fake.buttons(msg["message_id"])
    assert [t for t, _ in ids] == ["1. Yes", "2. No", "Deny"]
    approve = ids[0][1]

    # a stranger's press: ignored, logged by chat id only, nothing answered
    bridge.fake.press(STRANGER, msg["message_id"], approve)
    bridge.logged(f"ignored a button press from chat {STRANGER}")
    assert choices(aw) == [] and bridge.callbacks() == []

    # the person's press: applied, the tool runs
    first = bridge.fake.press(ME, msg["message_id"], approve)
    wait_for(lambda: choices(aw) == ["chose 1. Yes"], 20, "the approval typed",
             on_timeout=lambda: f"{choices(aw)}\n{bridge.text()}")
    # the press is answered once the answer is applied (the dialog seen closed),
    # which comes after the stand-in has the keys
    wait_for(lambda: bridge.callbacks() != [], 20, "the press answered",
             on_timeout=lambda: bridge.text())
    assert bridge.callbacks() == ["sent: Yes"]

    # the same update again (a lost confirmation): acted on once
    bridge.fake.redeliver(first)
    bridge.logged(f"update {first['update_id']} seen before")
    # a second press: refused, says why
    bridge.fake.press(ME, msg["message_id"], approve)
    wait_for(lambda: len(bridge.callbacks()) == 2, 20, "the second press answered")
    assert "closed" in bridge.callbacks()[1] or "already" in bridge.callbacks()[1]
    # the message says it closed and has no buttons left
    wait_for(lambda: "closed:" in bridge.fake.messages[msg["message_id"]]["text"], 20,
             "the notice edited")
    assert bridge.fake.buttons(msg["message_id"]) == []
    assert choices(aw) == ["chose 1. Yes"]
    assert len(bridge.fake.sent_to(ME)) == 1  # one notice for the question, never more
    sent = bridge.fake.called("sendMessage") + bridge.fake.called("editMessageText")
    assert sent and all("parse_mode" not in c for c in sent)  # plain text: markup stays inert
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    assert [a["source"] for a in audit if a.get("event") == "answer_requested"] == ["chat"]


def test_a_deny_listed_command_cannot_be_approved_from_the_chat(
        aw: AwEnv, bridge: Bridge) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-command", "rm -rf /")
    aw.wait_state("sa", "ready")
    msg = asked(aw, bridge)
    (_, yes), _, (_, deny) = bridge.fake.buttons(msg["message_id"])
    bridge.fake.press(ME, msg["message_id"], yes)
    wait_for(lambda: bridge.callbacks(), 20, "the press answered")
    assert bridge.callbacks()[0].startswith("refused: the deny-list holds"), bridge.callbacks()
    assert choices(aw) == []
    # a restart: the question is not sent again, and its buttons still work
    bridge.stop()
    bridge.start(aw)
    bridge.fake.press(ME, msg["message_id"], deny)
    wait_for(lambda: len(choices(aw)) == 1, 20, "the denial typed", on_timeout=bridge.text)
    assert "Yes" not in choices(aw)[0]
    assert bridge.callbacks()[1] == "sent: Deny"
    assert len(bridge.fake.sent_to(ME)) == 1


def test_a_refused_notice_is_sent_again_once(aw: AwEnv, bridge: Bridge) -> None:
    bridge.fake.failing["sendMessage"] = 2  # Telegram says 429 twice: surely not delivered
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    msg = asked(aw, bridge)
    assert len(bridge.fake.called("sendMessage:refused")) == 2
    assert "command:\ntouch x" in msg["text"]
    bridge.logged("429 Too Many Requests")
    assert bridge.text().count("429 Too Many Requests") == 1  # a repeated failure: one line
    assert len(bridge.fake.sent_to(ME)) == 1


def test_a_reply_answers_in_words(aw: AwEnv, bridge: Bridge) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-style", "choice")
    aw.wait_state("sa", "ready")
    msg = asked(aw, bridge)
    assert "(reply to this message to answer in words)" in msg["text"]
    bridge.fake.say(STRANGER, "the stranger's words", reply_to=msg["message_id"])
    bridge.logged(f"ignored a message from chat {STRANGER}")
    bridge.fake.say(ME, "SQLite, but *in memory*", reply_to=msg["message_id"])
    wait_for(lambda: choices(aw), 20, "the words typed", on_timeout=bridge.text)
    path = aw.log.with_name(aw.log.name + ".answers")
    (done,) = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert done["text"] == "SQLite, but *in memory*" and done["option"] == 3
    assert any(m["text"] == "sent your answer" for m in bridge.fake.sent_to(ME))


def test_send_and_ls_from_the_chat(aw: AwEnv, bridge: Bridge) -> None:
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    hostile = "hello from the phone <b>x</b> `rm -rf /`"
    bridge.fake.say(STRANGER, "/send sa not from you")
    bridge.logged(f"ignored a message from chat {STRANGER}")
    bridge.fake.say(ME, f"/send sa {hostile}")
    wait_for(lambda: any("queued " in m["text"] for m in bridge.fake.sent_to(ME)), 20,
             "the reply to /send", on_timeout=bridge.text)
    rows = [json.loads(x) for x in wait_for(
        lambda: aw.log.exists() and aw.log.read_text(encoding="utf-8").splitlines(), 20,
        "the message typed")]
    assert any(hostile in r["text"] for r in rows), rows
    assert not any("not from you" in r["text"] for r in rows)
    store = aw.store()
    try:
        sent = [e for e in store.events(0, session="sa", kinds=["message.queued"])]
        msgs = [store.get(e.subject) for e in sent]
    finally:
        store.close()
    assert [(m.source.value, m.source_id, m.content) for m in msgs][:1] == [
        ("chat", f"telegram:{ME}", hostile)]
    host = aw.registry().get("sa").host
    bridge.fake.say(ME, f"/send {host}/sa second, by host")
    wait_for(lambda: any("second, by host" in r["text"] for r in (json.loads(x) for x in
             aw.log.read_text(encoding="utf-8").splitlines())), 20, "the HOST/NAME message typed",
             on_timeout=bridge.text)
    bridge.fake.say(ME, "/send nosuch hi")
    bridge.fake.say(ME, "/ls")
    wait_for(lambda: any(m["text"].startswith("not queued") for m in bridge.fake.sent_to(ME))
             and any("sa: " in m["text"] for m in bridge.fake.sent_to(ME)), 20, "two replies",
             on_timeout=lambda: str(bridge.fake.sent_to(ME)))


# --- the parts, without tmux -------------------------------------------------------------


def test_the_token_file_must_be_private_and_is_never_quoted(tmp_path: Path) -> None:
    token = f"123:{secret_scan.token()}"
    f = tmp_path / "tok"
    f.write_text(token, encoding="utf-8")
    f.chmod(0o644)
    with pytest.raises(ChatTokenProblem, match="readable by others") as exc:
        read_token(str(f), env={})
    assert token not in str(exc.value) and "chmod 600" in exc.value.hint
    f.chmod(0o600)
    assert read_token(str(f), env={}) == token
    assert read_token("", env={TOKEN_ENV: "from-env"}) == "from-env"
    with pytest.raises(ChatTokenProblem, match="no bot token"):
        read_token("", env={})
    # an unreachable API: the error names the method, never the URL holding the token
    api = TelegramApi("http://127.0.0.1:9", token, poll_timeout_s=1)
    with pytest.raises(ChatUnreachable) as err:
        api.get_updates(0)
    assert token not in str(err.value) and "getUpdates" in str(err.value)
    fake = TelegramFake("another")
    try:  # a refused token: Telegram's description, no token
        with pytest.raises(ChatUnreachable, match="401 Unauthorized") as err:
            TelegramApi(fake.url, token).send_message(1, "x")
        assert token not in str(err.value)
    finally:
        fake.close()


def test_config_chat_telegram(tmp_path: Path) -> None:
    paths = Paths.from_env({"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")})
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text('[chat.telegram]\ntoken_file = "t"\nchat_ids = [1, -100]\n')
    cfg = load_config(paths, tmp_path).telegram
    assert cfg is not None and cfg.chat_ids == (1, -100)
    assert cfg.api_url == "https://api.telegram.org"
    for bad in ('chat_ids = ["me"]', 'colour = 1', 'api_url = "ftp://x"'):
        paths.config_file.write_text(f"[chat.telegram]\n{bad}\n")
        with pytest.raises(ConfigError):
            load_config(paths, tmp_path)


def test_a_projects_file_cannot_name_chats(tmp_path: Path) -> None:
    """A cloned project's .agentwrap.toml must not make its own chat able to approve."""
    paths = Paths.from_env({"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")})
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".agentwrap.toml").write_text('[chat.telegram]\nchat_ids = [666]\n')
    with pytest.raises(ConfigError, match="only be set in your own config"):
        load_config(paths, project)


def test_the_ledger_claims_each_update_once_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    assert led.claim_update(7) and not led.claim_update(7)
    assert led.next_offset() == 8
    n = led.add_notice("sa", "q1", ME, "text")
    assert n is not None and led.add_notice("sa", "q1", ME, "text") is None
    led.close()
    led = Ledger(path)
    assert not led.claim_update(7) and led.next_offset() == 8
    assert led.take_answer("sa", "q1", "x") and not led.take_answer("sa", "q1", "x")
    assert os.stat(path).st_mode & 0o077 == 0
    led.close()
