package sandbox

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFactLogCaps: past MaxDenials distinct denials new ones are only
// counted, while the kept ones still count their repeats.
func TestFactLogCaps(t *testing.T) {
	l := newFactLog()
	for i := 0; i < MaxDenials+250; i++ {
		l.add(Denial{Op: "write", Path: fmt.Sprintf("/d/%d", i), Syscall: "openat", Errno: "EACCES"})
	}
	l.add(Denial{Op: "write", Path: "/d/0", Syscall: "openat", Errno: "EACCES"})
	l.add(Denial{Op: "write", Path: fmt.Sprintf("/d/%d", MaxDenials+3), Syscall: "openat", Errno: "EACCES"})
	got := l.list()
	assert.Len(t, got, MaxDenials)
	assert.Equal(t, "/d/0", got[0].Path, "first seen are kept")
	assert.Equal(t, 2, got[0].Count, "a kept denial still counts")
	assert.Equal(t, fmt.Sprintf("/d/%d", MaxDenials-1), got[MaxDenials-1].Path)
	assert.Equal(t, 251, l.droppedCount(), "every denied call beyond the cap is counted")
}
