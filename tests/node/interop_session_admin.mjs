// Drives an ACP agent with the official TypeScript SDK client on its unstable entrypoint
// (@agentclientprotocol/sdk/unstable): session/fork, archive, unarchive, set_title, status and
// session/list's `archived` filter. Each answer is parsed with the SDK's own zod schema for its
// response type; the report carries what failed, and every line both sides wrote.
// usage: node interop_session_admin.mjs WORKDIR -- COMMAND [ARGS...]
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk/unstable";
// The SDK's generated validators (not in its export map, so imported by path).
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";
import { launchAgent } from "./agent_process.mjs";

const { workdir, child, exited, input, output } = launchAgent();

// Every line each side wrote, for the test to check against the schema too.
const lines = { in: [], out: [] };
const tee = (into) => new TransformStream({
  transform(chunk, controller) {
    into.push(new TextDecoder().decode(chunk));
    controller.enqueue(chunk);
  },
});
const fromAgent = output.pipeThrough(tee(lines.in));
const toAgent = tee(lines.out);
toAgent.readable.pipeTo(input).catch(() => {});
const stream = ndJsonStream(toAgent.writable, fromAgent);

const invalid = [];
const checked = (name, schema, value) => {
  const parsed = schema.safeParse(value);
  if (!parsed.success) invalid.push({ name, value, issues: parsed.error.issues });
  return value;
};

const app = client({ name: "acp-green-ts-session-admin" })
  .onNotification(methods.client.session.update, () => {});

const report = await app.connectWith(stream, async (ctx) => {
  const out = {};
  const init = checked("initialize", z.zInitializeResponse, await ctx.request(methods.agent.initialize, {
    protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "ts-session-admin", version: "1.0.0" },
  }));
  out.sessionCapabilities = init.agentCapabilities?.sessionCapabilities ?? {};
  const created = checked("session/new", z.zNewSessionResponse,
    await ctx.request(methods.agent.session.new, { cwd: workdir, mcpServers: [] }));
  const source = created.sessionId;
  checked("session/prompt", z.zPromptResponse,
    await ctx.request(methods.agent.session.prompt, { sessionId: source, prompt: [{ type: "text", text: "hello from node" }] }));

  const fork = checked("session/fork", z.zForkSessionResponse,
    await ctx.request(methods.agent.session.fork, { sessionId: source, cwd: workdir, mcpServers: [] }));
  out.fork = { isNew: fork.sessionId !== source, modes: (fork.modes?.availableModes ?? []).map((m) => m.id) };

  out.title = checked("session/set_title", z.zSetSessionTitleResponse,
    await ctx.request(methods.agent.session.setTitle, { sessionId: fork.sessionId, title: "  the fork\n" })).title;

  out.statusOpen = checked("session/status", z.zSessionStatusResponse,
    await ctx.request(methods.agent.session.status, { sessionId: source })).status;

  checked("session/archive", z.zArchiveSessionResponse, await ctx.request(methods.agent.session.archive, { sessionId: source }));
  out.statusArchived = checked("session/status", z.zSessionStatusResponse,
    await ctx.request(methods.agent.session.status, { sessionId: source })).status;
  const listed = async (archived) => {
    const params = archived === undefined ? {} : { archived };
    const page = checked("session/list", z.zListSessionsResponse, await ctx.request(methods.agent.session.list, params));
    return page.sessions.map((s) => ({ id: s.sessionId === source ? "source" : "fork", archived: s.archived, title: s.title ?? null }));
  };
  out.listDefault = await listed();
  out.listOnly = await listed("only");
  out.listInclude = await listed("include");
  checked("session/unarchive", z.zUnarchiveSessionResponse, await ctx.request(methods.agent.session.unarchive, { sessionId: source }));
  out.listAfterUnarchive = await listed();

  try {
    await ctx.request(methods.agent.session.status, { sessionId: "sess_nope" });
    out.unknown = null;
  } catch (error) {
    out.unknown = { code: error.code, reason: error.data?.reason ?? null };
  }
  return out;
});

child.stdin.end();
report.exit = await exited;
report.invalid = invalid;
report.lines = lines;
process.stdout.write(JSON.stringify(report) + "\n");
