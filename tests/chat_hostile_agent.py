"""A bare stdio ACP agent (no acp_green) that tries to take the user's files and their terminal.

Run as `python -m tests.chat_hostile_agent LOG`: every answer chat gives to its requests is
appended to LOG as one JSON line ({"method", "params", "answer"}), so a test sees exactly what
reached the agent. Each prompt is one order:

    read PATH [LINE LIMIT]   fs/read_text_file
    write PATH TEXT          fs/write_text_file
    odd-paths                reads and writes of paths no file can have (a NUL, a lone surrogate, a number)
                             and with params that are not an object
    escapes                  a message, a thought, a tool call, a plan and a permission request
                             full of OSC 0 (window title), OSC 52 (clipboard) and CSI sequences

and the turn says in one line what chat answered (`read: error -32001`, `read: 12 characters`).
"""

from __future__ import annotations

import json
import sys

OSC_TITLE = "\x1b]0;pwned-title\x07"
OSC_CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # base64 of "rm -rf ~"
CSI = "\x1b[2J\x1b[31m\x1b[1A"  # clear the screen, red, cursor up
C1 = "\x9b31m\x9d0;c1-title\x9c"  # the same, in C1 controls
HOSTILE = OSC_TITLE + OSC_CLIPBOARD + CSI + C1 + "\r\x08\x07"


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def next_message() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def update(update: dict) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}})


def say(text: str) -> None:
    update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


class Agent:
    def __init__(self, log: str) -> None:
        self.log = log
        self.next_id = 1000

    def ask(self, method: str, params: dict | list) -> dict:
        """Send a request to chat and wait for its answer (anything else meanwhile is ignored)."""
        self.next_id += 1
        send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
              "params": {"sessionId": "s1", **params} if isinstance(params, dict) else params})
        while True:
            answer = next_message()
            if answer.get("id") == self.next_id and "method" not in answer:
                with open(self.log, "a", encoding="utf-8") as log:
                    log.write(json.dumps({"method": method, "params": params, "answer": answer}) + "\n")
                return answer

    def order(self, text: str) -> None:
        verb, _, rest = text.partition(" ")
        if verb == "read":
            path, *numbers = rest.split(" ")
            params: dict = {"path": path}
            if numbers:
                params.update(line=int(numbers[0]), limit=int(numbers[1]))
            answer = self.ask("fs/read_text_file", params)
            got = answer.get("result", {}).get("content")
            say(f"read: {len(got)} characters\n" if isinstance(got, str) else f"read: error {answer['error']['code']}\n")
        elif verb == "write":
            path, _, content = rest.partition(" ")
            answer = self.ask("fs/write_text_file", {"path": path, "content": content})
            say("write: done\n" if "result" in answer else f"write: error {answer['error']['code']}\n")
        elif verb == "odd-paths":
            for params in ({"path": "/tmp/a\x00b"}, {"path": "/tmp/\ud800"}, {"path": 7}, ["/etc/hostname"]):
                for method in ("fs/read_text_file", "fs/write_text_file"):
                    answer = self.ask(method, {**params, "content": "x"} if isinstance(params, dict) else params)
                    say(f"{method}: error {answer['error']['code']}\n" if "error" in answer else f"{method}: answered\n")
        elif verb == "escapes":
            say(f"message{HOSTILE}end\n")
            update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": f"thought{HOSTILE}\n"}})
            update({"sessionUpdate": "tool_call", "toolCallId": f"t{HOSTILE}", "title": f"title{HOSTILE}", "kind": "edit",
                    "status": "pending", "content": [{"type": "content", "content": {"type": "text", "text": f"content{HOSTILE}"}}],
                    "locations": [{"path": f"/tmp/path{HOSTILE}"}]})
            update({"sessionUpdate": "plan", "entries": [{"content": f"plan{HOSTILE}", "status": "pending", "priority": "high"}]})
            answer = self.ask("session/request_permission", {
                "toolCall": {"toolCallId": f"t{HOSTILE}", "title": f"ask{HOSTILE}"},
                "options": [{"optionId": "ok", "name": f"Allow{HOSTILE}", "kind": "allow_once"},
                            {"optionId": "no", "name": f"Reject{HOSTILE}", "kind": "reject_once"}]})
            say(f"permission: {json.dumps(answer.get('result'))}\n")
        else:
            say(f"unknown order {verb!r}\n")

    def run(self) -> None:
        while True:
            message = next_message()
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                send({"jsonrpc": "2.0", "id": request_id, "result": {
                    "protocolVersion": 1, "agentCapabilities": {}, "authMethods": [],
                    "agentInfo": {"name": "hostile", "title": f"hostile{OSC_TITLE}", "version": "1"}}})
            elif method == "session/new":
                send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": "s1"}})
            elif method == "session/prompt":
                text = "".join(block.get("text", "") for block in message["params"]["prompt"] if isinstance(block, dict))
                self.order(text.strip())
                send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    Agent(sys.argv[1]).run()
