//go:build !linux

package main

// saidLine: only Linux's link wraps pthread_create (headroom_linux.c).
func saidLine(int) {}
