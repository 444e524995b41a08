"""A scripted, vendor-free model server for the end-to-end tests.

The e2e tests drive the *real* agent CLIs (Claude Code, Codex, Aider, Gemini CLI).
They must never reach a vendor, so each CLI is pointed at this server on
127.0.0.1. The server speaks just enough of four wire APIs for the CLIs to run a
normal turn, and it answers from directives embedded in the person's text so a
test decides what the "model" does:

* ``[[reply: TEXT]]``  answer TEXT verbatim.
* ``[[delay: S]]``     wait S seconds before the first token (the agent looks busy).
* ``[[slow: S]]``      stream 40 numbered lines spread over S seconds, then the reply.
* ``[[tool]]``         call the agent's shell tool with ``touch tool_ran.txt`` so the
                       agent asks for permission; the request carrying the tool result
                       is answered ``done``.
* ``[[call: NAME {JSON}]]`` call the agent's tool NAME with the JSON object as its
                       arguments, verbatim (e.g. ``[[call: Read {"file_path": "/etc/hostname"}]]``
                       or ``[[call: write_file {"file_path": "a.txt", "content": "x"}]]``), to
                       open the agent's other dialogs (read outside the project, file
                       edit, a question to the person). NAME must be one of the tools the
                       request offers, else the reply says so and lists them. The
                       request carrying the tool result is answered ``done``, like
                       ``[[tool]]``. The last such directive in the text wins.
* ``[[tool-described]]`` like ``[[tool]]``, but with :data:`TOOL_LONG_COMMAND` (harmless,
                       longer than 150 characters) and a ``description`` argument
                       (:data:`TOOL_DESCRIPTION`) that says something else, as real
                       models write one: Gemini CLI then shows the description where
                       its dialog shows a short command.
* ``Reply "ACK <token>"`` (or with backticks) answer ``ACK <token>`` when
  ``auto_ack`` is on; the last such phrase wins.
* ``[[ack-after: TEXT]]`` with such a request: answer ``TEXT ACK <token>`` (a
  reply long enough for the agent's TUI to wrap its ACK onto the next row).

Everything else gets ``default_reply``. The server also records every request, so a
test can assert what actually reached the model (``user_texts``,
``wait_for_user_text``) and see paths it does not serve (api ``"other"``, 404).

Wire APIs (streaming SSE and plain JSON for each):

* Anthropic Messages ``POST /v1/messages`` (+ ``count_tokens``, ``HEAD /``, ``GET /``).
  Tools marked ``defer_loading`` are callable only after a tool search loaded them
  (a ``tool_reference`` in a tool result), as with the real API.
* OpenAI Responses ``POST /v1/responses`` (+ ``GET /v1/models``).
* OpenAI Chat Completions ``POST /v1/chat/completions``.
* Gemini ``POST /v1beta/models/M:streamGenerateContent`` / ``:generateContent`` /
  ``:countTokens``.

Side requests
-------------
Agents make requests of their own besides the person's turn (session titles, model
routing, next-speaker checks, quota probes, token counting). They must not be
mistaken for the person's turn, so ``RecordedRequest.side`` marks them and
``user_texts()`` leaves them out. A model request is *side* when any of these holds:

1. it asks for structured output: Anthropic ``output_format`` or
   ``output_config.format`` (json_schema), Responses ``text.format`` of type
   json_schema/json_object, Chat ``response_format`` of type json_schema/json_object,
   Gemini ``generationConfig.responseJsonSchema``/``responseSchema`` or
   ``responseMimeType: application/json``;
2. it forces a named tool (Anthropic ``tool_choice: {"type": "tool"}``, Chat
   ``tool_choice: {"type": "function"}``) - the older way to get structured output;
   or a Chat request without tools whose system prompt is a title generator's
   (OpenCode titles each session that way before its first turn);
3. Anthropic: it offers no tools and either uses a ``haiku`` model (Claude Code's
   small fast model does its housekeeping) or has ``max_tokens <= 1`` (a quota probe).
   Claude Code's real turns always carry its tool list.
4. Gemini: a non-streaming ``:generateContent`` without tools (Gemini CLI's turns
   always stream with tools; at start-up its TUI asks a flash-lite model for a
   "Summary (max 80 chars)" of the previous session this way).

Non-model endpoints (``HEAD /``, ``GET /``, token counting, model lists) are side too.
A side request with a schema is answered with a small object that fits it (required
and optional properties filled: strings ``"ok"``, booleans false, numbers 0 - or the
low end of a range given as ``minimum`` or in the description, e.g. "from 1-100" -,
enums their first value); without a schema the answer is ``"ok"``. Directives in a side
request are ignored, so a title request that quotes ``[[delay: 5]]`` is not delayed.

Aider and ``[[tool]]``
----------------------
Aider sends no tool list, so for a Chat Completions request without tools ``[[tool]]``
is answered with a file edit that creates ``tool_ran.txt``: a SEARCH/REPLACE block when
the system prompt mentions SEARCH/REPLACE (aider's "diff" formats), else a "whole"
file listing. Either way aider stops and asks ``Create new file?`` - its yes/no
permission question.

Run ``python tests/e2e/model_server.py --port 8765`` to serve by hand; one JSON line
per request goes to stdout.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import io
import json
import logging
import re
import socket
import sys
import threading
import time
import traceback
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

__all__ = ["TOOL_COMMAND", "TOOL_DESCRIPTION", "TOOL_LONG_COMMAND", "TOOL_SEARCH", "ModelServer", "RecordedRequest", "fill_schema"]

log = logging.getLogger("agentwrap.e2e.model_server")

#: Claude Code's tool that loads deferred tools (2.1.332: its MCP servers' tools):
#: ``{"query": "select:NAME"}`` or keywords; the result names them in ``tool_reference``
#: blocks, and from the next request on they are callable.
TOOL_SEARCH = "ToolSearch"
#: The shell command a ``[[tool]]`` reply asks the agent to run.
TOOL_COMMAND = "touch tool_ran.txt"
#: The command of a ``[[tool-described]]`` call: past Gemini CLI 0.61's 150-character
#: ``SHOW_NL_DESCRIPTION_THRESHOLD``, so its dialog shows the description instead.
TOOL_LONG_COMMAND = (
    "touch tool_ran.txt && echo 'agentwrap e2e: a command longer than 150 characters,"
    " so that Gemini CLI titles its dialog with the description' > /dev/null"
)
#: The description a ``[[tool-described]]`` call gives: innocent, and not the command.
TOOL_DESCRIPTION = "List the files in this project."
#: The file a ``[[tool]]`` reply creates (aider edit or shell command).
TOOL_FILE = "tool_ran.txt"
#: Answer to the request that carries a tool result.
TOOL_DONE_REPLY = "done"
#: Answer to a side request that asks for no particular shape.
SIDE_REPLY = "ok"
#: Number of numbered lines a ``[[slow: S]]`` reply streams before the reply itself.
SLOW_LINES = 40

MODEL_APIS = ("anthropic", "responses", "chat", "gemini")

_FLOAT = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_RE_REPLY = re.compile(r"\[\[\s*reply\s*:\s*(.*?)\s*\]\]", re.IGNORECASE | re.DOTALL)
_RE_DELAY = re.compile(r"\[\[\s*delay\s*:\s*" + _FLOAT + r"\s*\]\]", re.IGNORECASE)
_RE_SLOW = re.compile(r"\[\[\s*slow\s*:\s*" + _FLOAT + r"\s*\]\]", re.IGNORECASE)
_RE_TOOL = re.compile(r"\[\[\s*tool\s*\]\]", re.IGNORECASE)
_RE_ACK_AFTER = re.compile(r"\[\[\s*ack-after\s*:\s*(.*?)\s*\]\]", re.IGNORECASE | re.DOTALL)
_RE_TOOL_DESCRIBED = re.compile(r"\[\[\s*tool-described\s*\]\]", re.IGNORECASE)
_RE_CALL = re.compile(r"\[\[\s*call\s*:\s*([A-Za-z0-9_.-]+)\s*", re.IGNORECASE)
# Reply "ACK tok" / Reply `ACK tok` (curly quotes too, since people paste them).
_RE_ACK = re.compile(
    r"Reply\s*[\"`\u201c\u201d]\s*ACK\s+([^\"`\u201c\u201d\n]+?)\s*[\"`\u201c\u201d]"
)
_RE_GEMINI = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):([A-Za-z]+)$")

# Tool names, most preferred first, that run a shell command in each agent.
_SHELL_TOOL_NAMES = (
    "Bash",  # Claude Code
    "shell",  # Codex (classic)
    "shell_command",  # Codex (string command)
    "exec_command",  # Codex (unified exec)
    "local_shell",  # Codex (built-in tool type)
    "run_shell_command",  # Gemini CLI
    "run_commands",  # Cline (a list of commands)
    "bash",
    "execute_command",
    "terminal",
)
# Item types in a Responses ``input`` that the model produced (end of a user turn).
_RESPONSES_MODEL_ITEMS = frozenset(
    {
        "function_call",
        "local_shell_call",
        "custom_tool_call",
        "reasoning",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
        "compaction",
    }
)

JSON = dict[str, Any]


# --------------------------------------------------------------------------- data


@dataclass
class RecordedRequest:
    """One request as the server saw it, kept so tests can assert on what arrived.

    ``status`` and ``error`` come after the contract fields; ``error`` holds the
    traceback when a handler failed, so a broken fixture shows up in the test log
    instead of as a hung agent.
    """

    time: float
    method: str
    path: str
    api: str
    headers: dict[str, str]
    body: Any
    side: bool
    user_text: str | None
    reply: str | None
    status: int = 200
    error: str | None = None

    def summary(self) -> JSON:
        """A one-line JSON-able view (no body, no headers) for the manual-run log."""
        return {
            "time": round(self.time, 3),
            "method": self.method,
            "path": self.path,
            "api": self.api,
            "side": self.side,
            "status": self.status,
            "user_text": self.user_text,
            "reply": self.reply,
            "error": self.error,
        }


@dataclass
class ToolSpec:
    """A tool the agent offered, normalised across the four APIs.

    ``kind`` is ``"function"`` for ordinary JSON-schema tools and ``"local_shell"`` for
    the Responses built-in that takes an ``exec`` action instead of arguments.
    """

    name: str
    schema: JSON
    kind: str = "function"
    namespace: str = ""  # Responses ``namespace`` tools (Codex's MCP servers): the call names it


@dataclass
class Turn:
    """The person's side of the conversation since the model last spoke.

    ``text`` joins every text part of every user message after the last model
    output, because agents split one turn over several parts or messages (Claude
    Code's ``<system-reminder>`` blocks, Codex's ``<environment_context>`` item).
    ``tool_result`` says whether that tail carries a tool result.
    """

    text: str = ""
    tool_result: bool = False


@dataclass
class Plan:
    """What to answer one model request with, decided before anything is sent."""

    text: str = ""
    tool: ToolSpec | None = None
    tool_args: JSON = field(default_factory=dict)
    delay: float = 0.0
    slow: float = 0.0

    @property
    def label(self) -> str:
        """The ``reply`` recorded for the request log."""
        return f"tool_call:{self.tool.name}" if self.tool else self.text

    def chunks(self) -> list[str]:
        """Split the text into stream deltas: lines when slow, else a few words each."""
        if not self.text:
            return []
        if self.slow > 0:
            return self.text.splitlines(keepends=True)
        words = re.findall(r"\s*\S+\s*", self.text) or [self.text]
        return ["".join(words[i : i + 3]) for i in range(0, len(words), 3)]


@dataclass
class Exchange:
    """Everything the API-specific writers need about one model request."""

    api: str
    body: JSON
    stream: bool
    model: str
    turn: Turn
    side: bool
    plan: Plan
    input_tokens: int
    sse: bool = True


# ------------------------------------------------------------------------ helpers



def _after_last(entries: list[JSON], is_model: Callable[[JSON], bool]) -> list[JSON]:
    """The entries after the model's last turn: what the person just sent.
    Every wire API keeps a conversation as one list; only its roles differ."""
    start = 0
    for i, entry in enumerate(entries):
        if is_model(entry):
            start = i + 1
    return entries[start:]


def _is_responses_model_item(item: JSON) -> bool:
    return item.get("role") == "assistant" or item.get("type") in _RESPONSES_MODEL_ITEMS

def _as_dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _schema_type(schema: JSON) -> str:
    """The schema's type in lower case (Gemini writes ``STRING``), null skipped."""
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if str(x).lower() != "null"), "null")
    if t is None:
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
        return ""
    return str(t).lower()


def fill_schema(schema: Any, root: JSON | None = None, depth: int = 0) -> Any:
    """Build a minimal value that satisfies a JSON schema.

    Side requests (titles, routing) parse the model's answer against their schema; a
    value that fits keeps the agent quiet. All properties are filled, not only the
    required ones, because strict schemas demand every property.
    """
    if not isinstance(schema, dict) or depth > 12:
        return SIDE_REPLY
    root = schema if root is None else root
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = _as_dict(target).get(part)
        return fill_schema(target, root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in _as_list(schema.get(key)) if isinstance(o, dict)]
        non_null = [o for o in options if _schema_type(o) != "null"]
        if non_null or options:
            return fill_schema((non_null or options)[0], root, depth + 1)
    kind = _schema_type(schema)
    if kind == "object":
        props = _as_dict(schema.get("properties"))
        return {k: fill_schema(v, root, depth + 1) for k, v in props.items()}
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        return [fill_schema(schema.get("items"), root, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number_for(schema)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = SIDE_REPLY
    min_len = schema.get("minLength")
    if isinstance(min_len, int) and min_len > len(text):
        text = text + "k" * (min_len - len(text))
    return text


_RE_RANGE = re.compile(r"(-?\d+)\s*(?:-|\u2013|to)\s*(-?\d+)")


def _number_for(schema: JSON) -> int | float:
    """0, unless the schema's ``minimum`` or a range in its description rules 0 out.

    Gemini CLI's routing classifier asks for ``complexity_score`` with only "Complexity
    score from 1-100." in the description, and its own validator rejects 0.
    """
    minimum = schema.get("minimum")
    if isinstance(minimum, (int, float)) and not isinstance(minimum, bool):
        return max(0, minimum)
    found = _RE_RANGE.search(str(schema.get("description") or ""))
    if found:
        low, high = int(found.group(1)), int(found.group(2))
        if low <= high and not low <= 0 <= high:
            return low
    return 0


def _estimate_tokens(value: Any) -> int:
    """A rough token count (4 characters a token): agents only display it."""
    try:
        size = len(json.dumps(value)) if not isinstance(value, str) else len(value)
    except (TypeError, ValueError):
        size = 0
    return max(1, size // 4)


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _text_parts(content: Any, text_types: tuple[str, ...]) -> list[str]:
    """Text of a message ``content`` that is either a string or a list of parts."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for part in _as_list(content):
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and part.get("type") in text_types:
            text = part.get("text")
            if isinstance(text, str):
                out.append(text)
    return out


# ----------------------------------------------------------- per-API request views


def anthropic_turn(body: JSON) -> Turn:
    """User messages after the last assistant one; ``tool_result`` marks a tool round trip.

    Only ``assistant`` ends a turn: Claude Code (``mid-conversation-system`` beta) puts
    ``role: "system"`` messages *after* the person's message, and their text is not
    the person's.
    """
    messages = [m for m in _as_list(body.get("messages")) if isinstance(m, dict)]
    texts: list[str] = []
    tool_result = False
    for message in _after_last(messages, lambda m: m.get("role") == "assistant"):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts.extend(_text_parts(content, ("text",)))
        for block in _as_list(content):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_result = True
    return Turn("\n".join(texts), tool_result)


def anthropic_tools(body: JSON) -> list[ToolSpec]:
    """Client tools the model can call now (server tools such as web search carry no
    input schema). A tool marked ``defer_loading`` is callable only once a
    ``tool_reference`` to it came back in a tool result, as with the real API's tool
    search: Claude Code 2.1.332 lists its MCP tools that way, and a model reaches
    them by calling ``ToolSearch`` first (:data:`TOOL_SEARCH`)."""
    loaded = _tool_references(body.get("messages"))
    tools: list[ToolSpec] = []
    for tool in _as_list(body.get("tools")):
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            if tool.get("defer_loading") and tool["name"] not in loaded:
                continue
            tools.append(ToolSpec(tool["name"], _as_dict(tool.get("input_schema"))))
    return tools


def _tool_references(value: Any) -> set[str]:
    """The tool names of every ``tool_reference`` block in ``value`` (a tool
    search's result: those tools' schemas are loaded from then on)."""
    found: set[str] = set()
    if isinstance(value, dict):
        if value.get("type") == "tool_reference" and isinstance(value.get("tool_name"), str):
            found.add(value["tool_name"])
        for v in value.values():
            found |= _tool_references(v)
    elif isinstance(value, list):
        for v in value:
            found |= _tool_references(v)
    return found


def responses_turn(body: JSON) -> Turn:
    """Trailing input items after the model's last output (message, call, reasoning)."""
    items = body.get("input")
    if isinstance(items, str):
        return Turn(items, False)
    entries = [i for i in _as_list(items) if isinstance(i, dict)]
    texts: list[str] = []
    tool_result = False
    for item in _after_last(entries, _is_responses_model_item):
        if str(item.get("type", "")).endswith("_output"):
            tool_result = True
        elif item.get("role") == "user":
            texts.extend(_text_parts(item.get("content"), ("input_text", "text")))
    return Turn("\n".join(texts), tool_result)


def responses_tools(body: JSON) -> list[ToolSpec]:
    """Function tools by name; the ``local_shell`` built-in as a tool of its own kind."""
    tools: list[ToolSpec] = []
    for tool in _as_list(body.get("tools")):
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "local_shell":
            tools.append(ToolSpec("local_shell", {}, "local_shell"))
        elif tool.get("type") == "function" and isinstance(tool.get("name"), str):
            tools.append(ToolSpec(tool["name"], _as_dict(tool.get("parameters"))))
        elif tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
            for sub in _as_list(tool.get("tools")):  # e.g. Codex's mcp__agentwrap
                if isinstance(sub, dict) and isinstance(sub.get("name"), str):
                    tools.append(ToolSpec(sub["name"], _as_dict(sub.get("parameters")),
                                          namespace=tool["name"]))
    return tools


def chat_turn(body: JSON) -> Turn:
    """Trailing ``user`` messages; ``tool``/``function`` messages are tool results."""
    messages = [m for m in _as_list(body.get("messages")) if isinstance(m, dict)]
    texts: list[str] = []
    tool_result = False
    for message in _after_last(messages, lambda m: m.get("role") == "assistant"):
        role = message.get("role")
        if role in ("tool", "function"):
            tool_result = True
        elif role == "user":
            texts.extend(_text_parts(message.get("content"), ("text", "input_text")))
    return Turn("\n".join(texts), tool_result)


def chat_tools(body: JSON) -> list[ToolSpec]:
    tools: list[ToolSpec] = []
    for tool in _as_list(body.get("tools")):
        fn = _as_dict(_as_dict(tool).get("function"))
        if isinstance(fn.get("name"), str):
            tools.append(ToolSpec(fn["name"], _as_dict(fn.get("parameters"))))
    return tools


def _gemini_request(body: JSON) -> JSON:
    """``countTokens`` may wrap the request in ``generateContentRequest``."""
    inner = body.get("generateContentRequest")
    return inner if isinstance(inner, dict) else body


def gemini_turn(body: JSON) -> Turn:
    """Trailing ``user`` contents; a ``functionResponse`` part is a tool result."""
    contents = [c for c in _as_list(_gemini_request(body).get("contents")) if isinstance(c, dict)]
    texts: list[str] = []
    tool_result = False
    for content in _after_last(contents, lambda c: c.get("role") == "model"):
        for part in _as_list(content.get("parts")):
            if not isinstance(part, dict):
                continue
            if "functionResponse" in part:
                tool_result = True
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
    return Turn("\n".join(texts), tool_result)


def gemini_tools(body: JSON) -> list[ToolSpec]:
    tools: list[ToolSpec] = []
    for group in _as_list(body.get("tools")):
        for decl in _as_list(_as_dict(group).get("functionDeclarations")):
            decl = _as_dict(decl)
            if isinstance(decl.get("name"), str):
                schema = decl.get("parametersJsonSchema") or decl.get("parameters")
                tools.append(ToolSpec(decl["name"], _as_dict(schema)))
    return tools


# ------------------------------------------------------------ side-request shapes


@dataclass
class SideShape:
    """Why a model request is side, and what shape its answer must take.

    ``schema`` is set when the answer must be JSON; ``forced_tool`` when the answer
    must be a call to that tool.
    """

    reason: str
    schema: JSON | None = None
    forced_tool: ToolSpec | None = None


def _json_format_schema(fmt: Any) -> JSON | None:
    """Schema of an ``{"type": "json_schema", ...}`` / ``json_object`` format, else None."""
    fmt = _as_dict(fmt)
    kind = fmt.get("type")
    if kind == "json_object":
        return {}
    if kind != "json_schema":
        return None
    schema = fmt.get("schema")
    if not isinstance(schema, dict):  # Chat nests it: {"json_schema": {"schema": ...}}
        schema = _as_dict(fmt.get("json_schema")).get("schema")
    return schema if isinstance(schema, dict) else {}


def anthropic_side(body: JSON, tools: list[ToolSpec]) -> SideShape | None:
    for where in (body.get("output_format"), _as_dict(body.get("output_config")).get("format")):
        schema = _json_format_schema(where)
        if schema is not None:
            return SideShape("output_format", schema)
    choice = _as_dict(body.get("tool_choice"))
    if choice.get("type") == "tool":
        tool = next((t for t in tools if t.name == choice.get("name")), None)
        if tool is not None:
            return SideShape("forced_tool", forced_tool=tool)
    if not tools:
        if "haiku" in str(body.get("model", "")).lower():
            return SideShape("small_model_no_tools")
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens <= 1:
            return SideShape("quota_probe")
    return None


def responses_side(body: JSON) -> SideShape | None:
    schema = _json_format_schema(_as_dict(body.get("text")).get("format"))
    return SideShape("text.format", schema) if schema is not None else None


def chat_side(body: JSON, tools: list[ToolSpec]) -> SideShape | None:
    schema = _json_format_schema(body.get("response_format"))
    if schema is not None:
        return SideShape("response_format", schema)
    choice = _as_dict(body.get("tool_choice"))
    if choice.get("type") == "function":
        name = _as_dict(choice.get("function")).get("name")
        tool = next((t for t in tools if t.name == name), None)
        if tool is not None:
            return SideShape("forced_tool", forced_tool=tool)
    if not tools and _chat_system_text(body).lstrip().startswith(_TITLE_SYSTEM_PROMPTS):
        return SideShape("title_prompt")  # OpenCode titles a session before its first turn
    return None


# System prompts of title requests that ask for no particular shape (aider's turns
# carry no tools either, so the prompt is what tells them apart).
_TITLE_SYSTEM_PROMPTS = ("You are a title generator",)


def gemini_side(body: JSON, tools: list[ToolSpec], stream: bool) -> SideShape | None:
    config = _as_dict(_gemini_request(body).get("generationConfig"))
    for key in ("responseJsonSchema", "responseSchema", "response_json_schema"):
        if isinstance(config.get(key), dict):
            return SideShape(key, config[key])
    if str(config.get("responseMimeType", "")).lower() == "application/json":
        return SideShape("responseMimeType", {})
    if not tools and not stream:
        # Gemini CLI's turns always stream with its tool list; a plain non-streaming
        # call without tools is housekeeping (e.g. the previous-session summary).
        return SideShape("unary_no_tools")
    return None


# ---------------------------------------------------------------------- planning


def pick_shell_tool(tools: list[ToolSpec]) -> ToolSpec | None:
    """The agent's shell tool: a known name first, then anything that sounds like one."""
    by_name = {t.name: t for t in tools}
    for name in _SHELL_TOOL_NAMES:
        if name in by_name:
            return by_name[name]
    for tool in tools:
        low = tool.name.lower()
        if any(word in low for word in ("shell", "bash", "exec", "command", "terminal")):
            return tool
    return None


def build_tool_args(
    tool: ToolSpec, escalate: bool, command: str = TOOL_COMMAND, description: str | None = None,
) -> JSON:
    """Arguments for ``touch tool_ran.txt``, shaped by the tool's own JSON schema.

    The command goes into ``command``/``cmd`` (a ``bash -lc`` argv when the schema
    wants an array, as Codex's classic ``shell`` does). With ``escalate`` the call asks
    for escalated sandbox permissions when the schema offers that (Codex), because a
    trusted Codex would otherwise run ``touch`` inside its sandbox without asking.
    """
    props = _as_dict(tool.schema.get("properties"))
    required = [r for r in _as_list(tool.schema.get("required")) if isinstance(r, str)]
    if not props:
        return {"command": command}
    args: JSON = {}
    for name, prop_any in props.items():
        prop = _as_dict(prop_any)
        low = name.lower()
        if low == "commands" and _schema_type(prop) == "array":  # Cline's run_commands
            args[name] = [command]
        elif low in ("command", "cmd", "script"):
            if _schema_type(prop) == "array":
                args[name] = ["bash", "-lc", command]
            else:
                args[name] = command
        elif low in ("description", "justification", "reason"):
            args[name] = description or f"Create {TOOL_FILE} (test fixture)"
        elif low == "sandbox_permissions" and escalate:
            options = _as_list(prop.get("enum"))
            if "require_escalated" in options:
                args[name] = "require_escalated"
            elif name in required:
                args[name] = fill_schema(prop)
        elif low == "with_escalated_permissions" and escalate:
            args[name] = True
        elif name in required:
            args[name] = fill_schema(prop)
    return args


def aider_edit_reply(system_text: str) -> str:
    """A reply in aider's edit format that creates ``tool_ran.txt``.

    Aider has no tools; proposing a new file makes it ask ``Create new file?``.
    """
    fence = "```"
    if "SEARCH/REPLACE" in system_text or "<<<<<<< SEARCH" in system_text:
        return (
            f"Creating the file.\n\n{TOOL_FILE}\n{fence}\n<<<<<<< SEARCH\n=======\n"
            f"tool ran\n>>>>>>> REPLACE\n{fence}\n"
        )
    return f"Creating the file.\n\n{TOOL_FILE}\n{fence}\ntool ran\n{fence}\n"


def find_call(text: str) -> tuple[str, JSON] | None:
    """The newest (last) ``[[call: NAME {JSON}]]`` in text: the tool name and its
    arguments.

    The newest, like ``[[reply]]`` and ``Reply "ACK"``: an agent that keeps a refused
    call's prompt in the next turn (Gemini CLI) sends the old directive with the new
    one, and the test means the new one, so one session can be asked for one call
    after another. The arguments are read with a JSON decoder, so they may hold
    ``]]`` themselves; a directive whose arguments are not a JSON object followed by
    ``]]`` is ignored.
    """
    decoder = json.JSONDecoder()
    found: tuple[str, JSON] | None = None
    for m in _RE_CALL.finditer(text):
        try:
            args, end = decoder.raw_decode(text, m.end())
        except ValueError:
            continue
        if isinstance(args, dict) and re.match(r"\s*\]\]", text[end:]):
            found = m.group(1), args
    return found


def slow_text(final: str) -> str:
    """The long reply of ``[[slow: S]]``: numbered lines, then the chosen reply."""
    lines = [f"Line {n}: streaming slowly, a few words." for n in range(1, SLOW_LINES + 1)]
    return "\n".join([*lines, final])


def _last_float(pattern: re.Pattern[str], text: str) -> float:
    found = pattern.findall(text)
    return float(found[-1]) if found else 0.0


# ------------------------------------------------------------------ HTTP plumbing


class _ClientGone(Exception):
    """The client closed the connection mid-response (e.g. the agent was interrupted)."""


class _Stream:
    """An SSE response written with HTTP/1.1 chunked encoding, flushed per event.

    Chunked framing keeps the connection reusable for the agent's next request,
    and flushing per event is what lets an agent render text as it arrives.
    """

    def __init__(self, handler: _Handler, content_type: str = "text/event-stream") -> None:
        self._handler = handler
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        self._flush()

    def event(self, data: JSON, name: str | None = None) -> None:
        head = f"event: {name}\n" if name else ""
        self.raw(f"{head}data: {json.dumps(data)}\n\n")

    def raw(self, text: str) -> None:
        payload = text.encode("utf-8")
        self._write(b"%x\r\n" % len(payload) + payload + b"\r\n")

    def close(self) -> None:
        self._write(b"0\r\n\r\n")

    def _write(self, data: bytes) -> None:
        try:
            self._handler.wfile.write(data)
        except OSError as exc:
            raise _ClientGone(str(exc)) from exc
        self._flush()

    def _flush(self) -> None:
        try:
            self._handler.wfile.flush()
        except OSError as exc:
            raise _ClientGone(str(exc)) from exc


class _HTTPServer(ThreadingHTTPServer):
    """Joins its handler threads on close and can cut open connections at stop."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: ModelServer) -> None:
        self.owner = owner
        self.open_connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """Routes each request to an API handler; never lets an exception hang a client."""

    protocol_version = "HTTP/1.1"
    server_version = "agentwrap-model-server/1"

    # -- connection bookkeeping -------------------------------------------------

    @property
    def owner(self) -> ModelServer:
        return cast(_HTTPServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        srv = cast(_HTTPServer, self.server)
        with srv.conn_lock:
            srv.open_connections.add(self.connection)

    def finish(self) -> None:
        srv = cast(_HTTPServer, self.server)
        with srv.conn_lock:
            srv.open_connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    # -- verbs ------------------------------------------------------------------

    # -- dispatch ---------------------------------------------------------------

    def _dispatch(self) -> None:
        self._headers_sent = False
        self._record: RecordedRequest | None = None
        split = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        body: Any = None
        try:
            raw = self._read_body()
            body = self._parse_body(raw)
            self._route(split.path, parse_qs(split.query), headers, body)
        except _ClientGone as exc:
            self.close_connection = True
            self._finish_record(499, f"client went away: {exc}", headers, body)
            log.info("client went away during %s %s: %s", self.command, self.path, exc)
        except Exception:
            tb = traceback.format_exc()
            log.error("handler failed for %s %s\n%s", self.command, self.path, tb)
            self.close_connection = True
            self._finish_record(500, tb, headers, body)
            if not self._headers_sent:
                try:
                    self._send_bytes(500, tb.encode("utf-8"), "text/plain; charset=utf-8")
                except OSError:
                    pass


    # every verb goes through one dispatcher (unknown paths are logged as 404s)
    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = _dispatch

    def _finish_record(self, status: int, error: str, headers: dict[str, str], body: Any) -> None:
        if self._record is None:
            self._record = self.owner._record(
                RecordedRequest(
                    time=time.time(),
                    method=self.command,
                    path=self.path,
                    api="other",
                    headers=headers,
                    body=body,
                    side=False,
                    user_text=None,
                    reply=None,
                )
            )
        self.owner._update(self._record, status=status, error=error)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = bytearray()
            while True:
                size_line = self.rfile.readline(1024)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _parse_body(self, raw: bytes) -> Any:
        if not raw:
            return None
        encoding = self.headers.get("Content-Encoding", "").lower().strip()
        if encoding in ("gzip", "x-gzip"):
            raw = zlib.decompress(raw, 16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        elif encoding == "zstd":
            # Codex compresses large request bodies with zstd; the stdlib decodes
            # it only from Python 3.14, the `zstandard` package (dev extra) before.
            try:
                from compression import zstd  # type: ignore[import-not-found, unused-ignore]

                raw = cast(bytes, zstd.decompress(raw))
            except ImportError:
                try:
                    import zstandard  # type: ignore[import-not-found, unused-ignore]
                except ImportError:
                    log.warning("zstd request body from %s cannot be decoded", self.path)
                    return None
                reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw))
                raw = reader.read()
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _send_bytes(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self._headers_sent = True
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, data: Any) -> None:
        self._send_bytes(status, json.dumps(data).encode("utf-8"), "application/json")

    def _start_stream(self, content_type: str = "text/event-stream") -> _Stream:
        self._headers_sent = True
        return _Stream(self, content_type)

    def _log(
        self,
        api: str,
        headers: dict[str, str],
        body: Any,
        side: bool,
        user_text: str | None,
        reply: str | None,
        status: int = 200,
    ) -> None:
        self._record = self.owner._record(
            RecordedRequest(
                time=time.time(),
                method=self.command,
                path=self.path,
                api=api,
                headers=headers,
                body=body,
                side=side,
                user_text=user_text,
                reply=reply,
                status=status,
            )
        )

    # -- routing ----------------------------------------------------------------

    def _route(
        self, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any
    ) -> None:
        method = self.command
        data = _as_dict(body)
        if path == "/" and method in ("GET", "HEAD"):
            # Claude Code probes HEAD / at start-up to see whether the server is up.
            self._log("anthropic", headers, body, True, None, "ok")
            self._send_bytes(200, b"ok", "text/plain")
            return
        if method == "POST" and path in ("/v1/messages", "/messages"):
            self._model_request("anthropic", data, headers, body, stream=bool(data.get("stream")))
            return
        if method == "POST" and path.endswith("/messages/count_tokens"):
            tokens = _estimate_tokens(data.get("messages")) + _estimate_tokens(data.get("system"))
            reply = {"input_tokens": tokens}
            turn = anthropic_turn(data)
            self._log("anthropic", headers, body, True, turn.text, json.dumps(reply))
            self._send_json(200, reply)
            return
        if method == "POST" and path.endswith("/responses"):
            self._model_request("responses", data, headers, body, stream=bool(data.get("stream")))
            return
        if method == "POST" and path.endswith("/chat/completions"):
            self._model_request("chat", data, headers, body, stream=bool(data.get("stream")))
            return
        if method == "GET" and path in ("/v1/models", "/models", "/v1beta/models"):
            api = "gemini" if path.startswith("/v1beta") else "responses"
            listing = self.owner.model_list(gemini=api == "gemini")
            self._log(api, headers, body, True, None, "model_list")
            self._send_json(200, listing)
            return
        match = _RE_GEMINI.match(path)
        if method == "POST" and match:
            model, action = match.group(1), match.group(2)
            if action == "countTokens":
                tokens = _estimate_tokens(_gemini_request(data).get("contents"))
                reply = {"totalTokens": tokens}
                turn = gemini_turn(data)
                self._log("gemini", headers, body, True, turn.text, json.dumps(reply))
                self._send_json(200, reply)
                return
            if action in ("streamGenerateContent", "generateContent"):
                data.setdefault("model", model)
                stream = action == "streamGenerateContent"
                sse = query.get("alt", [""])[-1] == "sse"
                self._model_request("gemini", data, headers, body, stream=stream, sse=sse)
                return
        self._log("other", headers, body, False, None, None, status=404)
        log.warning("unserved request %s %s", method, self.path)
        self._send_json(404, {"error": {"type": "not_found", "message": f"no route {path}"}})

    # -- model requests ---------------------------------------------------------

    def _model_request(
        self,
        api: str,
        data: JSON,
        headers: dict[str, str],
        body: Any,
        stream: bool,
        sse: bool = True,
    ) -> None:
        owner = self.owner
        if api == "anthropic":
            turn, tools = anthropic_turn(data), anthropic_tools(data)
            side = anthropic_side(data, tools)
        elif api == "responses":
            turn, tools = responses_turn(data), responses_tools(data)
            side = responses_side(data)
        elif api == "chat":
            turn, tools = chat_turn(data), chat_tools(data)
            side = chat_side(data, tools)
        else:
            turn, tools = gemini_turn(data), gemini_tools(data)
            side = gemini_side(data, tools, stream)
        plan = owner._plan(api, data, turn, tools, side)
        ex = Exchange(
            api=api,
            body=data,
            stream=stream,
            model=str(data.get("model") or "test-model"),
            turn=turn,
            side=side is not None,
            plan=plan,
            input_tokens=_estimate_tokens(data),
            sse=sse,
        )
        self._log(api, headers, body, side is not None, turn.text, plan.label)
        if api == "anthropic":
            self._anthropic(ex)
        elif api == "responses":
            self._responses(ex)
        elif api == "chat":
            self._chat(ex)
        else:
            self._gemini(ex)

    def _delay(self, plan: Plan) -> None:
        """Sleep the ``[[delay]]``; a stopping server ends the wait at once."""
        if plan.delay > 0 and self.owner._stopping.wait(plan.delay):
            raise _ClientGone("server stopping")

    def _pace(self, plan: Plan, chunks: list[str]) -> Iterator[str]:
        """Yield chunks after the ``delay``; with ``slow`` spread them over S seconds."""
        stopping = self.owner._stopping
        self._delay(plan)
        interval = plan.slow / len(chunks) if plan.slow > 0 and chunks else 0.0
        for i, chunk in enumerate(chunks):
            if i and interval and stopping.wait(interval):
                raise _ClientGone("server stopping")
            yield chunk

    def _wait_whole(self, plan: Plan) -> None:
        """Non-streaming answers take as long as the streamed ones would."""
        if self.owner._stopping.wait(plan.delay + plan.slow):
            raise _ClientGone("server stopping")

    # Anthropic Messages ---------------------------------------------------------

    def _anthropic(self, ex: Exchange) -> None:
        plan = ex.plan
        msg_id = _new_id("msg_")
        tool_id = _new_id("toolu_")
        output_tokens = _estimate_tokens(plan.text or plan.tool_args)
        stop_reason = "tool_use" if plan.tool else "end_turn"
        usage = {"input_tokens": ex.input_tokens, "output_tokens": output_tokens}
        if not ex.stream:
            self._wait_whole(plan)
            content: list[JSON] = []
            if plan.tool:
                content.append(
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": plan.tool.name,
                        "input": plan.tool_args,
                    }
                )
            else:
                content.append({"type": "text", "text": plan.text})
            self._send_json(
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": ex.model,
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            return
        out = self._start_stream()
        out.event(
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": ex.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": ex.input_tokens, "output_tokens": 1},
                },
            },
            "message_start",
        )
        if plan.tool:
            self._delay(plan)
            block: JSON = {"type": "tool_use", "id": tool_id, "name": plan.tool.name, "input": {}}
            out.event(
                {"type": "content_block_start", "index": 0, "content_block": block},
                "content_block_start",
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(plan.tool_args)}
            out.event(
                {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
            )
        else:
            start_block = {"type": "text", "text": ""}
            out.event(
                {"type": "content_block_start", "index": 0, "content_block": start_block},
                "content_block_start",
            )
            for chunk in self._pace(plan, plan.chunks()):
                delta = {"type": "text_delta", "text": chunk}
                out.event(
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                    "content_block_delta",
                )
        out.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        out.event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
            "message_delta",
        )
        out.event({"type": "message_stop"}, "message_stop")
        out.close()

    # OpenAI Responses -----------------------------------------------------------

    def _responses(self, ex: Exchange) -> None:
        plan = ex.plan
        resp_id = _new_id("resp_")
        item_id = _new_id("msg_" if not plan.tool else "fc_")
        call_id = _new_id("call_")
        created = int(time.time())
        output_tokens = _estimate_tokens(plan.text or plan.tool_args)
        usage = {
            "input_tokens": ex.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": ex.input_tokens + output_tokens,
        }

        def response(status: str, output: list[JSON], with_usage: bool) -> JSON:
            return {
                "id": resp_id,
                "object": "response",
                "created_at": created,
                "status": status,
                "model": ex.model,
                "output": output,
                "usage": usage if with_usage else None,
                "error": None,
                "incomplete_details": None,
            }

        if plan.tool and plan.tool.kind == "local_shell":
            final_item: JSON = {
                "type": "local_shell_call",
                "id": item_id,
                "call_id": call_id,
                "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", TOOL_COMMAND], "env": {}},
            }
        elif plan.tool:
            final_item = {
                "type": "function_call",
                "id": item_id,
                "call_id": call_id,
                "name": plan.tool.name,
                "arguments": json.dumps(plan.tool_args),
                "status": "completed",
                **({"namespace": plan.tool.namespace} if plan.tool.namespace else {}),
            }
        else:
            final_item = {
                "type": "message",
                "id": item_id,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": plan.text, "annotations": []}],
            }
        if not ex.stream:
            self._wait_whole(plan)
            self._send_json(200, response("completed", [final_item], True))
            return

        out = self._start_stream()
        seq = iter(range(1_000_000))

        def emit(kind: str, **fields: Any) -> None:
            out.event({"type": kind, "sequence_number": next(seq), **fields}, kind)

        emit("response.created", response=response("in_progress", [], False))
        emit("response.in_progress", response=response("in_progress", [], False))
        if plan.tool:
            self._delay(plan)
            added = dict(final_item, status="in_progress")
            if final_item["type"] == "function_call":
                added["arguments"] = ""
            emit("response.output_item.added", output_index=0, item=added)
            if final_item["type"] == "function_call":
                args = final_item["arguments"]
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=0,
                    delta=args,
                )
                emit(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=0,
                    arguments=args,
                )
        else:
            empty_msg = dict(final_item, status="in_progress", content=[])
            emit("response.output_item.added", output_index=0, item=empty_msg)
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item_id, "output_index": 0, "content_index": 0}
            emit("response.content_part.added", part=part, **where)
            for chunk in self._pace(plan, plan.chunks()):
                emit("response.output_text.delta", delta=chunk, logprobs=[], **where)
            emit("response.output_text.done", text=plan.text, logprobs=[], **where)
            emit("response.content_part.done", part=dict(part, text=plan.text), **where)
        emit("response.output_item.done", output_index=0, item=final_item)
        emit("response.completed", response=response("completed", [final_item], True))
        out.close()

    # OpenAI Chat Completions ----------------------------------------------------

    def _chat(self, ex: Exchange) -> None:
        plan = ex.plan
        chat_id = _new_id("chatcmpl-")
        created = int(time.time())
        output_tokens = _estimate_tokens(plan.text or plan.tool_args)
        usage = {
            "prompt_tokens": ex.input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": ex.input_tokens + output_tokens,
        }
        finish = "tool_calls" if plan.tool else "stop"
        call: JSON = {}
        if plan.tool:
            call = {
                "id": _new_id("call_"),
                "type": "function",
                "function": {"name": plan.tool.name, "arguments": json.dumps(plan.tool_args)},
            }
        if not ex.stream:
            self._wait_whole(plan)
            message: JSON = {"role": "assistant", "content": None if plan.tool else plan.text}
            if plan.tool:
                message["tool_calls"] = [call]
            self._send_json(
                200,
                {
                    "id": chat_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": ex.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return

        out = self._start_stream()

        def chunk(delta: JSON, finish_reason: str | None) -> None:
            out.event(
                {
                    "id": chat_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": ex.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
            )

        if plan.tool:
            self._delay(plan)
            head = {"index": 0, "id": call["id"], "type": "function"}
            head["function"] = {"name": plan.tool.name, "arguments": ""}
            chunk({"role": "assistant", "content": None, "tool_calls": [head]}, None)
            args = {"index": 0, "function": {"arguments": call["function"]["arguments"]}}
            chunk({"tool_calls": [args]}, None)
        else:
            chunk({"role": "assistant", "content": ""}, None)
            for piece in self._pace(plan, plan.chunks()):
                chunk({"content": piece}, None)
        chunk({}, finish)
        if _as_dict(ex.body.get("stream_options")).get("include_usage"):
            out.event(
                {
                    "id": chat_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": ex.model,
                    "choices": [],
                    "usage": usage,
                }
            )
        out.raw("data: [DONE]\n\n")
        out.close()

    # Gemini ---------------------------------------------------------------------

    def _gemini(self, ex: Exchange) -> None:
        plan = ex.plan
        output_tokens = _estimate_tokens(plan.text or plan.tool_args)
        usage = {
            "promptTokenCount": ex.input_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": ex.input_tokens + output_tokens,
        }
        response_id = _new_id("")

        def payload(parts: list[JSON], last: bool) -> JSON:
            candidate: JSON = {"content": {"role": "model", "parts": parts}, "index": 0}
            if last:
                candidate["finishReason"] = "STOP"
            data: JSON = {
                "candidates": [candidate],
                "modelVersion": ex.model,
                "responseId": response_id,
            }
            if last:
                data["usageMetadata"] = usage
            return data

        if plan.tool:
            call_parts: list[JSON] = [
                {"functionCall": {"name": plan.tool.name, "args": plan.tool_args}}
            ]
        else:
            call_parts = []
        if not ex.stream:
            self._wait_whole(plan)
            self._send_json(200, payload(call_parts or [{"text": plan.text}], True))
            return
        sse = ex.sse
        out = self._start_stream("text/event-stream" if sse else "application/json")
        if not sse:  # without alt=sse the stream is one JSON array, written piece by piece
            out.raw("[")
        first = True

        def send(data: JSON) -> None:
            nonlocal first
            if sse:
                out.raw(f"data: {json.dumps(data)}\r\n\r\n")
            else:
                out.raw(("" if first else ",\r\n") + json.dumps(data))
            first = False

        if plan.tool:
            self._delay(plan)
            send(payload(call_parts, True))
        else:
            chunks = plan.chunks() or [""]
            for i, piece in enumerate(self._pace(plan, chunks)):
                send(payload([{"text": piece}], i == len(chunks) - 1))
        if not sse:
            out.raw("]")
        out.close()


# ------------------------------------------------------------------------ server


class ModelServer:
    """The scripted model server; see the module docstring for the reply rules.

    The socket is bound in ``__init__`` so ``url`` and ``port`` are known before the
    agents' config files are written; ``start`` then serves in a daemon thread.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.auto_ack: bool = True
        self.default_reply: str = "OK, noted."
        #: Ask for escalated sandbox permissions in [[tool]] calls when the tool schema
        #: offers it (Codex), so a trusted Codex still asks the person.
        self.escalate_tool: bool = True
        #: Called with every finished record (the manual-run mode prints them).
        self.on_request: Callable[[RecordedRequest], None] | None = None
        self._log: list[RecordedRequest] = []
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._httpd = _HTTPServer((host, port), self)
        self.host: str = host
        self.port: int = int(self._httpd.server_address[1])
        self.url: str = f"http://{host}:{self.port}"

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> ModelServer:
        """Serve in a daemon thread; returns self so ``ModelServer().start()`` chains."""
        if self._stopping.is_set():
            raise RuntimeError("a stopped ModelServer cannot be restarted; make a new one")
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"model-server-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections, and join every thread the server made.

        Pending ``[[delay]]``/``[[slow]]`` waits end at once, and keep-alive connections
        an agent still holds are shut down, so ``server_close`` can join the handler
        threads without waiting for clients.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
        with self._httpd.conn_lock:
            conns = list(self._httpd.open_connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request log ------------------------------------------------------------

    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received, in arrival order (safe to keep)."""
        with self._cond:
            return [dataclasses.replace(r, headers=dict(r.headers)) for r in self._log]

    def user_texts(self, include_side: bool = False) -> list[str]:
        """The person's text of every model request, in arrival order.

        Every request counts, retries included; a request that only carries a tool
        result contributes its (usually empty) new text.
        """
        with self._cond:
            return [
                r.user_text
                for r in self._log
                if r.api in MODEL_APIS and r.user_text is not None and (include_side or not r.side)
            ]

    def request_bodies(self, include_side: bool = True) -> list[str]:
        """Every recorded request's whole body as text, in arrival order.

        This is everything the model provider would receive - system prompt,
        attachments, ``<system-reminder>`` blocks, tool results, skill
        instructions - not only the person's text, so a test can prove that
        something (a file's contents) never reached the model in any form.
        """
        with self._cond:
            records = [r for r in self._log if include_side or not r.side]
        out: list[str] = []
        for rec in records:
            body = rec.body
            if body is None:
                continue
            if isinstance(body, (bytes, bytearray)):
                out.append(bytes(body).decode("utf-8", "replace"))
            elif isinstance(body, str):
                out.append(body)
            else:
                out.append(json.dumps(body, ensure_ascii=False))
        return out

    def wait_for_user_text(self, needle: str, timeout: float) -> str:
        """Block until a main request's text contains ``needle``; return that text."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for text in self.user_texts():
                    if needle in text:
                        return text
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no user text containing {needle!r} within {timeout}s")
                self._cond.wait(min(remaining, 0.5))

    def reset(self) -> None:
        """Forget every recorded request (requests still in flight are kept out too)."""
        with self._cond:
            self._log.clear()

    def _record(self, rec: RecordedRequest) -> RecordedRequest:
        with self._cond:
            self._log.append(rec)
            self._cond.notify_all()
        if self.on_request is not None:
            try:
                self.on_request(copy.copy(rec))
            except Exception:
                log.exception("on_request hook failed")
        return rec

    def _update(self, rec: RecordedRequest, status: int, error: str | None) -> None:
        with self._cond:
            rec.status = status
            rec.error = error
            self._cond.notify_all()
        if self.on_request is not None and error:
            try:
                self.on_request(copy.copy(rec))
            except Exception:
                log.exception("on_request hook failed")

    # -- replies ----------------------------------------------------------------

    def model_list(self, gemini: bool) -> JSON:
        """A small model list in OpenAI shape (also fine for Anthropic), or Gemini's."""
        names = ["test-model", "gpt-5", "claude-sonnet-4-5", "gemini-2.5-pro"]
        if gemini:
            return {
                "models": [
                    {
                        "name": f"models/{n}",
                        "displayName": n,
                        "supportedGenerationMethods": ["generateContent", "countTokens"],
                    }
                    for n in names
                ]
            }
        return {
            "object": "list",
            "data": [
                {
                    "id": n,
                    "object": "model",
                    "type": "model",
                    "display_name": n,
                    "created": 1_700_000_000,
                    "created_at": "2024-01-01T00:00:00Z",
                    "owned_by": "agentwrap-test",
                }
                for n in names
            ],
            "has_more": False,
            "first_id": names[0],
            "last_id": names[-1],
        }

    def _plan(
        self, api: str, body: JSON, turn: Turn, tools: list[ToolSpec], side: SideShape | None
    ) -> Plan:
        """Decide the answer from the request shape and the person's latest text."""
        if side is not None:
            if side.forced_tool is not None:
                return Plan(tool=side.forced_tool, tool_args=fill_schema(side.forced_tool.schema))
            if side.schema is not None:
                return Plan(text=json.dumps(fill_schema(side.schema)))
            return Plan(text=SIDE_REPLY)
        text = turn.text
        plan = Plan(delay=_last_float(_RE_DELAY, text), slow=_last_float(_RE_SLOW, text))
        replies = _RE_REPLY.findall(text)
        acks = _RE_ACK.findall(text) if self.auto_ack else []
        called = find_call(text)
        if called is not None:
            name, args = called
            tool = next((t for t in tools if t.name == name), None)
            if tool is not None:
                plan.tool, plan.tool_args = tool, args
                return plan
            offered = ", ".join(t.name for t in tools) or "none"
            final = f"[[call]] asked for {name}, but the request offered no such tool ({offered})."
        elif _RE_TOOL_DESCRIBED.search(text) and pick_shell_tool(tools) is not None:
            plan.tool = pick_shell_tool(tools)
            assert plan.tool is not None
            plan.tool_args = build_tool_args(plan.tool, self.escalate_tool,
                                             TOOL_LONG_COMMAND, TOOL_DESCRIPTION)
            return plan
        elif _RE_TOOL.search(text):
            tool = pick_shell_tool(tools)
            if tool is not None:
                plan.tool = tool
                plan.tool_args = build_tool_args(tool, self.escalate_tool)
                return plan
            if api == "chat":
                plan.text = aider_edit_reply(_chat_system_text(body))
                return plan
            final = f"[[tool]] asked, but the request offered no shell tool. {self.default_reply}"
        elif replies:
            final = replies[-1]
        elif acks:
            before = _RE_ACK_AFTER.findall(text)
            final = f"{before[-1]} ACK {acks[-1]}" if before else f"ACK {acks[-1]}"
        elif turn.tool_result:
            final = TOOL_DONE_REPLY
        else:
            final = self.default_reply
        plan.text = slow_text(final) if plan.slow > 0 else final
        return plan


def _chat_system_text(body: JSON) -> str:
    return "\n".join(
        "\n".join(_text_parts(m.get("content"), ("text",)))
        for m in _as_list(body.get("messages"))
        if isinstance(m, dict) and m.get("role") == "system"
    )


# -------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, printing one JSON line per request."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--default-reply", default=None)
    parser.add_argument("--no-auto-ack", action="store_true")
    parser.add_argument("--bodies", action="store_true", help="include request bodies in the log")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    server = ModelServer(args.host, args.port)
    if args.default_reply is not None:
        server.default_reply = args.default_reply
    server.auto_ack = not args.no_auto_ack

    def show(rec: RecordedRequest) -> None:
        line = rec.summary()
        if args.bodies:
            line["headers"] = rec.headers
            line["body"] = rec.body
        print(json.dumps(line), flush=True)

    server.on_request = show
    server.start()
    print(json.dumps({"serving": server.url}), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
