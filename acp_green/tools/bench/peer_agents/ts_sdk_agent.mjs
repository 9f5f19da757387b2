// A minimal ACP agent on the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0), for the
// acp-green benchmarks. It understands `/stream N [SIZE]` and `/wait`, like acp_green's demo agent.
// Written the way the SDK's README suggests: one awaited notify() per chunk, nothing clever.
// Set ACP_PEER_YIELD_EVERY=K to yield to the event loop every K chunks (the fairness variant).
import { Readable, Writable } from "node:stream";
import { randomUUID } from "node:crypto";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { agent, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const yieldEvery = Number(process.env.ACP_PEER_YIELD_EVERY || 0);
const MODES = [
  { id: "ask", name: "Ask" },
  { id: "code", name: "Code" },
];
// sessionId -> { mode, cancelled: boolean, wake: function | null }
const sessions = new Map();

function promptText(blocks) {
  return blocks.filter((b) => b.type === "text").map((b) => b.text).join("").trim();
}

function chunkText(i, size) {
  const head = `${i}:`;
  return size > head.length ? head + ".".repeat(size - head.length) : head;
}

const app = agent({ name: "ts-sdk-peer" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    authMethods: [],
    agentInfo: { name: "ts-sdk-peer", version: "2.4.0" },
  }))
  .onRequest(methods.agent.session.new, () => {
    const sessionId = randomUUID();
    sessions.set(sessionId, { mode: "ask", cancelled: false, wake: null });
    return { sessionId, modes: { currentModeId: "ask", availableModes: MODES } };
  })
  .onRequest(methods.agent.session.setMode, ({ params }) => {
    const session = sessions.get(params.sessionId);
    if (session) session.mode = params.modeId;
    return {};
  })
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    const session = sessions.get(params.sessionId);
    if (!session) return;
    session.cancelled = true;
    if (session.wake) session.wake();
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    session.cancelled = false;
    const text = promptText(params.prompt);
    if (text === "/wait") {
      if (!session.cancelled) await new Promise((resolve) => { session.wake = resolve; });
      session.wake = null;
      return { stopReason: "cancelled" };
    }
    const match = /^\/stream\s+(\d+)(?:\s+(\d+))?$/.exec(text);
    const count = match ? Number(match[1]) : 1;
    const size = match && match[2] ? Number(match[2]) : 64;
    for (let i = 0; i < count; i++) {
      if (session.cancelled) return { stopReason: "cancelled" };
      await client.notify(methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: match ? chunkText(i, size) : text } },
      });
      if (yieldEvery && (i + 1) % yieldEvery === 0) await yieldToLoop();
    }
    return { stopReason: "end_turn" };
  });

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
await connection.closed;
