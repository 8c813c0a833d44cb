//go:build linux

// Command rawcmd runs a command under a hand-built policy with sandbox.Cmd,
// so that the integration suite can check on the real kernel that Start
// refuses an inconsistent policy. It is its own sandbox runner.
//
//	rawcmd POLICY-JSON COMMAND [ARG...]
//
// POLICY-JSON is a modes.Policy. It exits with the command's status, or
// prints "setup error: <detail>" and exits 125 when Start refused.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rawcmd POLICY-JSON COMMAND [ARG...]")
		os.Exit(2)
	}
	var p modes.Policy
	if err := json.Unmarshal([]byte(os.Args[1]), &p); err != nil {
		fmt.Fprintln(os.Stderr, "bad policy:", err)
		os.Exit(2)
	}
	cmd := &sandbox.Cmd{Policy: p, Args: os.Args[2:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	res, err := cmd.Run()
	var se *sandbox.SetupError
	switch {
	case errors.As(err, &se):
		fmt.Fprintln(os.Stderr, "setup error:", se.Detail)
		os.Exit(125)
	case err != nil:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(126)
	}
	os.Exit(res.ExitCode)
}
