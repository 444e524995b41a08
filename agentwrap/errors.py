"""The one exception hierarchy of agentwrap.

Every error a user can meet derives from :class:`AgentwrapError` and carries a
``hint``: the next thing to do. The CLI prints ``error: <message>`` and
``hint: <hint>`` and exits with ``exit_code``, so callers never have to format
tracebacks for expected failures.
"""

from __future__ import annotations

import math


class AgentwrapError(Exception):
    """Base of every error agentwrap raises on purpose."""

    exit_code: int = 1
    default_hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, object]:
        """What a script reads of it (``--json``): the class, the message, the
        hint, the exit code, and the facts a retry needs (``retryAfter``)."""
        return {"error": type(self).__name__, "detail": self.message, "hint": self.hint or None,
                "exitCode": self.exit_code}


# --- configuration and profiles -------------------------------------------------


class ConfigError(AgentwrapError):
    """A config file or value is invalid."""

    exit_code = 78  # EX_CONFIG
    default_hint = "fix the file named above; `agentwrap doctor` lists config paths"


class ProfileError(ConfigError):
    """An agent profile (patterns/*.toml) is invalid or missing."""

    default_hint = "fix the profile file named above, or delete your override to use the built-in"


# --- environment ------------------------------------------------------------------


class EnvironmentProblem(AgentwrapError):
    """Something agentwrap needs from the machine is missing."""

    exit_code = 69  # EX_UNAVAILABLE


class TmuxNotFound(EnvironmentProblem):
    default_hint = "install tmux (Debian: apt-get install -y tmux) or use --backend pty"


class AgentNotFound(EnvironmentProblem):
    default_hint = "install the agent CLI or put it on PATH; `agentwrap doctor` shows what is found"


class RelayHelperMissing(EnvironmentProblem):
    """``[run] relay = "native"`` but the C relay was not built or is stale."""

    default_hint = (
        "install a C compiler (Debian: apt-get install -y gcc) and reinstall agentwrap, "
        'or set [run] relay = "python" in ~/.config/agentwrap/config.toml'
    )


class ChatTokenProblem(ConfigError):
    """The chat bridge's bot token is missing, unreadable, or readable by others
    (the message never holds the token itself)."""

    default_hint = ("put the token BotFather gave you in the [chat.telegram] token_file,"
                    " made 0600 (chmod 600 FILE), or in AGENTWRAP_TELEGRAM_TOKEN")


class ChatUnreachable(EnvironmentProblem):
    """The chat service's API refused or could not be reached (the token and
    the URL that holds it are never part of the message)."""

    default_hint = "check [chat.telegram] api_url and the network; the bridge retries by itself"

    def __init__(self, message: str, *, hint: str | None = None, unsent: bool = False) -> None:
        super().__init__(message, hint=hint)
        #: True when the request surely did not take effect (refused, or never
        #: connected): safe to send again; False when it may have been.
        self.unsent = unsent


class AddressUnavailable(EnvironmentProblem):
    """``agentwrap serve`` cannot listen where it was asked: the port is taken,
    or ``--uds`` names a file that is not a socket a dead server left."""

    exit_code = 75  # EX_TEMPFAIL: another server may go away
    default_hint = "pick another with --port N (or --uds PATH), or stop the server that holds it"


# --- terminal backends ------------------------------------------------------------


class BackendError(AgentwrapError):
    """The terminal backend (tmux or pty) failed."""

    default_hint = "`agentwrap doctor` checks tmux; `agentwrap ls --all` shows the sessions"


class AgentExited(BackendError):
    """The agent process is gone; nothing can be typed into it."""


class AppServerError(BackendError):
    """Codex's app-server (issue 24) could not be reached, closed, or answered a
    request with an error; the session falls back to the screen and typing."""

    default_hint = "`agentwrap state --explain` says whether the session runs on Codex's app-server"


class AppServerRefused(AppServerError):
    """Codex's app-server answered a request with an error: it did not do it
    (a ``turn/steer`` naming a turn that has just ended), unlike a lost answer,
    after which it may have."""


# --- sessions ---------------------------------------------------------------------


class SessionError(AgentwrapError):
    pass


class SessionNotFound(SessionError):
    exit_code = 3
    default_hint = "`agentwrap ls` lists the running sessions"


class SessionAmbiguous(SessionError):
    """A bare ``NAME`` that sessions of several other hosts have and this one
    does not (a shared store): the caller must say which, ``HOST/NAME``;
    :attr:`candidates` lists them."""

    exit_code = 64  # EX_USAGE
    default_hint = "name the session HOST/NAME (`agentwrap ls` shows each session's host)"

    def __init__(self, message: str, candidates: list[str], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.candidates = candidates

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "candidates": self.candidates}


class SessionNameTaken(SessionError):
    default_hint = "choose another --name, or `agentwrap stop NAME` the old session first"


class InvalidRunOption(SessionError):
    """A value ``agentwrap run`` does not take (``--on-timeout``,
    ``--answer-timeout``): nothing was started."""

    exit_code = 64  # EX_USAGE
    default_hint = "`agentwrap run --help` lists the options and the values they take"


class ContainerEngineMissing(EnvironmentProblem):
    """``run --container``/``--image``: neither the engine ``[container] engine`` names
    nor docker or podman is on PATH, or the engine refused (nothing was started)."""

    default_hint = "install podman or docker, or name one: [container] engine = \"podman\""


class ContainerProblem(SessionError):
    """The container a session was to run in is not there or not running, or
    would not start (its engine's words in the message): nothing was started."""

    exit_code = 69  # EX_UNAVAILABLE
    default_hint = "`podman ps -a` (or docker) shows the containers and their state"


class PathNotMounted(SessionError):
    """A file agentwrap would write for a container's agent (the instruction-file
    fallback, the answer folder) lies outside what the container mounts: refused,
    so nothing is written where the agent cannot see it."""

    exit_code = 77  # EX_NOPERM
    default_hint = ("mount the project into the container at the same path"
                    " (run --image does; for --container add -v PROJECT:PROJECT when you start it)")


class SessionNotRunning(SessionError):
    exit_code = 3
    default_hint = "start it again with `agentwrap run`; `agentwrap ls --all` shows stale entries"


class SessionNotEnded(SessionError):
    """A session still running was asked to be dismissed (only an ended one can be)."""

    exit_code = 3
    default_hint = "stop it first with `agentwrap stop NAME`; `agentwrap ls --all` shows the ended"


class HostNotFound(SessionError):
    """No host of that name in the store (``agentwrap hosts forget``)."""

    exit_code = 3
    default_hint = "`agentwrap hosts` lists the hosts the store knows"


class HostStillUp(SessionError):
    """A host that still beats (or this one) cannot be forgotten: its
    supervisors would go on delivering into sessions marked ended."""

    exit_code = 75  # EX_TEMPFAIL: once it is silent, it can be
    default_hint = ("stop agentwrap on that host first (`agentwrap stop --all` there), or wait"
                    " until `agentwrap hosts` shows it unreachable")


class HostNameTaken(ConfigError):
    """Another machine that is up beats under this host's name in the shared
    store (cloned machines share a hostname): two hosts of one name would judge
    each other's sessions by pids of the wrong machine, and stop them."""

    default_hint = ("give this machine a name of its own: [host] name in"
                    " ~/.config/agentwrap/config.toml, or AGENTWRAP_HOST_NAME")


# --- messages and delivery --------------------------------------------------------


class QueueError(AgentwrapError):
    pass


class InvalidMessage(QueueError):
    """Content or fields are malformed; nothing was stored."""

    exit_code = 65  # EX_DATAERR
    default_hint = "see `agentwrap <command> --help` for the accepted values"


class MessageTooLarge(InvalidMessage):
    default_hint = "split the content into smaller messages or raise limits.max_content_bytes"


class RateLimited(QueueError):
    exit_code = 75  # EX_TEMPFAIL

    def __init__(self, message: str, *, retry_after: float, hint: str | None = None) -> None:
        super().__init__(
            message, hint=hint or f"retry in {retry_after:.0f} s or raise limits.rate_per_minute"
        )
        self.retry_after = retry_after

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "retryAfter": max(1, math.ceil(self.retry_after))}


class QueueFull(QueueError):
    exit_code = 75
    default_hint = "wait for pending messages to drain (`agentwrap queue NAME`) or raise the limit"


class UntrustedSource(QueueError):
    """The source may not type into this session as is (a shell, ``send --raw``)."""

    exit_code = 77  # EX_NOPERM
    default_hint = (
        "to allow it, list the source under [trust] raw_sources in"
        " ~/.config/agentwrap/config.toml (a project's file cannot)"
    )


class FlowLimit(QueueError):
    """An agent-to-agent message would make its flow too deep or too old.

    Agents answering each other can loop; a flow (the messages sharing a
    correlation id) ends after a few hops or minutes, whatever the agents say.
    """

    exit_code = 77  # EX_NOPERM
    default_hint = (
        "do not forward this further; report to the user instead (a new message from outside"
        " starts a new flow)"
    )


class MessageNotFound(QueueError):
    exit_code = 3
    default_hint = "`agentwrap history NAME` lists message ids"


class DeliveryError(AgentwrapError):
    """A delivery step failed (paste not seen, submit not confirmed, ...)."""


class FallbackError(DeliveryError):
    """Writing the instruction-file fallback section was refused or failed."""


class IdempotencyConflict(QueueError):
    """An idempotency key was reused for a different message (HTTP's 409).

    Returning the first message would tell the producer its new content was
    accepted when it was not; failing loudly is the only honest answer.
    """

    exit_code = 4
    default_hint = "use a new --idempotency-key for new content, or resend the same content"


# --- the store and the files agentwrap keeps ---------------------------------------


class UnsafePath(EnvironmentProblem):
    """A dir or file agentwrap keeps private things in is not safely ours.

    Like tmux with its socket dir, agentwrap refuses a runtime or state dir
    that another user owns, that others may write, or that is a symlink:
    whoever controls it could read the messages or plant links that make
    agentwrap overwrite other files.
    """

    exit_code = 77  # EX_NOPERM


class StoreError(AgentwrapError):
    """The SQLite store could not do what was asked (see the subclasses).

    Raised only from the store's one translation point (:func:`agentwrap.queue.db.
    store_errors`), so callers never see a bare ``sqlite3`` error.
    """

    exit_code = 74  # EX_IOERR


class StoreLocked(StoreError):
    """Another process held the write lock for longer than the busy timeout."""

    exit_code = 75  # EX_TEMPFAIL
    default_hint = (
        "another agentwrap process holds the database; retry shortly, and if it persists"
        " look for a stuck process with `fuser` on the file named above"
    )


class StoreFull(StoreError):
    """The disk (or the database's size limit) is full: nothing was written."""

    default_hint = "free some disk space on the file system named above, then retry"


class StoreCorrupt(StoreError):
    """The database file is damaged; agentwrap will not guess what it held."""


class StoreUnavailable(StoreError):
    """The database cannot be opened or written: permissions, read-only, I/O,
    a PostgreSQL server that refuses who we are (password, database, role)."""

    exit_code = 77  # EX_NOPERM


class StoreDown(StoreUnavailable):
    """The store's server is down, unreachable or cannot take one more
    connection now (refused, cut off, restarting, "too many connections"):
    a temporary failure, unlike a refusal of who we are; nothing was written
    and the same call may be tried again once it is back."""

    exit_code = 75  # EX_TEMPFAIL
    default_hint = (
        "the store's server is down or full for now: nothing was written; retry once it is"
        " back (`agentwrap doctor` checks the store), or ask its admin if it stays away"
    )


class StoreInUse(StoreError):
    """A store cannot be moved while supervisors still write to it (nothing was copied)."""

    exit_code = 75  # EX_TEMPFAIL


class StoreNotEmpty(StoreError):
    """A store is moved only into an empty one: the target holds rows (nothing was copied)."""

    exit_code = 73  # EX_CANTCREAT


# --- the hub and the host links (issue 38) ----------------------------------------------


class HubUnreachable(StoreDown):
    """This host's link to its hub is down (never up, cut, or the hub
    restarting): nothing was sent or recorded, and nothing new is typed until
    the link is back; the link reconnects by itself."""

    default_hint = (
        "the hub is unreachable from this host: nothing was recorded; the link reconnects by"
        " itself (check the hub with `curl URL/healthz`, or the network between)"
    )


class HostUnreachable(StoreDown):
    """The hub has no link from the host that runs this session (its
    supervisor is down, or the host cannot reach the hub): what only that
    host can do (its screen, stop) was not done; every
    other host is served as usual."""

    default_hint = (
        "that host has no link to the hub now: nothing was done there; it is shown"
        " `unreachable since ...` until its link is back (check `agentwrap hub hosts`)"
    )


class LinkProtocolError(StoreError):
    """A frame on a host link is not ``agentwrap.link/1`` (not JSON, not
    JSON-RPC 2.0, a value of the wrong shape): the link that sent it is closed,
    nothing it asked for was done."""

    exit_code = 76  # EX_PROTOCOL
    default_hint = "the hub and the host must run agentwrap versions speaking agentwrap.link/1"


class ForeignSession(QueueError):
    """A host asked the hub to act for a session or a batch of another host
    (claim, phase, finish, attempt, acknowledge, read): refused, nothing
    changed. A host acts only for its own sessions."""

    exit_code = 77  # EX_NOPERM
    default_hint = "a host claims, types and reports only for its own sessions (HOST/NAME)"


class JoinRefused(AgentwrapError):
    """A join code the hub will not take (unknown, already used, expired), or a
    hub whose TLS certificate is not the one the code names: nothing was saved."""

    exit_code = 77  # EX_NOPERM
    default_hint = ("ask the hub's admin for a new code (`agentwrap hub invite HOST` on the hub):"
                    " a code works once, for a few minutes, with the hub it was made on")


class LinkRefused(AgentwrapError):
    """The hub refused this host's credential (revoked, forgotten, or never
    joined): the link stays down until the host joins again."""

    exit_code = 77  # EX_NOPERM
    default_hint = "join again with a new code: `agentwrap join URL CODE`"


class HubListenRefused(ConfigError):
    """``agentwrap hub`` was asked to serve plain HTTP on an address that is
    not loopback: credentials and messages would cross the network in clear."""

    default_hint = ("give --tls-cert FILE --tls-key FILE, listen on 127.0.0.1, or put the hub"
                    " behind a TLS reverse proxy that forwards to a loopback --listen")


class DeliveryInterrupted(DeliveryError):
    """The supervisor was told to stop in the middle of a delivery step.

    Not a failure of the batch: it stays in its write-ahead phase and the
    next supervisor resumes it from there.
    """


# --- answering a waiting agent's question ----------------------------------------------


class AnswerError(AgentwrapError):
    """An answer to the question a waiting agent shows could not be taken or applied."""


class NoOpenQuestion(AnswerError):
    """The session is not waiting for an answer (or what it shows was not read as a question)."""

    exit_code = 4
    default_hint = "`agentwrap state NAME` shows what the agent is doing and what it asks"


class StaleAnswer(AnswerError):
    """The answer names a question the agent no longer asks: nothing was typed."""

    exit_code = 5
    default_hint = "read the question again (`agentwrap state NAME`) and answer that one"


class InvalidAnswer(AnswerError):
    """The answer does not fit the question (no such option, text where none is taken, ...)."""

    exit_code = 65  # EX_DATAERR
    default_hint = "`agentwrap state NAME` lists the options; `agentwrap answer --help`"


class AnswerLinkRefused(AnswerError):
    """A one-tap answer link that may not answer: forged, expired, used, for a
    question no longer open, or approving what the deny-list or a rule forbids.
    Nothing was answered; ``reason`` names which (``forged``, ``expired``,
    ``used``, ``stale``, ``closed``, ``refused``)."""

    exit_code = 77  # EX_NOPERM
    default_hint = "answer in the dashboard or the terminal (`agentwrap answer NAME`)"

    def __init__(self, message: str, *, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


class AnswerFailed(AnswerError):
    """The keys were pressed but the dialog did not close as expected (evidence in the message)."""

    exit_code = 1
    default_hint = "look at the session (`agentwrap state NAME --screen`) and answer in the terminal"
