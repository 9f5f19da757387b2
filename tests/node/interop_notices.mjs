// Drives an ACP agent with the official TypeScript SDK client (@agentclientprotocol/sdk 2.4.0)
// that advertises session.notices and session.compaction, and prints a JSON report of the
// notice, compaction and tool-call updates the SDK accepted (each parsed by its own schema
// before the handler sees it) and of anything the SDK reported on stderr.
// usage: node interop_notices.mjs WORKDIR -- COMMAND [ARGS...]
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import { collectComplaints, launchAgent } from "./agent_process.mjs";

const { workdir, child, exited, input, output } = launchAgent();
const stream = ndJsonStream(input, output);

// An update the SDK's schema refuses never reaches the handler; the SDK says so on console.error.
const complaints = collectComplaints();

const updates = [];
const app = client({ name: "acp-green-ts-notices" })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const of = (kinds) => updates.filter((u) => kinds.includes(u.sessionUpdate));

const report = await app.connectWith(stream, async (ctx) => {
  await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { session: { notices: {}, compaction: {} } },
    clientInfo: { name: "ts-notices", version: "1.0.0" },
  });
  const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: workdir, mcpServers: [] });
  const out = {};
  for (const text of ["/notice warning Context is almost full", "/compact c-1", "/named"]) {
    const answer = await ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    out[text] = answer.stopReason;
  }
  out.notices = of(["notice"]);
  out.compaction = of(["compaction_update", "compaction_summary_chunk"]);
  out.tools = of(["tool_call", "tool_call_update"]).map((u) => [u.sessionUpdate, u.name ?? null]);
  out.said = of(["agent_message_chunk"]).map((u) => u.content.text);
  return out;
});

child.stdin.end();
report.exit = await exited;
report.complaints = complaints;
process.stdout.write(JSON.stringify(report) + "\n");
