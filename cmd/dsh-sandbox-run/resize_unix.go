//go:build unix

package main

import "syscall"

// sigResize is a terminal's resize, passed on to the command (see stopper).
const sigResize = syscall.SIGWINCH
