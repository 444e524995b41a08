"""``agentwrap hook AGENT EVENT``: one run of a native hook, start to answer.

The agent runs the hook with its event as JSON on stdin and waits for it, so
the hook does one thing and leaves:

1. read stdin (all of it: the agent writes it whole) and decide from the
   agent, the event and the payload what to do (:mod:`.protocol`);
2. a **signal** (turn ended, prompt submitted, permission question open) is
   kept for the supervisor's detector (:mod:`agentwrap.sessions.signals`: a
   file, not the store, so it needs neither the store's code nor its lock);
   nothing is printed;
3. a **context** event (session start, between tool calls) hands the session's
   due messages that fit in :data:`~.protocol.MAX_CONTEXT_CHARS` to the model
   through channel ``hook`` (an atomic claim: a message typed or taken by MCP
   meanwhile is not taken again), framed as the typed block frames them
   (:mod:`agentwrap.delivery.handover`: quoted, ``[source:sourceId]``, the
   batch token, the ACK request when asked), plus how many still wait. Run by
   the supervisor's hook server, it claims through the supervisor's open
   store; run here (no supervisor took the hook), the hook opens the store
   itself, and then only if SQLite says something is due
   (:mod:`agentwrap.queue.due`);
4. a **question** (Claude, Codex and Qwen ``PermissionRequest``) is kept for the
   supervisor with its exact text and, when one of the user's answer rules
   decides it, answered here (:mod:`agentwrap.answers.hook_questions`);
   Copilot's ``permissionRequest`` comes for requests it never asks about too,
   so its text is kept and nothing more (:data:`~.protocol.TEXT_ONLY_QUESTIONS`);
5. at a turn's end the agent's reply (Claude, Codex, Qwen ``last_assistant_message``,
   Gemini ``prompt_response``, Copilot's read from its ``transcriptPath``:
   :mod:`.transcript`) is searched for ``ACK <token>``: the messages a
   hook handed over in that batch, or typed and submitted and awaiting their
   ACK, are acknowledged (``seen``, channel ``hook``): the reply whole, where
   the screen shows it wrapped. Only then is the store opened at a turn's end.

Where the agent waits for an answer (a hand-over, a permission request),
what that answer does not depend on (the handoff notes; a dialog's request
and its signal once no rule answers it) is *later* work: the supervisor's
hook server (:mod:`.server`) sends the answer first and does it after, since
the agent waits for the answer alone (issue 27); the Python hook, whose exit
the agent waits for anyway, does it before it returns.

:func:`main` is the Python hook: a second client of the supervisor's hook
server (:mod:`.client`, the native client's twin), which runs
:func:`handle` there; only when no supervisor takes the hook does it run
:func:`handle` in this process.

It never fails the agent: a missing or locked database (busy timeout
:data:`BUSY_TIMEOUT_MS`), an unknown session, bad input or any error means no
output and exit status 0, with a line in the session's log when it has one.
The session is ``AGENTWRAP_SESSION`` and the store the one
:meth:`Paths.from_env` finds, both set by ``agentwrap run`` for the agent.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ...errors import AgentwrapError, StoreUnavailable
from ...hook_wire import ASKED_ENV, MAX_STDIN, PROFILE_ENV, SESSION_ENV
from ...paths import Paths, check_session_name, private_dir, write_private
from .protocol import (
    CONTEXT,
    EVENTS,
    MAX_CONTEXT_CHARS,
    QUESTION,
    TEXT_ONLY_QUESTIONS,
    TRANSCRIPT_FIELDS,
    action,
    context_output,
    normalised,
    permission_output,
)

if TYPE_CHECKING:  # imported where used: a signal never loads the store's code
    from ...answers.hook_questions import HookQuestion
    from ...answers.store import AnswerStore
    from ...service import Service

#: How long a hook waits for a locked database before it gives up (silently).
BUSY_TIMEOUT_MS = 100
#: The same at a session start: once a session, while the supervisor, the
#: host and the registry write their first rows, and the agent waits for it anyway.
START_BUSY_TIMEOUT_MS = 2000
#: How long a rule's answer waits for a locked database to be kept before the hook
#: leaves the request to the dialog instead (the agent waits for its hook anyway).
KEEP_BUSY_TIMEOUT_MS = 2000
#: The channel consumed messages are recorded under (``history``, ``metrics``).
CHANNEL = "hook"
#: An ACK in the agent's reply (the profiles' default pattern, any batch token).
ACK_RE = re.compile(r"\bACK[: ]+([0-9a-f]{8})\b", re.IGNORECASE)
#: Where a turn-end payload carries the agent's reply.
REPLY_FIELDS = ("last_assistant_message", "prompt_response")

USAGE = """\
usage: agentwrap hook AGENT EVENT < hook-input.json

The handler an agent's native hook runs (registered per launch by `agentwrap
run`): AGENT is claude, codex, gemini, qwen, copilot, opencode, cline or kimi, EVENT
the hook event. At the session start and between tool calls it hands the
session's queued messages to the model as additional context (delivered once, channel "hook"); at a turn's end,
a prompt submit or a notification it records a state signal for the
supervisor; at a permission request (PermissionRequest) it keeps the exact
request for the supervisor and answers it when one of your [[answer_rules]]
decides it (the built-in deny-list still wins: such a command is never
approved). It prints nothing and exits 0 whenever it has nothing to say or
anything goes wrong, so it never disturbs the agent.
"""


def main(
    argv: Sequence[str] | None = None, *, stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None, env: Mapping[str, str] | None = None,
) -> int:
    """Run one hook; always returns 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = sys.stdout if stdout is None else stdout
    if args[:1] in (["-h"], ["--help"]):
        out.write(USAGE)
        return 0
    if len(args) != 2:
        sys.stderr.write(USAGE)
        return 0
    raw = _read_all(sys.stdin.buffer if stdin is None else stdin)
    env = os.environ if env is None else env
    taken = _ask_supervisor(args[0], args[1], raw, env)
    if taken is not None:
        answer = taken.decode("utf-8", "replace")  # what hook.c prints, byte for byte
    else:
        from ...terminal.proctree import started_at  # the agent started this process at its event

        answer = handle(args[0], args[1], raw, env, started=started_at())
    if answer:
        try:
            out.write(answer + "\n")
            out.flush()
        except OSError:  # the agent went away
            pass
    return 0


def _ask_supervisor(agent: str, event: str, raw: bytes, env: Mapping[str, str]) -> bytes | None:
    """The session's supervisor's answer (its hook server ran the hook), or
    None: run it here. Not asked for a payload too big to send (hook.c then
    prints nothing, as :func:`handle` does) nor when the native client asked
    already (:data:`~agentwrap.hook_wire.ASKED_ENV`)."""
    if len(raw) > MAX_STDIN or env.get(ASKED_ENV) == "1":
        return None
    from .client import ask, socket_for

    path = socket_for(env)
    return ask(path, agent, event, raw, env) if path is not None else None


#: Takes work that need not come before the hook's answer (see :func:`handle`).
Later = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class HookRun:
    """One hook run, as an action sees it: who, what, and where to write."""

    agent: str
    event: str
    payload: dict[str, Any]
    session: str
    paths: Paths
    action: str  # what :func:`~.protocol.action` made of the event
    #: The hand-over of the process that runs this hook for the agent (the
    #: supervisor's hook server: claimed, recorded once the answer reached the
    #: agent); None: the hook's own, from the store (no supervisor took it).
    hand_over: Callable[[HookRun], str] | None = None
    #: When the agent started the hook's process (its event), epoch seconds;
    #: None: unknown, the signal is stamped when written.
    started: float | None = None
    #: Where work the answer does not wait for goes (:func:`handle`'s ``later``).
    later: Later = lambda work: work()
    #: The answers table of the process that runs this hook for the agent (the
    #: supervisor's hook server keeps one open for its life); None: the hook
    #: opens its own for the rule's answer it keeps (:func:`_keep_answer`).
    answers: Callable[[], AnswerStore] | None = None
    #: A boxed session's (issue 39): the payload with its paths as the host's, and
    #: the translation of one more (:func:`_on_host`); None: on the host.
    host_payload: dict[str, Any] | None = None
    to_host: Callable[[str], str] | None = None

    def log(self, line: str) -> None:
        _log(self.paths, self.session, self.agent, self.event, line)

    def after_answer(self, what: str, work: Callable[[], object]) -> None:
        """Run ``work`` once the answer is out (never raises: a failure is
        logged with ``what``, as :func:`handle` logs its own)."""
        def guarded() -> None:
            try:
                work()
            except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent
                self.log(f"{what} failed: {type(exc).__name__}: {exc}")

        self.later(guarded)


def handle(agent: str, event: str, raw: bytes, env: Mapping[str, str], *,
           hand_over: Callable[[HookRun], str] | None = None,
           started: float | None = None, later: Later | None = None,
           answers: Callable[[], AnswerStore] | None = None) -> str:
    """What to print for one hook run ("" for nothing); never raises.
    ``hand_over``: see :attr:`HookRun.hand_over`; ``started``: see
    :attr:`HookRun.started`; ``answers``: see :attr:`HookRun.answers`. ``later`` takes the work the answer does not
    depend on, for its caller to run once the answer is out (each piece
    never raises); without it that work runs here, before this returns."""
    deferred: list[Callable[[], None]] = []
    try:
        return _handle(agent, event, raw, env, hand_over, started,
                       later if later is not None else deferred.append, answers)
    finally:
        for work in deferred:
            work()


def _handle(agent: str, event: str, raw: bytes, env: Mapping[str, str],
            hand_over: Callable[[HookRun], str] | None, started: float | None,
            later: Later, answers: Callable[[], AnswerStore] | None) -> str:
    session = env.get(SESSION_ENV, "")
    paths: Paths | None = None
    try:
        payload = json.loads(raw) if raw and len(raw) <= MAX_STDIN else None
        if not isinstance(payload, dict) or not session or agent not in EVENTS:
            return ""
        check_session_name(session)  # it names files: nothing else gets through
        payload = normalised(agent, payload)
        todo = action(agent, event, payload)
        if todo is None:
            return ""
        paths = Paths.from_env(env)
        # the handoff record's notes (issue 12); TURN_SIGNS: a model turn has run
        from ...continuity.hooks import START_EVENTS, TURN_SIGNS, on_hook

        run = HookRun(agent, event, payload, session, paths, todo, hand_over, started, later,
                      answers)
        run = _on_host(run)  # in a container: its paths as the host's (issue 39)
        noted = run.host_payload if run.host_payload is not None else payload
        if event in START_EVENTS:  # a session start: its handoff is (part of) the answer
            handoff = on_hook(paths, session, agent, event, todo, noted) or ""
            text = "\n\n".join(t for t in (handoff, _at_start(run, len(handoff))) if t)
            return json.dumps(context_output(event, text, agent), ensure_ascii=False) \
                if text else ""
        if todo in ACTIONS:  # the agent waits for this answer: the notes can follow it
            run.after_answer("notes", lambda: on_hook(paths, session, agent, event, todo, noted))
        else:  # a signal answers nothing: its notes before it (a turn end's reply, for `ready`)
            on_hook(paths, session, agent, event, todo, noted)
        if todo in TURN_SIGNS and paths.started_batches(session).is_file():
            _first_turn(run)  # before the action: a turn end's ACKs may be for that hand-over
        act = ACTIONS.get(todo, _signal)
        return act(run, env)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent
        if paths is not None:
            _log(paths, session, agent, event, f"failed: {type(exc).__name__}: {exc}")
        return ""


def _on_host(run: HookRun) -> HookRun:
    """A boxed session's hook run with its payload's paths as the host's (the
    container's mounts, kept by its launch: :func:`agentwrap.containers.box.
    saved_mounts`) and the translation of any other; on the host, ``run`` as it
    is. What no mount holds is dropped, logged: never taken for a host path
    (:class:`~agentwrap.errors.PathNotMounted`)."""
    from ...agents.launch import launch_dir
    from ...containers.box import mounts_file

    launch = launch_dir(run.paths, run.session)
    kept = mounts_file(launch)
    if not kept.exists() and not kept.is_symlink():
        return run  # the usual case: on the host, nothing more is imported
    from ...containers.box import saved_mounts
    from ...containers.mounts import PATH_FIELDS, host_payload
    from ...errors import PathNotMounted

    try:
        mounts = saved_mounts(launch)
    except PathNotMounted as exc:  # the mounts unknown: none of its paths is the host's
        run.log(f"refused: {exc.message}")

        def nowhere(path: str) -> str:
            raise PathNotMounted(f"{path}: the container's mounts are unknown")

        return replace(run, to_host=nowhere, host_payload={
            k: v for k, v in run.payload.items()
            if k not in (*PATH_FIELDS, "tool_input", "tool_calls")})
    if mounts is None:
        return run
    return replace(run, to_host=mounts.to_host, host_payload=host_payload(
        mounts, run.payload, refused=lambda why: run.log(f"refused: {why}")))


def _signal(run: HookRun, env: Mapping[str, str]) -> str:
    """A state signal for the detector; at a turn's end, the ACKs in the reply."""
    from ...sessions.signals import write_signal

    write_signal(run.paths, run.session, run.action, source="hook", agent=run.agent,
                 event=run.event, detail=str(run.payload.get("message", "")), now=run.started)
    if run.action == "permission_prompt" and isinstance(run.payload.get("details"), dict):
        from ...answers import hook_questions as hq_mod  # Gemini: the exact text, no answer

        hq = hq_mod.from_payload(run.agent, run.event, run.payload)
        if hq is not None:
            hq_mod.write_question(run.paths, run.session, hq)
    tokens = acked_tokens(run.payload, run.agent) if run.action == "turn_end" else set()
    if tokens and run.paths.db_path.is_file():
        from ...service import Service

        with Service.open(run.paths, busy_timeout_ms=BUSY_TIMEOUT_MS) as service:
            acknowledge(service, run.session, tokens, log=run.log)
    return ""


def _context(run: HookRun, env: Mapping[str, str]) -> str:
    """The session's due messages, handed to the model as additional context."""
    from ...feedback.edit_hook import after_tool  # checks after an edit tool (issue 12)

    after_tool(run.paths, run.session, run.agent, run.payload, log=run.log, env=env,
               to_host=run.to_host)  # its own payload: a boxed agent's paths go through to_host
    if not run.paths.db_path.is_file():  # agentwrap never ran here: make nothing
        return ""
    text = run.hand_over(run) if run.hand_over is not None else _from_store(run)
    return json.dumps(context_output(run.event, text, run.agent), ensure_ascii=False) \
        if text else ""


def _from_store(run: HookRun) -> str:
    """The hook's own hand-over, when no supervisor took the hook (not
    started yet, killed, stopped, busy): the store, opened here."""
    from ...queue.due import anything_due

    if not anything_due(run.paths.db_path, run.session, busy_timeout_ms=BUSY_TIMEOUT_MS):
        return ""  # the usual case: the service (most of agentwrap) is not even imported
    from ...service import Service

    with Service.open(run.paths, busy_timeout_ms=BUSY_TIMEOUT_MS) as service:
        return service.hand_over(run.session, channel=CHANNEL, limit_chars=MAX_CONTEXT_CHARS,
                                 log=run.log)


def _at_start(run: HookRun, used: int) -> str:
    """At an agent's start (not a resume, /clear or compaction: the queue
    then waits for the next safe point), what is queued for the session
    (``run --context`` files, messages sent before the agent started) after
    the previous session's handoff. The agent gives it to the model with the
    first prompt (no agent starts a turn for it); it counts as delivered then
    (:meth:`Service.first_turn`, from the next hook that shows a turn).
    The supervisor is not asked: it may not run yet, and it would count the
    messages delivered at once."""
    text = ""
    from ...continuity.hooks import START_SOURCES
    from ...sessions.channels import START_CONTEXT

    # only where this hook's output was seen reaching the model (issue 35: Codex and
    # Copilot run it at the first prompt, unproven): elsewhere the supervisor types it
    proven = START_CONTEXT.get(run.agent, START_CONTEXT[None]).channel == "hook"
    if proven and run.payload.get("source") in START_SOURCES and run.paths.db_path.is_file():
        from ...service import Service

        # once a session, and the supervisor waits for it: the store may be busy
        with Service.open(run.paths, busy_timeout_ms=START_BUSY_TIMEOUT_MS) as service:
            text = service.hand_over(run.session, channel=CHANNEL, at_start=True, log=run.log,
                                     limit_chars=MAX_CONTEXT_CHARS - used - 2)
    seen = run.paths.session_started(run.session)  # after the claim: typing may go on now
    if run.paths.state_dir.is_dir():  # Gemini's launch has no files of its own there yet
        private_dir(seen.parent, repair=True)
        write_private(seen, b"")
    run.log(f"session start ({run.payload.get('source')}):"
            f" {'queue handed over' if text else 'nothing queued to hand over'}")
    return text


def _first_turn(run: HookRun) -> None:
    """A model turn has run since the session start (a prompt, a tool call,
    a turn's end): what the SessionStart hook handed over went to the model
    with it (the prompt's hook, or a tool call's or the turn end's should
    that one be missed)."""
    from ...service import Service

    with Service.open(run.paths, busy_timeout_ms=BUSY_TIMEOUT_MS) as service:
        ids = service.first_turn(run.session, CHANNEL)
    run.log(f"{len(ids)} message(s) handed at the start went to the model ({run.event})")


def _question(run: HookRun, env: Mapping[str, str]) -> str:
    """A permission request or AskUserQuestion about to be asked: kept for the
    supervisor (exact text); answered here when an answer rule decides it (the
    dialog then never opens: kept in the answers table and audited first, then
    announced by the supervisor); else a permission_prompt signal and nothing
    printed, and the dialog opens."""
    from ...answers import hook_questions as hq_mod

    hq = hq_mod.from_payload(run.agent, run.event, run.payload)
    if hq is None:
        return ""
    if run.agent in TEXT_ONLY_QUESTIONS:  # asked or not, nobody knows yet: the text only
        hq_mod.write_question(run.paths, run.session, hq)
        return ""
    profile = env.get(PROFILE_ENV) or run.agent
    cwd = Path(str(run.payload.get("cwd") or "/"))
    rules = hq_mod.rules_for(run.paths, profile, cwd)
    if rules and hq.kind == "permission" and _in_background(run):
        # registered "async" (no rules at launch): the agent ignores what this hook
        # prints, so an answer here would be claimed and never given (issue 35); the
        # supervisor gives a rule's answer on the screen instead
        run.log(f"{hq.tool} {hq.command!r} left to the dialog: this hook runs in the"
                " background, so a rule's answer is given on the screen")
        return _to_the_dialog(run, hq)
    if rules and hq.kind == "permission":  # the supervisor waits for this hook's word
        hq_mod.write_question(run.paths, run.session, replace(hq, decision=hq_mod.PENDING))
    behavior, decision = hq_mod.hook_decision(hq, profile, rules)
    if not behavior or decision is None:
        if decision is not None:
            run.log(f"{hq.tool} {hq.command!r} left to the person: {decision.reason}")
        return _to_the_dialog(run, hq)
    answered = hq_mod.decided(hq, behavior, decision)
    how = "allow" if behavior == "allow" else "deny"
    try:
        _keep_answer(run, answered, how)
    except (AgentwrapError, OSError) as exc:  # not kept, so not given: the dialog opens
        run.log(f"{hq.tool} {hq.command!r} left to the screen: the answer by rule"
                f" {decision.rule!r} could not be kept ({exc})")
        return _to_the_dialog(run, hq)
    from ...audit import AuditLog

    AuditLog(run.paths.audit_log).write(
        event="policy_answered", session=run.session, question=answered.id, rule=decision.rule,
        how=how, via="hook", tool=answered.tool, command=answered.command or "")
    hq_mod.write_question(run.paths, run.session, answered)
    run.log(f"{how} {hq.tool} {hq.command!r} by rule {decision.rule!r}")
    message = f"agentwrap: {decision.reason}" if behavior == "deny" else ""
    return json.dumps(permission_output(run.event, behavior, message), ensure_ascii=False)


def _in_background(run: HookRun) -> bool:
    """This launch registered the hook to run in the background (read only when a
    rule may answer: the launch code is not loaded for every hook)."""
    from ...sessions.channels import registered_in_background

    return registered_in_background(run.paths, run.session, run.event)


def _to_the_dialog(run: HookRun, hq: HookQuestion) -> str:
    """Nothing answered here: the request kept for the supervisor, a
    permission_prompt signal, nothing printed: the agent opens its dialog."""
    from ...answers import hook_questions as hq_mod
    from ...sessions.signals import write_signal

    def tell() -> None:
        hq_mod.write_question(run.paths, run.session, hq)
        write_signal(run.paths, run.session, "permission_prompt", source="hook",
                     agent=run.agent, event=run.event, detail=hq.tool, now=run.started)

    run.after_answer("the dialog's request", tell)
    return ""


def _keep_answer(run: HookRun, hq: HookQuestion, how: str) -> None:
    """The rule's answer in the answers table, ``applied``, before the agent is
    given it: whoever sees its effect (the tool ran) finds it kept, once (the
    hook is its only writer). Raises when it cannot be kept (the store locked
    past :data:`KEEP_BUSY_TIMEOUT_MS`, or none: agentwrap never ran here): then it
    is not given. The supervisor's hook server hands in the answers table it
    keeps open (:attr:`HookRun.answers`): a store opened per answer (a new
    PostgreSQL connection each) doubled what the agent waited for."""
    from ...answers.actions import HookAnswer

    def keep(store: AnswerStore) -> None:
        store.given(run.session, hq.id, HookAnswer(hq.decision),
                    f"{how} through the agent's hook by rule {hq.rule!r}",
                    source="policy", rule=hq.rule)

    if run.answers is not None:
        keep(run.answers())
        return
    store = open_keeping_store(run.paths)
    try:
        keep(store)
    finally:
        store.close()


def open_keeping_store(paths: Paths) -> AnswerStore:
    """The answers table a hook keeps a rule's answer in: where the queue is,
    waiting at most :data:`KEEP_BUSY_TIMEOUT_MS` for a lock; raises
    :class:`~agentwrap.errors.StoreUnavailable` when there is none (agentwrap
    never ran here: a hook makes no store)."""
    from ...answers.store import AnswerStore
    from ...config import load_config
    from ...queue.backend import store_url
    from ...queue.keys import host_name

    cfg = load_config(paths)
    url = store_url(cfg.store.url)  # the answers are where the queue is
    if not url and not paths.db_path.is_file():
        raise StoreUnavailable(f"no store at {paths.db_path}")
    return AnswerStore(paths.db_path, events_dir=paths.events_dir, url=url,
                       busy_timeout_ms=KEEP_BUSY_TIMEOUT_MS, host=host_name(cfg.host.name))


#: What each action does (a signal name not listed here: :func:`_signal`). Add an
#: event's action here and in :data:`.protocol.EVENTS`.
ACTIONS: dict[str, Callable[[HookRun, Mapping[str, str]], str]] = {
    CONTEXT: _context,
    QUESTION: _question,
}


def acked_tokens(payload: Mapping[str, object], agent: str = "") -> set[str]:
    """The batch tokens the agent's reply acknowledges (``agent``: where its
    payload names a transcript instead, the reply is read from that file)."""
    replies = [payload.get(name) for name in REPLY_FIELDS]
    transcript = payload.get(TRANSCRIPT_FIELDS.get(agent, ""))
    if isinstance(transcript, str) and transcript:
        from .transcript import WAIT_S, reply_from

        replies.append(reply_from(transcript, payload.get("timestamp"), WAIT_S))
    found: set[str] = set()
    for reply in replies:
        if isinstance(reply, str):
            found.update(t.lower() for t in ACK_RE.findall(reply[-20_000:]))
    return found


def acknowledge(
    service: Service, session: str, tokens: set[str], *,
    log: Callable[[str], None] = lambda _: None,
) -> list[str]:
    """Acknowledge the messages of the batches ``tokens`` the agent's reply
    acknowledges: those a hook handed over (delivered), and those typed and
    submitted whose ACK the typing path awaits (in flight, phase
    ``submitted``: the reply is the hook's whole, however the TUI wrapped it
    on screen; the engine sees them end and stops waiting). Returns their
    ids; anything else (not submitted yet, ended) is left alone."""
    from ...message import Phase, Status

    done: list[str] = []
    for entry in service.history(service.own(session), limit=200):
        m = entry.message
        typed = m.status is Status.DELIVERING and m.phase is Phase.SUBMITTED
        handed = m.status is Status.DELIVERED and entry.channel == CHANNEL
        if m.batch_id not in tokens or not (typed or handed):
            continue
        try:
            service.acknowledge(session, m.id, "seen", channel=CHANNEL)
            done.append(m.id)
        except AgentwrapError as exc:  # acknowledged meanwhile
            log(f"ACK {m.batch_id} for {m.id}: {exc}")
    if done:
        log(f"ACK {', '.join(sorted(tokens))}: acknowledged {len(done)} message(s)")
    return done


def _read_all(stream: IO[bytes]) -> bytes:
    """All of stdin (so the agent's write never meets a closed pipe); more
    than :data:`MAX_STDIN` is read and dropped."""
    try:
        data = stream.read(MAX_STDIN + 1)
        if len(data) > MAX_STDIN:
            while stream.read(1 << 16):
                pass
        return data
    except (OSError, ValueError):
        return b""


def _log(paths: Paths, session: str, agent: str, event: str, line: str) -> None:
    """One line in the session's log, when its log dir exists; never raises."""
    try:
        if not session or not paths.logs_dir.is_dir():
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = f"{stamp} hook {agent} {event}: {line}\n".encode("utf-8", "replace")
        fd = os.open(paths.supervisor_log(session), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                     0o600)
        try:
            os.write(fd, text)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass


__all__ = [
    "ACTIONS", "BUSY_TIMEOUT_MS", "CHANNEL", "USAGE", "HookRun",
    "Later",
    "acked_tokens", "acknowledge", "handle", "main", "open_keeping_store",
]
