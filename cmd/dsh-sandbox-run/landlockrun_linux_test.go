//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStrerrorIsGlibcs(t *testing.T) {
	for e, want := range map[syscall.Errno]string{
		syscall.ENOENT:       "No such file or directory",
		syscall.EACCES:       "Permission denied",
		syscall.ENOTDIR:      "Not a directory",
		syscall.ELOOP:        "Too many levels of symbolic links",
		syscall.ENAMETOOLONG: "File name too long",
		syscall.ENOEXEC:      "Exec format error",
	} {
		assert.Equal(t, want, strerror(e), int(e))
	}
}

// TestLandlockRunRefusals: every refusal that happens before anything
// runs is exactly one line and exit 125, nothing on stdout.
func TestLandlockRunRefusals(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		argv []string
		env  []string
		want string
	}{
		{"missing command", []string{"--ro", "/"}, nil, "landlock-run: usage error: missing `-- <argv>...` command\n"},
		{"nothing after --", []string{"--"}, nil, "landlock-run: usage error: missing `-- <argv>...` command\n"},
		{"unknown argument", []string{"--ro", "/", "-x", "--", "true"}, nil, "landlock-run: usage error: unknown argument: -x\n"},
		{"--ro without a path", []string{"--ro"}, nil, "landlock-run: usage error: --ro requires a path\n"},
		{"--rw without a path", []string{"--rw"}, nil, "landlock-run: usage error: --rw requires a path\n"},
		{"probe with more", []string{"--probe", "--ro", "/"}, nil, "landlock-run: usage error: --probe takes no other arguments\n"},
		{"unopenable rule path", []string{"--ro", "/", "--rw", missing, "--", "true"}, nil,
			"landlock-run: cannot open rule path: " + missing + ": No such file or directory\n"},
		{"rule path through a file", []string{"--ro", file + "/x", "--", "true"}, nil,
			"landlock-run: cannot open rule path: " + file + "/x: Not a directory\n"},
		{"narrower reads", []string{"--ro", "/usr", "--rw", "/dev/null", "--", "true"}, nil,
			"landlock-run: unsupported grant: reads limited to the --ro paths are not supported (give --ro /)\n"},
		{"writable file", []string{"--ro", "/", "--rw", file, "--", "true"}, nil,
			"landlock-run: unsupported grant: --rw " + file + ": not a directory (only directories and /dev/null can be granted writable here)\n"},
		{"bad network setting", []string{"--ro", "/", "--", "true"}, []string{"DSH_SANDBOX_NETWORK=no"},
			"landlock-run: DSH_SANDBOX_NETWORK must be on or off, got \"no\"\n"},
		{"bad ABI cap", []string{"--probe"}, []string{"DSH_SANDBOX_LANDLOCK_ABI=0"},
			"landlock-run: DSH_SANDBOX_LANDLOCK_ABI must be a Landlock ABI version (1 or more), got \"0\"\n"},
		{"report through a symlink", []string{"--ro", "/", "--", "true"}, []string{"DSH_SANDBOX_REPORT=" + filepath.Join(dir, "link")},
			"landlock-run: cannot write report: " + filepath.Join(dir, "link") + " is a symlink (refused: give the file it points to)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Symlink(file, filepath.Join(dir, "link")); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := landlockRun(tc.argv, tc.env, &stdout, &stderr)
			assert.Equal(t, 125, code)
			assert.Equal(t, tc.want, stderr.String())
			assert.Empty(t, stdout.String())
		})
	}
}
