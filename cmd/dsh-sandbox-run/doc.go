// Command dsh-sandbox-run runs a command confined by a dsh-sandbox mode.
//
//	dsh-sandbox-run [--mode read-only|workspace-write|danger-full-access] [--workspace DIR]
//	                [--allow-write DIR]... [--protect PATH]... [--unprotect NAME]... [--network]
//	                [--deny-read PATH]... [--allow-read PATH]...
//	                [--allow-broad-workspace] [--timeout MS] [--landlock-abi N]
//	                [--setenv NAME=VALUE]... [--unsetenv NAME]... [--keep-env NAME]... [--clearenv]
//	                [--report FILE] [--quiet] -- COMMAND [ARG...]
//	dsh-sandbox-run --probe [--json] [--landlock-abi N]
//	dsh-sandbox-run --help | --version
//
// COMMAND is only ever taken after "--". It exits with the command's
// status, 128+N when the command died of signal N, and 125 (with one stderr
// line saying why) when the sandbox could not be set up, in which case the
// command never ran. docs/report.md gives the report and probe JSON formats.
package main
