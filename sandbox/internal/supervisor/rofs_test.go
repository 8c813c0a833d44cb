//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestOutsideRoots: a path is outside the writable roots unless it is one
// of them or lies beneath one (a protected path inside a root is inside);
// a sibling sharing a root's prefix is outside.
func TestOutsideRoots(t *testing.T) {
	pol := modes.Policy{
		WritableRoots: []string{"/w", "/tmp", "/home/u/.cache/go-build"},
		Protected:     []string{"/w/.envrc"},
	}
	for _, tc := range []struct {
		p    string
		want bool
	}{
		{"/w", false},
		{"/w/a/b", false},
		{"/w/.envrc", false},
		{"/w/", false},
		{"/wx", true},
		{"/w.bak/x", true},
		{"/tmp", false},
		{"/tmp/x", false},
		{"/tmpx", true},
		{"/home/u/.cache", true},
		{"/home/u/.cache/go-build", false},
		{"/home/u/.cache/go-build/ab/cd", false},
		{"/home/u/.cache/go-buildx", true},
		{"/", true},
		{"/etc/passwd", true},
		{"", true},
	} {
		assert.Equal(t, tc.want, outsideRoots(pol, tc.p), tc.p)
	}
	// The root directory as a root holds every absolute path; no roots,
	// none.
	all := modes.Policy{WritableRoots: []string{"/"}}
	assert.False(t, outsideRoots(all, "/"))
	assert.False(t, outsideRoots(all, "/etc/passwd"))
	assert.True(t, outsideRoots(modes.Policy{}, "/w"))
}
