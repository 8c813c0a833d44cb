package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestParseLandlockRun(t *testing.T) {
	ro := func(p string) llGrant { return llGrant{arg: p} }
	rw := func(p string) llGrant { return llGrant{write: true, arg: p} }
	for _, tc := range []struct {
		name string
		argv []string
		want llArgs
		err  string // the exact message, when refused
	}{
		{"upstream read-only profile", []string{"--ro", "/", "--rw", "/dev/null", "--", "bash", "-c", "x"},
			llArgs{grants: []llGrant{ro("/"), rw("/dev/null")}, argv: []string{"bash", "-c", "x"}}, ""},
		{"upstream workspace-write profile", []string{"--ro", "/", "--rw", "/dev/null", "--rw", "/tmp", "--rw", "/w", "--", "true"},
			llArgs{grants: []llGrant{ro("/"), rw("/dev/null"), rw("/tmp"), rw("/w")}, argv: []string{"true"}}, ""},
		{"grants in any order", []string{"--rw", "/w", "--ro", "/", "--", "true"},
			llArgs{grants: []llGrant{rw("/w"), ro("/")}, argv: []string{"true"}}, ""},
		{"no grants", []string{"--", "true"}, llArgs{argv: []string{"true"}}, ""},
		{"everything after -- is the command's", []string{"--", "x", "--probe", "--ro", "--"},
			llArgs{argv: []string{"x", "--probe", "--ro", "--"}}, ""},
		{"a path is taken whatever it looks like", []string{"--ro", "--", "--rw", "--probe", "--", "true"},
			llArgs{grants: []llGrant{ro("--"), rw("--probe")}, argv: []string{"true"}}, ""},
		{"probe", []string{"--probe"}, llArgs{probe: true}, ""},
		{"probe with more", []string{"--probe", "--ro", "/"}, llArgs{}, "usage error: --probe takes no other arguments"},
		{"probe after a grant", []string{"--ro", "/", "--probe"}, llArgs{}, "usage error: --probe takes no other arguments"},
		{"probe with a command", []string{"--probe", "--", "true"}, llArgs{}, "usage error: --probe takes no other arguments"},
		{"an unknown argument before --probe wins", []string{"-v", "--probe"}, llArgs{}, "usage error: unknown argument: -v"},
		{"--ro last", []string{"--ro"}, llArgs{}, "usage error: --ro requires a path"},
		{"--rw last", []string{"--ro", "/", "--rw"}, llArgs{}, "usage error: --rw requires a path"},
		{"unknown argument", []string{"--ro", "/", "--network", "--", "true"}, llArgs{}, "usage error: unknown argument: --network"},
		{"command without --", []string{"--ro", "/", "true"}, llArgs{}, "usage error: unknown argument: true"},
		{"empty argument", []string{""}, llArgs{}, "usage error: unknown argument: "},
		{"nothing", nil, llArgs{}, "usage error: missing `-- <argv>...` command"},
		{"no --", []string{"--ro", "/"}, llArgs{}, "usage error: missing `-- <argv>...` command"},
		{"nothing after --", []string{"--ro", "/", "--"}, llArgs{}, "usage error: missing `-- <argv>...` command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLandlockRun(tc.argv)
			if tc.err != "" {
				require.Error(t, err)
				assert.Equal(t, tc.err, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLLOptions(t *testing.T) {
	dir := func(write bool, p string) llResolved {
		return llResolved{llGrant: llGrant{write: write, arg: p}, path: p, dir: true}
	}
	file := func(write bool, p string) llResolved {
		return llResolved{llGrant: llGrant{write: write, arg: p}, path: p}
	}
	root, null := dir(false, "/"), file(true, "/dev/null")
	for _, tc := range []struct {
		name   string
		grants []llResolved
		cwd    string
		tmp    string
		want   modes.Options
		err    string
	}{
		{"read-only profile", []llResolved{root, null}, "/w", "",
			modes.Options{Mode: modes.ReadOnly, Workspace: "/w"}, ""},
		{"read-only without /dev/null", []llResolved{root}, "/w", "",
			modes.Options{Mode: modes.ReadOnly, Workspace: "/w"}, ""},
		{"the other sinks and terminals need nothing", []llResolved{root, file(true, "/dev/zero"), file(true, "/dev/tty"), dir(true, "/dev/pts")}, "/w", "",
			modes.Options{Mode: modes.ReadOnly, Workspace: "/w"}, ""},
		{"workspace-write profile, cwd in the root", []llResolved{root, null, dir(true, "/tmp"), dir(true, "/w")}, "/w/sub", "",
			modes.Options{Mode: modes.WorkspaceWrite, Workspace: "/w", AllowWrite: []string{"/tmp"}, AllowBroadWorkspace: true}, ""},
		{"cwd elsewhere: the first that is no temp area", []llResolved{root, null, dir(true, "/tmp"), dir(true, "/var/tmp"), dir(true, "/w")}, "/", "/var/tmp",
			modes.Options{Mode: modes.WorkspaceWrite, Workspace: "/w", AllowWrite: []string{"/tmp", "/var/tmp"}, AllowBroadWorkspace: true}, ""},
		{"the deepest root containing cwd", []llResolved{root, dir(true, "/tmp"), dir(true, "/tmp/w")}, "/tmp/w/x", "",
			modes.Options{Mode: modes.WorkspaceWrite, Workspace: "/tmp/w", AllowWrite: []string{"/tmp"}, AllowBroadWorkspace: true}, ""},
		{"only temp areas", []llResolved{root, dir(true, "/tmp")}, "/", "",
			modes.Options{Mode: modes.WorkspaceWrite, Workspace: "/tmp", AllowBroadWorkspace: true}, ""},
		{"duplicates once", []llResolved{root, dir(true, "/w"), dir(true, "/w")}, "/", "",
			modes.Options{Mode: modes.WorkspaceWrite, Workspace: "/w", AllowBroadWorkspace: true}, ""},
		{"--rw / reads and writes everything", []llResolved{dir(true, "/")}, "/w", "",
			modes.Options{Mode: modes.WorkspaceWrite, Workspace: "/", AllowBroadWorkspace: true}, ""},
		{"redundant --ro", []llResolved{root, dir(false, "/usr"), file(false, "/etc/passwd")}, "/w", "",
			modes.Options{Mode: modes.ReadOnly, Workspace: "/w"}, ""},
		{"narrower reads", []llResolved{dir(false, "/usr"), null}, "/w", "", modes.Options{},
			"unsupported grant: reads limited to the --ro paths are not supported (give --ro /)"},
		{"no reads at all", []llResolved{null}, "/w", "", modes.Options{},
			"unsupported grant: reads limited to the --ro paths are not supported (give --ro /)"},
		{"a writable file", []llResolved{root, file(true, "/w/f")}, "/w", "", modes.Options{},
			"unsupported grant: --rw /w/f: not a directory (only directories and /dev/null can be granted writable here)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := llOptions(tc.grants, tc.cwd, tc.tmp)
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLLEnvironment(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
		err  string
	}{
		{"", true, ""}, {"on", true, ""}, {"off", false, ""},
		{"0", false, `DSH_SANDBOX_NETWORK must be on or off, got "0"`},
		{"OFF", false, `DSH_SANDBOX_NETWORK must be on or off, got "OFF"`},
	} {
		got, err := llNetwork(tc.v)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.v)
			continue
		}
		require.NoError(t, err, tc.v)
		assert.Equal(t, tc.want, got, tc.v)
	}
	for _, tc := range []struct {
		v    string
		want int
		err  string
	}{
		{"", 0, ""}, {"2", 2, ""}, {"5", 5, ""},
		{"0", 0, `DSH_SANDBOX_LANDLOCK_ABI must be a Landlock ABI version (1 or more), got "0"`},
		{"-1", 0, `DSH_SANDBOX_LANDLOCK_ABI must be a Landlock ABI version (1 or more), got "-1"`},
		{"two", 0, `DSH_SANDBOX_LANDLOCK_ABI must be a Landlock ABI version (1 or more), got "two"`},
	} {
		got, err := llABICap(tc.v)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.v)
			continue
		}
		require.NoError(t, err, tc.v)
		assert.Equal(t, tc.want, got, tc.v)
	}
	for abi, want := range map[int]string{0: "landlock: partially enforced (older ABI)", 1: "landlock: partially enforced (older ABI)",
		4: "landlock: partially enforced (older ABI)", 5: "landlock: fully enforced", 7: "landlock: fully enforced"} {
		assert.Equal(t, want, llProbeLine(abi), abi)
	}
}
