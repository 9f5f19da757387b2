"""A minimal stdio ACP agent (stdlib only) for probe tests; each flag gives it one trait that
real agents have and acp_green's demo agent has not.

    python stub_agent.py [--needs-auth] [--ignore-eof] [--child] [--graceful-sigterm]
        [--relative-paths] [--open-tool-calls] [--wait-queues] [--busy-code CODE]
        [--auth-at-prompt] [--auth-message TEXT] [--v2] [--v2-only] [--v2-invalid] [--null-unknown]
        [--garbage-no-id] [--session-updates-after] [--string-locations] [--negative-ids-unreadable]
        [--broken-backend] [--unknown-session-code CODE] [--v2-turns] [--v2-stop-answer] [--v2-cancel-end-turn]
        [--v2-no-idle-at-eof] [--refuse-batches] [--v2-replay-new-ids] [--v2-cancel-ignored]
        [--big-ids-as-doubles] [--child-lingers SECONDS] [--exit-code CODE] [--v2-hold-until-next]
        [--v2-idle-before-ack] [--v2-idle-snapshot] [--v2-auth-at-turn] [--answer-after SECONDS]

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
--auth-at-prompt (with --needs-auth): session/new works, session/prompt is refused with -32000.
--auth-message TEXT: the -32000 refusal's message (default "Authentication required").
--v2: initialize answers the v2 draft's result (info, capabilities) when asked for 2 or more.
--v2-only: as --v2, and initialize(protocolVersion=1) is refused with -32022 (v2: no version at
or below 1). --v2-invalid: the v2 initialize result lacks `info` (invalid in v2, valid in v1).
--null-unknown: an unknown `_` request is answered `result: null` instead of -32601.
--garbage-no-id: a line that is not JSON is answered -32700 without an `id` member.
--session-updates-after: after each prompt's response, session-level updates follow
(session_info_update, available_commands_update), as real agents send between turns.
--string-locations: `/read`'s tool call gives `locations` as bare strings, not objects.
--negative-ids-unreadable: a request with a negative integer id is answered -32700 without an id
(codex-acp 0.16.0 does so), never with its own answer.
--broken-backend: session/new is answered -32603 (claude-code-acp does so when Claude Code cannot
start): the agent is reachable, but no session can be opened.
--v2-turns (with --v2): a prompt under v2 is answered {messageId} at once and its turn ends with an
idle state_update (end_turn); `/wait` runs until session/cancel (idle, cancelled) or EOF (idle,
cancelled, then exit). Each of the next flags adds one v2 fault to it: --v2-stop-answer: a prompt is
answered with v1's {stopReason} and no state_update; --v2-cancel-end-turn: a cancelled `/wait`
ends idle with end_turn; --v2-no-idle-at-eof: a `/wait` running at EOF exits without its idle update.
--v2-cancel-ignored: a v2 `/wait` ignores session/cancel (its turn never ends until EOF).
--v2-replay-new-ids: session/resume (replayFrom start) replays each user message under a new messageId.
--refuse-batches: a batch line is refused as a whole, -32600 with id null (codex-acp 2.6.0 does so).
--big-ids-as-doubles: an integer id beyond 2**53 is answered as a JavaScript number holds it (2**53+1
comes back as 2**53), as agents on node do.
--child-lingers SECONDS: starts a child that outlives the agent by SECONDS and then exits on its own
(a wrapper's native helper noticing its parent is gone: codex-acp's `codex`).
--exit-code CODE: at EOF, exits with CODE instead of 0.
--answer-after SECONDS: a prompt (under v1) is answered end_turn after SECONDS, whatever comes meanwhile
(a turn that ends on its own before the agent reads a cancel).
Under --v2-turns: --v2-hold-until-next: a `/wait` prompt is held, not inserted, until the next message
comes; a session/cancel then cancels it before its insertion (answered -32800, no turn), anything else
inserts it. --v2-idle-before-ack: a turn's running and idle updates come before the prompt's response.
--v2-idle-snapshot: a prompt is first met with an idle state_update without a stop reason (a snapshot of
the session's state), then acknowledged and run. --v2-auth-at-turn: a prompt is acknowledged and its turn
ends idle with stopReason "error" and error -32000 "Authentication required" (claude-agent-acp 0.101.0
without a login).
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
                 "--wait-queues", "--auth-at-prompt", "--v2", "--v2-only", "--v2-invalid", "--null-unknown", "--garbage-no-id",
                 "--session-updates-after", "--string-locations", "--negative-ids-unreadable", "--broken-backend",
                 "--v2-turns", "--v2-stop-answer", "--v2-cancel-end-turn", "--v2-no-idle-at-eof", "--refuse-batches",
                 "--v2-replay-new-ids", "--v2-cancel-ignored", "--big-ids-as-doubles", "--v2-hold-until-next",
                 "--v2-idle-before-ack", "--v2-idle-snapshot", "--v2-auth-at-turn"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--child-lingers", type=float, default=None)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--answer-after", type=float, default=0.0)
    parser.add_argument("--busy-code", type=int, default=None)
    parser.add_argument("--auth-message", default="Authentication required")
    parser.add_argument("--unknown-session-code", type=int, default=None)
    flags = parser.parse_args()
    if flags.graceful_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if flags.child_lingers is not None:  # waits for its parent to go, then lingers before it exits
        watcher = ("import os, sys, time\nwhile os.getppid() == int(sys.argv[2]): time.sleep(0.02)\n"
                   "time.sleep(float(sys.argv[1]))")
        subprocess.Popen([sys.executable, "-c", watcher, str(flags.child_lingers), str(os.getpid())], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if flags.child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = sys.stdout
    logged_in = not flags.needs_auth
    replies: dict[str, dict] = {}  # answers to our requests to the client, by id
    sessions: set[str] = set()
    next_id = [0]
    negotiated = [1]
    said: dict[str, list[tuple[str, str]]] = {}  # v2: each session's user messages (messageId, text)
    pending_lines: list[str] = []  # lines read ahead (a held prompt's next message), read again first

    def next_line() -> str:
        return pending_lines.pop(0) if pending_lines else sys.stdin.readline()

    def write(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    def respond(rid, result=None, error=None) -> None:
        if flags.big_ids_as_doubles and isinstance(rid, int) and abs(rid) > 2**53:
            rid = int(float(rid))  # what a JavaScript number keeps of it
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

    def state(session_id: str, name: str, stop: str | None = None) -> None:
        update(session_id, {"sessionUpdate": "state_update", "state": name, **({"stopReason": stop} if stop else {})})

    def v2_turn(rid, session_id: str, text: str) -> None:
        if flags.v2_stop_answer:
            respond(rid, {"stopReason": "end_turn"})
            return
        if flags.v2_idle_snapshot:
            state(session_id, "idle")
        if flags.v2_hold_until_next and text == "/wait":
            line = sys.stdin.readline()
            after = json.loads(line) if line else {}
            if after.get("method") == "session/cancel":
                respond(rid, error={"code": -32800, "message": "Request cancelled"})
                return
            if after:
                pending_lines.append(line)
        message_id = uuid.uuid4().hex
        acked = not flags.v2_idle_before_ack
        if acked:
            respond(rid, {"messageId": message_id})
        said.setdefault(session_id, []).append((message_id, text))
        state(session_id, "running")
        if flags.v2_auth_at_turn:
            update(session_id, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "error",
                                "error": {"code": -32000, "message": "Authentication required"}})
        elif text == "/wait":
            while True:
                line = next_line()
                if not line:
                    if not flags.v2_no_idle_at_eof:
                        state(session_id, "idle", "cancelled")
                    os._exit(0)
                waiting = json.loads(line)
                if waiting.get("method") == "session/cancel" and not flags.v2_cancel_ignored:
                    break
                if waiting.get("method") == "session/cancel":
                    continue
                if waiting.get("method") == "session/prompt":
                    respond(waiting.get("id"), error={"code": -32000, "message": "Session is busy",
                                                      "data": {"reason": "session_busy"}})
                else:
                    handle(waiting)
            state(session_id, "idle", "end_turn" if flags.v2_cancel_end_turn else "cancelled")
        else:
            state(session_id, "idle", "end_turn")
        if not acked:
            respond(rid, {"messageId": message_id})

    def handle(message: dict) -> None:
        nonlocal logged_in
        method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method is None:
            replies[str(rid)] = message
            return
        if "id" not in message:
            return  # notifications: nothing to do
        if flags.negative_ids_unreadable and isinstance(rid, int) and rid < 0:
            write({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}})
            return
        if method == "initialize":
            methods = [{"id": "stub-login", "name": "Stub login"}] if flags.needs_auth else []
            asked = params.get("protocolVersion")
            v2 = flags.v2 or flags.v2_only or flags.v2_invalid
            if v2 and isinstance(asked, int) and asked >= 2:
                info = {} if flags.v2_invalid else {"info": {"name": "stub-agent", "version": "0.0.1"}}
                negotiated[0] = 2
                v2_methods = [{"methodId": m["id"], "type": "agent", "name": m["name"]} for m in methods]
                respond(rid, {"protocolVersion": 2, **info, "capabilities": {}, "authMethods": v2_methods})
            elif flags.v2_only:
                respond(rid, error={"code": -32022, "message": "Unsupported protocol version",
                                    "data": {"supportedVersions": [2]}})
            else:
                respond(rid, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": methods,
                              "agentInfo": {"name": "stub-agent", "version": "0.0.1"}})
        elif method == "authenticate":
            if params.get("methodId") == "stub-login":
                logged_in = True
                respond(rid, {})
            else:
                respond(rid, error={"code": -32602, "message": "Unknown auth method"})
        elif method == "session/resume" and negotiated[0] == 2 and flags.v2_turns:
            session_id = params.get("sessionId")
            for message_id, text in said.get(session_id, []) if params.get("replayFrom") else []:
                update(session_id, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text},
                                    "messageId": uuid.uuid4().hex if flags.v2_replay_new_ids else message_id})
            state(session_id, "idle")
            respond(rid, {})
        elif method == "session/new" and flags.broken_backend:
            respond(rid, error={"code": -32603, "message": "Internal error",
                                "data": {"details": "Query closed before response received"}})
        elif method == "session/new":
            if logged_in or flags.auth_at_prompt:
                session_id = uuid.uuid4().hex
                sessions.add(session_id)
                respond(rid, {"sessionId": session_id})
            else:
                respond(rid, error={"code": -32000, "message": flags.auth_message})
        elif method == "session/prompt" and not logged_in:
            respond(rid, error={"code": -32000, "message": flags.auth_message})
        elif method == "session/prompt":
            blocks = params.get("prompt") or []
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict)).strip()
            session_id = params.get("sessionId")
            if flags.unknown_session_code is not None and session_id not in sessions:
                respond(rid, error={"code": flags.unknown_session_code, "message": "Unknown session",
                                    "data": {"reason": "unknown_session", "sessionId": session_id}})
                return
            if negotiated[0] == 2 and flags.v2_turns:
                v2_turn(rid, session_id, text)
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
                location = os.path.basename(path) if flags.string_locations else {"path": path}
                update(session_id, {"sessionUpdate": "tool_call", "toolCallId": "read-1", "title": f"Read {path}",
                                    "kind": "read", "status": "in_progress", "locations": [location]})
                ask("fs/read_text_file", {"sessionId": session_id, "path": path})
                if not flags.open_tool_calls:
                    update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": "read-1", "status": "completed"})
            time.sleep(flags.answer_after)
            respond(rid, {"stopReason": "end_turn"})
            if flags.session_updates_after:
                update(session_id, {"sessionUpdate": "session_info_update", "title": "A stub conversation"})
                update(session_id, {"sessionUpdate": "available_commands_update", "availableCommands": []})
        elif flags.null_unknown and method.startswith("_"):
            respond(rid, None)
        else:
            respond(rid, error={"code": -32601, "message": f"Method not found: {method}"})

    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            answer = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            if flags.garbage_no_id:
                del answer["id"]
            write(answer)
            continue
        if isinstance(message, dict):
            handle(message)
        elif isinstance(message, list) and flags.refuse_batches:
            write({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request: JSON-RPC batches are not supported"}})
    while flags.ignore_eof:
        time.sleep(60)
    sys.exit(flags.exit_code)


if __name__ == "__main__":
    main()
