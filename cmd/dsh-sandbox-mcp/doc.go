// Command dsh-sandbox-mcp is an MCP server exposing the sandboxed bash tool
// and the background task tools (bash, task_output, task_list, task_kill)
// to any MCP client.
//
//	dsh-sandbox-mcp [--mode read-only|workspace-write|danger-full-access] [--workspace DIR]
//	                [--allow-write DIR]... [--protect PATH]... [--unprotect NAME]...
//	                [--deny-read PATH]... [--allow-read PATH]... [--network] [--allow-broad-workspace]
//	                [--allow-domain PATTERN]... [--deny-domain PATTERN]... [--allow-host HOST:PORT]...
//	                [--resolve NAME=ADDR[,ADDR]]... [--max-pids N] [--max-memory SIZE] [--max-cpu CORES]
//	                [--no-background] [--http ADDR [--http-allow-remote]]
//	dsh-sandbox-mcp --help | --version
//
// It serves MCP over stdio until stdin ends, or over streamable HTTP at
// http://ADDR/mcp with --http (a loopback ADDR unless --http-allow-remote;
// every request needs "Authorization: Bearer $DSH_MCP_TOKEN"). When the
// variable is unset a token is generated and shown where no sandboxed
// command can read it: on stderr when stderr is a terminal, else in
// ~/.local/state/dsh-sandbox/mcp-PORT.token (mode 0600, one of the secrets
// every confined command has hidden, removed at exit), whose path goes on
// stderr — a log file of the client's, which commands could read, never
// holds the token. On stdin's end, SIGTERM, SIGINT or SIGHUP it kills
// every live task tree and exits 0; a usage or setup error exits 2 with one
// stderr line. The policy flags are dsh-sandbox-run's; escalations are
// asked through MCP elicitation (see package mcpserver and docs/mcp.md).
package main
