package limits

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// cpuPeriod is the CFS period the CPU quota is a share of (100 ms).
const cpuPeriod = 100000

// killWait bounds the kill of what is left in a group, and its removal.
const killWait = 2 * time.Second

// v1Controllers are the cgroup v1 hierarchies a command's group joins:
// "cpu" without a CPU limit too, for its group scheduling — the command's
// tasks share one weight against the host's, so a fork bomb of 600 runnable
// tasks cannot starve the supervisor that kills it (left out, a bomb's kill
// without a pid namespace took 43 s and 59 s in TestForkBombKilled, whose
// bound is 15 s, on 2 vCPUs).
var v1Controllers = []string{"pids", "memory", "cpu", "cpuacct", "freezer"}

// Group is one command's cgroup.
type Group struct {
	mgr    cgroups.Manager
	v2     bool
	dir    string // v2: the group; v1: the memory hierarchy's (for the events)
	paths  map[string]string
	limits modes.Limits
	swap   bool // v1: the memory limit covers swap too (memsw)
}

// Create makes a cgroup named name for limits l: a child of this process's
// own cgroup on v1 (one per controller), a sibling of it on v2 (the parent of
// a process's cgroup is where a delegated subtree lets it create groups with
// controllers). Its error means only that no group could be made.
func Create(l modes.Limits, name string) (*Group, error) {
	r := &cgroups.Resources{SkipDevices: true}
	if l.MaxPids > 0 {
		n := int64(l.MaxPids)
		r.PidsLimit = &n
	}
	if l.MaxCPU > 0 {
		r.CpuPeriod = cpuPeriod
		r.CpuQuota = max(int64(l.MaxCPU*cpuPeriod), 1000)
	}
	g := &Group{limits: l, v2: cgroups.IsCgroup2UnifiedMode()}
	cg := &cgroups.Cgroup{Name: name, Resources: r}
	if g.v2 {
		if l.MaxMemory > 0 {
			r.Memory, r.MemorySwap = l.MaxMemory, l.MaxMemory
		}
		// fs2 and fs directly, not through cgroups/manager, whose systemd
		// driver is never used here: 0.5 MB less in every binary and ~80
		// fewer page faults per CLI run (measured with perf stat).
		m, err := fs2.NewManager(cg, "")
		if err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		// memory.swap.max becomes 0 where swap is accounted.
		g.mgr, g.dir = m, m.Path("")
	} else {
		own, err := ownV1Paths()
		if err != nil {
			return nil, err
		}
		g.paths = map[string]string{}
		for _, c := range v1Controllers {
			g.paths[c] = filepath.Join(own[c], name)
		}
		if l.MaxMemory > 0 {
			r.Memory = l.MaxMemory
			// memory+swap, where the kernel accounts swap (swapaccount).
			if cgroups.PathExists(filepath.Join(filepath.Dir(g.paths["memory"]), "memory.memsw.limit_in_bytes")) {
				r.MemorySwap, g.swap = l.MaxMemory, true
			}
		}
		m, err := fs.NewManager(cg, g.paths)
		if err != nil {
			return nil, fmt.Errorf("cgroup v1: %w", err)
		}
		g.mgr, g.dir = m, g.paths["memory"]
	}
	// Where this user may not make the group (no delegated subtree: any
	// user but root, as a rule) its parents' modes say so at once, before
	// the sweep and the cgroup library's Apply (0.3-1 ms of a user's
	// command start, measured on v1).
	for _, d := range g.parents() {
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %s: %w", name, d, err)
		}
	}
	g.sweep(name)
	// Create the group (no pid yet), then set its limits.
	if err := g.mgr.Apply(-1); err != nil {
		g.mgr.Destroy()
		return nil, fmt.Errorf("create cgroup %s: %w", name, err)
	}
	if err := g.mgr.Set(r); err != nil {
		g.mgr.Destroy()
		return nil, fmt.Errorf("set cgroup limits: %w", err)
	}
	return g, nil
}

// ownV1Paths is this process's own cgroup directory in each hierarchy of
// v1Controllers: what cgroups.GetOwnCgroupPath says of each, read from one
// read of /proc/self/mountinfo and one of /proc/self/cgroup instead of one
// of each per controller (a fifth of a command's cgroup setup, measured).
func ownV1Paths() (map[string]string, error) {
	mounts, err := cgroups.GetCgroupMounts(false)
	if err != nil {
		return nil, fmt.Errorf("cgroup v1: %w", err)
	}
	own, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup v1: %w", err)
	}
	paths := map[string]string{}
	for _, c := range v1Controllers {
		cg, ok := own[c]
		if !ok {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, cgroups.NewNotFoundError(c))
		}
		i := slices.IndexFunc(mounts, func(m cgroups.Mount) bool { return slices.Contains(m.Subsystems, c) })
		if i < 0 {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, cgroups.NewNotFoundError(c))
		}
		rel, err := filepath.Rel(mounts[i].Root, cg)
		if err != nil {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
		paths[c] = filepath.Join(mounts[i].Mountpoint, rel)
	}
	return paths, nil
}

// parents are the directories the group is made in: one per hierarchy on
// v1, one on v2.
func (g *Group) parents() []string {
	if g.v2 {
		return []string{filepath.Dir(g.dir)}
	}
	var dirs []string
	for _, c := range v1Controllers {
		dirs = append(dirs, filepath.Dir(g.paths[c]))
	}
	return dirs
}

// staleAge is how old an empty group must be before sweep removes it: a
// group is joined milliseconds after its creation.
const staleAge = time.Minute

// sweep removes the empty groups of earlier commands next to the group
// name will be — left by a supervisor killed (SIGKILL) before it could
// remove its own. Names share name's prefix up to its last "-"; a group
// with processes cannot be removed (EBUSY), and a young one is left alone.
func (g *Group) sweep(name string) {
	prefix := name[:strings.LastIndexByte(name, '-')+1]
	for _, d := range g.parents() {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || e.Name() == name {
				continue
			}
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAge {
				os.Remove(filepath.Join(d, e.Name()))
			}
		}
	}
}

// Mechanism is CgroupV1 or CgroupV2.
func (g *Group) Mechanism() string {
	if g.v2 {
		return CgroupV2
	}
	return CgroupV1
}

// Limits are the limits the group enforces.
func (g *Group) Limits() modes.Limits { return g.limits }

// OpenDir opens the group's directory for clone3(CLONE_INTO_CGROUP)
// (os/exec's SysProcAttr.UseCgroupFD): a process started into its group
// is never outside it and never migrates, which saves the write to
// cgroup.procs (0.4 ms measured here; more when it waits for an RCU grace
// period). Only on v2: v1 has no such call, and the answer is an error
// there.
func (g *Group) OpenDir() (*os.File, error) {
	if !g.v2 {
		return nil, errors.New("cgroup v1: no clone into a cgroup")
	}
	return os.OpenFile(g.dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
}

// JoinFiles opens, on cgroup v1, the tasks file of the group in each of its
// hierarchies for writing, for the runner to join the group itself: a
// process's only thread writing "0" there moves itself without taking the
// cgroup threadgroup rwsem for writing (Linux 6.0, "cgroup: Optimize single
// thread migration"), whose first taking waits for an RCU grace period —
// 8–12 ms of a command's start measured on this project's v1 host, when the
// supervisor writes the runner's pid to cgroup.procs (Add). The permission
// check uses the credentials of the opener. On v2 a process joins with its
// whole thread group, so there is no such file, and the answer is an error.
func (g *Group) JoinFiles() ([]*os.File, error) {
	if g.v2 {
		return nil, errors.New("cgroup v2: no single-thread join")
	}
	var files []*os.File
	for _, c := range v1Controllers {
		f, err := os.OpenFile(filepath.Join(g.paths[c], "tasks"), os.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// Add moves pid (a process that has not forked yet) into the group.
func (g *Group) Add(pid int) error {
	if err := g.mgr.Apply(pid); err != nil {
		return fmt.Errorf("join cgroup: %w", err)
	}
	return nil
}

// Finish kills whatever is left in the group, reads what the command used
// and which limits it hit, and removes the group. It is bounded in time.
func (g *Group) Finish() (Usage, []Hit, error) {
	kerr := g.kill()
	u, hits := g.usage()
	err := g.mgr.Destroy()
	if err == nil {
		err = kerr
	}
	if err != nil {
		return u, hits, fmt.Errorf("remove cgroup: %w", err)
	}
	return u, hits, nil
}

// Close removes a group no command ran in (kills what may have joined).
func (g *Group) Close() error {
	_, _, err := g.Finish()
	return err
}

// allPids lists the processes in the group (on v1 in its pids hierarchy:
// the library's manager reads the devices one, which a group of ours has
// not joined).
func (g *Group) allPids() ([]int, error) {
	if g.v2 {
		return cgroups.GetAllPids(g.dir)
	}
	return cgroups.GetAllPids(g.paths["pids"])
}

// Kill SIGKILLs every process in the group, the command's helpers
// included, until none is left (at most 2 s); the group stays for Finish.
func (g *Group) Kill() error { return g.kill() }

// KillNow SIGKILLs every process in the group once and does not wait for
// them to go (Finish does): for a caller that must not wait on processes
// that may only exit once it reaped some.
func (g *Group) KillNow() { g.killFor(0) }

// kill SIGKILLs every process left in the group until none is: cgroup.kill
// on v2 (Linux 5.14), else frozen, killed and thawed, in rounds.
func (g *Group) kill() error { return g.killFor(killWait) }

// killFor is kill, waiting at most d (0: one round, no wait).
func (g *Group) killFor(d time.Duration) error {
	deadline := time.Now().Add(d)
	if g.v2 {
		if err := os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0); err == nil {
			if d == 0 {
				return nil
			}
			for p := newPause(); time.Now().Before(deadline); p.sleep() {
				if pids, err := g.allPids(); err != nil || len(pids) == 0 {
					return nil
				}
			}
			return errors.New("processes left in the cgroup after cgroup.kill")
		}
	}
	// v1: the group is frozen, then listed and killed until a list names
	// no task not killed yet, then thawed. From the freeze on, every task
	// forked in the group is frozen at its birth, and a killed task forks
	// no more. But a task that was inside fork when it was killed finishes
	// that fork, and its child joins the group only at the fork's end: a
	// list made before then misses it, and the thaw lets it go. So the
	// list waits, at most freezeWait, for the state to read FROZEN: every
	// live task of the group then sits in the freezer, none inside fork.
	// (A task that cannot freeze, asleep in the kernel, holds the state at
	// FREEZING: the wait is bounded, and then the group is listed anyway.)
	// Listed before the freeze, and once, a single KillNow left 87–99 of
	// 300 tasks of a setsid bomb running; frozen first but listed once, a
	// child forked while the freeze was written was thawed alive; frozen
	// and listed until nothing new, without the wait, 80 tasks once in CI
	// (TestKillNowEndsABomb).
	freezer := filepath.Join(g.paths["freezer"], "freezer.state")
	p := newPause()
	for round := 0; round == 0 || time.Now().Before(deadline); round++ {
		frozen := os.WriteFile(freezer, []byte(cgroups.Frozen), 0) == nil
		n, err := g.killListed(freezer, frozen)
		if frozen {
			// Killed tasks die once thawed.
			os.WriteFile(freezer, []byte(cgroups.Thawed), 0)
		}
		if err != nil {
			return fmt.Errorf("cgroup pids: %w", err)
		}
		if n == 0 {
			return nil
		}
		if d == 0 {
			return nil
		}
		p.sleep()
	}
	return errors.New("processes left in the cgroup after the kill")
}

// freezeWait bounds the wait for a v1 group to read FROZEN before it is
// listed for a kill.
const freezeWait = 250 * time.Millisecond

// awaitFrozen waits, at most d, until the v1 freezer state at path reads
// FROZEN (or cannot be read).
func awaitFrozen(path string, d time.Duration) {
	deadline := time.Now().Add(d)
	for p := newPause(); time.Now().Before(deadline); p.sleep() {
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) == string(cgroups.Frozen) {
			return
		}
	}
}

// killListed SIGKILLs every task the group lists, and lists it again while
// a list names a task not killed yet (only when frozen: else a bomb would
// keep it listing); it returns how many tasks it killed. A frozen group
// that lists a task is first awaited FROZEN (an empty one holds no fork
// in progress: its parent would be listed).
func (g *Group) killListed(freezer string, frozen bool) (int, error) {
	killed := make(map[int]bool)
	awaited := !frozen
	for {
		pids, err := g.allPids()
		if err != nil {
			return len(killed), err
		}
		if len(pids) > 0 && !awaited {
			awaited = true
			awaitFrozen(freezer, freezeWait)
			continue
		}
		fresh := 0
		for _, p := range pids {
			if !killed[p] {
				killed[p] = true
				syscall.Kill(p, syscall.SIGKILL)
				fresh++
			}
		}
		if fresh == 0 || !frozen {
			return len(killed), nil
		}
	}
}

// pause is the wait between two looks at a group being emptied: a killed
// process leaves its group once its exit is done, typically well under a
// millisecond after the SIGKILL, so the first waits are short and each
// doubles, up to maxPause. (A fixed 5 ms cost a command that much whenever
// the runner's killed processes were still listed at the first look: one
// run in three as root on cgroup v1.)
type pause time.Duration

const (
	firstPause = 100 * time.Microsecond
	maxPause   = 5 * time.Millisecond
)

func newPause() *pause {
	p := pause(firstPause)
	return &p
}

func (p *pause) sleep() { time.Sleep(p.next()) }

// next returns the wait to make now, and doubles the next one.
func (p *pause) next() time.Duration {
	d := time.Duration(*p)
	*p = pause(min(2*d, maxPause))
	return d
}

// usage reads the group's counters: v1 memory.max_usage_in_bytes (memsw
// where swap is accounted), cpuacct.usage, the memory OOM and pids events;
// v2 memory.peak (5.19), cpu.stat, pids.peak, memory.events, pids.events.
func (g *Group) usage() (Usage, []Hit) {
	var u Usage
	var hits []Hit
	num := func(path string) *int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil
		}
		return &v
	}
	hit := func(limit string, n int64) {
		if n > 0 {
			hits = append(hits, Hit{Limit: limit, Count: int(n)})
		}
	}
	if g.v2 {
		u.PeakMemoryBytes = num(filepath.Join(g.dir, "memory.peak"))
		if v, ok := keyed(filepath.Join(g.dir, "cpu.stat"))["usage_usec"]; ok {
			ms := v / 1000
			u.CPUTimeMs = &ms
		}
		u.PeakPids = num(filepath.Join(g.dir, "pids.peak"))
		if g.limits.MaxMemory > 0 {
			hit(Memory, keyed(filepath.Join(g.dir, "memory.events"))["oom_kill"])
		}
		if g.limits.MaxPids > 0 {
			hit(Pids, keyed(filepath.Join(g.dir, "pids.events"))["max"])
		}
		return u, hits
	}
	peak := "memory.max_usage_in_bytes"
	if g.swap {
		peak = "memory.memsw.max_usage_in_bytes"
	}
	u.PeakMemoryBytes = num(filepath.Join(g.paths["memory"], peak))
	if ns := num(filepath.Join(g.paths["cpuacct"], "cpuacct.usage")); ns != nil {
		ms := *ns / 1e6
		u.CPUTimeMs = &ms
	}
	if g.limits.MaxMemory > 0 {
		hit(Memory, keyed(filepath.Join(g.paths["memory"], "memory.oom_control"))["oom_kill"])
	}
	if g.limits.MaxPids > 0 {
		hit(Pids, keyed(filepath.Join(g.paths["pids"], "pids.events"))["max"])
	}
	return u, hits
}

// keyed reads a flat keyed cgroup file ("key value" lines).
func keyed(path string) map[string]int64 {
	m := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	return m
}
