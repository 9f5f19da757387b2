// Drives an ACP agent with the official TypeScript SDK client on its `/unstable` entrypoint,
// hosting an MCP server over ACP in the SDK's own MCP-over-ACP shape (McpOverAcpProvider:
// `mcp/message` by serverId + requestId). Declares it in session/new, has the agent call its
// tool (`/mcp proj echo ...`) twice, meet an inner error and cancel a held call, and prints a JSON
// report with every message each side sent.
// usage: node mcp_client.mjs WORKDIR -- COMMAND [ARGS...]
import { McpOverAcpProvider, client, methods, ndJsonStream } from "@agentclientprotocol/sdk/unstable";
import { launchAgent } from "./agent_process.mjs";

const { workdir, child, exited, input, output } = launchAgent();
const raw = ndJsonStream(input, output);

// Every message each side sends, as the SDK read or wrote it.
const fromAgent = [];
const toAgent = [];
const tap = (into) => new TransformStream({
  transform(message, out) {
    into.push(message);
    out.enqueue(message);
  },
});
const outgoing = tap(toAgent);
outgoing.readable.pipeTo(raw.writable);
const tapped = { readable: raw.readable.pipeThrough(tap(fromAgent)), writable: outgoing.writable };

const updates = [];
const calls = [];
let release = null;
const held = new Promise((resolve) => { release = resolve; });
const mcp = new McpOverAcpProvider();
const app = client({ name: "acp-green-ts-mcp" })
  .onRequest(methods.client.mcp.message, mcp.handleRequest)
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params);
  });

async function handler(cx) {
  calls.push({ method: cx.method, protocolVersion: cx.protocolVersion, name: cx.params?.name });
  if (cx.method !== "tools/call") return { error: { code: -32601, message: `Method not found: ${cx.method}` } };
  if (cx.params.name === "hold") {
    release();
    await new Promise((resolve) => cx.signal.addEventListener("abort", resolve, { once: true }));
    throw cx.signal.reason;
  }
  if (cx.params.name === "missing") return { error: { code: -32602, message: "Unknown tool: missing" } };
  return { result: { content: [{ type: "text", text: `client says ${cx.params.arguments?.text}` }], isError: false } };
}

const toolUpdates = (sid) =>
  updates.filter((n) => n.sessionId === sid && n.update.sessionUpdate === "tool_call_update").map((n) => n.update);
const said = (sid, from) =>
  updates.slice(from).filter((n) => n.sessionId === sid && n.update.sessionUpdate === "agent_message_chunk")
    .map((n) => n.update.content.text).join("");

const report = await app.connectWith(tapped, async (ctx) => {
  const out = {};
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: {},
    clientInfo: { name: "ts-mcp-interop", version: "1.0.0" },
  });
  out.mcpCapabilities = init.agentCapabilities?.mcpCapabilities;
  const server = mcp.registerServer(ctx, { name: "proj", handler });
  out.serverId = server.serverId;
  const session = await ctx.request(methods.agent.session.new, { cwd: workdir, mcpServers: [server.declaration] });
  const sid = session.sessionId;
  const prompt = (text) => ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] });

  let mark = updates.length;
  out.first = { stopReason: (await prompt('/mcp proj echo {"text": "over the new shape"}')).stopReason, said: said(sid, mark) };
  mark = updates.length;
  out.second = { stopReason: (await prompt('/mcp proj echo {"text": "again"}')).stopReason, said: said(sid, mark) };
  out.missing = { stopReason: (await prompt("/mcp proj missing")).stopReason, update: toolUpdates(sid).at(-1) };
  const waiting = prompt("/mcp proj hold");
  await Promise.race([held, waiting]); // a call that never reaches the handler must not hang the script
  await ctx.notify(methods.agent.session.cancel, { sessionId: sid });
  out.cancel = { stopReason: (await waiting).stopReason };
  return out;
});

child.stdin.end();
report.calls = calls;
report.fromAgent = fromAgent;
report.toAgent = toAgent;
report.exit = await exited;
process.stdout.write(JSON.stringify(report) + "\n");
