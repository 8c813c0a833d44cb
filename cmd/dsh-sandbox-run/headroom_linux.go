//go:build linux

package main

// headroom_linux.c wraps pthread_create for this binary's link, so that the
// Go runtime running out of threads ends the CLI with one line and exit 125
// instead of a crash dump.

// #cgo LDFLAGS: -Wl,--wrap=pthread_create
// void dsh_said_line(int code);
import "C"

// saidLine tells the wrapper that the CLI wrote its one line and ends with
// code: a thread creation that fails from then on ends the process with
// code, silently, rather than adding a second line.
func saidLine(code int) { C.dsh_said_line(C.int(code)) }
