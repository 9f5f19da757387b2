// What every node peer here shares: the agent under test, the command after `--`, launched over
// pipes (its stderr passed through), and the complaints the SDK writes with console.error.
// usage in a peer: node PEER.mjs WORKDIR -- COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

// The workdir and the agent, its stdin and stdout as web streams, and a promise of its exit.
export function launchAgent(args = process.argv.slice(2)) {
  const command = args.slice(args.indexOf("--") + 1);
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { workdir: args[0], child, exited, input: Writable.toWeb(child.stdin), output: Readable.toWeb(child.stdout) };
}

// Every later console.error, one string each: the SDK reports a message its schema refused there.
export function collectComplaints() {
  const complaints = [];
  console.error = (...parts) => complaints.push(parts.map((p) => (p instanceof Error ? p.message : typeof p === "object" ? JSON.stringify(p) : String(p))).join(" "));
  return complaints;
}
