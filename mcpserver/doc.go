// Package mcpserver exposes the sandboxed bash tool and the background task
// tools (packages tool and tasks) as a Model Context Protocol server, on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk/mcp).
//
// [New] builds one sandbox executor, one task runtime and the tools bash,
// task_output, task_list and task_kill (bash alone with
// [Options.DisableBackground]), and
// returns a [Server] whose [Server.MCP] can be run over any MCP transport
// (stdio, streamable HTTP, in-memory) and serve many client sessions at
// once. Each tool keeps exactly its own name, description and JSON schema
// (the MCP inputSchema), and a call's result text is exactly the tool's
// text: an error result (call.Result.IsError) is an MCP result with isError
// set.
//
// # Sessions
//
// Every MCP session is one agent session (call.Agent): the server gives it
// an id of its own (random, never the transport's session id, which a
// streamable HTTP client uses as a credential), so background tasks belong
// to the MCP session that started them (another session gets "task <id>
// belongs to another session") and per-session modes (tool.SessionModes)
// follow it. Its workspace is [Options.Workspace] when set, else the
// client's first file:// root (read at the session's first call, and again
// after notifications/roots/list_changed), else the executor's workspace.
// When a session ends its live tasks are killed.
//
// # Escalation
//
// An escalation (sandbox_permissions) is asked through MCP elicitation,
// form mode, to the session that made the call: the message names the
// command, the workdir, the current and requested modes and the
// justification. accept allows the one call (tool.AllowedOnce), decline
// rejects it (tool.Rejected), cancel cancels it (tool.Cancelled); a client
// that did not declare the elicitation capability, or a failed
// elicitation, makes the approval unavailable (tool.Unavailable). Nothing is
// ever approved without the client's answer.
//
// Server-initiated elicitation is forbidden from MCP protocol version
// 2026-07-28 on (requests must be embedded in multi round-trip results
// instead), so the server negotiates 2025-11-25 at most.
//
// # Notices
//
// The completion notice of a background task ("background task <id> …
// finished …") goes to the owning session as a notifications/message
// logging notification (level notice, logger "dsh-sandbox"; clients receive
// it once they set a logging level) and is also added, as an extra text
// content block after the tool's own text, to that session's next tool
// result, so that the model sees it in clients that show logs only to the
// user.
package mcpserver
