package sandbox

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/audit"
)

// A start walk that ran out of descriptors beside the command's start is
// walked once more when the first call waits for it; any other error is
// the walk's answer.
func TestStartWalkWalksAgainOnlyForResources(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first      error
		wantErr    bool
		wantWalks  int
		wantAudits bool
	}{
		{"out of descriptors", fmt.Errorf("audit: /ws: open /ws: %w", unix.EMFILE), false, 2, true},
		{"out of memory", fmt.Errorf("audit: %w", unix.ENOMEM), false, 2, true},
		{"refused", fmt.Errorf("audit: /ws: %w", unix.EACCES), true, 1, false},
		{"no error", nil, false, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			walks := 0
			w := &startWalk{stop: make(chan struct{}), done: make(chan struct{})}
			w.walk = func() ([]*audit.Audit, error) {
				walks++
				if walks == 1 && tc.first != nil {
					return nil, tc.first
				}
				return []*audit.Audit{{}}, nil
			}
			w.audits, w.err = w.walk()
			close(w.done)
			for range 2 { // the first call, then Wait's
				if err := w.wait(); (err != nil) != tc.wantErr {
					t.Fatalf("wait() = %v, want an error: %v", err, tc.wantErr)
				}
			}
			if walks != tc.wantWalks || (len(w.audits) > 0) != tc.wantAudits {
				t.Errorf("%d walks, audits %v; want %d walks, audits %v", walks, w.audits, tc.wantWalks, tc.wantAudits)
			}
			if tc.wantErr && !errors.Is(w.err, unix.EACCES) {
				t.Errorf("err = %v, want the walk's own", w.err)
			}
		})
	}
}

// freeFDs counts what this process may still open: ten more open files
// leave ten fewer.
func TestFreeFDs(t *testing.T) {
	before := freeFDs()
	if before < 10 {
		t.Fatalf("freeFDs() = %d", before)
	}
	var fds []int
	for range 10 {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
	}
	after := freeFDs()
	for _, fd := range fds {
		unix.Close(fd)
	}
	if before-after != 10 {
		t.Errorf("freeFDs() = %d, then %d with ten more open, want %d", before, after, before-10)
	}
}
