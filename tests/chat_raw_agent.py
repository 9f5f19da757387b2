"""A bare stdio ACP agent (no acp_green) that asks permission on every prompt and never withdraws
the question itself: it ignores session/cancel and sends no $/cancel_request, so only the client
can end the question. Each turn says the outcome the client answered, then ends. With
`--never-ends-a-turn` it answers no prompt at all, cancelled or not."""

from __future__ import annotations

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def next_message() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def main() -> None:
    asked = 1000
    while True:
        message = next_message()
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": "s1"}})
        elif method == "session/prompt" and "--never-ends-a-turn" in sys.argv:
            continue
        elif method == "session/prompt":
            asked += 1
            send({"jsonrpc": "2.0", "id": asked, "method": "session/request_permission", "params": {
                "sessionId": "s1", "toolCall": {"toolCallId": "t1", "title": "Do the thing"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}, {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
            while True:  # wait for the answer; a session/cancel meanwhile is ignored
                answer = next_message()
                if answer.get("id") == asked and "method" not in answer:
                    break
            outcome = json.dumps(answer.get("result"), sort_keys=True)
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"outcome: {outcome}\n"}}}})
            send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
