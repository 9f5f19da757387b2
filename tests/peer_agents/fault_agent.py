"""A deliberately faulty stdio ACP agent: each flag breaks one invariant the rig checks.

Standalone (stdlib only, threads, no acp_green) so it can do what the runtime never would.
It follows the demo grammar the soak uses: plain text echoes, `/stream N [SIZE]`,
`/sleep SECONDS`, `/wait`. Without flags it is a correct agent.

    python fault_agent.py [--bad-json] [--bad-schema] [--double-response] [--drop-response]
        [--answer-notifications] [--out-of-order] [--update-after-response]
        [--cancel-ignored] [--ignore-eof] [--orphan]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid

FLAGS = {
    "bad_json": "valid_json_rpc",
    "bad_schema": "schema",
    "double_response": "one_response_per_request",
    "drop_response": "one_response_per_request",
    "answer_notifications": "no_response_to_notification",
    "out_of_order": "prompt_updates_in_order",
    "update_after_response": "no_update_after_response",
    "cancel_ignored": "cancelled_answers_cancelled",
    "ignore_eof": "exit_after_eof",
    "orphan": "no_orphan_processes",
}


class Agent:
    def __init__(self, flags: argparse.Namespace, out) -> None:
        self.flags = flags
        self.out = out
        self.lock = threading.Lock()
        self.cancel_events: dict[str, threading.Event] = {}
        self.busy: set[str] = set()
        self.threads: list[threading.Thread] = []

    def write(self, message: dict) -> None:
        data = json.dumps(message).encode() + b"\n"
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def respond(self, rid, result) -> None:
        self.write({"jsonrpc": "2.0", "id": rid, "result": result})
        if self.flags.double_response:
            self.write({"jsonrpc": "2.0", "id": rid, "result": result})

    def error(self, rid, code: int, message: str, data=None) -> None:
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.write({"jsonrpc": "2.0", "id": rid, "error": error})

    def update(self, session_id: str, update: dict) -> None:
        self.write({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})

    def chunk(self, session_id: str, text: str) -> None:
        if self.flags.bad_schema:
            self.update(session_id, {"sessionUpdate": "agent_message_chunk", "text": text})  # no `content`
        else:
            self.update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    def handle(self, message: dict) -> None:
        method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method is None:
            return  # a response to us: we never ask anything
        if "id" not in message:
            if method == "session/cancel":
                event = self.cancel_events.get(params.get("sessionId"))
                if event is not None and params.get("sessionId") in self.busy:  # idle cancels do not carry over
                    event.set()
                if self.flags.answer_notifications:
                    self.write({"jsonrpc": "2.0", "id": None, "result": {}})
            return
        if method == "initialize":
            self.respond(rid, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": [],
                               "agentInfo": {"name": "fault-agent", "version": "0.0.1"}})
        elif method == "session/new":
            if self.flags.orphan:
                # Double fork: the middle process exits at once, so the sleeper (in a session of
                # its own) is an orphan right away, reparented away from this agent's tree.
                daemonize = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], "
                             "start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
                subprocess.run([sys.executable, "-c", daemonize], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
            session_id = uuid.uuid4().hex
            self.cancel_events[session_id] = threading.Event()
            self.respond(rid, {"sessionId": session_id, "modes": {"currentModeId": "ask", "availableModes": [
                {"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}})
        elif method == "session/set_mode":
            if not self.flags.drop_response:
                self.respond(rid, {})
        elif method == "session/prompt":
            session_id = params.get("sessionId")
            if session_id not in self.cancel_events:
                self.error(rid, -32002, "unknown session")  # ACP's "Resource not found"
            elif session_id in self.busy:
                self.error(rid, -32000, "session busy", {"reason": "session_busy"})
            else:
                self.busy.add(session_id)
                thread = threading.Thread(target=self.prompt, args=(rid, session_id, params), daemon=True)
                self.threads.append(thread)
                thread.start()
        else:
            self.error(rid, -32601, f"Method not found: {method}")

    def prompt(self, rid, session_id: str, params: dict) -> None:
        cancel = self.cancel_events[session_id]
        text = "".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text").strip()
        if self.flags.bad_json:
            with self.lock:
                self.out.write(b"debug: prompt received\n")
                self.out.flush()
        stop = "end_turn"
        if text.startswith("/stream"):
            parts = text.split()
            count = int(parts[1]) if len(parts) > 1 else 10
            size = int(parts[2]) if len(parts) > 2 else 64
            order = list(range(count))
            if self.flags.out_of_order and count > 1:
                order[0], order[1] = order[1], order[0]
            for i in order:
                if cancel.is_set():
                    stop = "cancelled"
                    break
                head = f"{i}:"
                self.chunk(session_id, head + "." * max(0, size - len(head)))
        elif text.startswith("/sleep"):
            seconds = float(text.split()[1]) if len(text.split()) > 1 else 1
            stop = "cancelled" if cancel.wait(seconds) else "end_turn"
        elif text.startswith("/wait"):
            cancel.wait()
            stop = "end_turn" if self.flags.cancel_ignored else "cancelled"
        else:
            self.chunk(session_id, text or "(empty)")
        if cancel.is_set() and not self.flags.cancel_ignored:
            stop = "cancelled"
        cancel.clear()  # a fresh token for the next turn
        self.busy.discard(session_id)
        self.respond(rid, {"stopReason": stop})
        if self.flags.update_after_response:
            self.chunk(session_id, "one more thing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in FLAGS:
        parser.add_argument("--" + flag.replace("_", "-"), action="store_true")
    flags = parser.parse_args()
    agent = Agent(flags, sys.stdout.buffer)
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            agent.write({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if not isinstance(message, dict):
            agent.write({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}})
            continue
        agent.handle(message)
    # EOF: cancel what runs, let it answer, exit.
    for event in agent.cancel_events.values():
        event.set()
    for thread in agent.threads:
        thread.join(timeout=5)
    if flags.ignore_eof:
        while True:
            time.sleep(60)
    os._exit(0)


if __name__ == "__main__":
    main()
