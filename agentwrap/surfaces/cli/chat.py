"""``agentwrap chat telegram``: answer questions and send messages from a Telegram chat.

Its own command, not a part of ``serve``: the bridge opens no port (it
polls Telegram), needs none of the HTTP API, and runs where the person wants
it (beside ``serve`` or without it, under systemd, on one host of a shared
store); a network failure towards Telegram never touches the API's process.
Thin: the work is :mod:`agentwrap.surfaces.chat`, imported only when it runs.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from rich.markup import escape

from ...errors import ConfigError
from .common import err, user_paths

HELP = "a chat channel both ways: questions with buttons, /send and /ls (Telegram)"
DESCRIPTION = """\
Bridge the sessions to a Telegram chat, outbound only (long polling: no port
is opened). Each question an agent waits on is sent once to every chat of
[chat.telegram] chat_ids, with the session, its host, the exact command and
its options as buttons plus Deny; a press answers it (as source "chat"), a
reply to the message answers a question that takes words. In the chat,
/send NAME text queues a message for a session, /ls lists them. Only the
configured chat ids are heard. A press never approves a command the
built-in deny-list holds: from the chat, only Deny answers those."""
EPILOG = """\
config (~/.config/agentwrap/config.toml):
  [chat.telegram]
  token_file = "~/.config/agentwrap/telegram.token"   # chmod 600; or AGENTWRAP_TELEGRAM_TOKEN
  chat_ids = [123456789]

examples:
  agentwrap chat telegram"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("chat", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=fmt)
    services = p.add_subparsers(dest="service", metavar="SERVICE", required=True)
    t = services.add_parser("telegram", help="the Telegram bridge ([chat.telegram])",
                            description=DESCRIPTION, epilog=EPILOG, formatter_class=fmt)
    t.set_defaults(func=cmd_chat_telegram)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def cmd_chat_telegram(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ..chat.bridge import TelegramBridge, read_token
    from ..chat.telegram_api import TelegramApi

    paths = user_paths()
    cfg = load_config(paths).telegram
    if cfg is None or not cfg.chat_ids:
        raise ConfigError("no [chat.telegram] chat_ids in your config: nobody would be heard",
                          hint="add [chat.telegram] with token_file and chat_ids"
                          " (`agentwrap chat telegram --help`)")
    token = read_token(cfg.token_file)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logger = logging.getLogger("agentwrap.chat")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    api = TelegramApi(cfg.api_url, token, poll_timeout_s=cfg.poll_timeout_s)
    bridge = TelegramBridge(paths, api, cfg.chat_ids)
    err.print(escape(f"chat telegram: bridging {len(cfg.chat_ids)} chat(s) to the sessions"
                     f" of {paths.state_dir} (Ctrl-C stops)"))
    try:
        bridge.run()
    except KeyboardInterrupt:
        return 130
    finally:
        bridge.stop()
        api.close()
    return 0
