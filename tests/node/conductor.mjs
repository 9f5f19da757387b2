// Runs @thinkwell/conductor (an ACP proxy chain, pinned in package-lock.json) with no proxies in
// front of an ACP agent, speaking ACP to its own client on stdin/stdout.
// usage: node conductor.mjs -- COMMAND [ARGS...]
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
process.exit(0);
