// Runs @thinkwell/conductor (an ACP proxy chain, pinned in package-lock.json) with no proxies in
// front of an ACP agent, speaking ACP to its own client on stdin/stdout.
// usage: node conductor.mjs -- COMMAND [ARGS...]
import { readdirSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Conductor, StdioConnector, fromConnectors } from "@thinkwell/conductor";

const args = process.argv.slice(2);
const command = args.slice(args.indexOf("--") + 1);

// The client side: this process's stdin and stdout, one JSON-RPC message per line.
const ownStdio = {
  async connect() {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    return {
      send(message) {
        process.stdout.write(JSON.stringify(message) + "\n");
      },
      messages: {
        async *[Symbol.asyncIterator]() {
          for await (const line of lines) {
            if (line.trim()) yield JSON.parse(line);
          }
        },
      },
      async close() {
        lines.close();
      },
    };
  },
};

const conductor = new Conductor({
  // fromConnectors takes (agent, proxies) in 0.5.7, whatever its README shows.
  instantiator: fromConnectors(new StdioConnector({ command: command[0], args: command.slice(1) }), []),
});
await conductor.connect(ownStdio);
// Exit only once the agent this process started has exited: an agent still shutting down when
// its parent is gone would be an orphan to whoever started us.
const deadline = Date.now() + 10000;
while (liveChildren().length > 0 && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
process.exit(0);

function liveChildren() {
  const found = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(ppid) === process.pid && state !== "Z") found.push(Number(entry));
    } catch {
      // gone between the listing and the read
    }
  }
  return found;
}
