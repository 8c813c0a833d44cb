//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestProbeReadsNoWorkspaceTree: the probe runs `true`, which changes
// nothing, so it audits no git tree: it never opens a directory below the
// workspace (run from /, an audit would read the whole filesystem).
func TestProbeReadsNoWorkspaceTree(t *testing.T) {
	ws := t.TempDir()
	sub := filepath.Join(ws, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(in)
	_, err = unix.InotifyAddWatch(in, sub, unix.IN_OPEN)
	require.NoError(t, err)

	r := ProbeWith(ProbeOptions{Workspace: ws})
	require.NotEqual(t, levelUnavailable, r.Modes["workspace-write"].Enforcement, "%+v", r.Modes["workspace-write"])

	buf := make([]byte, 4096)
	n, err := unix.Read(in, buf)
	require.Equal(t, unix.EAGAIN, err, "the probe opened %s (inotify: %d bytes): it walked the workspace", sub, n)
}
