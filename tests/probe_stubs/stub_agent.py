"""A minimal stdio ACP agent (stdlib only) for probe tests; each flag gives it one trait that
real agents have and acp_green's demo agent has not.

    python stub_agent.py [--needs-auth] [--ignore-eof] [--child] [--graceful-sigterm]
        [--relative-paths] [--open-tool-calls] [--wait-queues] [--busy-code CODE]
        [--unknown-session-code CODE]

It answers every prompt at once with end_turn and no chunks (no /stream, no prompt that runs
until cancelled), `/read PATH` by asking the client for the file, and nothing else.
--needs-auth: session/new is -32000 "Authentication required" until `authenticate` with
method "stub-login". --ignore-eof: keeps running after stdin closes. --child: starts a sleeping
child process at once (in its session, still its child). --graceful-sigterm: SIGTERM exits 0,
SIGHUP keeps its default (death). --relative-paths: `/read` sends the path as given, relative.
--open-tool-calls: a `/read`'s tool call is left in_progress when the prompt answers.
--wait-queues: `/wait` runs until session/cancel, and requests that arrive meanwhile wait their
turn (a second prompt is queued, not refused); at EOF the agent exits without answering it.
--busy-code CODE: `/wait` runs until session/cancel, and a second prompt meanwhile is refused at
once with error CODE (ACP's is -32000; any other code is a wrong refusal).
--unknown-session-code CODE: a prompt naming a session it never created is refused with error
CODE (ACP's is -32002; older agents answered -32602); without it such a prompt answers end_turn.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--needs-auth", "--ignore-eof", "--child", "--graceful-sigterm", "--relative-paths", "--open-tool-calls",
                 "--wait-queues"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--busy-code", type=int, default=None)
    parser.add_argument("--unknown-session-code", type=int, default=None)
    flags = parser.parse_args()
    if flags.graceful_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if flags.child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = sys.stdout
    logged_in = not flags.needs_auth
    replies: dict[str, dict] = {}  # answers to our requests to the client, by id
    sessions: set[str] = set()
    next_id = [0]

    def write(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    def respond(rid, result=None, error=None) -> None:
        write({"jsonrpc": "2.0", "id": rid, **({"error": error} if error else {"result": result})})

    def ask(method: str, params: dict) -> dict:
        next_id[0] += 1
        key = f"stub-{next_id[0]}"
        write({"jsonrpc": "2.0", "id": key, "method": method, "params": params})
        while key not in replies:
            line = sys.stdin.readline()
            if not line:
                return {}
            handle(json.loads(line))
        return replies.pop(key)

    def update(session_id: str, body: dict) -> None:
        write({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": body}})

    def handle(message: dict) -> None:
        nonlocal logged_in
        method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method is None:
            replies[str(rid)] = message
            return
        if "id" not in message:
            return  # notifications: nothing to do
        if method == "initialize":
            methods = [{"id": "stub-login", "name": "Stub login"}] if flags.needs_auth else []
            respond(rid, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": methods,
                          "agentInfo": {"name": "stub-agent", "version": "0.0.1"}})
        elif method == "authenticate":
            if params.get("methodId") == "stub-login":
                logged_in = True
                respond(rid, {})
            else:
                respond(rid, error={"code": -32602, "message": "Unknown auth method"})
        elif method == "session/new":
            if logged_in:
                session_id = uuid.uuid4().hex
                sessions.add(session_id)
                respond(rid, {"sessionId": session_id})
            else:
                respond(rid, error={"code": -32000, "message": "Authentication required"})
        elif method == "session/prompt":
            blocks = params.get("prompt") or []
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict)).strip()
            session_id = params.get("sessionId")
            if flags.unknown_session_code is not None and session_id not in sessions:
                respond(rid, error={"code": flags.unknown_session_code, "message": "Unknown session",
                                    "data": {"reason": "unknown_session", "sessionId": session_id}})
                return
            if text == "/wait" and (flags.wait_queues or flags.busy_code is not None):
                queued = []
                while True:
                    line = sys.stdin.readline()
                    if not line:
                        os._exit(0)  # EOF: leave without answering
                    waiting = json.loads(line)
                    if waiting.get("method") == "session/cancel":
                        break
                    if flags.busy_code is not None and waiting.get("method") == "session/prompt":
                        respond(waiting.get("id"), error={"code": flags.busy_code, "message": "Session is busy"})
                        continue
                    queued.append(waiting)
                respond(rid, {"stopReason": "cancelled"})
                for waiting in queued:
                    handle(waiting)
                return
            if text.startswith("/read "):
                path = text[len("/read "):].strip()
                path = path.lstrip("/") if flags.relative_paths else path
                update(session_id, {"sessionUpdate": "tool_call", "toolCallId": "read-1", "title": f"Read {path}",
                                    "kind": "read", "status": "in_progress", "locations": [{"path": path}]})
                ask("fs/read_text_file", {"sessionId": session_id, "path": path})
                if not flags.open_tool_calls:
                    update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": "read-1", "status": "completed"})
            respond(rid, {"stopReason": "end_turn"})
        else:
            respond(rid, error={"code": -32601, "message": f"Method not found: {method}"})

    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            write({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if isinstance(message, dict):
            handle(message)
    while flags.ignore_eof:
        time.sleep(60)


if __name__ == "__main__":
    main()
