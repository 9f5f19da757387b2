// Drives an ACP agent with the official TypeScript SDK client (@agentclientprotocol/sdk) and
// prints a JSON report: initialize, session/new, a streamed prompt, a permission round trip
// (with an fs write), and a cancelled prompt.
// usage: node interop_client.mjs WORKDIR -- COMMAND [ARGS...]
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import { launchAgent } from "./agent_process.mjs";

const { workdir, child, exited, input, output } = launchAgent();
const stream = ndJsonStream(input, output);

const updates = [];
const permissions = [];
const writes = {};
const app = client({ name: "acp-green-ts-interop" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    permissions.push(params.toolCall.title ?? params.toolCall.toolCallId);
    const allow = params.options.find((o) => o.kind.startsWith("allow"));
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
    writes[params.path] = params.content;
    return {};
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params);
  });

const chunks = (sid, from) =>
  updates.slice(from).filter((n) => n.sessionId === sid && n.update.sessionUpdate === "agent_message_chunk")
    .map((n) => n.update.content.text);

const report = await app.connectWith(stream, async (ctx) => {
  const out = {};
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: true } },
    clientInfo: { name: "ts-interop", version: "1.0.0" },
  });
  out.protocolVersion = init.protocolVersion;
  out.agentName = init.agentInfo?.name;
  const session = await ctx.request(methods.agent.session.new, { cwd: workdir, mcpServers: [] });
  const sid = session.sessionId;
  out.modes = (session.modes?.availableModes ?? []).map((m) => m.id);

  let mark = updates.length;
  const streamed = await ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "/stream 40 16" }] });
  out.stream = { stopReason: streamed.stopReason, chunks: chunks(sid, mark) };

  const path = `${workdir}/from-ts.txt`;
  const wrote = await ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: `/write ${path} hello from node` }] });
  out.write = { stopReason: wrote.stopReason, permissions, writes };

  mark = updates.length;
  const waiting = ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "/wait" }] });
  await ctx.notify(methods.agent.session.cancel, { sessionId: sid });
  const cancelled = await waiting;
  out.cancel = { stopReason: cancelled.stopReason };

  const after = await ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "still here" }] });
  out.after = { stopReason: after.stopReason, text: chunks(sid, mark).join("") };
  return out;
});

child.stdin.end();
report.exit = await exited;
process.stdout.write(JSON.stringify(report) + "\n");
