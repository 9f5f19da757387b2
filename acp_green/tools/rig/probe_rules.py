"""What each row of `acp-green probe` rests on: its force and the sentence it cites.

A row is a MUST only where ACP or JSON-RPC 2.0 says MUST (or MUST NOT): a broken one is `fail`
and the probe exits 1. An `advisory` row rests on what ACP says without a MUST (a SHOULD, what
it implies, a code its schema names): `warn`, never a failure. A row of acp_green's own advice
(`own`: what acp_green asks of its own agent and offers others, beyond ACP) warns too, and says
so: "acp_green's own advice". "ACP docs, PAGE" is the page of ACP's v1 protocol documentation
(agentclientprotocol.com/protocol/...), "ACP's schema" the v1 schema vendored in `acp_green/schema/`,
"the v2 schema" the draft vendored in `acp_green/schema/v2/` (`@agentclientprotocol/sdk` 2.4.0);
"JSON-RPC 2.0" is its specification (jsonrpc.org/specification), by section.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ADVISORY", "MUST", "OWN", "OWN_ADVICE", "RULES", "Rule", "rule_for"]

MUST, ADVISORY, OWN = "must", "advisory", "own"
OWN_ADVICE = "acp_green's own advice"


@dataclass(frozen=True, slots=True)
class Rule:
    """A row's force and what it rests on (v2: its sentence under the v2 draft, when it differs)."""

    force: str
    basis: str
    v2: str = ""

    def cited(self, protocol: int) -> str:
        return self.v2 if protocol == 2 and self.v2 else self.basis


def _own(text: str) -> Rule:
    return Rule(OWN, f"{OWN_ADVICE} (no ACP rule): {text}")


_VALID_MESSAGE = ("ACP docs, Transports: \"The agent MUST NOT write anything to its stdout that is not a valid ACP "
                  "message\", and messages \"MUST NOT contain embedded newlines\"")
_CANCEL_V1 = ("ACP docs, Prompt Turn (Cancellation): \"the Agent MUST respond to the original session/prompt request with "
              "the cancelled stop reason\"; ACP's schema, StopReason: cancelled \"MUST be returned when the client sends a "
              "session/cancel notification\"")
_CANCEL_V2 = ("the v2 schema, session/cancel: it \"cancels a session's foreground work and its prompts not yet inserted\"; "
              "\"the Agent MUST send an idle state_update session update with the cancelled stop reason if cancellation "
              "ended active foreground work\", and \"MUST catch errors caused by aborting cancelled work and report the "
              "cancelled stop reason, not error\" (a prompt cancelled before insertion is answered -32800, as "
              "$/cancel_request and session/close say)")

#: Every row the probe can show, by its name in the table.
RULES: dict[str, Rule] = {
    # -- the checks ---------------------------------------------------------------------------
    "version negotiation": Rule(MUST, "ACP docs, Initialization: \"If the Agent supports the requested "
                                "version, it MUST respond with the same version. Otherwise, the Agent MUST respond with "
                                "the latest version it supports.\""),
    "ids echoed": Rule(MUST, "JSON-RPC 2.0 section 5 (Response object): the id \"MUST be the same as the value of the id member in "
                       "the Request Object\"; an ACP RequestId is null, an int64 or a string (ACP's schema)"),
    "notifications unanswered": Rule(MUST, "JSON-RPC 2.0 section 4.1: \"The Server MUST NOT reply to a Notification\" (ACP "
                                     "messages are JSON-RPC 2.0's: ACP docs, Overview)"),
    "-32700 for garbage": Rule(MUST, "JSON-RPC 2.0 section 4: \"the Server MUST reply with a Response\" (section 5.1: invalid JSON is "
                               "-32700, Parse error), and section 5: \"If there was an error in detecting the id in the Request "
                               "object (e.g. Parse error/Invalid Request), it MUST be Null\""),
    "initialize+session/new in one write": _own("a client may write its next request before the answer to the last (JSON-RPC "
                                                "2.0 lets it), and ACP asks only that the client initialize before it "
                                                "creates a session (ACP docs, Initialization); nothing makes an agent read them in order "
                                                "(acp_green's S2)"),
    "cancel during a long prompt": Rule(MUST, _CANCEL_V1, _CANCEL_V2),
    "cancel in the same write as the prompt": Rule(MUST, _CANCEL_V1, _CANCEL_V2),
    "control during a streaming prompt": Rule(ADVISORY, "ACP docs, Session Modes (session/set_mode): \"This method "
                                              "can be called at any time during a session, whether the Agent is idle or "
                                              "actively generating a response\" (no MUST: an answer held until the turn "
                                              "ends is what clients trip on)",
                                              "ACP v2 has no modes: session/new during a turn; nothing in ACP says it is "
                                              "answered before the turn ends (what clients trip on)"),
    "many sessions at once": _own("16 sessions each answer a prompt sent together, none an error (ACP lets an agent refuse "
                                  "a prompt with an error; a prompt never answered is the `one response per request` row's "
                                  "JSON-RPC MUST)"),
    "a prompt that uses a tool": _own("the tool prompt is answered; it gives the rows that judge what a tool sends (paths: "
                                      "an ACP MUST) something to judge, and judges nothing itself"),
    "exit on EOF": _own("an idle agent exits 0 once its stdin closes and leaves no process behind, judged after a settle "
                        "window; ACP's shutdown is the client's: \"Close stdin, terminate subprocess\" (ACP docs, Transports)"),
    "second prompt on a busy session": _own("a second prompt while the session's turn runs is refused at once with -32000 "
                                            "and data.reason session_busy (acp_green's S8); ACP implies one turn at a time "
                                            "(ACP docs, Prompt Turn: \"Once a prompt turn completes, the Client may send another\") and "
                                            "defines no refusal, and v2 lets an agent hold the prompt"),
    "running prompt answered at EOF": _own("a prompt still running when stdin closes is answered (cancelled) before the "
                                           "agent exits (acp_green's S13); ACP owes nothing once stdin closed"),
    "SIGHUP handled like SIGTERM": _own("SIGHUP (the editor's terminal closed) ends the agent as SIGTERM does; ACP says "
                                        "nothing of signals"),
    "unknown session answered -32002": Rule(ADVISORY, "ACP's ErrorCode (the schema): -32002 \"Resource not found\"; the v2 "
                                            "schema: SessionNotFoundErrorData is \"for -32002 (Resource not found) when a "
                                            "session-scoped request names a session that does not exist\" (a code named; "
                                            "no MUST to use it)"),
    "session/resume replays from start": Rule(ADVISORY, "the v2 schema, PromptResponse.messageId: \"If retained and "
                                              "replayed, the message keeps this identifier\" (no MUST word)"),
    "batch answered as one array": Rule(ADVISORY, "JSON-RPC 2.0 section 6: \"The Server should respond with an Array containing "
                                        "the corresponding Response objects\" (a should: the v2 draft's own TypeScript SDK "
                                        "refuses batches)"),
    # -- the invariants, checked over every run ------------------------------------------------
    "stdout hygiene (every line JSON-RPC)": Rule(MUST, _VALID_MESSAGE),
    "strict schema validity": Rule(MUST, _VALID_MESSAGE + " (a message the schema of the negotiated version rejects is no "
                                   "valid ACP message); a fault of a response's id is counted by the id rows, not again "
                                   "here"),
    "one response per request": Rule(MUST, "JSON-RPC 2.0 section 4: \"When a rpc call is made, the Server MUST reply with a "
                                     "Response\"; section 5: its id \"MUST be the same as the value of the id member in the "
                                     "Request Object\""),
    "no response to a notification": Rule(MUST, "JSON-RPC 2.0 section 4.1: \"The Server MUST NOT reply to a Notification\""),
    "prompt updates in order": _own("a `/stream N` prompt answered in acp-green's demo grammar (chunks 0:, 1:, ...) "
                                    "arrives in order"),
    "no update after the prompt response": Rule(MUST, "ACP docs, Prompt Turn: the response ends the turn, and updates "
                                                "sent after session/cancel \"MUST\" come \"before responding to the "
                                                "session/prompt request\"; ACP docs, Session Setup: a load's replay "
                                                "comes before its response (session-level updates may come between "
                                                "turns)"),
    "cancelled prompt answers cancelled": Rule(MUST, _CANCEL_V1, _CANCEL_V2),
    "process exits after stdin closes": _own("the process ends within the exit timeout of EOF, judged after a settle "
                                             "window; ACP's shutdown is the client's: \"Close stdin, terminate "
                                             "subprocess\" (ACP docs, Transports)"),
    "no descendant survives": _own("no process the agent started outlives it, judged after a settle window (a child that "
                                   "exits on its own within it is no survivor); ACP says nothing of an agent's processes"),
    "file paths sent to the client are absolute": Rule(MUST, "ACP docs, Overview: \"All file paths in the protocol "
                                                       "MUST be absolute\""),
    "only what the client advertised (boolean options)": Rule(MUST, "ACP docs, Session Config Options: Agents \"MUST "
                                                              "NOT include type: \"boolean\" options ... unless the "
                                                              "Client advertised support\""),
    "tool calls finish before the prompt response": _own("a tool call is completed or failed when its prompt answers "
                                                         "(clients show a stuck spinner otherwise)"),
    "messageId consistent within a message": Rule(ADVISORY, "ACP's schema (message chunks): \"Chunks with the same messageId "
                                                  "belong to the same message; a changed messageId indicates a new "
                                                  "message\" (messageId itself is a MAY)"),
    "unknown method answered -32601": Rule(ADVISORY, "ACP docs, Extensibility: an unknown extension request is answered "
                                           "-32601 \"Method not found\" (a should; JSON-RPC 2.0 section 5.1 names the code)"),
    # -- rows that say why others could not run -----------------------------------------------
    "authentication": Rule(MUST, "ACP's ErrorCode -32000 \"Authentication required\" (the v2 schema names it "
                           "auth_required too, and a v2 turn that fails for it ends idle with stopReason \"error\" and "
                           "that error: ErrorStopReason); it fails only when --authenticate METHOD did not log the agent "
                           "in"),
    "protocol version": Rule(MUST, "ACP docs, Initialization: the version the agent answers decides what can be graded"),
    "session and first prompt": Rule(MUST, "JSON-RPC 2.0 lets any request be answered with an error: nothing that needs a "
                                     "session can then be graded"),
    "start": Rule(MUST, "the agent could not be started or reached: nothing could be graded"),
}


def rule_for(name: str) -> Rule:
    """The rule of a row (a row the table does not know is a MUST citing nothing, which a test forbids)."""
    return RULES.get(name, Rule(MUST, ""))
