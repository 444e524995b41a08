"""Fast checks of the fixture model server, using only urllib/http.client.

The e2e tests trust this server to speak each wire API the way the real agent CLIs
expect; these tests pin the event sequences, the reply directives, the side-request
rules and the request log so a regression shows up here and not as a hung agent.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .model_server import (
    TOOL_COMMAND,
    TOOL_DESCRIPTION,
    TOOL_LONG_COMMAND,
    ModelServer,
    fill_schema,
    find_call,
)

BASH_TOOL = {
    "name": "Bash",
    "description": "Run a command",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {"type": "string"},
            "timeout": {"type": "number"},
        },
        "required": ["command"],
    },
}
CODEX_SHELL = {
    "type": "function",
    "name": "shell",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "workdir": {"type": "string"},
            "timeout_ms": {"type": "number"},
            "with_escalated_permissions": {"type": "boolean"},
            "justification": {"type": "string"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}
CODEX_EXEC = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "sandbox_permissions": {
                "type": "string",
                "enum": ["use_default", "require_escalated"],
            },
            "yield_time_ms": {"type": "number"},
        },
        "required": ["cmd"],
    },
}
GEMINI_SHELL = {
    "functionDeclarations": [
        {"name": "read_file", "parametersJsonSchema": {"type": "object", "properties": {}}},
        {
            "name": "run_shell_command",
            "parametersJsonSchema": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "description": {"type": "string"},
                    "dir_path": {"type": "string"},
                },
                "required": ["command"],
            },
        },
    ]
}
TITLE_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}


@dataclass
class Reply:
    """One HTTP answer: status, headers, raw text."""

    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    def events(self) -> list[tuple[str | None, Any]]:
        """SSE events as (event name, parsed data); ``[DONE]`` kept as a string."""
        out: list[tuple[str | None, Any]] = []
        for block in self.text.replace("\r\n", "\n").split("\n\n"):
            name: str | None = None
            data: list[str] = []
            for line in block.split("\n"):
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
            if data:
                raw = "\n".join(data)
                out.append((name, raw if raw == "[DONE]" else json.loads(raw)))
        return out


def call(
    server: ModelServer,
    path: str,
    body: Any = None,
    method: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        server.url + path,
        data=data,
        method=method or ("POST" if data is not None else "GET"),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            return Reply(resp.status, dict(resp.headers.items()), resp.read().decode())
    except urllib.error.HTTPError as err:
        return Reply(err.code, dict(err.headers.items()), err.read().decode())


def anthropic_body(text: str, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "tools": [BASH_TOOL],
    }
    body.update(extra)
    return body


def anthropic_text(reply: Reply) -> str:
    return "".join(
        d["delta"]["text"]
        for _, d in reply.events()
        if d.get("type") == "content_block_delta" and d["delta"]["type"] == "text_delta"
    )


def responses_body(*texts: str, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "stream": stream,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
            for t in texts
        ],
        "tools": [CODEX_SHELL],
    }
    body.update(extra)
    return body


def responses_text(reply: Reply) -> str:
    return "".join(
        d["delta"] for _, d in reply.events() if d["type"] == "response.output_text.delta"
    )


def chat_body(text: str, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "test-model",
        "stream": stream,
        "messages": [
            {"role": "system", "content": "Act as an expert software developer."},
            {"role": "user", "content": text},
        ],
    }
    body.update(extra)
    return body


def chat_text(reply: Reply) -> str:
    return "".join(
        d["choices"][0]["delta"].get("content") or ""
        for _, d in reply.events()
        if d != "[DONE]" and d["choices"]
    )


def gemini_body(text: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "contents": [
            {"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"}]},
            {"role": "model", "parts": [{"text": "Got it."}]},
            {"role": "user", "parts": [{"text": text}]},
        ],
        "tools": [GEMINI_SHELL],
        "generationConfig": {"temperature": 0},
    }
    body.update(extra)
    return body


GEMINI_STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def gemini_text(reply: Reply) -> str:
    return "".join(
        p.get("text", "") for _, d in reply.events() for p in d["candidates"][0]["content"]["parts"]
    )


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


# ------------------------------------------------------------------ Anthropic


def test_anthropic_stream_event_sequence(server: ModelServer) -> None:
    reply = call(server, "/v1/messages?beta=true", anthropic_body("hello"))
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/event-stream")
    events = reply.events()
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[2:-3]) == {"content_block_delta"}
    assert all(name == data["type"] for name, data in events)
    assert anthropic_text(reply) == "OK, noted."
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > 0
    rec = server.requests()[-1]
    assert (rec.api, rec.side, rec.path) == ("anthropic", False, "/v1/messages?beta=true")
    assert rec.user_text == "hello" and rec.reply == "OK, noted."


def test_anthropic_system_message_after_user_is_not_the_turn(server: ModelServer) -> None:
    """Claude Code 2.1 sends ``role: system`` messages after the person's message."""
    body = anthropic_body("[[reply: seen]]")
    body["messages"].append({"role": "system", "content": "Available agent types: ..."})
    assert anthropic_text(call(server, "/v1/messages?beta=true", body)) == "seen"
    assert server.user_texts() == ["[[reply: seen]]"]


def test_request_bodies_hold_everything_the_model_receives(server: ModelServer) -> None:
    """Attachments and system text are not the person's turn, but they reach the
    model: ``request_bodies`` shows them, ``user_texts`` does not."""
    body = anthropic_body("hello")
    body["messages"][0]["content"] = [
        {"type": "text", "text": "<system-reminder>file secret.env: S3CR3T-ü</system-reminder>"},
        {"type": "text", "text": "hello"},
    ]
    body["system"] = "system prompt text"
    call(server, "/v1/messages?beta=true", body)
    call(server, "/v1/messages", anthropic_body("title?", output_format={"type": "json_schema"}))
    bodies = server.request_bodies()
    assert len(bodies) == 2
    assert "S3CR3T-ü" in bodies[0] and "system prompt text" in bodies[0]
    assert len(server.request_bodies(include_side=False)) == 1


def test_anthropic_non_stream_and_auth_headers(server: ModelServer) -> None:
    for auth in ({"x-api-key": "k"}, {"Authorization": "Bearer whatever"}):
        reply = call(
            server, "/v1/messages", anthropic_body("[[reply: hi]]", stream=False), headers=auth
        )
        msg = reply.json()
        assert msg["type"] == "message" and msg["stop_reason"] == "end_turn"
        assert msg["content"] == [{"type": "text", "text": "hi"}]
    assert server.requests()[1].headers["authorization"] == "Bearer whatever"


def test_anthropic_tool_call_then_done(server: ModelServer) -> None:
    reminder = "<system-reminder>ctx</system-reminder>"
    reply = call(server, "/v1/messages?beta=true", anthropic_body(f"{reminder}\nplease [[tool]]"))
    events = [d for _, d in reply.events()]
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["name"] == "Bash"
    partial = "".join(
        e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
    )
    args = json.loads(partial)
    assert args["command"] == TOOL_COMMAND and args["description"]
    assert "timeout" not in args
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert server.requests()[-1].reply == "tool_call:Bash"

    tool_id = start["content_block"]["id"]
    body = anthropic_body(f"{reminder}\nplease [[tool]]")
    body["messages"] += [
        {"role": "assistant", "content": [start["content_block"] | {"input": args}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}],
        },
    ]
    assert anthropic_text(call(server, "/v1/messages?beta=true", body)) == "done"
    assert server.user_texts() == [f"{reminder}\nplease [[tool]]", ""]

    non_stream = call(server, "/v1/messages", anthropic_body("[[tool]]", stream=False)).json()
    assert non_stream["content"][0]["type"] == "tool_use"
    assert non_stream["content"][0]["input"]["command"] == TOOL_COMMAND


def test_anthropic_side_requests(server: ModelServer) -> None:
    title = anthropic_body(
        "[[delay: 30]] [[tool]] write a parser",
        tools=[],
        output_format={"type": "json_schema", "schema": TITLE_SCHEMA},
    )
    reply = call(server, "/v1/messages?beta=true", title)
    assert json.loads(anthropic_text(reply)) == {"title": "ok"}
    config = anthropic_body(
        "x", output_config={"format": {"type": "json_schema", "schema": TITLE_SCHEMA}}
    )
    assert json.loads(anthropic_text(call(server, "/v1/messages", config))) == {"title": "ok"}
    haiku = anthropic_body("summarise", model="claude-haiku-4-5", tools=[])
    assert anthropic_text(call(server, "/v1/messages", haiku)) == "ok"
    quota = anthropic_body("quota", model="claude-sonnet-4-5", tools=[], max_tokens=1)
    call(server, "/v1/messages", quota)
    forced = anthropic_body(
        "x",
        tools=[{"name": "emit", "input_schema": TITLE_SCHEMA}],
        tool_choice={"type": "tool", "name": "emit"},
        stream=False,
    )
    out = call(server, "/v1/messages", forced).json()
    assert out["content"][0]["input"] == {"title": "ok"}

    call(server, "/v1/messages", anthropic_body("the real turn"))
    assert [r.side for r in server.requests()] == [True] * 5 + [False]
    assert server.user_texts() == ["the real turn"]
    assert len(server.user_texts(include_side=True)) == 6


def test_anthropic_probe_endpoints(server: ModelServer) -> None:
    assert call(server, "/", method="HEAD").status == 200
    assert call(server, "/").status == 200
    count = call(server, "/v1/messages/count_tokens?beta=true", anthropic_body("x" * 400)).json()
    assert count["input_tokens"] > 50
    assert all(r.side for r in server.requests())
    assert server.user_texts() == []


# ------------------------------------------------------------------ Responses


def test_responses_stream_event_sequence(server: ModelServer) -> None:
    body = responses_body("<environment_context>cwd</environment_context>", "say hi [[reply: hi!]]")
    reply = call(server, "/v1/responses", body)
    types = [d["type"] for _, d in reply.events()]
    assert types[0] == "response.created"
    for kind in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ):
        assert kind in types
    assert types[-1] == "response.completed"
    assert all(name == data["type"] for name, data in reply.events())
    done = next(d for _, d in reply.events() if d["type"] == "response.output_item.done")
    assert done["item"]["type"] == "message" and done["item"]["role"] == "assistant"
    assert done["item"]["content"][0] == {"type": "output_text", "text": "hi!", "annotations": []}
    completed = reply.events()[-1][1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["total_tokens"] > 0
    assert responses_text(reply) == "hi!"
    assert server.user_texts() == [
        "<environment_context>cwd</environment_context>\nsay hi [[reply: hi!]]"
    ]


def test_responses_non_stream_and_string_input(server: ModelServer) -> None:
    out = call(server, "/v1/responses", {"model": "m", "input": "hello"}).json()
    assert out["object"] == "response" and out["status"] == "completed"
    assert out["output"][0]["content"][0]["text"] == "OK, noted."


def test_responses_shell_tool_then_done(server: ModelServer) -> None:
    reply = call(server, "/v1/responses", responses_body("[[tool]]"))
    done = next(d for _, d in reply.events() if d["type"] == "response.output_item.done")
    item = done["item"]
    assert item["type"] == "function_call" and item["name"] == "shell"
    args = json.loads(item["arguments"])
    assert args["command"] == ["bash", "-lc", TOOL_COMMAND]
    assert args["with_escalated_permissions"] is True and args["justification"]
    assert "workdir" not in args

    follow = responses_body("[[tool]]")
    follow["input"] += [
        item,
        {"type": "function_call_output", "call_id": item["call_id"], "output": "ok"},
    ]
    assert responses_text(call(server, "/v1/responses", follow)) == "done"

    server.escalate_tool = False
    exec_body = responses_body(
        "[[tool]]", tools=[{"type": "custom", "name": "apply_patch"}, CODEX_EXEC]
    )
    out = call(server, "/v1/responses", exec_body | {"stream": False}).json()
    assert out["output"][0]["name"] == "exec_command"
    assert json.loads(out["output"][0]["arguments"]) == {"cmd": TOOL_COMMAND}


def test_responses_side_title_and_models(server: ModelServer) -> None:
    body = responses_body(
        "name this session",
        tools=[],
        text={
            "format": {"type": "json_schema", "name": "t", "strict": True, "schema": TITLE_SCHEMA}
        },
    )
    assert json.loads(responses_text(call(server, "/v1/responses", body))) == {"title": "ok"}
    models = call(server, "/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"]
    assert all(r.side for r in server.requests())
    assert server.user_texts() == []


# ------------------------------------------------------------------ Chat Completions


def test_chat_stream_with_and_without_usage(server: ModelServer) -> None:
    plain = call(server, "/v1/chat/completions", chat_body("[[reply: one two three four]]"))
    events = plain.events()
    assert events[-1][1] == "[DONE]"
    assert events[-2][1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in d for _, d in events[:-1])
    assert chat_text(plain) == "one two three four"

    with_usage = call(
        server,
        "/v1/chat/completions",
        chat_body("hi", stream_options={"include_usage": True}),
    )
    usage_chunk = with_usage.events()[-2][1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["total_tokens"] > 0


def test_chat_non_stream(server: ModelServer) -> None:
    out = call(server, "/v1/chat/completions", chat_body("hi", stream=False)).json()
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "OK, noted."}


def test_chat_tool_for_aider_is_a_file_edit(server: ModelServer) -> None:
    aider_suffix = "\n\nTo suggest changes to a file you MUST return the entire content"
    whole = chat_text(call(server, "/v1/chat/completions", chat_body("[[tool]]" + aider_suffix)))
    assert "tool_ran.txt\n```\ntool ran\n```" in whole
    diff_body = chat_body("[[tool]]")
    diff_body["messages"][0]["content"] = "Use *SEARCH/REPLACE* blocks."
    diff = chat_text(call(server, "/v1/chat/completions", diff_body))
    assert "tool_ran.txt\n```\n<<<<<<< SEARCH\n=======\ntool ran\n>>>>>>> REPLACE\n```" in diff


def test_chat_tool_call_with_tools(server: ModelServer) -> None:
    tools = [
        {"type": "function", "function": {"name": "bash", "parameters": BASH_TOOL["input_schema"]}}
    ]
    reply = call(server, "/v1/chat/completions", chat_body("[[tool]]", tools=tools))
    calls = [
        tc
        for _, d in reply.events()
        if d != "[DONE]" and d["choices"]
        for tc in d["choices"][0]["delta"].get("tool_calls") or []
    ]
    assert calls[0]["function"]["name"] == "bash"
    args = json.loads("".join(c["function"]["arguments"] for c in calls))
    assert args["command"] == TOOL_COMMAND
    assert reply.events()[-2][1]["choices"][0]["finish_reason"] == "tool_calls"
    follow = chat_body("[[tool]]", tools=tools)
    follow["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    assert chat_text(call(server, "/v1/chat/completions", follow)) == "done"


def test_chat_side_json_response_format(server: ModelServer) -> None:
    body = chat_body(
        "x",
        stream=False,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "t", "schema": TITLE_SCHEMA},
        },
    )
    out = call(server, "/v1/chat/completions", body).json()
    assert json.loads(out["choices"][0]["message"]["content"]) == {"title": "ok"}
    assert server.requests()[-1].side


# ------------------------------------------------------------------ Gemini


def test_gemini_stream_and_non_stream(server: ModelServer) -> None:
    reply = call(server, GEMINI_STREAM, gemini_body("[[reply: hello gemini world, nice day]]"))
    events = reply.events()
    assert all(name is None for name, _ in events)
    assert gemini_text(reply) == "hello gemini world, nice day"
    assert events[-1][1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1][1]["usageMetadata"]["totalTokenCount"] > 0
    rec = server.requests()[-1]
    assert rec.api == "gemini" and rec.user_text == "[[reply: hello gemini world, nice day]]"

    whole = call(server, "/v1beta/models/gemini-2.5-pro:generateContent", gemini_body("hi")).json()
    assert whole["candidates"][0]["content"]["parts"] == [{"text": "OK, noted."}]

    array = call(
        server, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", gemini_body("x")
    ).json()
    assert isinstance(array, list) and array[-1]["candidates"][0]["finishReason"] == "STOP"


def test_gemini_tool_then_done(server: ModelServer) -> None:
    reply = call(server, GEMINI_STREAM, gemini_body("[[tool]]"))
    part = reply.events()[-1][1]["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "run_shell_command"
    assert part["functionCall"]["args"]["command"] == TOOL_COMMAND
    assert "dir_path" not in part["functionCall"]["args"]
    follow = gemini_body("[[tool]]")
    follow["contents"] += [
        {"role": "model", "parts": [part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command"}}]},
    ]
    assert gemini_text(call(server, GEMINI_STREAM, follow)) == "done"



def test_gemini_described_tool_call(server: ModelServer) -> None:
    """[[tool-described]]: the long command and a description that is not the command;
    [[tool]] still gives the short one."""
    reply = call(server, GEMINI_STREAM, gemini_body("[[tool-described]] list the files"))
    args = reply.events()[-1][1]["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]
    assert args["command"] == TOOL_LONG_COMMAND and len(TOOL_LONG_COMMAND) > 150
    assert args["description"] == TOOL_DESCRIPTION != TOOL_LONG_COMMAND
    plain = call(server, GEMINI_STREAM, gemini_body("[[tool]]"))
    args = plain.events()[-1][1]["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]
    assert args["command"] == TOOL_COMMAND


def test_call_directive_parses_json_arguments() -> None:
    text = 'x [[call: Read {"file_path": "/etc/hostname"}]] y'
    assert find_call(text) == ("Read", {"file_path": "/etc/hostname"})
    nested = '[[call: ask_user {"questions": [{"options": [["a"]]}]}]]'
    assert find_call(nested) == ("ask_user", {"questions": [{"options": [["a"]]}]})
    assert find_call("[[call: Read not-json]]") is None
    assert find_call('[[call: Read ["a"]]]') is None  # arguments must be an object
    assert find_call('[[call: Read {"a": 1}] ]') is None


def test_the_newest_call_directive_wins() -> None:
    """An agent that keeps a refused call's prompt (Gemini CLI) sends it with the
    next: the newest directive is the one meant, a malformed newest one is ignored."""
    kept = '[[call: Bash {"command": "rm -rf ~/important"}]] please\n'
    newest = '[[call: Bash {"command": "git reset --hard"}]] please'
    assert find_call(kept + newest) == ("Bash", {"command": "git reset --hard"})
    assert find_call(kept + "[[call: Bash not-json]]") == ("Bash", {"command": "rm -rf ~/important"})


def test_call_directive_calls_the_named_tool(server: ModelServer) -> None:
    args = {"file_path": "/etc/hostname"}
    read = {"name": "Read", "input_schema": {"type": "object", "properties": {}}}
    body = anthropic_body(f"[[call: Read {json.dumps(args)}]] read it", tools=[BASH_TOOL, read])
    events = [d for _, d in call(server, "/v1/messages?beta=true", body).events()]
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"]["name"] == "Read"
    partial = "".join(
        e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
    )
    assert json.loads(partial) == args
    assert server.requests()[-1].reply == "tool_call:Read"

    reply = call(server, GEMINI_STREAM, gemini_body('[[call: read_file {"file_path": "/x"}]]'))
    part = reply.events()[-1][1]["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"] == {"name": "read_file", "args": {"file_path": "/x"}}

    missing = anthropic_text(call(server, "/v1/messages", anthropic_body("[[call: Nope {}]]")))
    assert missing.startswith("[[call]] asked for Nope") and "(Bash)" in missing


def test_deferred_tools_are_callable_once_a_tool_search_loaded_them(server: ModelServer) -> None:
    """Claude Code 2.1.332 lists MCP tools with ``defer_loading``: a model cannot
    call one until a tool search's result named it in a ``tool_reference``."""
    mcp = {"name": "mcp__agentwrap__check_input_queue", "defer_loading": True,
           "input_schema": {"type": "object", "properties": {}}}
    text = "[[call: mcp__agentwrap__check_input_queue {}]]"
    before = anthropic_text(call(server, "/v1/messages", anthropic_body(
        text, stream=True, tools=[BASH_TOOL, mcp])))
    assert before.startswith("[[call]] asked for mcp__agentwrap__check_input_queue"), before
    loaded = anthropic_body(text, tools=[BASH_TOOL, mcp])
    loaded["messages"][0]["content"].insert(0, {
        "type": "tool_result", "tool_use_id": "toolu_1",
        "content": [{"type": "tool_reference", "tool_name": mcp["name"]}]})
    call(server, "/v1/messages", loaded).events()
    assert server.requests()[-1].reply == f"tool_call:{mcp['name']}"

def test_gemini_routing_side_and_count_tokens(server: ModelServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "model_choice": {"type": "string", "enum": ["flash", "pro"]},
        },
        "required": ["reasoning", "model_choice"],
    }
    route = gemini_body(
        "route me",
        tools=[],
        generationConfig={"responseMimeType": "application/json", "responseJsonSchema": schema},
    )
    url = "/v1beta/models/gemini-2.5-flash-lite:generateContent"
    out = call(server, url, route).json()
    choice = json.loads(out["candidates"][0]["content"]["parts"][0]["text"])
    assert choice == {"reasoning": "ok", "model_choice": "flash"}
    summary = gemini_body("[[tool]] Summary (max 80 chars):", tools=[])
    out = call(server, url, summary).json()
    assert out["candidates"][0]["content"]["parts"] == [{"text": "ok"}]
    count = call(server, "/v1beta/models/gemini-2.5-pro:countTokens", gemini_body("x")).json()
    assert count["totalTokens"] > 0
    assert all(r.side for r in server.requests()) and server.user_texts() == []


# ------------------------------------------------------------------ directives


def test_delay_holds_first_token(server: ModelServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    started = time.monotonic()
    body = json.dumps(anthropic_body("[[delay: 0.6]] [[reply: late]]"))
    conn.request("POST", "/v1/messages", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    first = resp.read(20).decode()  # event: message_start arrives before the delay
    assert time.monotonic() - started < 0.5 and first.startswith("event: message_start")
    text = first + resp.read().decode()
    assert time.monotonic() - started >= 0.6
    assert '"text": "late"' in text
    conn.close()


def test_slow_spreads_numbered_lines(server: ModelServer) -> None:
    started = time.monotonic()
    reply = call(server, "/v1/chat/completions", chat_body("[[slow: 0.8]] [[reply: END]]"))
    elapsed = time.monotonic() - started
    assert 0.7 <= elapsed < 3
    text = chat_text(reply)
    lines = text.splitlines()
    assert lines[0].startswith("Line 1:") and lines[39].startswith("Line 40:")
    assert lines[-1] == "END"
    assert len([d for _, d in reply.events() if d != "[DONE]"]) >= 40


def test_ack_rule(server: ModelServer) -> None:
    wrapped = (
        "<system-reminder>note</system-reminder>\nqueued context. "
        'Reply "ACK first-1" then later Reply `ACK tok-42` to confirm.\n'
        "Aider: ONLY EVER RETURN CODE IN A *SEARCH/REPLACE BLOCK*!"
    )
    assert anthropic_text(call(server, "/v1/messages", anthropic_body(wrapped))) == "ACK tok-42"
    assert (
        responses_text(call(server, "/v1/responses", responses_body('Reply "ACK a1"'))) == "ACK a1"
    )
    server.auto_ack = False
    server.default_reply = "nope"
    assert chat_text(call(server, "/v1/chat/completions", chat_body('Reply "ACK a1"'))) == "nope"
    # an explicit [[reply]] wins over an ACK request
    server.auto_ack = True
    body = gemini_body('Reply "ACK a1" [[reply: explicit]]')
    assert gemini_text(call(server, GEMINI_STREAM, body)) == "explicit"


def test_reply_is_verbatim(server: ModelServer) -> None:
    text = "multi\nline  *reply* with `code`"
    body = anthropic_body(f"x [[reply: {text}]] y", stream=False)
    assert call(server, "/v1/messages", body).json()["content"][0]["text"] == text


# ------------------------------------------------------------------ log and robustness


def test_log_wait_reset_and_unknown_paths(server: ModelServer) -> None:
    assert call(server, "/v1/unknown", {"a": 1}).status == 404
    rec = server.requests()[0]
    assert (rec.api, rec.status, rec.body) == ("other", 404, {"a": 1})

    def later() -> None:
        time.sleep(0.2)
        call(server, "/v1/messages", anthropic_body("<wrap>needle-77</wrap>"))

    thread = threading.Thread(target=later)
    thread.start()
    assert server.wait_for_user_text("needle-77", timeout=5) == "<wrap>needle-77</wrap>"
    thread.join()
    with pytest.raises(TimeoutError):
        server.wait_for_user_text("never", timeout=0.2)
    copy = server.requests()
    copy[0].reply = "mutated"
    assert server.requests()[0].reply is None
    call(server, "/v1/messages", anthropic_body("<wrap>needle-77</wrap>"))
    assert server.user_texts() == ["<wrap>needle-77</wrap>"] * 2  # retries are all counted
    server.reset()
    assert server.requests() == [] and server.user_texts() == []


def test_handler_error_is_a_500_with_traceback(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: Any) -> Any:
        raise RuntimeError("planned failure")

    monkeypatch.setattr(server, "_plan", boom)
    reply = call(server, "/v1/messages", anthropic_body("x"))
    assert reply.status == 500 and "planned failure" in reply.text
    rec = server.requests()[-1]
    assert rec.status == 500 and rec.error and "planned failure" in rec.error
    monkeypatch.undo()
    assert call(server, "/v1/messages", anthropic_body("x", stream=False)).status == 200


def test_bad_json_and_chunked_request_body(server: ModelServer) -> None:
    bad = urllib.request.Request(
        server.url + "/v1/chat/completions", data=b"{not json", method="POST"
    )
    with urllib.request.urlopen(bad, timeout=5) as resp:
        assert resp.status == 200
    assert server.requests()[-1].body is None

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    payload = json.dumps(chat_body("[[reply: chunked ok]]", stream=False)).encode()
    conn.request(
        "POST", "/v1/chat/completions", iter([payload[:10], payload[10:]]), encode_chunked=True
    )
    assert json.loads(conn.getresponse().read())["choices"][0]["message"]["content"] == "chunked ok"
    conn.close()


def test_keep_alive_reuses_connection(server: ModelServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for word in ("one", "two"):
        body = json.dumps(anthropic_body(f"[[reply: {word}]]"))
        conn.request("POST", "/v1/messages?beta=true", body)
        assert f'"text": "{word}"' in conn.getresponse().read().decode()
    conn.close()


def test_stop_is_prompt_and_leaks_no_threads() -> None:
    before = threading.active_count()
    srv = ModelServer().start()
    idle = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    idle.request("GET", "/v1/models")
    idle.getresponse().read()  # leaves a keep-alive connection open

    def slow_request() -> None:
        try:
            call(srv, "/v1/messages", anthropic_body("[[delay: 30]]"))
        except (OSError, http.client.HTTPException):
            pass

    pending = threading.Thread(target=slow_request)
    pending.start()
    deadline = time.monotonic() + 5
    while len(srv.requests()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 3
    pending.join(timeout=5)
    idle.close()
    assert threading.active_count() == before
    srv.stop()  # idempotent


def test_port_and_url_known_before_start() -> None:
    srv = ModelServer(port=0)
    try:
        assert srv.port > 0 and srv.url == f"http://127.0.0.1:{srv.port}"
    finally:
        srv.stop()


def test_fill_schema_shapes() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "b": {"type": "boolean"},
            "n": {"type": "number"},
            "i": {"type": ["integer", "null"]},
            "e": {"enum": ["first", "second"]},
            "a": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "o": {"$ref": "#/$defs/inner"},
            "u": {"anyOf": [{"type": "null"}, {"type": "STRING"}]},
        },
        "$defs": {"inner": {"type": "object", "properties": {"k": {"const": 3}}}},
    }
    ranged = {"type": "INTEGER", "description": "Complexity score from 1-100."}
    assert fill_schema(ranged) == 1
    assert fill_schema({"type": "number", "description": "between -5 to 5"}) == 0
    assert fill_schema({"type": "integer", "minimum": 3}) == 3
    assert fill_schema(schema) == {
        "s": "ok",
        "b": False,
        "n": 0,
        "i": 0,
        "e": "first",
        "a": ["ok"],
        "o": {"k": 3},
        "u": "ok",
    }
