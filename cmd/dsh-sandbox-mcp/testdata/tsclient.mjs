// A real MCP client nobody here wrote: the TypeScript SDK, driving the
// dsh-sandbox-mcp binary over stdio. Run by TestTypeScriptClient; it prints
// one JSON object with everything the server answered, and the Go test
// checks it.
//
//   node tsclient.mjs SPEC_JSON
//
// SPEC_JSON: {"command": argv of the server, "cwd": DIR, "env": {...},
//             "outside": a directory outside the workspace}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(process.argv[2]);
const out = { elicits: [], logs: [], calls: {} };
let answer = "accept";

const client = new Client(
  { name: "ts-sdk-client", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  out.elicits.push({ message: req.params.message, answer });
  return answer === "accept" ? { action: "accept", content: {} } : { action: answer };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  out.logs.push(n.params);
});

const transport = new StdioClientTransport({
  command: spec.command[0],
  args: spec.command.slice(1),
  cwd: spec.cwd,
  env: spec.env,
  stderr: "inherit",
});
await client.connect(transport);
out.serverVersion = client.getServerVersion();
out.instructions = client.getInstructions();
await client.setLoggingLevel("info");

const tools = await client.listTools();
out.tools = tools.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));

const bash = (args) => client.callTool({ name: "bash", arguments: { description: "Run a test command", ...args } });
const call = async (key, name, args) => {
  const r = await client.callTool({ name, arguments: args });
  out.calls[key] = { isError: r.isError === true, texts: r.content.map((c) => c.text) };
};

out.calls.run = await bash({ command: "echo hello from ts; pwd" });
out.calls.invalid = await bash({ command: "" });
const target = spec.outside + "/ts-escalated";
out.calls.denied = await bash({ command: `echo x > ${target}` });
answer = "accept";
out.calls.accepted = await bash({
  command: `echo x > ${target}`,
  sandbox_permissions: "danger-full-access",
  justification: "The test asks for a file outside the workspace.",
});
answer = "decline";
out.calls.declined = await bash({
  command: `echo y > ${spec.outside}/ts-declined`,
  sandbox_permissions: "danger-full-access",
  justification: "The test asks for a second file outside the workspace.",
});
out.calls.background = await bash({ command: "echo from-background", run_in_background: true });
const id = out.calls.background.content[0].text.replace("started background task ", "");
await call("output", "task_output", { task_id: id, wait: true });
out.calls.long = await bash({ command: "exec sleep 60", run_in_background: true });
const long = out.calls.long.content[0].text.replace("started background task ", "");
await call("list", "task_list", {});
await call("kill", "task_kill", { task_id: long });
await call("killed", "task_output", { task_id: long, wait: true });

for (const k of ["run", "invalid", "denied", "accepted", "declined", "background", "long"]) {
  const r = out.calls[k];
  out.calls[k] = { isError: r.isError === true, texts: r.content.map((c) => c.text) };
}
await client.close();
console.log(JSON.stringify(out));
