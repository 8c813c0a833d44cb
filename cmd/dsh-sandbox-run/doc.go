// Command dsh-sandbox-run runs a command confined by a dsh-sandbox mode.
//
//	dsh-sandbox-run [--mode read-only|workspace-write|danger-full-access] [--workspace DIR]
//	                [--allow-write DIR]... [--protect PATH]... [--network]
//	                [--report FILE] [--quiet] -- COMMAND [ARG...]
//	dsh-sandbox-run --probe [--json]
//
// It exits with the command's status, 128+N when the command died of signal
// N, and 125 (with one stderr line saying why) when the sandbox could not be
// set up, in which case the command never ran. See the README for the report
// and probe JSON formats.
package main
