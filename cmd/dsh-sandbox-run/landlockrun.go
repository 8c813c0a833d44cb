package main

// The landlock-run drop-in: invoked as "landlock-run" (a symlink to this
// binary), dsh-sandbox-run speaks the CLI contract of the upstream harness's
// Landlock launcher byte for byte (docs/policy.md, "The `landlock-run` drop-in")
// and maps its grants onto a dsh-sandbox policy. This file holds the parts
// that do not touch the kernel: the argv parser, the messages and the
// mapping of grants onto modes.Options.

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

const (
	// llName is the argv[0] basename that selects the drop-in.
	llName = "landlock-run"
	// llExit is the exit status of every launcher failure.
	llExit = 125
	// llFullABI is the newest Landlock ABI upstream knows: below it,
	// upstream says its enforcement is partial.
	llFullABI = 5

	llMsgMissing     = "usage error: missing `-- <argv>...` command"
	llMsgProbeArgs   = "usage error: --probe takes no other arguments"
	llMsgNotEnforced = "landlock is not enforced by this kernel (ABI unsupported or disabled)"
	llMsgPartial     = "partial enforcement (older Landlock ABI)"
	llProbeFull      = "landlock: fully enforced"
	llProbePartial   = "landlock: partially enforced (older ABI)"

	// The environment variables the drop-in reads (and passes on to the
	// command unchanged, like everything else).
	llEnvNetwork = "DSH_SANDBOX_NETWORK"      // "off": no network ("on" or unset: all of it)
	llEnvReport  = "DSH_SANDBOX_REPORT"       // write dsh-sandbox-run's JSON report there
	llEnvABI     = "DSH_SANDBOX_LANDLOCK_ABI" // cap the Landlock ABI, as --landlock-abi
)

// llGrant is one --ro or --rw argument, in argv order.
type llGrant struct {
	write bool   // --rw
	arg   string // the path as given
}

// llArgs is a parsed landlock-run command line.
type llArgs struct {
	probe  bool
	grants []llGrant
	argv   []string // the command, after "--"
}

// parseLandlockRun parses argv (without the program name) left to right,
// as upstream does: the first offending argument decides the message. A
// path argument is taken whatever it looks like ("--ro --" grants "--").
func parseLandlockRun(argv []string) (llArgs, error) {
	var a llArgs
	for i := 0; i < len(argv); i++ {
		switch s := argv[i]; s {
		case "--probe":
			if len(argv) != 1 {
				return llArgs{}, errors.New(llMsgProbeArgs)
			}
			return llArgs{probe: true}, nil
		case "--ro", "--rw":
			if i+1 == len(argv) {
				return llArgs{}, fmt.Errorf("usage error: %s requires a path", s)
			}
			i++
			a.grants = append(a.grants, llGrant{write: s == "--rw", arg: argv[i]})
		case "--":
			if i+1 == len(argv) {
				return llArgs{}, errors.New(llMsgMissing)
			}
			a.argv = argv[i+1:]
			return a, nil
		default:
			return llArgs{}, fmt.Errorf("usage error: unknown argument: %s", s)
		}
	}
	return llArgs{}, errors.New(llMsgMissing)
}

// llResolved is a grant whose path was opened: path is what the opened
// file is (absolute, symlinks resolved), dir whether it is a directory.
type llResolved struct {
	llGrant
	path string
	dir  bool
}

// llOptions maps resolved grants onto a dsh-sandbox policy request. cwd is
// the canonical working directory, tmpDir the canonical $TMPDIR ("" when
// unset). Reads must cover "/" (dsh-sandbox has no read allow-list: a
// narrower read profile is refused rather than run wider). Writable
// directories become the writable roots of workspace-write — the one
// containing cwd (the deepest) is the workspace, else the first that is
// not a temp area — and the device sinks and terminals, writable in every
// confined mode, need nothing; no writable directory: read-only. A
// writable file other than those is refused (no file-granular roots). The
// grants are the caller's explicit choice, so a grant of / or of a home
// directory is honoured (AllowBroadWorkspace).
func llOptions(grants []llResolved, cwd, tmpDir string) (modes.Options, error) {
	readsAll := false
	var dirs []string
	for _, g := range grants {
		if g.path == "/" {
			readsAll = true
		}
		if !g.write || (modes.Policy{}).IsDevice(g.path) {
			continue
		}
		if !g.dir {
			return modes.Options{}, fmt.Errorf("unsupported grant: --rw %s: not a directory (only directories and /dev/null can be granted writable here)", g.arg)
		}
		seen := false
		for _, d := range dirs {
			seen = seen || d == g.path
		}
		if !seen {
			dirs = append(dirs, g.path)
		}
	}
	if !readsAll {
		return modes.Options{}, errors.New("unsupported grant: reads limited to the --ro paths are not supported (give --ro /)")
	}
	if len(dirs) == 0 {
		return modes.Options{Mode: modes.ReadOnly, Workspace: cwd}, nil
	}
	ws := -1
	for i, d := range dirs {
		if modes.Within(cwd, d) && (ws < 0 || len(d) > len(dirs[ws])) {
			ws = i
		}
	}
	for i := 0; ws < 0 && i < len(dirs); i++ {
		if dirs[i] != "/tmp" && dirs[i] != tmpDir {
			ws = i
		}
	}
	if ws < 0 {
		ws = 0
	}
	o := modes.Options{Mode: modes.WorkspaceWrite, Workspace: dirs[ws], AllowBroadWorkspace: true}
	for i, d := range dirs {
		if i != ws {
			o.AllowWrite = append(o.AllowWrite, d)
		}
	}
	return o, nil
}

// llNetwork reads DSH_SANDBOX_NETWORK: upstream leaves the network open,
// so does the drop-in unless it is "off".
func llNetwork(v string) (bool, error) {
	switch v {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%s must be on or off, got %q", llEnvNetwork, v)
}

// llABICap reads DSH_SANDBOX_LANDLOCK_ABI (0: the kernel's).
func llABICap(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a Landlock ABI version (1 or more), got %q", llEnvABI, v)
	}
	return n, nil
}

// llProbeLine is what --probe prints for a host whose sandbox confines:
// "fully" when Landlock runs at upstream's newest ABI or later, "partially"
// when it runs at an older one or not at all (the mount view and seccomp
// confine then).
func llProbeLine(landlockABI int) string {
	if landlockABI >= llFullABI {
		return llProbeFull
	}
	return llProbePartial
}
