//go:build linux

package main

// headroom_linux.c wraps pthread_create for this binary's link, so that the
// Go runtime running out of threads ends the CLI with one line and exit 125
// instead of a crash dump.

// #cgo LDFLAGS: -Wl,--wrap=pthread_create
import "C"
