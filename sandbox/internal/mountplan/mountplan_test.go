//go:build linux

package mountplan

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

type planOp struct {
	src, tgt, fstype string
	flags            uint64
	mode             string
}

type planRule struct {
	path   string
	access uint64
}

func parsePlan(t *testing.T, toks []string) (ops []planOp, checks []string) {
	ops, checks, _, _ = parsePlanAll(t, toks)
	return ops, checks
}

// parsePlanAll also returns the mount data of "md" steps (by target) and the
// Landlock rules of "l" steps.
func parsePlanAll(t *testing.T, toks []string) (ops []planOp, checks []string, data map[string]string, rules []planRule) {
	data = map[string]string{}
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "m", "md":
			md := 0
			if toks[i] == "md" {
				md = 1
			}
			require.Less(t, i+5+md, len(toks))
			f, err := strconv.ParseUint(toks[i+4], 10, 64)
			require.NoError(t, err)
			ops = append(ops, planOp{toks[i+1], toks[i+2], toks[i+3], f, toks[i+5]})
			if md == 1 {
				data[toks[i+2]] = toks[i+6]
			}
			i += 5 + md
		case "l":
			a, err := strconv.ParseUint(toks[i+2], 10, 64)
			require.NoError(t, err)
			rules = append(rules, planRule{toks[i+1], a})
			i += 2
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
	return ops, checks, data, rules
}

func TestMountPlan(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "dsh-plan-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	ws := filepath.Join(base, "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755))
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	toks, err := Plan(p, landlock.MountAccess{}, Masks(p), nil, nil, nil)
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
		if o.flags&unix.MS_REMOUNT != 0 && o.mode == "skip" && o.flags&unix.MS_RDONLY == 0 {
			// A mount inside a writable root: only made nodev.
			assert.NotZero(t, o.flags&unix.MS_NODEV, "%s", o.tgt)
			assert.NotEmpty(t, RootOf(p.WritableRoots, o.tgt), "%s made nodev only, outside the roots", o.tgt)
			continue
		}
		if o.flags&unix.MS_REMOUNT != 0 && o.mode == "skip" {
			assert.NotZero(t, o.flags&unix.MS_NODEV, "%s remounted nodev", o.tgt)
			assert.Zero(t, o.flags&unix.MS_RDONLY^unix.MS_RDONLY, "%s remounted read-only", o.tgt)
			if root := RootOf(p.WritableRoots, o.tgt); root != "" {
				// Inside a writable root only a mount the host made
				// read-only stays so (a clone bound read-only into /tmp).
				assert.NotZero(t, rdonlyFlag(o.tgt), "%s lies in writable root %s and was made read-only", o.tgt, root)
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

func TestUnescapeMountPath(t *testing.T) {
	assert.Equal(t, "/mnt/a b", unescapeMountPath(`/mnt/a\040b`))
	assert.Equal(t, "/plain", unescapeMountPath("/plain"))
}

// TestMountPlanDevicesAndProc: the plan keeps only the sinks, the random
// devices and /dev/tty openable (bound before every other mount becomes
// nodev), covers the host's devpts with a fresh instance whose ptmx replaces
// /dev/ptmx, grants Landlock access on what it mounts, and binds every global
// /proc entry read-only after the fresh /proc, checking each.
func TestMountPlanDevicesAndProc(t *testing.T) {
	ws := t.TempDir()
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	ll := landlock.MountAccessOf(7)
	toks, err := Plan(p, ll, Masks(p), nil, nil, nil)
	require.NoError(t, err)
	ops, checks, data, rules := parsePlanAll(t, toks)
	index := func(match func(planOp) bool) int { return slices.IndexFunc(ops, match) }
	firstNodev := index(func(o planOp) bool { return o.mode == "skip" && o.flags&unix.MS_RDONLY != 0 })
	require.Positive(t, firstNodev)
	assert.NotZero(t, ops[firstNodev].flags&unix.MS_NODEV)
	for _, d := range openableDevices() {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		bind := index(func(o planOp) bool { return o.src == d && o.tgt == d && o.flags == unix.MS_BIND })
		require.NotEqual(t, -1, bind, "%s is bound onto itself", d)
		assert.Less(t, bind, firstNodev, "%s is bound before the mounts become nodev", d)
		ro := ops[bind+1]
		assert.Equal(t, d, ro.tgt)
		assert.NotZero(t, ro.flags&unix.MS_RDONLY, "%s read-only", d)
		assert.Zero(t, ro.flags&unix.MS_NODEV, "%s stays openable", d)
	}
	for _, w := range p.WritableRoots {
		i := index(func(o planOp) bool { return o.tgt == w && o.flags&unix.MS_REMOUNT != 0 })
		require.NotEqual(t, -1, i, "writable root %s remounted", w)
		assert.NotZero(t, ops[i].flags&unix.MS_NODEV, "writable root %s is nodev", w)
		assert.Zero(t, ops[i].flags&unix.MS_RDONLY&^uint64(rdonlyFlag(w)), "writable root %s stays writable", w)
	}

	devpts := index(func(o planOp) bool { return o.fstype == "devpts" })
	require.NotEqual(t, -1, devpts, "a fresh devpts is planned")
	assert.Equal(t, planOp{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "hard"}, ops[devpts])
	assert.Contains(t, data["/dev/pts"], "newinstance")
	assert.Contains(t, data["/dev/pts"], "ptmxmode=0666")
	hostPts := index(func(o planOp) bool { return o.tgt == "/dev/pts" && o.mode == "skip" })
	assert.True(t, hostPts >= 0 && hostPts < devpts, "the host's devpts is made nodev before it is covered")
	assert.Equal(t, planOp{"/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, "hard"}, ops[devpts+1])
	assert.Contains(t, rules, planRule{"/dev/pts", ll.Pty})
	assert.Contains(t, rules, planRule{"/dev/ptmx", ll.Pty &^ unix.LANDLOCK_ACCESS_FS_READ_DIR})
	assert.Contains(t, rules, planRule{"/proc", ll.Read})

	proc := index(func(o planOp) bool { return o.mode == "proc" })
	require.Greater(t, proc, devpts)
	globals := procGlobals()
	for _, g := range []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if _, err := os.Stat(g); err == nil {
			assert.Contains(t, globals, g)
		}
	}
	// The instance is read-only while its global entries are bound (a
	// bind takes its mount's flags), then writable again (read-only where
	// the host's /proc is).
	var remounts []int
	for i, o := range ops {
		if o.tgt == "/proc" && o.flags&unix.MS_REMOUNT != 0 {
			remounts = append(remounts, i)
		}
	}
	require.Len(t, remounts, 2, "/proc remounted read-only, then back")
	roAt, rwAt := remounts[0], remounts[1]
	require.Greater(t, roAt, proc)
	const atime = uint64(unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	base := uint64(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	assert.Equal(t, base|unix.MS_RDONLY, ops[roAt].flags&^atime)
	assert.Equal(t, base|uint64(rdonlyFlag("/proc")), ops[rwAt].flags&^atime)
	assert.Equal(t, "hard", ops[roAt].mode)
	assert.Equal(t, "hard", ops[rwAt].mode)
	for _, g := range globals {
		assert.True(t, ProcGlobal(g), g)
		bind := index(func(o planOp) bool { return o.src == g && o.tgt == g })
		require.Greater(t, bind, roAt, "%s bound after /proc is read-only", g)
		require.Less(t, bind, rwAt, "%s bound before /proc is writable again", g)
		assert.Equal(t, uint64(unix.MS_BIND|unix.MS_REC), ops[bind].flags)
		assert.Contains(t, checks, g)
	}
	assert.NotContains(t, globals, "/proc/self")
	assert.NotContains(t, globals, "/proc/1")

	// Without Landlock, no rules.
	toks, err = Plan(p, landlock.MountAccess{}, Masks(p), nil, nil, nil)
	require.NoError(t, err)
	_, _, _, rules = parsePlanAll(t, toks)
	assert.Empty(t, rules)
}

func TestProcGlobal(t *testing.T) {
	for p, want := range map[string]bool{
		"/proc/sys/kernel/core_pattern": true, "/proc/sysrq-trigger": true, "/proc/irq/1/smp_affinity": true,
		"/proc/kmsg": true, "/proc/12/oom_score_adj": false, "/proc/12/attr/current": false, "/proc": false,
		"/procfoo/sys": false, "/tmp/proc/sys": false,
	} {
		assert.Equal(t, want, ProcGlobal(p), p)
	}
}

// TestPlanMasks: an existing deny-read directory gets an empty read-only
// tmpfs, an existing file a read-only nodev bind of /dev/null, both
// self-tested read-only; a missing one gets nothing (nothing is created on
// the host); danger-full-access has no plan for them.
func TestPlanMasks(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	dir, file, missing := filepath.Join(base, ".ssh"), filepath.Join(base, ".netrc"), filepath.Join(base, ".kube")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(file, []byte("machine x"), 0o600))
	p := modes.Policy{Mode: modes.ReadOnly, Workspace: base, DenyRead: []string{dir, file, missing}}
	assert.Equal(t, []string{dir, file}, Masks(p))
	toks, err := Plan(p, landlock.MountAccess{}, Masks(p), nil, nil, nil)
	require.NoError(t, err)
	ops, checks, data, _ := parsePlanAll(t, toks)
	var onDir, onFile []planOp
	for _, op := range ops {
		switch op.tgt {
		case dir:
			onDir = append(onDir, op)
		case file:
			onFile = append(onFile, op)
		case missing:
			t.Errorf("a step on the missing %s: %+v", missing, op)
		}
	}
	ro := uint64(unix.MS_RDONLY | unix.MS_NODEV | unix.MS_NOSUID | unix.MS_NOEXEC)
	require.Len(t, onDir, 1)
	assert.Equal(t, planOp{"tmpfs", dir, "tmpfs", ro, "hard"}, onDir[0])
	assert.Contains(t, data[dir], "mode=0700")
	require.Len(t, onFile, 2)
	assert.Equal(t, planOp{"/dev/null", file, "", unix.MS_BIND, "hard"}, onFile[0])
	assert.Equal(t, uint64(unix.MS_REMOUNT|unix.MS_BIND), onFile[1].flags&(unix.MS_REMOUNT|unix.MS_BIND))
	assert.Equal(t, ro, onFile[1].flags&ro)
	assert.Contains(t, checks, dir)
	assert.Contains(t, checks, file)
	assert.Empty(t, Masks(modes.Policy{Mode: modes.DangerFullAccess, DenyRead: []string{dir}}))
}

// A transaction's overlay is the first mount after making the tree private,
// its Landlock rules are added right after it (on its inodes), and the
// transaction's directory is hidden before anything else is bound.
func TestMountPlanOverlay(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "dsh-plan-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	ws, tx := filepath.Join(base, "ws"), filepath.Join(base, "tx")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(tx, "upper"), 0o755))
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	ov := &Overlay{Root: p.Workspace, Upper: tx + "/upper", Work: tx + "/work", Dir: tx,
		Rules: []landlock.Rule{{Path: p.Workspace, Access: 7}}}
	toks, err := Plan(p, landlock.MountAccess{}, Masks(p), nil, ov, nil)
	require.NoError(t, err)
	ops, checks, data, rules := parsePlanAll(t, toks)
	require.GreaterOrEqual(t, len(ops), 3)
	assert.Equal(t, planOp{"overlay", p.Workspace, "overlay", unix.MS_NOSUID | unix.MS_NODEV, "hard"}, ops[1])
	assert.Equal(t, "lowerdir="+p.Workspace+",upperdir="+tx+"/upper,workdir="+tx+"/work,userxattr", data[p.Workspace])
	assert.Equal(t, planOp{"tmpfs", tx, "tmpfs", maskFlags, "hard"}, ops[2], "the transaction directory is hidden")
	assert.Equal(t, []planRule{{p.Workspace, 7}}, rules)
	assert.Contains(t, checks, tx)
	// The rules come right after the overlay, before any bind.
	i := slices.Index(toks, "l")
	assert.Equal(t, "md", toks[i-7], "the rule follows the overlay's step: %v", toks[:i+3])

	for _, bad := range []string{"/a,b", "/a:b", `/a\b`, "/a\nb", "rel"} {
		_, err := Plan(p, landlock.MountAccess{}, nil, nil, &Overlay{Root: p.Workspace, Upper: bad, Work: tx + "/work", Dir: tx}, nil)
		assert.ErrorContains(t, err, "cannot be an overlay layer", bad)
	}
}

// cachePlanPolicy makes a base directory under /var/tmp (removed at the
// test's end) with a workspace in it, and returns the base, the cache
// store's path there (not made) and the workspace-write policy.
func cachePlanPolicy(t *testing.T) (base, store string, p modes.Policy) {
	base, err := os.MkdirTemp("/var/tmp", "dsh-plan-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	ws := filepath.Join(base, "ws")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	p, err = modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	return base, filepath.Join(base, "store"), p
}

// The toolchain caches' overlays come after a transaction's, each in mode
// "cache" (the runner leaves out one that fails, with its rules) and
// followed by its own rules; a layer an overlay cannot name is refused.
func TestMountPlanCaches(t *testing.T) {
	base, store, p := cachePlanPolicy(t)
	caches := []Overlay{
		{Root: base + "/home/.npm", Upper: store + "/npm/upper", Work: store + "/npm/work", Rules: []landlock.Rule{{Path: base + "/home/.npm", Access: 5}}},
		{Root: base + "/home/.cache/pip", Upper: store + "/pip/upper", Work: store + "/pip/work"},
	}
	ov := &Overlay{Root: p.Workspace, Upper: base + "/tx/upper", Work: base + "/tx/work", Dir: base + "/tx"}
	toks, err := Plan(p, landlock.MountAccess{}, Masks(p), nil, ov, caches)
	require.NoError(t, err)
	ops, _, data, rules := parsePlanAll(t, toks)
	require.GreaterOrEqual(t, len(ops), 5)
	assert.Equal(t, planOp{"overlay", p.Workspace, "overlay", unix.MS_NOSUID | unix.MS_NODEV, "hard"}, ops[1])
	assert.Equal(t, planOp{"overlay", caches[0].Root, "overlay", unix.MS_NOSUID | unix.MS_NODEV, "cache"}, ops[3])
	assert.Equal(t, planOp{"overlay", caches[1].Root, "overlay", unix.MS_NOSUID | unix.MS_NODEV, "cache"}, ops[4])
	assert.Equal(t, "lowerdir="+caches[0].Root+",upperdir="+store+"/npm/upper,workdir="+store+"/npm/work,userxattr", data[caches[0].Root])
	assert.Equal(t, []planRule{{caches[0].Root, 5}}, rules)
	i := slices.Index(toks, caches[0].Root)
	assert.Equal(t, []string{"l", caches[0].Root, "5", "md", "overlay", caches[1].Root}, toks[i+5:i+11], "the rule right after its overlay")

	_, err = Plan(p, landlock.MountAccess{}, nil, nil, nil, []Overlay{{Root: "/a:b", Upper: store + "/u", Work: store + "/w"}})
	assert.ErrorContains(t, err, "cannot be an overlay layer")
}

// A cache whose directory was empty has its upper layer bound there, then
// given nosuid and nodev (and the flags the kernel keeps) by a remount in
// mode "cacheflags", which the runner skips when the bind failed and which
// undoes the bind when it fails itself; its rules follow, as an overlay's.
func TestMountPlanCacheBind(t *testing.T) {
	base, store, p := cachePlanPolicy(t)
	require.NoError(t, os.MkdirAll(store+"/pip/upper", 0o700))
	pip := base + "/home/.cache/pip"
	caches := []Overlay{
		{Root: base + "/home/.npm", Upper: store + "/npm/upper", Work: store + "/npm/work"},
		{Root: pip, Upper: store + "/pip/upper", Work: store + "/pip/work", BindUpper: true, Rules: []landlock.Rule{{Path: pip, Access: 5}}},
	}
	toks, err := Plan(p, landlock.MountAccess{}, Masks(p), nil, nil, caches)
	require.NoError(t, err)
	kept, err := keptFlags(store + "/pip/upper")
	require.NoError(t, err)
	ops, _, data, rules := parsePlanAll(t, toks)
	require.GreaterOrEqual(t, len(ops), 4)
	assert.Equal(t, planOp{"overlay", caches[0].Root, "overlay", unix.MS_NOSUID | unix.MS_NODEV, "cache"}, ops[1])
	assert.Equal(t, planOp{store + "/pip/upper", pip, "", unix.MS_BIND, "cache"}, ops[2])
	assert.Equal(t, planOp{"", pip, "", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV | uint64(kept), "cacheflags"}, ops[3])
	assert.NotContains(t, data, pip, "no overlay for it")
	assert.Equal(t, []planRule{{pip, 5}}, rules)
	i := slices.Index(toks, "cacheflags")
	assert.Equal(t, []string{"l", pip, "5"}, toks[i+1:i+4], "the rule right after its flags")
}

// TestMountPlanCredentials: a credential file with a copy shows the copy,
// bound read-only (nosuid, nodev, noexec) with a Landlock read rule of its
// own and checked; one without a copy is masked by /dev/null as before; the
// copies' directory is hidden after them.
func TestMountPlanCredentials(t *testing.T) {
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	for _, f := range []string{".npmrc", ".pypirc"} {
		require.NoError(t, os.WriteFile(filepath.Join(home, f), []byte("x=1\n"), 0o600))
	}
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Homes: []string{home}})
	require.NoError(t, err)
	npmrc, pypirc := filepath.Join(home, ".npmrc"), filepath.Join(home, ".pypirc")
	require.Contains(t, p.CredentialFiles, npmrc)
	cp := filepath.Join(dir, "npmrc-1")
	require.NoError(t, os.WriteFile(cp, []byte("x=1\n"), 0o444))
	ll := landlock.MountAccessOf(7)
	toks, err := Plan(p, ll, Masks(p), &Credentials{Dir: dir, Copies: map[string]string{npmrc: cp}}, nil, nil)
	require.NoError(t, err)
	ops, checks, data, rules := parsePlanAll(t, toks)
	index := func(match func(planOp) bool) int { return slices.IndexFunc(ops, match) }
	bind := index(func(o planOp) bool { return o.tgt == npmrc && o.flags == unix.MS_BIND })
	require.NotEqual(t, -1, bind)
	assert.Equal(t, cp, ops[bind].src, "the copy is shown")
	ro := ops[bind+1]
	assert.Equal(t, npmrc, ro.tgt)
	assert.Equal(t, uint64(unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC), ro.flags&^uint64(unix.MS_NOATIME|unix.MS_NODIRATIME|unix.MS_RELATIME))
	assert.Contains(t, rules, planRule{npmrc, unix.LANDLOCK_ACCESS_FS_READ_FILE})
	assert.Contains(t, checks, npmrc)
	null := index(func(o planOp) bool { return o.tgt == pypirc && o.flags == unix.MS_BIND })
	require.NotEqual(t, -1, null)
	assert.Equal(t, "/dev/null", ops[null].src, "no copy: masked whole")
	hide := index(func(o planOp) bool { return o.tgt == dir && o.fstype == "tmpfs" })
	require.Greater(t, hide, bind, "the copies' directory is hidden after the copies are bound")
	assert.Contains(t, data[dir], "size=4k")
	assert.Contains(t, checks, dir)

	// Without Landlock, no rule.
	toks, err = Plan(p, landlock.MountAccess{}, Masks(p), &Credentials{Dir: dir, Copies: map[string]string{npmrc: cp}}, nil, nil)
	require.NoError(t, err)
	_, _, _, rules = parsePlanAll(t, toks)
	assert.NotContains(t, rules, planRule{npmrc, unix.LANDLOCK_ACCESS_FS_READ_FILE})
}

// procGlobals, which stops reading /proc at its first per-process entry,
// lists what a whole listing of /proc gives: the kernel lists the global
// entries first (proc_root_readdir), on every kernel the tests run on.
func TestProcGlobalsAll(t *testing.T) {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	root := os.Geteuid() == 0
	var want []string
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 || isPID(e.Name()) {
			continue
		}
		if !root && !e.IsDir() {
			if fi, err := e.Info(); err != nil || fi.Mode().Perm()&0o222 == 0 {
				continue
			}
		}
		want = append(want, "/proc/"+e.Name())
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, procGlobals())
}
