// The TypeScript SDK's client and a bash call longer than its default
// request timeout (60 s). Run by TestTypeScriptClientProgress:
//
//   node tsprogress.mjs SPEC_JSON
//
// SPEC_JSON: {"command": argv of the server, "cwd": DIR, "env": {...},
//             "script": the long command}
// Two calls run at once: one asks for progress (onprogress) and lets it
// reset the timeout (resetTimeoutOnProgress), one does not. It prints one
// JSON object: each call's texts or error, and the progress it received.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const client = new Client({ name: "ts-sdk-progress", version: "1.0.0" });
await client.connect(new StdioClientTransport({
  command: spec.command[0],
  args: spec.command.slice(1),
  cwd: spec.cwd,
  env: spec.env,
  stderr: "inherit",
}));
const out = { progress: [], defaultTimeout: null };
const args = { name: "bash", arguments: { command: spec.script, description: "Run a long test command" } };
const settle = (p) => p.then(
  (r) => ({ texts: r.content.map((c) => c.text), isError: r.isError === true }),
  (e) => ({ error: String(e && e.message || e) }),
);
// No timeout option anywhere: the SDK's default applies to both.
const [withProgress, without] = await Promise.all([
  settle(client.callTool(args, undefined, {
    onprogress: (p) => out.progress.push(p),
    resetTimeoutOnProgress: true,
  })),
  settle(client.callTool(args)),
]);
out.withProgress = withProgress;
out.without = without;
const { DEFAULT_REQUEST_TIMEOUT_MSEC } = await import("@modelcontextprotocol/sdk/shared/protocol.js");
out.defaultTimeout = DEFAULT_REQUEST_TIMEOUT_MSEC;
process.stdout.write(JSON.stringify(out));
await client.close();
