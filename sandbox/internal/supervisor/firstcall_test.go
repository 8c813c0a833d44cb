//go:build linux

package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestFirstCallGates: Config.FirstCall (the audit's start walk beside the
// command) runs at the first call that would be let through, and that call
// waits for it: the file it creates does not exist until FirstCall returned.
// A call refused before (a write outside the writable roots) neither waits
// nor counts as a change (MayHaveChanged); the created file does.
func TestFirstCallGates(t *testing.T) {
	ws := workspace(t)
	entered, release := make(chan struct{}), make(chan struct{})
	s, _, n := startRouted(t, ws, []string{"openat"}, true, false, func(n *Notifier) {
		n.firstCall = func() error {
			close(entered)
			<-release
			return nil
		}
	})
	outside := filepath.Join(t.TempDir(), "outside")
	var refused error
	s.do(func() {
		_, refused = unix.Open(outside, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	})
	assert.Error(t, refused, "a write outside the writable roots")
	select {
	case <-entered:
		t.Fatal("a refused call ran FirstCall")
	default:
	}
	assert.False(t, n.MayHaveChanged(), "a refused call changes nothing")

	created := filepath.Join(ws, "created")
	done := make(chan error, 1)
	go s.do(func() {
		fd, err := unix.Open(created, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		done <- err
	})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the create did not run FirstCall")
	}
	_, err := os.Lstat(created)
	assert.ErrorIs(t, err, os.ErrNotExist, "the create ran before FirstCall returned")
	select {
	case err := <-done:
		t.Fatalf("the create returned (%v) before FirstCall did", err)
	default:
	}
	close(release)
	require.NoError(t, <-done)
	assert.FileExists(t, created)
	assert.True(t, n.MayHaveChanged())
}

// TestFirstCallFails: when FirstCall fails, a call that would be let through
// fails with EIO and a fact saying why, and nothing is created.
func TestFirstCallFails(t *testing.T) {
	ws := workspace(t)
	s, log, n := startRouted(t, ws, []string{"openat"}, true, false, func(n *Notifier) {
		n.firstCall = func() error { return errors.New("the workspace vanished") }
	})
	created := filepath.Join(ws, "created")
	var err error
	s.do(func() {
		var fd int
		if fd, err = unix.Open(created, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644); err == nil {
			unix.Close(fd)
		}
	})
	assert.ErrorIs(t, err, unix.EIO)
	assert.NoFileExists(t, created)
	assert.False(t, n.MayHaveChanged())
	// (Recorded once the answer is given: after the call returned.)
	require.Eventually(t, func() bool { return len(log.List()) > 0 }, 10*time.Second, time.Millisecond)
	ds := log.List()
	require.Len(t, ds, 1)
	assert.Equal(t, "EIO", ds[0].Errno)
	assert.Equal(t, "openat", ds[0].Syscall)
	assert.Contains(t, ds[0].Reason, "the workspace vanished")
}

// TestDevTTYWithoutTerminal: an open of /dev/tty by a process without a
// controlling terminal gets the kernel's ENXIO from the supervisor, never
// let through, so it is no change (bash opens it at every start); with a
// terminal it is let through.
func TestDevTTYWithoutTerminal(t *testing.T) {
	stat, err := os.ReadFile("/proc/self/stat")
	require.NoError(t, err)
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	require.Greater(t, len(f), 4)
	noTTY := f[4] == "0"
	ws := workspace(t)
	s, log, n := startRouted(t, ws, []string{"openat"}, true, false)
	s.do(func() {
		var fd int
		if fd, err = unix.Open("/dev/tty", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			unix.Close(fd)
		}
	})
	if noTTY {
		assert.ErrorIs(t, err, unix.ENXIO)
		assert.False(t, n.MayHaveChanged(), "ENXIO from the supervisor: nothing let through")
	} else {
		assert.NoError(t, err)
		assert.True(t, n.MayHaveChanged())
	}
	assert.Empty(t, log.List(), "no fact: the kernel's own answer")
}
