package executor

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestScrubbed(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"PATH", false},
		{"HOME", false},
		{"GITHUB_TOKEN", true},
		{"token", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"MONKEY", true}, // substring match, as upstream
		{"db_password", true},
		{"ClientSecret", true},
		{"DSH_HOME", true},
		{"dsh_session_id", true},
		{"XDSH_FOO", false},
		{"_DSH_SANDBOX_RUNNER", false},
		{"DSHX", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Scrubbed(tt.name), tt.name)
	}
}

func TestChildEnvLayers(t *testing.T) {
	before := os.Environ()
	parent := []string{
		"PATH=/usr/bin",
		"HOME=/home/u",
		"GITHUB_TOKEN=ghp_x",
		"DSH_SESSION_ID=parent",
		"TERM=xterm-256color",
		"PAGER=less",
		"KEEP=1",
		"NOEQUALS",
		"=bad",
	}
	got := ChildEnv(parent,
		map[string]string{"KEEP": "2", "GIT_PAGER": "delta", "EXTRA": "e"},
		map[string]string{"DSH_SESSION_ID": "s1", "KEEP": "3"})
	assert.Equal(t, []string{
		"DSH_SESSION_ID=s1", // managed, set last
		"EXTRA=e",
		"GIT_PAGER=delta", // trusted env over the defaults
		"HOME=/home/u",
		"KEEP=3", // managed over trusted over parent
		"NO_COLOR=1",
		"PAGER=cat", // defaults over the parent
		"PATH=/usr/bin",
		"TERM=dumb",
	}, got)
	assert.Equal(t, before, os.Environ(), "the process environment is never touched")
}

func TestChildEnvEmpty(t *testing.T) {
	assert.Equal(t, []string{"GIT_PAGER=cat", "NO_COLOR=1", "PAGER=cat", "TERM=dumb"}, ChildEnv(nil, nil, nil))
}
