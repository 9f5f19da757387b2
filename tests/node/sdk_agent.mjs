// A small, typical agent on the official ACP TypeScript SDK (@agentclientprotocol/sdk):
// echoes the prompt word by word (50 ms per word, like a model streaming), offers two modes,
// and answers `cancelled` when the turn is cancelled. Used to see what `acp-green probe` finds.
import { Readable, Writable } from "node:stream";
import { randomUUID } from "node:crypto";
import { agent, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const WORD_DELAY_MS = 50;
const cancelled = new Map(); // sessionId -> { value: boolean }

const app = agent({ name: "ts-sdk-echo-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: 1,
    agentCapabilities: {},
    agentInfo: { name: "ts-sdk-echo-agent", version: "0.1.0" },
  }))
  .onRequest(methods.agent.session.new, () => {
    const sessionId = randomUUID();
    cancelled.set(sessionId, { value: false });
    return {
      sessionId,
      modes: { currentModeId: "ask", availableModes: [{ id: "ask", name: "Ask" }, { id: "code", name: "Code" }] },
    };
  })
  .onRequest(methods.agent.session.setMode, () => ({}))
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const flag = cancelled.get(params.sessionId) ?? { value: false };
    flag.value = false;
    const text = params.prompt.filter((b) => b.type === "text").map((b) => b.text).join(" ");
    for (const word of text.split(/\s+/).filter(Boolean)) {
      if (flag.value) return { stopReason: "cancelled" };
      await client.notify(methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: word + " " } },
      });
      await new Promise((resolve) => setTimeout(resolve, WORD_DELAY_MS));
    }
    return { stopReason: flag.value ? "cancelled" : "end_turn" };
  })
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    const flag = cancelled.get(params.sessionId);
    if (flag) flag.value = true;
  });

const connection = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);
