//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

type planOp struct {
	src, tgt, fstype string
	flags            uint64
	mode             string
}

func parsePlan(t *testing.T, toks []string) (ops []planOp, checks []string) {
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "m":
			require.Less(t, i+5, len(toks))
			f, err := strconv.ParseUint(toks[i+4], 10, 64)
			require.NoError(t, err)
			ops = append(ops, planOp{toks[i+1], toks[i+2], toks[i+3], f, toks[i+5]})
			i += 5
		case "r":
			f, err := strconv.ParseUint(toks[i+2], 10, 64)
			require.NoError(t, err)
			ops = append(ops, planOp{"", toks[i+1], "", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | f, "skip"})
			i += 2
		case "ro":
			checks = append(checks, toks[i+1])
			i++
		default:
			t.Fatalf("unknown token %q at %d", toks[i], i)
		}
	}
	return ops, checks
}

func TestMountPlan(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "dsh-plan-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	ws := filepath.Join(base, "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755))
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	toks, err := mountPlan(p)
	require.NoError(t, err)
	ops, checks := parsePlan(t, toks)

	require.NotEmpty(t, ops)
	assert.Equal(t, planOp{"", "/", "", unix.MS_REC | unix.MS_PRIVATE, "hard"}, ops[0], "first: nothing propagates out")
	index := func(want planOp) int {
		for i, o := range ops {
			if o == want {
				return i
			}
		}
		return -1
	}
	bindWS := index(planOp{p.Workspace, p.Workspace, "", unix.MS_BIND | unix.MS_REC, "hard"})
	pinGit := index(planOp{p.Workspace + "/.git", p.Workspace + "/.git", "", unix.MS_BIND | unix.MS_REC, "hard"})
	bindHooks := index(planOp{p.Workspace + "/.git/hooks", p.Workspace + "/.git/hooks", "", unix.MS_BIND | unix.MS_REC, "hard"})
	assert.True(t, bindWS > 0 && pinGit > bindWS && bindHooks > pinGit, "workspace, then pinned .git, then hooks: %v", ops)
	require.Greater(t, len(ops), bindHooks+1)
	ro := ops[bindHooks+1]
	assert.Equal(t, p.Workspace+"/.git/hooks", ro.tgt)
	assert.NotZero(t, ro.flags&unix.MS_REMOUNT)
	assert.NotZero(t, ro.flags&unix.MS_RDONLY)

	var sawRoot, sawProc bool
	for _, o := range ops {
		if o.flags&unix.MS_REMOUNT != 0 && o.mode == "skip" {
			assert.Zero(t, o.flags&unix.MS_RDONLY^unix.MS_RDONLY, "%s remounted read-only", o.tgt)
			for _, w := range p.WritableRoots {
				assert.False(t, modes.Within(o.tgt, w), "%s lies in writable root %s", o.tgt, w)
			}
			sawRoot = sawRoot || o.tgt == "/"
		}
		if o.mode == "proc" {
			sawProc = true
			assert.Equal(t, planOp{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "proc"}, o)
		}
	}
	assert.True(t, sawRoot, "/ is remounted read-only")
	assert.True(t, sawProc, "a fresh /proc is planned")
	assert.Contains(t, checks, "/")
	assert.Contains(t, checks, p.Workspace+"/.git/hooks")
	assert.NotContains(t, checks, p.Workspace+"/.git/config", "a missing protected path is not mounted")
}

func TestSpecTokens(t *testing.T) {
	b := specTokens([][2]string{{"confine", "1"}, {"why", "a b"}}, []string{"ro", "/"})
	assert.Equal(t, "dsh1\x00confine\x001\x00why\x00a b\x00ops\x00ro\x00/\x00", string(b))
}

func TestUnescapeMountPath(t *testing.T) {
	assert.Equal(t, "/mnt/a b", unescapeMountPath(`/mnt/a\040b`))
	assert.Equal(t, "/plain", unescapeMountPath("/plain"))
}
