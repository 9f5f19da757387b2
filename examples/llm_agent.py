"""An LLM agent on acp_green: any OpenAI-compatible chat-completions endpoint, with the session's MCP tools.

Run `python examples/llm_agent.py --base-url http://127.0.0.1:8080/v1` (the agent command for an
editor), or `acp-green serve --agent llm_agent:from_env` from this directory. Environment:
OPENAI_BASE_URL (the endpoint when --base-url is not given; default http://127.0.0.1:8080/v1),
OPENAI_MODEL (default "default", which llama.cpp's server ignores), OPENAI_API_KEY (a bearer token).

Each turn the model is given the session's earlier turns as stored (`turn.history()`), so a
session loaded after a restart carries on where it was. Every tool of the session's MCP servers is offered to the model; each call it makes is an ACP
tool call, asked for first unless the tool is annotated `readOnlyHint`. Token usage reaches the
ledger when the endpoint reports it. A cancel closes the HTTP response at once.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import gevent
from geventhttpclient import HTTPClient, URL

from acp_green import (
    Agent, ClientError, ConversationMessage, ConversationToolCall, ConversationTurn, McpUnavailable, RpcError, ServeOptions,
    ToolCallStatus, Turn, serve_stdio,
)
from acp_green.content import text as text_content

log = logging.getLogger("llm_agent")
DEFAULT_URL = "http://127.0.0.1:8080/v1"  # llama.cpp's server
MAX_ROUNDS = 16  # model requests per turn; then the turn ends with max_turn_requests
HISTORY_TURNS = 50  # the session's earlier turns the model is given (the newest)
FINISHED = ("end_turn", "max_turn_requests")  # turns whose reply the model is given back
ALLOW = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}, {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]


class EndpointError(Exception):
    """The endpoint refused the request or answered something that is not a completion stream."""


@dataclass
class Reply:
    """One streamed completion, as it was read."""
    text: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)  # by index: id, name, arguments
    usage: dict[str, int] | None = None
    error: str | None = None


class LlmAgent(Agent):
    """Each turn: the session's conversation and MCP tools to the model, until it stops calling tools."""
    name = "llm-agent"
    title = "LLM agent (OpenAI-compatible endpoint)"

    def __init__(self, base_url: str, model: str = "default", api_key: str | None = None) -> None:
        url = URL(base_url.rstrip("/") + "/chat/completions")
        self.model = model
        self._path = url.request_uri
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # One connection per streaming session at most; a slow model may think for minutes.
        self._http = HTTPClient.from_url(url, concurrency=64, connection_timeout=10, network_timeout=600)

    def prompt(self, turn: Turn) -> str:
        messages = earlier_messages(turn) + [{"role": "user", "content": turn.text}]
        tools = self._tools(turn)
        totals = [0, 0]
        for _ in range(MAX_ROUNDS):
            reply = self._complete(turn, messages, tools)
            if reply.usage:  # per request; a turn's tool rounds add up
                totals = [totals[0] + reply.usage.get("prompt_tokens", 0), totals[1] + reply.usage.get("completion_tokens", 0)]
                turn.usage.report(input_tokens=totals[0], output_tokens=totals[1])
            if turn.cancelled:
                return "cancelled"
            if reply.error:
                turn.say(f"\n[the model endpoint failed: {reply.error}]")
                return "end_turn"
            calls = [reply.calls[i] for i in sorted(reply.calls)]
            for call in calls:
                call["id"] = call["id"] or f"call_{uuid.uuid4().hex[:12]}"  # some servers send none
            messages.append({"role": "assistant", "content": reply.text or None, **({"tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]} if calls else {})})
            if not calls:
                return "end_turn"
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": self._run_tool(turn, tools, call)})
                if turn.cancelled:
                    return "cancelled"
        return "max_turn_requests"

    def _tools(self, turn: Turn) -> dict[str, tuple[str, dict[str, Any]]]:
        """Function name -> (MCP server, tool) for every tool of the session's MCP servers."""
        offered: dict[str, tuple[str, dict[str, Any]]] = {}
        for server in turn.session.mcp_servers:
            try:
                listed = turn.mcp(server["name"]).list_tools(timeout=30)
            except (McpUnavailable, RpcError) as exc:
                log.warning("MCP server %r offers no tools: %s", server["name"], exc)
                continue
            for tool in listed:
                offered[re.sub(r"[^A-Za-z0-9_-]", "_", f"{server['name']}__{tool['name']}")[:64]] = (server["name"], tool)
        return offered

    def _complete(self, turn: Turn, messages: list[dict[str, Any]], tools: dict[str, tuple[str, dict[str, Any]]]) -> Reply:
        """One streamed completion, read in its own greenlet; a cancel kills that greenlet, which
        closes the response's socket there and then."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = [{"type": "function", "function": {
                "name": name, "description": tool.get("description") or "",
                "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}}}}
                for name, (_server, tool) in tools.items()]
        reply = Reply()
        reader, cancelled = gevent.spawn(self._read, turn, json.dumps(body).encode(), reply), gevent.spawn(turn.wait_cancelled)
        racing: list[gevent.Greenlet[..., Any]] = [reader, cancelled]  # two result types: one list type for gevent.wait
        try:
            gevent.wait(racing, count=1)
        finally:
            cancelled.kill()
            reader.kill()
        return reply

    def _read(self, turn: Turn, body: bytes, reply: Reply) -> None:
        try:
            with self._http.request("POST", self._path, body=body, headers=self._headers) as response:
                if response.status_code != 200:
                    raise EndpointError(f"HTTP {response.status_code}: {_error_text(response.read(4096))}")
                while line := response.readline(b"\n"):
                    data = line.strip()
                    if not data.startswith(b"data:"):
                        continue  # blank separators, comments, event names
                    data = data[5:].strip()
                    if data == b"[DONE]":
                        return
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise EndpointError(f"not JSON in the event stream: {data[:80]!r}") from None
                    reply.usage = chunk.get("usage") or reply.usage
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            reply.text += delta["content"]
                            turn.say(delta["content"])
                        for part in delta.get("tool_calls") or []:
                            call = reply.calls.setdefault(part.get("index", 0), {"id": "", "name": "", "arguments": ""})
                            function = part.get("function") or {}
                            call["id"] = part.get("id") or call["id"]
                            call["name"] = function.get("name") or call["name"]
                            call["arguments"] += function.get("arguments") or ""
        except Exception as exc:  # refused, cut off, garbage: whatever it was, the user is told
            reply.error = str(exc) or type(exc).__name__

    def _run_tool(self, turn: Turn, tools: dict[str, tuple[str, dict[str, Any]]], call: dict[str, str]) -> str:
        """Run one call as an ACP tool call (always ending completed or failed); what the model is told."""
        if call["name"] not in tools:
            return f"error: there is no tool {call['name']!r}"
        server, tool = tools[call["name"]]
        read_only = (tool.get("annotations") or {}).get("readOnlyHint") is True
        try:
            arguments = json.loads(call["arguments"] or "{}")
            problem = None if isinstance(arguments, dict) else "error: the arguments are not a JSON object"
        except ValueError as exc:
            arguments, problem = call["arguments"], f"error: the arguments are not JSON ({exc})"
        title = f"{server}.{tool['name']}"
        # The model's call id is its own (a local model may repeat it or leave it empty); the
        # ACP tool call gets one from the runtime, unique within the session.
        acp_call = turn.tool_call(title=title, kind="read" if read_only else "other", status="pending", raw_input=arguments)
        status: ToolCallStatus = "failed"
        text = problem or "cancelled"  # what the update says if the turn is cancelled
        try:
            if problem:
                return text
            if not read_only:
                outcome = turn.request_permission({"toolCallId": acp_call.id, "title": title, "status": "pending"}, ALLOW)
                if outcome.get("outcome") != "selected" or outcome.get("optionId") != "allow":
                    text = "error: the user refused permission to run this tool"
                    return text
            acp_call.update(status="in_progress")
            result = turn.mcp(server).call_tool(tool["name"], arguments)
            text = "".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
            status = "failed" if result.get("isError") else "completed"
            return text
        except (McpUnavailable, RpcError, ClientError) as exc:
            text = f"error: {exc}"
            return text
        finally:
            acp_call.update(status=status, content=[text_content(text)])


def earlier_messages(turn: Turn) -> list[dict[str, Any]]:
    """The model's messages for the session's earlier turns (the newest HISTORY_TURNS), rebuilt
    from the stored conversation: the same after session/load, an eviction or a restart.

    A turn that did not finish (cancelled, failed, interrupted) leaves the user's words, not
    half a reply.
    """
    past = list(itertools.islice(turn.history(newest_first=True), HISTORY_TURNS))
    messages: list[dict[str, Any]] = []
    for earlier in reversed(past):
        messages.append({"role": "user", "content": earlier.prompt_text})
        if earlier.stop_reason in FINISHED:
            messages.extend(replayed_messages(earlier))
    return messages


def replayed_messages(earlier: ConversationTurn) -> list[dict[str, Any]]:
    """One finished turn's assistant messages, tool calls and tool results, in the order they came."""
    messages: list[dict[str, Any]] = []
    text, calls = "", list[ConversationToolCall]()

    def round_ended() -> None:
        nonlocal text, calls
        if not text and not calls:
            return
        messages.append({"role": "assistant", "content": text or None, **({"tool_calls": [
            {"id": call.tool_call_id, "type": "function", "function": {"name": function_name(call), "arguments": arguments(call)}}
            for call in calls]} if calls else {})})
        messages.extend({"role": "tool", "tool_call_id": call.tool_call_id, "content": call.text} for call in calls)
        text, calls = "", []

    for item in earlier.items:
        if isinstance(item, ConversationToolCall):
            calls.append(item)
        elif isinstance(item, ConversationMessage) and item.kind == "message":
            if calls:  # the model's next round
                round_ended()
            text += item.text
    round_ended()
    return messages


def function_name(call: ConversationToolCall) -> str:
    """The function the model called: the tool call's title is "<server>.<tool>" (see _run_tool)."""
    server, _, tool = call.title.partition(".")
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")[:64]


def arguments(call: ConversationToolCall) -> str:
    """The call's arguments as the model wrote them (its raw input, or the text that was not JSON)."""
    return call.raw_input if isinstance(call.raw_input, str) else json.dumps(call.raw_input)


def _error_text(body: bytes) -> str:
    """The message of an OpenAI-style error body, else the body's start."""
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace")


def from_env(base_url: str | None = None) -> LlmAgent:
    """The agent as the environment configures it (`base_url`, if given, over OPENAI_BASE_URL)."""
    return LlmAgent(base_url or os.environ.get("OPENAI_BASE_URL", DEFAULT_URL), os.environ.get("OPENAI_MODEL", "default"),
                    os.environ.get("OPENAI_API_KEY"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An ACP agent backed by an OpenAI-compatible endpoint.")
    parser.add_argument("--base-url", help=f"the endpoint, up to /v1 (default: $OPENAI_BASE_URL or {DEFAULT_URL})")
    parser.add_argument("--state-dir", help="where sessions and usage are kept (default: as acp-green serve)")
    parser.add_argument("--log-level", default="WARNING", help="log threshold; logs go to stderr (default: WARNING)")
    args = parser.parse_args()
    raise SystemExit(serve_stdio(from_env(args.base_url), ServeOptions(state_dir=args.state_dir), log_level=args.log_level))
