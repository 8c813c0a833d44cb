//go:build linux

package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Info is what /proc/PID/stat says of a process.
type Info struct {
	PID, PPID int
	State     byte
	TTY       int    // the controlling terminal's device number, 0: none
	Start     uint64 // start time, in clock ticks since boot
}

// ReadStat reads /proc/pid/stat; false when the process is gone or the
// file is not what it should be.
func ReadStat(pid int) (Info, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Info{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Info{}, false
	}
	// After "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime ...
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return Info{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	tty, err2 := strconv.Atoi(f[4])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Info{}, false
	}
	return Info{PID: pid, PPID: ppid, State: f[0][0], TTY: tty, Start: start}, true
}

// Alive reports whether the process of pidfd fd has not exited.
func Alive(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n == 0
}
