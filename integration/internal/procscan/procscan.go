//go:build linux

// Package procscan finds host processes by their command line, for the
// integration suite and its executor harness (no survivor checks).
package procscan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WithCmdline lists "pid: cmdline" of live processes (not zombies, not this
// process) whose command line contains s.
func WithCmdline(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%d: %q", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return out
}
