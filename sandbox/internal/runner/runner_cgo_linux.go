//go:build linux

package runner

// The runner is C (runner_*_linux.c, runner_linux.h): it runs from an ELF
// constructor before the Go runtime starts. Every binary that links this
// package can therefore serve as its own runner — when it is re-executed as
// "dsh-sandbox-runner" it never reaches main — and a command costs one
// execve of the binary, not a second Go program start.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
// int dsh_kill_tree_signal(void);
import "C"

import "syscall"

// killTreeSignal asks a pid namespace's init to kill its namespace and
// report (runner_linux.h, kill_tree_signal); the C library numbers it.
func killTreeSignal() syscall.Signal { return syscall.Signal(C.dsh_kill_tree_signal()) }
