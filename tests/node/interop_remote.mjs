// Drives `acp-green serve --listen` over the network with the official TypeScript SDK client
// (@agentclientprotocol/sdk) on its experimental remote streams, and prints a JSON report.
// First connection: initialize, session/new, a streamed prompt, a cancelled prompt and a permission
// round trip (with an fs write); it is closed (HTTP: DELETE; WebSocket: the close handshake). Second
// connection: initialize, session/load of the same session (its replay recorded), one more prompt.
// usage: node interop_remote.mjs URL http|ws WORKDIR
//   URL is the server's http://HOST:PORT/acp; for ws the same address is used as ws://HOST:PORT/acp.
import { client, methods } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import WebSocket from "ws"; // node 20 has no global WebSocket
import { collectComplaints } from "./agent_process.mjs";

const [url, kind, workdir] = process.argv.slice(2);
if (!url || !["http", "ws"].includes(kind) || !workdir) {
  process.stderr.write("usage: node interop_remote.mjs URL http|ws WORKDIR\n");
  process.exit(2);
}
const BOUND_MS = 30_000; // every wait is bounded, never timed
const HISTORY = new Set(["user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update"]);
const complaints = collectComplaints();
const transportLog = []; // HTTP: "METHOD status [session]" per request; WebSocket: open/close events

function bounded(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${BOUND_MS / 1000} s waiting for ${what}`)), BOUND_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function waitFor(predicate, what) {
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    const value = predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${BOUND_MS / 1000} s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// One transport of `kind`, and a promise that it has closed (the DELETE answered, the socket closed).
function openStream() {
  if (kind === "http") {
    const deletes = [];
    const fetchLogged = (input, init = {}) => {
      const method = init.method ?? "GET";
      const session = new Headers(init.headers).get("Acp-Session-Id") ? " [session]" : "";
      const answered = fetch(input, init).then((response) => {
        transportLog.push(`${method} ${response.status}${session}`);
        return response;
      }, (error) => {
        // The SDK aborts what is in flight when it closes: a last POST whose message was already
        // answered on an event stream may still await its 202 then.
        transportLog.push(`${method} ${error?.name ?? "failed"}${session}`);
        throw error;
      });
      if (method === "DELETE") deletes.push(answered);
      return answered;
    };
    const closed = async () => {
      await waitFor(() => deletes.length > 0, "the transport's DELETE");
      return (await bounded(deletes[0], "the DELETE's answer")).status;
    };
    return { stream: createHttpStream(url, { fetch: fetchLogged }), closed };
  }
  let socket;
  let socketClosed;
  class LoggedWebSocket extends WebSocket {
    constructor(...args) {
      super(...args);
      socket = this;
      this.on("upgrade", (response) => transportLog.push(`upgrade ${response.statusCode}${response.headers["acp-connection-id"] ? " [connection id]" : ""}`));
      socketClosed = new Promise((resolve) => this.on("close", (code) => {
        transportLog.push(`close ${code}`);
        resolve(code);
      }));
    }
  }
  const stream = createWebSocketStream(url.replace(/^http/, "ws"), { WebSocket: LoggedWebSocket });
  return { stream, closed: () => bounded(socketClosed, "the WebSocket to close"), socket: () => socket };
}

// A client app recording what the agent sends it: updates, permission requests, file writes.
function recordingClient() {
  const seen = { updates: [], permissions: [], writes: {} };
  const app = client({ name: "acp-green-ts-remote-interop" })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      seen.permissions.push(params.toolCall.title ?? params.toolCall.toolCallId);
      const allow = params.options.find((o) => o.kind.startsWith("allow"));
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
      seen.writes[params.path] = params.content;
      return {};
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      seen.updates.push(params);
    });
  const history = (sid) => seen.updates.filter((n) => n.sessionId === sid && HISTORY.has(n.update.sessionUpdate)).map((n) => n.update);
  const chunks = (sid, from = 0) =>
    seen.updates.slice(from).filter((n) => n.sessionId === sid && n.update.sessionUpdate === "agent_message_chunk")
      .map((n) => n.update.content.text);
  return { app, seen, history, chunks };
}

const initializeParams = {
  protocolVersion: 1,
  clientCapabilities: { fs: { readTextFile: false, writeTextFile: true } },
  clientInfo: { name: "ts-remote-interop", version: "1.0.0" },
};

const report = { kind, complaints, transportLog };
try {
  // -- the first connection: a conversation ----------------------------------------------------
  const first = recordingClient();
  const one = openStream();
  const prompts = [];
  let sid;
  report.first = await first.app.connectWith(one.stream, async (ctx) => {
    const out = {};
    const init = await bounded(ctx.request(methods.agent.initialize, initializeParams), "initialize");
    out.protocolVersion = init.protocolVersion;
    out.agentName = init.agentInfo?.name;
    out.loadSession = init.agentCapabilities?.loadSession;
    const session = await bounded(ctx.request(methods.agent.session.new, { cwd: workdir, mcpServers: [] }), "session/new");
    sid = session.sessionId;
    const prompt = (text, what) => {
      prompts.push(text);
      return bounded(ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] }), what);
    };

    let mark = first.seen.updates.length;
    const hello = await prompt(`hello over ${kind}`, "the hello prompt");
    out.hello = { stopReason: hello.stopReason, chunks: first.chunks(sid, mark) };
    mark = first.seen.updates.length;
    const streamed = await prompt("/stream 20 16", "the streamed prompt");
    out.stream = { stopReason: streamed.stopReason, chunks: first.chunks(sid, mark) };

    // The SDK writes one message at a time (an HTTP POST is answered before the next is sent):
    // the cancel reaches the agent after the prompt it cancels.
    const waiting = prompt("/wait", "the cancelled prompt's answer");
    await bounded(ctx.notify(methods.agent.session.cancel, { sessionId: sid }), "session/cancel to be sent");
    out.cancel = { stopReason: (await waiting).stopReason };

    const path = `${workdir}/from-ts-${kind}.txt`;
    const wrote = await prompt(`/write ${path} written over ${kind}`, "the prompt asking permission");
    out.write = { stopReason: wrote.stopReason, permissions: first.seen.permissions, writes: first.seen.writes, path };
    out.toolStatuses = first.history(sid).filter((u) => u.sessionUpdate.startsWith("tool_call")).map((u) => u.status);
    return out;
  });
  report.first.closed = await one.closed();
  report.sessionId = sid;
  report.prompts = prompts;
  report.live = first.history(sid);

  // -- the second connection: the session loaded, then prompted ---------------------------------
  const second = recordingClient();
  const two = openStream();
  report.second = await second.app.connectWith(two.stream, async (ctx) => {
    const out = { refusals: [] };
    await bounded(ctx.request(methods.agent.initialize, initializeParams), "initialize");
    // A disconnect reaches the server after the client's close (a DELETE is answered 202,
    // Accepted; a socket's end is read later): while the session is still held, load again.
    const deadline = Date.now() + BOUND_MS;
    for (;;) {
      try {
        await bounded(ctx.request(methods.agent.session.load, { sessionId: sid, cwd: workdir, mcpServers: [] }), "session/load");
        break;
      } catch (error) {
        const inUse = error?.data?.reason === "session_in_use" || error?.data?.status === 409;
        if (!inUse || Date.now() > deadline) throw error;
        out.refusals.push({ code: error.code, data: error.data });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const agentSide = report.live.filter((u) => u.sessionUpdate !== "user_message_chunk").length;
    await waitFor(() => second.history(sid).length >= prompts.length + agentSide, "the replayed history");
    out.replay = second.history(sid);
    const mark = second.seen.updates.length;
    const after = await bounded(ctx.request(methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "still here" }] }),
      "a prompt after the load");
    out.after = { stopReason: after.stopReason, chunks: second.chunks(sid, mark) };
    return out;
  });
  report.second.closed = await two.closed();
} catch (error) {
  process.stderr.write(`${error?.stack ?? error}\nerror data: ${JSON.stringify(error?.data)}\ntransport: ${JSON.stringify(transportLog)}\n`);
  process.exit(1);
}
process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(0));
