// Drives an ACP agent with the official TypeScript SDK's draft ACP v2 client
// (@agentclientprotocol/sdk 2.4.0, `experimental/v2`): initialize, a session, a streamed prompt
// (acknowledged with its messageId, ended by an idle state_update), the mode set as a config
// option, a cancel, a resume that
// replays from the start, and a close. Prints a JSON report; every message the SDK received was
// parsed by its own v2 schema first (a refused one is an error here or a complaint on stderr).
// usage: node interop_v2.mjs WORKDIR -- COMMAND [ARGS...]
import { client, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";
import { collectComplaints, launchAgent } from "./agent_process.mjs";

const { workdir, child, exited, input, output } = launchAgent();
const stream = ndJsonStream(input, output);

const complaints = collectComplaints();

const all = [];
const forms = [];
const app = client({ name: "acp-green-ts-v2" })
  .onNotification("session/update", ({ params }) => {
    all.push(params);
  })
  .onRequest("elicitation/create", ({ params }) => {
    forms.push(params.message);
    return { action: "accept", content: { answer: "from the v2 client" } };
  });

// Reads the session's updates up to its next idle state_update (a `stop` message).
async function untilIdle(session) {
  const kinds = [];
  let text = "";
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") {
      return { kinds, text, stopReason: message.stopReason ?? null };
    }
    kinds.push(message.update.sessionUpdate);
    if (message.update.sessionUpdate === "agent_message_chunk" && message.update.content.type === "text") {
      text += message.update.content.text;
    }
  }
}

const report = await app.connectWith(stream, async (agent) => {
  const out = {};
  const init = await agent.request("initialize", {
    protocolVersion: 2, info: { name: "ts-v2", version: "1.0.0" }, capabilities: { elicitation: { form: {} } },
  });
  out.protocolVersion = init.protocolVersion;
  out.agentName = init.info.name;
  out.sessionCapabilities = Object.keys(init.capabilities.session ?? {}).sort();
  const session = await agent.buildSession(workdir).start();
  const sessionId = session.sessionId;

  // v2 has no session modes: the agent's modes are its `mode` config option, set with the SDK's
  // own call (which sends `type: "id"`); the session's tracked options take the answer's list.
  out.initialMode = session.configOptions?.[0]?.currentValue ?? null;
  await session.setConfigOption({ configId: "mode", type: "id", value: "code" });
  out.configOptions = session.configOptions.map((o) => [o.configId, o.category ?? null, o.currentValue]);

  const first = await session.prompt("/stream 5");
  out.stream = { messageId: typeof first.messageId, ...(await untilIdle(session)) };

  await session.prompt("/ask Who is asking?");
  out.ask = { forms, ...(await untilIdle(session)) };

  const waiting = await session.prompt("/wait");
  await agent.notify("session/cancel", { sessionId });
  out.cancel = { acknowledged: typeof waiting.messageId, ...(await untilIdle(session)) };

  const before = all.length;
  const resumed = await agent.request("session/resume", { sessionId, cwd: workdir, replayFrom: { type: "start" } });
  // The replay, then the current state (idle: a `stop` message), all sent before the response.
  const replay = await untilIdle(session);
  const replayed = all.slice(before).filter((n) => n.sessionId === sessionId).map((n) => n.update);
  out.resume = {
    answer: Object.keys(resumed).sort(),
    kinds: [...new Set(replay.kinds)].sort(),
    text: replay.text,
    stopReason: replay.stopReason,
    firstUserMessageId: replayed.find((u) => u.sessionUpdate === "user_message_chunk")?.messageId === first.messageId,
  };
  out.list = (await agent.request("session/list", {})).sessions.map((s) => s.sessionId === sessionId);
  out.close = await agent.request("session/close", { sessionId });
  session.dispose();
  return out;
});

child.stdin.end();
report.exit = await exited;
report.complaints = complaints;
process.stdout.write(JSON.stringify(report) + "\n");
