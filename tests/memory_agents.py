"""An agent that reads its session's stored conversation and keeps state (tests/agent/test_conversation_memory.py).

Commands (the prompt's first word):
  /recall        says, as JSON, what `turn.history()` read (oldest first)
  /recall-newest the same, newest first
  /work          thinks, says two messages, plans, and runs a tool call with raw input and output
  /set K V       session.state[K] = V (a JSON value)
  /unstorable K  session.state[K] = an object JSON cannot carry
  /check K       session.state[K] = an unstorable object, then turn.save_state(): says the error
  /state         says session.state as JSON
anything else    says "ok: <text>"
"""

from __future__ import annotations

import json
from typing import Any

from acp_green import Agent, ConversationTurn, StateNotStorable, Turn


def turn_summary(turn: ConversationTurn) -> dict[str, Any]:
    return {
        "index": turn.index,
        "prompt": turn.prompt_text,
        "messages": [[m.message_id is not None, m.text] for m in turn.messages],
        "thoughts": [m.text for m in turn.thoughts],
        "tools": [[c.title, c.status, c.raw_input, c.raw_output, c.text] for c in turn.tool_calls],
        "plans": [[e.get("content") for e in p.entries] for p in turn.plans],
        "order": [type(item).__name__ for item in turn.items],
        "stop": turn.stop_reason,
    }


class MemoryAgent(Agent):
    name = "memory-agent"

    def prompt(self, turn: Turn) -> str:
        command, _, rest = turn.text.partition(" ")
        if command in ("/recall", "/recall-newest"):
            turn.say(json.dumps([turn_summary(t) for t in turn.history(newest_first=command == "/recall-newest")]))
        elif command == "/work":
            turn.think("pondering")
            turn.say("first ")
            turn.say("part")
            turn.plan([{"content": "look", "priority": "high", "status": "completed"}])
            call = turn.tool_call(title="lookup", kind="read", raw_input={"key": "k1"})
            call.complete(raw_output={"value": 1}, content=[{"type": "content", "content": {"type": "text", "text": "found"}}])
            turn.say("after the tool")
        elif command == "/set":
            key, _, value = rest.partition(" ")
            turn.session.state[key] = json.loads(value)
            turn.say("set")
        elif command == "/unstorable":
            turn.session.state[rest] = object()
            turn.say("set")
        elif command == "/check":
            turn.session.state[rest] = {1, 2}
            try:
                turn.save_state()
            except StateNotStorable as exc:
                del turn.session.state[rest]
                turn.say(f"refused: {exc.key}: {exc}")
        elif command == "/state":
            turn.say(json.dumps(turn.session.state, sort_keys=True))
        else:
            turn.say(f"ok: {turn.text}")
        return "end_turn"
