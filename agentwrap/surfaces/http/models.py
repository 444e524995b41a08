"""The request and response bodies of the HTTP API, as typed models.

Field names are the API's (camelCase, as issue 10 writes them). The models
describe shapes only: whether a content is too long, a TTL out of range or a
source reserved is decided by the store behind :class:`~agentwrap.service.
Service`, the same for every surface (the store's fixed bounds are *stated*
in the document, through ``json_schema_extra``, so clients and the schema
fuzzer know them; the store enforces them). Requests refuse unknown fields and
values of the wrong JSON type (strict types: ``"30"`` is not a number), so a
typo is a 400, not a default or a conversion.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictInt, StrictStr

from ...message import Source
from ...queue.validate import MAX_DEPTH, MAX_ID_CHARS, MIN_TTL_S

SenderPriority = Literal["low", "normal", "high", "critical"]
StrictNumber = Annotated[float, Strict()]  # a JSON number (an int too), never "30"
# Ids end up in labels typed into a terminal: no control characters (the store
# also refuses other invisible ones, and says which).
ID_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
ID_SCHEMA: dict[str, Any] = {"minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": ID_PATTERN}


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputRequest(BaseModel):
    """``POST /api/sessions/{name}/input``: one message for the session's agent."""

    model_config = ConfigDict(extra="forbid")

    # json_schema_extra: the store's fixed bounds, stated in the document so a
    # client (or a fuzzer) knows them; the store still enforces them (400).
    source: Source = Field(description="who sends it; 'system' is agentwrap's own and refused",
                           json_schema_extra={"not": {"const": Source.SYSTEM.value}})
    sourceId: StrictStr = Field("", description="who within the source, e.g. github",
                                json_schema_extra={"maxLength": MAX_ID_CHARS, "pattern": ID_PATTERN})
    content: StrictStr = Field(
        description="the text for the agent (sanitized; never truncated; at most"
                    " limits.max_content_bytes of UTF-8, 10 KiB by default)",
        json_schema_extra={"minLength": 1, "pattern": r"\S"},
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="data only, a JSON object")
    ttl: StrictNumber | None = Field(
        None, description="seconds before it expires (default from config; at most"
                          " limits.max_ttl_s)", json_schema_extra={"minimum": MIN_TTL_S},
    )
    priority: SenderPriority = "normal"
    correlationId: StrictStr | None = Field(None, json_schema_extra=ID_SCHEMA)
    depth: StrictInt = Field(0, description="agent-to-agent hops so far",
                             json_schema_extra={"minimum": 0, "maximum": MAX_DEPTH})
    idempotencyKey: StrictStr | None = Field(
        None, description="a repeated key with the same content returns the first message",
        json_schema_extra=ID_SCHEMA,
    )
    ack: StrictBool | None = Field(
        None, description="ask the agent to acknowledge (default: config)"
    )


ACKNOWLEDGED_DOC = (
    "true once the agent acknowledged it; false when it was delivered but the ACK asked"
    " for never came (the agent exited first: `send --wait` exits 15); null otherwise (no"
    " ACK asked, not delivered, or one handed over through a hook, MCP or a read file whose"
    " ACK may still come)")
OUTCOME_DOC = (
    "the end as a sender reads it: the status, except `unacknowledged` for a message"
    " delivered whose ACK was asked and never came (its status stays `delivered`)")


class Evicted(_Out):
    id: str
    source: str


class InputAccepted(_Out):
    """The stored message (201; 200 when an idempotency key named an earlier one)."""

    id: str
    queued: bool = True
    created: bool = Field(description="false: an idempotency key returned the first message")
    supervised: bool = Field(description="false: no supervisor runs; it waits for `adopt`")
    evicted: list[Evicted] | None = Field(
        None, description="messages of the session's full queue that made way for this one"
    )
    status: str = Field(description="its status now (the end state after ?wait=)")
    detail: str = ""
    final: bool = Field(description="true once it reached an end state")
    acknowledged: bool | None = Field(None, description=ACKNOWLEDGED_DOC)
    outcome: str = Field(description=OUTCOME_DOC)


class Attempt(_Out):
    number: int
    batchId: str
    started: float
    finished: float | None
    channel: str
    outcome: str
    evidence: str


class MessageOut(_Out):
    id: str
    session: str
    content: str
    source: str
    sourceId: str
    priority: str
    status: str
    detail: str
    created: float
    expires: float
    updated: float
    finished: float | None
    attempts: int
    phase: str | None
    correlationId: str | None
    idempotencyKey: str | None
    depth: int
    requireAck: bool | None
    metadata: dict[str, Any]
    kind: str
    framing: str = Field(description="how it reaches the agent: \"the user's own words\","
                         " \"quoted as data\", \"typed as is\" or \"agentwrap's notice\"")


class MessageDetail(MessageOut):
    attemptLog: list[Attempt] = Field(description="every attempt, with its evidence")
    acknowledged: bool | None = Field(None, description=ACKNOWLEDGED_DOC)
    outcome: str = Field(description=OUTCOME_DOC)


class MessageList(_Out):
    """Newest first, each with its attempts."""

    messages: list[MessageDetail]
    total: int = Field(description="messages in this answer")
    more: bool = Field(description="older messages match too (raise ``limit`` to see them)")


class LoginRequest(BaseModel):
    """``POST /api/login``: the code of a one-time login link."""

    model_config = ConfigDict(extra="forbid")

    code: StrictStr = Field(max_length=200, description="the part after `#login=` in the link")


class LoginOut(_Out):
    token: str = Field(description="a bearer token for this page (kept until the API token is renewed)")


class QueuedInput(MessageOut):
    waitingBecause: str
    ageS: float
    ttlLeftS: float


class InputPeek(_Out):
    """Never consumes: what waits, highest priority first (in-flight first)."""

    inputs: list[QueuedInput]
    total: int = Field(description="entries matching the filters, before ``limit``")


class QuestionOption(_Out):
    label: str
    description: str = ""
    number: int | None = Field(None, description="as shown; typing it picks the option")
    key: str | None = Field(None, description="the key hint the dialog shows (y, esc, ...)")
    checked: bool | None = Field(None, description="multi-select: the box is ticked")


class QuestionItem(_Out):
    question: str
    header: str = ""
    options: list[QuestionOption]
    multiSelect: bool = False


class QuestionOut(_Out):
    """What a ``waiting_input`` agent asks, read from its screen (or a hook)."""

    id: str = Field(description="from the content: an answer names the question it answers")
    kind: Literal["permission", "choice", "confirm", "trust", "text"]
    title: str
    questions: list[QuestionItem]
    highlighted: int | None = Field(None, description="the option number the cursor is on")
    free_text_allowed: bool = False
    tool: str | None = None
    command: str | None = None
    dialog: str = Field("", description="the profile's dialog that matched")
    source: Literal["screen", "hook", "app-server"] = Field(
        "screen", description="where it was read: the screen, the agent's hook, or Codex's"
        " app-server (its approval request: exact command and `cwd`, answered by a reply)")
    tabs: list[str] = Field(
        default_factory=list, description="a dialog of several questions shown as tabs: every"
        " question's header, in order (answer them all at once with `answers`)")
    description: str | None = Field(
        None, description="what the agent says the call does, where its dialog shows that"
        " apart from the command (never the command)")
    command_unsure: str = Field(
        "", description="why `command`, read off the screen, may not be exactly what runs"
        " (empty: read whole, or told by the agent's hook); answer rules never approve it")
    cwd: str = Field("", description="where the command runs, when the agent told it"
                     " (Codex's app-server)")


class AnswerRequest(BaseModel):
    """Exactly one of option, options, answers, text, deny (see ``agentwrap answer --help``)."""

    model_config = ConfigDict(extra="forbid")

    option: StrictInt | StrictStr | None = Field(
        None, description="the option's number as shown, or its label (exact, or a unique prefix)",
        json_schema_extra={"maxLength": 200})
    options: list[StrictInt | StrictStr] | None = Field(
        None, description="a multi-select question: the options to tick (numbers or labels);"
        " the others end up unticked", json_schema_extra={"maxItems": 20})
    answers: dict[StrictStr, StrictInt | StrictStr | list[StrictInt | StrictStr]] | None = Field(
        None, description="a dialog of several questions (tabs): each question's header or"
        " number -> its option, or a list of options for a multi-select one; every question"
        " needs one", json_schema_extra={"maxProperties": 20})
    text: StrictStr | None = Field(None, description="free text, where the question takes it",
                                   json_schema_extra={"maxLength": 1000})
    deny: StrictBool = Field(False, description="dismiss the dialog (the profile's deny keys)")
    questionId: StrictStr | None = Field(
        None, description="answer only while this question is open (else 409)",
        json_schema_extra={"maxLength": 64})


class AnswerOut(_Out):
    """An answer and what became of it."""

    id: str
    session: str
    questionId: str
    answer: dict[str, Any] = Field(description="what is typed: how (option, text, deny), ...")
    source: str
    status: Literal["pending", "applied", "stale", "failed"]
    detail: str
    created: float
    finished: float | None = None
    supervised: bool = Field(description="false: no supervisor runs to type it")
    question: QuestionOut


class StateOut(_Out):
    state: str
    since: float
    reason: str
    signal: str
    rule: str
    evidence: str
    quietMs: int
    draft: bool
    question: QuestionOut | None = Field(None, description="set while waiting_input")


class SessionSummary(_Out):
    name: str
    host: str = Field(description="the machine it runs on ('' if recorded before hosts were)")
    hostLiveness: str = Field(description="up, or unreachable: another host of a shared store"
                              " silent past its deadline (its sessions' state is then unknown)")
    unreachableSince: float | None = Field(description="set while unreachable: its last beat"
                                           " (0: never seen)")
    profile: str
    backend: str
    liveness: str = Field(description="running, stale (no supervisor), ended, or unreachable"
                          " (its host is)")
    state: str
    pending: int
    started: float
    ended: float | None
    exitCode: int | None
    endReason: str | None = Field(default=None, description="an ended session: why it ended"
                                  " (its exit code, a signal, `stop`, its supervisor gone)")


class SessionList(_Out):
    sessions: list[SessionSummary]
    host: str = Field(description="the host serving this API: a bare session name means its"
                      " session of that name when it has one")


class HostSummary(_Out):
    name: str
    here: bool = Field(description="the host serving this API")
    liveness: str = Field(description="up, or unreachable: silent past its heartbeat deadline")
    lastBeat: float | None = Field(description="its last heartbeat (null: none, e.g. on SQLite)")
    unreachableSince: float | None = Field(description="set while unreachable: its last beat")
    sessions: list[str] = Field(description="the sessions running there")
    pending: int = Field(description="messages pending for its sessions")


class HostList(_Out):
    hosts: list[HostSummary]
    shared: bool = Field(description="false: the store is this machine's SQLite file, whose"
                         " only host is this one")


class ChannelMetrics(_Out):
    attempts: int = Field(description="attempts made through this channel")
    failedAttempts: int = Field(description="of those, the ones that did not get the message there")
    delivered: int = Field(description="messages delivered or acknowledged through it"
                           " (a message counts for the channel of its last attempt)")
    firstTry: int
    firstTryRate: float | None
    p50LatencyS: float | None = Field(description="created -> delivered")
    p95LatencyS: float | None


class Metrics(_Out):
    byStatus: dict[str, int]
    total: int
    attempted: int
    succeededFirstTry: int
    succeededAfterRetry: int
    escalated: int
    failed: int
    meanAttempts: float | None
    meanLatencyS: float | None
    p95LatencyS: float | None
    byChannel: dict[str, ChannelMetrics] = Field(
        description="per channel: tmux-paste, pty-paste, hook, mcp, read-file, fallback-file, ...")


class SessionDetail(SessionSummary):
    explanation: StateOut
    permissionGate: str | None = Field(
        None, description="set for an agent that runs tools without asking by default (OpenCode):"
        " 'none: ...' when this session has no permission gate, else how it was made to ask")
    queueDepth: int = Field(description="pending and in-flight messages")
    pendingByPriority: dict[str, int]
    metrics: Metrics


class DebugQueue(_Out):
    session: str
    liveness: str
    state: str
    entries: list[QueuedInput]


class DebugQueues(_Out):
    queues: list[DebugQueue]


class Health(_Out):
    status: Literal["ok"]
    version: str
    lastEventId: int


class ApiError(BaseModel):
    """Every error: ``error`` says what; the other fields name the field or limit."""

    model_config = ConfigDict(extra="allow")

    error: str
    detail: str | None = None
    hint: str | None = None


class StreamEvent(_Out):
    """One event of ``GET /api/events`` (the ``data:`` of an SSE event)."""

    id: str = Field(description="store event id N (N.i for all but the last of several)")
    type: str = Field(description="session.input.queued, message.delivered, session.state, ...")
    at: float
    session: str
    messageId: str | None
    data: dict[str, Any]
