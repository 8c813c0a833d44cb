//go:build !unix

package main

import "syscall"

// sigResize stands for a terminal's resize, which never arrives here, where
// the sandbox refuses every command anyway (sandbox.ErrUnsupported). 28 is
// SIGWINCH's number on Linux; syscall.Signal(28) is no signal on Windows.
const sigResize = syscall.Signal(28)
