"""A real agent's permission, answered by a button in the Telegram fake (issue 40).

Claude Code, and Codex on agentwrap's app-server (where the permission is the
server's request answered by a reply), against the loopback model server, ask
to run ``touch tool_ran.txt``; ``agentwrap chat telegram`` (a real process) sends the
question to the fake Bot API with its exact command and the options as
buttons; the test presses the first option, as the person would on the
phone, and the tool runs: the file exists and the tool's result reaches the
model. A second press is refused. Timings are printed, never asserted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.telegram_fake import TelegramFake

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import next_tool_result, on_app_server, open_permission

pytestmark = pytest.mark.e2e

ME = 4242


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_permission_approved_from_the_chat(
        make_session: Callable[..., AgentSession], agent: str) -> None:
    s = make_session(agent)
    token = "123456:e2e-telegram-token-never-printed"
    fake = TelegramFake(token)
    token_file = s.root / "telegram.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    cfg = Path(s.env["XDG_CONFIG_HOME"]) / "agentwrap" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    old = cfg.read_text() if cfg.exists() else ""
    cfg.write_text(old + f'\n[chat.telegram]\ntoken_file = "{token_file}"\nchat_ids = [{ME}]\n'
                   f'api_url = "{fake.url}"\npoll_timeout_s = 2\n')
    log = s.root / "chat.log"
    with log.open("wb") as out:
        bridge = subprocess.Popen([sys.executable, "-m", "agentwrap", "chat", "telegram"],
                                  env=s.env, cwd=s.workdir, stdout=out, stderr=subprocess.STDOUT)
    try:
        q, seen = open_permission(s)
        if agent == "codex":
            assert on_app_server(s), s.state()  # the default: the button answers a server request
        first = q["questions"][0]["options"][0]["label"]
        msg = s.wait_until(lambda: (m := fake.sent_to(ME)) and m[0], 30, "the notice in the chat")
        since = float(s.state()["since"])  # when waiting_input was recorded
        print(f"waiting_input recorded -> notice at the fake: {msg['at'] - since:.3f} s")
        assert f"command:\n{q['command']}" in msg["text"], msg["text"]
        buttons = fake.buttons(msg["message_id"])
        print(f"{agent}: buttons {[b[0] for b in buttons]}")
        assert buttons[-1][0] == "Deny" and buttons[0][0] == f"1. {first}", buttons
        pressed = time.monotonic()
        fake.press(ME, msg["message_id"], buttons[0][1])
        s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
        print(f"press -> the tool ran: {time.monotonic() - pressed:.3f} s")
        result = next_tool_result(s, seen)
        assert "error" not in result.lower() or "tool_ran" in result, result
        fake.press(ME, msg["message_id"], buttons[0][1])
        s.wait_until(lambda: len(fake.called("answerCallbackQuery")) == 2, 30, "the second press")
        texts = [c["text"] for c in fake.called("answerCallbackQuery")]
        assert texts[0].startswith(f"sent: {first}") and ("closed" in texts[1] or "already" in texts[1])
        s.wait_until(lambda: "closed:" in fake.messages[msg["message_id"]]["text"], 30,
                     "the notice closed")
        assert len(fake.sent_to(ME)) == 1
    finally:
        bridge.send_signal(signal.SIGTERM)
        bridge.wait(timeout=20)
        fake.close()
    assert token not in log.read_text(errors="replace")
