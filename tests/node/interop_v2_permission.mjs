// The TypeScript SDK 2.4.0's draft ACP v2 client answers an agent's permission request (its
// `subject` names the tool call) and reports the states the turn went through, as JSON.
// usage: node interop_v2_permission.mjs WORKDIR -- COMMAND [ARGS...]   (an agent that asks once a prompt)
import { client, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";
import { collectComplaints, launchAgent } from "./agent_process.mjs";

const { workdir, child, exited, input, output } = launchAgent();
const stream = ndJsonStream(input, output);
const complaints = collectComplaints();

const asked = [];
const app = client({ name: "acp-green-ts-v2-permission" }).onRequest("session/request_permission", ({ params }) => {
  asked.push({ title: params.title, subject: params.subject?.type, toolCall: params.subject?.toolCall?.title ?? null });
  const allow = params.options.find((o) => o.kind === "allow_once");
  return { outcome: { outcome: "selected", optionId: allow.optionId } };
});

const report = await app.connectWith(stream, async (agent) => {
  await agent.request("initialize", { protocolVersion: 2, info: { name: "ts-v2", version: "1.0.0" }, capabilities: {} });
  const session = await agent.buildSession(workdir).start();
  await session.prompt("go");
  const states = [];
  let text = "";
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") {
      states.push(`idle:${message.stopReason}`);
      break;
    }
    if (message.update.sessionUpdate === "state_update") states.push(message.update.state);
    if (message.update.sessionUpdate === "agent_message_chunk") text += message.update.content.text;
  }
  session.dispose();
  return { asked, states, text };
});

child.stdin.end();
report.exit = await exited;
report.complaints = complaints;
process.stdout.write(JSON.stringify(report) + "\n");
