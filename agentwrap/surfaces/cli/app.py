"""The ``agentwrap`` command.

Every sub-command is a thin layer over the library: parse, call, print. People
get rich tables and live views; scripts get ``--json``. Expected failures are
:class:`~agentwrap.errors.AgentwrapError` and print one line with the cause and
one with what to do next, then exit non-zero.

This module builds the parser (every help text) and runs the chosen command;
the commands themselves are grouped in :mod:`.sessions`, :mod:`.messages`,
:mod:`.inspection` and :mod:`.events`, over what they share in :mod:`.common`
(where the rules for showing untrusted text are). Every command reaches the
store and the registry through :class:`~agentwrap.service.Service`.

Every call is a new process, so the parser is built from light modules (help
texts, flags) and :data:`HANDLERS` imports a command's module only once that
command is chosen: ``--help`` loads no config, service or handler, and ``ls``
none of the feedback watchers, web stack or other commands.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ... import __version__
from ...errors import AgentwrapError
from ...message import Source
from .answer import add_parser as add_answer_parser
from .chat import add_parser as add_chat_parser
from .context import add_parser as add_context_parser
from .events import EPILOG as EVENTS_EPILOG
from .events import HELP as EVENTS_HELP
from .feedback import add_parser as add_feedback_parser
from .hosts import add_parser as add_hosts_parser
from .hub import add_parser as add_hub_parser
from .mcp import MCP_EPILOG, MCP_HELP
from .serve import SERVE_EPILOG, SERVE_HELP
from .store import add_parser as add_store_parser


@dataclass(frozen=True)
class Handler:
    """A command's function, named here and imported only when that command runs.

    The parser holds every help text and flag; what a command does (the
    service, the registry, the supervisor...) is loaded by the one command
    that needs it, so ``agentwrap ls`` or ``--help`` pay for nothing else.
    """

    module: str  # beside this one: "sessions" is agentwrap.surfaces.cli.sessions
    function: str

    def __call__(self, args: argparse.Namespace) -> int:
        module = importlib.import_module(f"{__package__}.{self.module}")
        code: int = getattr(module, self.function)(args)
        return code


#: The one table of the commands this module's parser defines: what runs each.
#: (answer, context, watch, schedule, store, hosts, hub, join and chat define
#: their own parsers in their modules, whose heavy imports wait in their functions.)
HANDLERS: dict[str, Handler] = {
    "run": Handler("sessions", "cmd_run"),
    "attach": Handler("sessions", "cmd_attach"),
    "adopt": Handler("sessions", "cmd_adopt"),
    "ls": Handler("sessions", "cmd_ls"),
    "dismiss": Handler("sessions", "cmd_dismiss"),
    "state": Handler("inspection", "cmd_state"),
    "stop": Handler("sessions", "cmd_stop"),
    "send": Handler("messages", "cmd_send"),
    "queue": Handler("messages", "cmd_queue"),
    "history": Handler("messages", "cmd_history"),
    "metrics": Handler("messages", "cmd_metrics"),
    "cancel": Handler("messages", "cmd_cancel"),
    "events": Handler("events", "cmd_events"),
    "serve": Handler("serve", "cmd_serve"),
    "token": Handler("serve", "cmd_token"),
    "mcp": Handler("mcp", "cmd_mcp"),
    "doctor": Handler("inspection", "cmd_doctor"),
    "profiles": Handler("inspection", "cmd_profiles"),
    "_supervise": Handler("sessions", "cmd_supervise"),
    "_host": Handler("sessions", "cmd_host"),
}

MAIN_HELP = """\
Run a terminal coding agent under supervision and deliver context into it.

agentwrap starts the agent under tmux (default) or a pty, watches its screen to
know whether it is starting, ready, busy, waiting for an answer or holding your
unsent draft, and types queued messages into it only at safe moments, verified,
acknowledged, retried, and written to the agent's instruction file as a last
resort.

examples:
  agentwrap run claude                         # start Claude Code, supervised
  agentwrap run --detach --name api codex      # headless; attach later
  agentwrap run claude --context handoff.md    # startup context, once ready
  agentwrap send api "CI failed on main" --source webhook --source-id github
  echo "focus on the docs" | agentwrap send api -
  agentwrap state api --explain                # what state, and why
  agentwrap ls                                 # running sessions
  agentwrap queue api / history api / metrics  # what waits, what happened
  agentwrap events api --follow                # every change, as it happens
  agentwrap serve                              # the HTTP API; `agentwrap token` for curl

Files: config ~/.config/agentwrap/config.toml (+ .agentwrap.toml in a project),
profiles ~/.config/agentwrap/patterns/*.toml, state ~/.local/state/agentwrap/.
Run `agentwrap doctor` when something does not work.
"""


EXIT_HELP = """\
exit status with --wait: 0 delivered or acknowledged, 15 delivered but the
ACK asked for never came (the agent exited first), 10 escalated to the
instruction file, 11 expired, 12 evicted, 13 cancelled, 14 failed, 124 timed
out waiting (the message stays queued). Without --wait: 0 once stored.
Refused before storing: 3 unknown or ended session, 4 idempotency key reused
with other content, 65 invalid message, 75 rate limit / queue full / the
store's server down for now (retry), 77 source not trusted with raw input,
or the store refuses who we are (permissions, password, role).
"""


def port_number(text: str) -> int:
    """A TCP port, 0-65535 (0: any free one), for argparse: anything else is a
    usage error (exit 2) naming the range, not a traceback from bind()."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535; 0: any free one)")
    return port


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(prog="agentwrap", description=MAIN_HELP, formatter_class=fmt)
    p.add_argument("--version", action="version", version=f"agentwrap {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def add(name: str, help: str, desc: str = "", epilog: str = "") -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=desc or help, epilog=epilog,
                            formatter_class=fmt)
        if name in HANDLERS:  # `hook` has none: main hands it over before parsing
            sp.set_defaults(func=HANDLERS[name])
        return sp

    r = add("run", "start an agent under supervision",
            "Start an agent (claude, codex, aider, gemini or any command) under supervision.\n"
            "Keys, screen, resizes and Ctrl-C work as usual; the exit code is the agent's.\n"
            "With tmux (default) the agent keeps running when you detach (prefix d).",
            "examples:\n  agentwrap run claude\n  agentwrap run --detach --name api codex\n"
            "  agentwrap run --backend pty aider --model openai/x\n"
            "  agentwrap run claude --context handoff.md --trust-folder\n"
            "  agentwrap run --image localhost/agentbox -- claude")
    r.add_argument("--name", help="session name (default: the agent's name, made unique)")
    r.add_argument("--profile", help="profile to use (default: chosen from the command name)")
    r.add_argument("--backend", choices=["tmux", "pty"], help="terminal backend (default: config, tmux)")
    r.add_argument("--detach", "-d", action="store_true", help="start headless (tmux); attach later")
    r.add_argument("--context", action="append", default=[], metavar="FILE",
                   help="startup context delivered once the agent is ready (repeatable)")
    r.add_argument("--trust-folder", action="store_true", default=None,
                   help="answer the agent's folder-trust dialog automatically (opt-in)")
    r.add_argument("--require-ack", action="store_true", default=None,
                   help="ask the agent to acknowledge every delivery")
    r.add_argument("--on-timeout", metavar="deny|leave",
                   help="what becomes of a question nobody answers in --answer-timeout seconds"
                   " (this session; default: [answers] on_timeout, leave)")
    r.add_argument("--answer-timeout", metavar="SECONDS",
                   help="how long a question stays open before --on-timeout applies"
                   " (this session; 0: never; default: [answers] timeout_s)")
    r.add_argument("--no-channels", dest="channels", action="store_false",
                   help="type messages only: no native hooks or MCP server for this launch")
    r.add_argument("--no-continuity", dest="continuity", action="store_false",
                   help="do not hand over the previous session's handoff in this project"
                   " (`agentwrap context show` prints it)")
    r.add_argument("--container", metavar="NAME",
                   help="run the agent in this running container (the engine's exec -it)")
    r.add_argument("--image", metavar="IMAGE",
                   help="start a container from IMAGE for the session (--init, the project"
                   " mounted at its own path; removed at the end unless --keep)")
    r.add_argument("--keep", action="store_true",
                   help="with --image: keep the container when the session ends")
    r.add_argument("--cwd", help="working directory of the agent (default: here)")
    r.add_argument("--cols", type=int, help="width of a detached session")
    r.add_argument("--rows", type=int, help="height of a detached session")
    r.add_argument("--json", action="store_true", help="with --detach: print the session as JSON")
    r.add_argument("command", nargs=argparse.REMAINDER, help="the agent command and its arguments")

    a = add("attach", "put this terminal on a running tmux session (re-adopts it if needed)")
    a.add_argument("name")

    ad = add("adopt", "restart supervision of a session whose supervisor died",
             "Start a new supervisor for a running tmux session. Messages that were being\n"
             "delivered resume from where they stopped; nothing is typed twice.")
    ad.add_argument("name")

    ls = add("ls", "list sessions",
             "List the running sessions (and stale ones, whose supervisor died). Ended\n"
             "sessions are kept, with their exit code, why they ended, their history and\n"
             "last screen, until dismissed or [sessions] keep_ended_s passes (default 7\n"
             "days): --all lists them too; without it a line counts them.")
    ls.add_argument("--all", action="store_true", help="include ended sessions")
    ls.add_argument("--json", action="store_true")

    dm = add("dismiss", "forget ended sessions (their record and last screen)",
             "Forget ended sessions now: their record, state log and last screen. Their\n"
             "messages stay in `agentwrap history`. A running session is refused: stop it\n"
             "first. Ended sessions are also forgotten once [sessions] keep_ended_s passes.")
    dm.add_argument("names", nargs="+", metavar="name")
    dm.add_argument("--json", action="store_true")

    st = add("state", "show a session's state (starting, ready, busy, waiting_input, draft, exited)",
             epilog="examples:\n  agentwrap state api --explain\n  agentwrap state api --watch --json")
    st.add_argument("name")
    st.add_argument("--explain", action="store_true", help="which signal and rule decided it")
    st.add_argument("--watch", action="store_true", help="follow changes until the session ends")
    st.add_argument("--screen", action="store_true",
                    help="print the screen the last verdict was based on (to debug a profile)")
    st.add_argument("--json", action="store_true")

    so = add("stop", "stop sessions' agents (each one's whole process tree)",
             "Stop the agents of the named sessions, together: each process tree gets\n"
             "SIGTERM (SIGKILL after 2 s) and the end is recorded. With one name, --json\n"
             "prints its record; with several or --all, a list.")
    so.add_argument("names", nargs="*", metavar="name")
    so.add_argument("--all", action="store_true", help="every running session of this host")
    so.add_argument("--json", action="store_true")

    se = add("send", "queue a message for a session",
             "Queue a message. It is stored durably before this returns, then typed into\n"
             "the agent at the next safe moment as one marked block, prefixed\n"
             "[source:source_id]. Content is sanitized: escape sequences and control\n"
             "characters are removed. Use - to read the content from stdin.\n\n"
             "Into a shell (profile 'shell': bash, zsh, ...) a message is a command: typed\n"
             "as is, one at a time, and only from sources your config trusts with that\n"
             "([trust] raw_sources, default: user). --raw does the same for any session\n"
             "(an agent's own /command, a REPL's input).",
             EXIT_HELP + "\nexamples:\n  agentwrap send api \"CI: test_login failed\" --source webhook "
             "--source-id github --priority high\n  git diff | agentwrap send api - --wait --timeout 60"
             "\n  agentwrap send sh \"make test\"            # a shell session: runs make test"
             "\n  agentwrap send api --raw \"/compact\"      # typed as is: the agent's own command")
    se.add_argument("name")
    se.add_argument("content", help="the text, or - for stdin")
    se.add_argument("--source", default="user",
                    help="who sends it: " + ", ".join(s.value for s in Source if s is not Source.SYSTEM)
                    + " (default user; system is agentwrap's own)")
    se.add_argument("--source-id", help="who within the source, e.g. github")
    se.add_argument("--priority", default="normal", choices=["low", "normal", "high", "critical"])
    se.add_argument("--ttl", type=float, help="seconds before it expires (default 300, max 3600)")
    se.add_argument("--ack", action=argparse.BooleanOptionalAction, default=None,
                    help="ask the agent to acknowledge (default: config)")
    se.add_argument("--idempotency-key",
                    help="a repeated key returns the first message (whatever its state); the same"
                    " key with other content is an error (exit 4)")
    se.add_argument("--correlation-id")
    se.add_argument("--depth", type=int, default=0, help="hops so far (agent-to-agent)")
    se.add_argument("--metadata", help="JSON object stored with the message")
    se.add_argument("--raw", action="store_true",
                    help="type the text as is (no quoting block, no ACK); trusted sources only")
    se.add_argument("--wait", action="store_true", help="block until the message ends")
    se.add_argument("--timeout", type=float, default=60.0, help="with --wait (default 60 s)")
    se.add_argument("--json", action="store_true")

    add_answer_parser(sub)
    add_context_parser(sub)
    add_feedback_parser(sub)
    add_store_parser(sub)
    add_hosts_parser(sub)
    add_hub_parser(sub)
    add_chat_parser(sub)

    q = add("queue", "what is pending for a session, and why it waits")
    q.add_argument("name")
    q.add_argument("--json", action="store_true")

    h = add("history", "every message and how it ended")
    h.add_argument("name", nargs="?")
    h.add_argument("--limit", type=int, default=50)
    h.add_argument("--source", help="only messages from this source (webhook, filesystem, ...)"
                   " or feedback source (ruff, pytest, ...)")
    h.add_argument("--conversation", action="store_true",
                   help="the session's whole conversation in order: prompts, each delivered"
                   " message with its ACK, the agent's replies, tool calls, questions")
    h.add_argument("--json", action="store_true")

    mt = add("metrics", "delivery figures (first-try rate, retries, escalations, latency)")
    mt.add_argument("name", nargs="?")
    mt.add_argument("--json", action="store_true")

    c = add("cancel", "cancel a pending message (id or unique prefix)")
    c.add_argument("id")
    c.add_argument("--json", action="store_true")

    ev = add("events", "what happened to messages and sessions, in order (--follow: as it happens)",
             EVENTS_HELP, EVENTS_EPILOG)
    ev.add_argument("name", nargs="?", help="only this session's events")
    ev.add_argument("--follow", "-f", action="store_true",
                    help="keep printing new events until Ctrl-C")
    ev.add_argument("--after", type=int, metavar="ID", help="only events after this id")
    ev.add_argument("--last", type=int, metavar="N",
                    help="start from the N most recent events of the log (--follow: 10)")
    ev.add_argument("--json", action="store_true", help="one JSON object per line")

    sr = add("serve", "serve the HTTP API (queue messages, sessions, events) on 127.0.0.1:7878",
             SERVE_HELP, SERVE_EPILOG)
    sr.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1; others print a warning)")
    sr.add_argument("--port", type=port_number, default=7878,
                    help="TCP port (default 7878; 0: any free)")
    sr.add_argument("--uds", metavar="PATH", help="listen on this unix socket instead (0600)")
    sr.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    tk = add("token", "print the HTTP API's bearer token (made on first use, kept 0600)")
    tk.add_argument("--new", action="store_true", help="replace it with a new one")
    tk.add_argument("--link", action="store_true",
                    help="print a one-time login link for the dashboard instead (valid 10 min)")
    tk.add_argument("--url", default=None, metavar="URL",
                    help="where `agentwrap serve` listens, for --link (default: where the"
                    " running serve said it listens, else http://127.0.0.1:7878)")

    mc = add("mcp", "serve a session's input queue as MCP tools over stdio (for its agent)",
             MCP_HELP, MCP_EPILOG)
    mc.add_argument("--print-config", metavar="NAME",
                    help="print the MCP server entry (mcpServers JSON) for session NAME and exit")

    # `hook` never reaches the parser (see main); listed here for --help only
    add("hook", "the handler an agent's native hooks run (registered by `agentwrap run`)")

    d = add("doctor", "check tmux, agent CLIs, config and sessions; say how to fix problems")
    d.add_argument("--json", action="store_true")

    pr = add("profiles", "list agent profiles (built-in and yours)")
    pr.add_argument("--json", action="store_true")

    sv = sub.add_parser("_supervise")  # internal: the detached supervisor process
    sv.add_argument("name")
    sv.set_defaults(func=HANDLERS["_supervise"])

    ho = sub.add_parser("_host")  # internal: the supervisor host of all tmux sessions
    ho.set_defaults(func=HANDLERS["_host"])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["hook"]:  # an agent's hook: no parser, never an error exit
        from ..hooks import main as hook_main

        return hook_main(words[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if args.cmd == "run" and args.command and args.command[0] == "--":
        args.command = args.command[1:]
    try:
        code: int = args.func(args)
        return code
    except AgentwrapError as exc:
        from rich.markup import escape

        from .common import err, hint_line, out

        if getattr(args, "json", False):  # a script reads stdout: the refusal as data too
            out.file.write(json.dumps(exc.to_json(), ensure_ascii=False) + "\n")
        # messages quote user input (names, paths): never read it as markup
        err.print(f"[red]error:[/] {escape(exc.message)}")
        if exc.hint:
            err.print(f"[dim]hint:[/] {escape(hint_line(type(exc), exc.hint, getattr(args, 'name', None)))}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
