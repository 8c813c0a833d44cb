package limits

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/opencontainers/cgroups"
)

// A group made here limits what joins it, reports its usage and the limits
// hit, kills what is left and is removed. Real cgroups: root only.
func TestGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("!!! creating a cgroup needs root here: test NOT RUN (integration/limits_test.go covers the fallback)")
	}
	g, err := Create(modes.Limits{MaxPids: 8, MaxMemory: 64 << 20, MaxCPU: 0.5}, "dsh-unit-"+time.Now().Format("150405.000000"))
	if err != nil {
		t.Fatalf("Create as root: %v", err)
	}
	// A shell whose subshell tries 20 sleepers (and dies at the first
	// failed fork): at most 8 tasks fit.
	sh := startInGroup(t, g, "/bin/sh", `read x; (i=0; while [ $i -lt 20 ]; do sleep 30 & i=$((i+1)); done) 2>/dev/null; exec sleep 30`)
	// Until the group refused a fork (its pids.events): the forks are
	// slow in a VM without acceleration.
	pidsHit := func(hits []Hit) bool {
		for _, h := range hits {
			if h.Limit == Pids && h.Count > 0 {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(testtime.Scale(30 * time.Second))
	for time.Now().Before(deadline) {
		if _, hits := g.usage(); pidsHit(hits) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pids, _ := g.allPids()
	if len(pids) > 8 {
		t.Errorf("%d tasks in a group limited to 8", len(pids))
	}
	u, hits, err := g.Finish()
	if err != nil {
		t.Errorf("Finish: %v", err)
	}
	sh.Wait()
	if ws, ok := sh.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the shell ended %v, want killed by Finish", sh.ProcessState)
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); len(b) > 0 {
				t.Errorf("pid %d (%q) survived Finish", p, b)
			}
		}
	}
	if u.PeakMemoryBytes == nil || *u.PeakMemoryBytes <= 0 || u.CPUTimeMs == nil {
		t.Errorf("usage = %+v, want peak memory and CPU time", u)
	}
	if !pidsHit(hits) {
		t.Errorf("hits = %+v, want the pids limit", hits)
	}
	if g.mgr.Exists() {
		t.Errorf("the group still exists after Finish: %v", g.mgr.GetPaths())
	}
}

// Create sweeps the empty groups a SIGKILLed supervisor left (older than a
// minute), and leaves young ones.
func TestSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("!!! creating a cgroup needs root here: test NOT RUN")
	}
	stale, err := Create(modes.Limits{MaxPids: 8}, "dsh-sweep-stale")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	young, err := Create(modes.Limits{MaxPids: 8}, "dsh-sweep-young")
	if err != nil {
		stale.Close()
		t.Fatalf("Create: %v", err)
	}
	defer young.Close()
	defer stale.Close()
	old := time.Now().Add(-2 * staleAge)
	for _, p := range stale.paths {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatalf("age %s: %v", p, err)
		}
	}
	g, err := Create(modes.Limits{MaxPids: 8}, "dsh-sweep-new")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer g.Close()
	for c, p := range stale.paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale %s group %s not swept: %v", c, p, err)
		}
	}
	for c, p := range young.paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("young %s group %s swept: %v", c, p, err)
		}
	}
}

// On cgroup v2 a process can be started inside the group (OpenDir for
// clone3's CLONE_INTO_CGROUP): it is in the group from its first
// instruction. On v1 OpenDir refuses, and the caller joins by Add.
func TestOpenDir(t *testing.T) {
	g := testGroup(t)
	dir, err := g.OpenDir()
	if !g.v2 {
		if err == nil {
			dir.Close()
			t.Fatal("OpenDir on cgroup v1 succeeded; there is no clone into a v1 group")
		}
		return
	}
	if err != nil {
		t.Fatalf("OpenDir on cgroup v2: %v", err)
	}
	defer dir.Close()
	sh := exec.Command("/bin/sh", "-c", "cat /proc/self/cgroup")
	sh.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("start into the group: %v", err)
	}
	if want := "0::" + strings.TrimPrefix(g.dir, "/sys/fs/cgroup") + "\n"; string(out) != want {
		t.Errorf("/proc/self/cgroup = %q, want %q", out, want)
	}
}

// On cgroup v1 a process joins the group itself through JoinFiles: "0"
// written to each tasks file moves the writing thread, in every hierarchy
// of the group. On v2 JoinFiles refuses, and the caller joins by Add.
func TestJoinFiles(t *testing.T) {
	g := testGroup(t)
	files, err := g.JoinFiles()
	if g.v2 {
		if err == nil {
			t.Fatal("JoinFiles on cgroup v2 succeeded; a v2 group has no single-thread join")
		}
		return
	}
	if err != nil {
		t.Fatalf("JoinFiles on cgroup v1: %v", err)
	}
	if len(files) != len(v1Controllers) {
		t.Fatalf("JoinFiles gave %d files, want one per hierarchy (%d)", len(files), len(v1Controllers))
	}
	// The shell writes "0" to each (fds 3..), says so, and waits.
	script := ""
	for i := range files {
		script += "echo 0 >&" + strconv.Itoa(3+i) + " && "
	}
	sh := exec.Command("/bin/sh", "-c", script+"echo joined && read x")
	sh.ExtraFiles = files
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	defer sh.Wait()
	defer in.Close()
	line := make([]byte, 7)
	if n, _ := io.ReadFull(out, line); string(line[:n]) != "joined\n" {
		t.Fatalf("the shell said %q, want it to join", line[:n])
	}
	for _, c := range v1Controllers {
		b, err := os.ReadFile(filepath.Join(g.paths[c], "cgroup.procs"))
		if err != nil {
			t.Fatalf("read the %s group: %v", c, err)
		}
		if !slices.Contains(strings.Fields(string(b)), strconv.Itoa(sh.Process.Pid)) {
			t.Errorf("the shell (pid %d) is not in the %s group (%q)", sh.Process.Pid, c, b)
		}
	}
}

// testGroup is a group limited to 8 pids, removed when the test ends. Root
// only: the test is skipped, loudly, for other users.
func testGroup(t *testing.T) *Group {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("!!! creating a cgroup needs root here: test NOT RUN")
	}
	g, err := Create(modes.Limits{MaxPids: 8}, "dsh-unit-"+time.Now().Format("150405.000000"))
	if err != nil {
		t.Fatalf("Create as root: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// On cgroup v1 a group joins the cpu hierarchy without a CPU limit too (its
// group scheduling keeps a fork bomb from starving the supervisor): a group
// of its own there, with no quota.
func TestV1CPUGroupWithoutLimit(t *testing.T) {
	g := testGroup(t)
	if g.v2 {
		t.Skip("cgroup v2: one hierarchy")
	}
	own, err := cgroups.GetOwnCgroupPath("cpu")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(own, filepath.Base(g.paths["pids"]))
	if dir != g.paths["cpu"] {
		t.Errorf("the cpu group is %q, want %q", g.paths["cpu"], dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		t.Fatalf("no group of its own in the cpu hierarchy: %v", err)
	}
	if strings.TrimSpace(string(b)) != "-1" {
		t.Errorf("cpu.cfs_quota_us = %q, want -1 (no limit)", b)
	}
}

// The waits between two looks at a group being emptied start short and
// double up to maxPause, so that a group emptied within a millisecond is
// seen empty within about that.
func TestPauseGrows(t *testing.T) {
	p := newPause()
	var got []time.Duration
	for range 8 {
		got = append(got, p.next())
	}
	want := []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 400 * time.Microsecond, 800 * time.Microsecond,
		1600 * time.Microsecond, 3200 * time.Microsecond, 5 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("pauses = %v, want %v", got, want)
	}
}

// A user who may not make a group in its parents (no delegated subtree) is
// refused at once, with the parent and EACCES, and nothing is made.
func TestCreateRefusedWithoutAccess(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("!!! root may make a group anywhere: test NOT RUN (make test runs it as DSH_TEST_USER too)")
	}
	g, err := Create(modes.Limits{MaxPids: 8}, "dsh-refused-1")
	if err == nil {
		g.Close()
		t.Skip("!!! this user may make cgroups (a delegated subtree): test NOT RUN")
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Errorf("Create: %v, want EACCES", err)
	}
	probe := &Group{v2: cgroups.IsCgroup2UnifiedMode(), paths: map[string]string{}}
	if probe.v2 {
		if own, err := cgroups.GetOwnCgroupPath(""); err == nil {
			probe.dir = filepath.Join(filepath.Dir(own), "dsh-refused-1")
		}
	} else {
		for _, c := range v1Controllers {
			if own, err := cgroups.GetOwnCgroupPath(c); err == nil {
				probe.paths[c] = filepath.Join(own, "dsh-refused-1")
			}
		}
	}
	parents := probe.parents()
	if len(parents) == 0 || !strings.Contains(err.Error(), parents[0]) {
		t.Errorf("Create: %v, want it to name the group's parent %v", err, parents)
	}
	for _, d := range parents {
		if _, err := os.Stat(filepath.Join(d, "dsh-refused-1")); !os.IsNotExist(err) {
			t.Errorf("a group was made in %s: %v", d, err)
		}
	}
}

// TestOwnV1Paths: ownV1Paths says what cgroups.GetOwnCgroupPath says of
// each controller, from one read of each file.
func TestOwnV1Paths(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("cgroup v2 host: no v1 hierarchies")
	}
	got, err := ownV1Paths()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v1Controllers {
		want, err := cgroups.GetOwnCgroupPath(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if got[c] != want {
			t.Errorf("%s: %q, want %q", c, got[c], want)
		}
	}
}

// One KillNow ends a fork bomb in the group, however fast it forks: nothing
// forked while the group was being killed outlives it. The bomb leaves its
// session at every fork (setsid), so that only the group holds it, and
// stops by itself after a minute, so that a failure ends too.
func TestKillNowEndsABomb(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("!!! creating a cgroup needs root here: test NOT RUN (integration/forkbomb_test.go covers the CLI)")
	}
	// On a slow machine (QEMU/TCG) the bomb is that many times smaller:
	// it grows as slowly as it forks there.
	tasks := max(60, int(300/testtime.Factor()))
	for round := range 5 {
		g, err := Create(modes.Limits{MaxPids: tasks + 100}, "dsh-unit-bomb-"+time.Now().Format("150405.000000"))
		if err != nil {
			t.Fatalf("Create as root: %v", err)
		}
		end := time.Now().Add(time.Minute).Unix()
		bomb := `read x; export B='while printf -v n "%(%s)T" -1; [ "$n" -lt ` + strconv.FormatInt(end, 10) + ` ]; do setsid bash -c "$B" & done' ; exec bash -c "$B"`
		sh := startInGroup(t, g, "/bin/bash", bomb)
		deadline := time.Now().Add(testtime.Scale(30 * time.Second))
		for pids, _ := g.allPids(); len(pids) < tasks && time.Now().Before(deadline); pids, _ = g.allPids() {
			time.Sleep(time.Millisecond)
		}
		g.KillNow()
		gone := pollEmpty(g, testtime.Scale(2*time.Second))
		left, _ := g.allPids()
		seen := taskStates(g, left)
		g.Finish()
		sh.Wait()
		if !gone {
			t.Fatalf("round %d: %d tasks of the bomb outlived KillNow (%s)", round, len(left), seen)
		}
	}
}

// taskStates says, for a failure's log, what the group's freezer reads and
// how many of pids are in each scheduler state, with a pending SIGKILL or
// not: whether they were missed, or killed but not gone.
func taskStates(g *Group, pids []int) string {
	freezer, _ := os.ReadFile(filepath.Join(g.paths["freezer"], "freezer.state"))
	count := map[string]int{}
	for _, pid := range pids {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			count["gone"]++
			continue
		}
		state, killed := "?", "SIGKILL not pending"
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "State":
				state = v
			case "SigPnd", "ShdPnd":
				if n, err := strconv.ParseUint(v, 16, 64); err == nil && n&(1<<(syscall.SIGKILL-1)) != 0 {
					killed = "SIGKILL pending"
				}
			}
		}
		count[state+", "+killed]++
	}
	return fmt.Sprintf("freezer %q, tasks %v", strings.TrimSpace(string(freezer)), count)
}

// startInGroup starts shell -c script, adds it to g and lets it go: the
// script's first act is to read a line, so that all of it runs in g.
func startInGroup(t *testing.T, g *Group, shell, script string) *exec.Cmd {
	t.Helper()
	sh := exec.Command(shell, "-c", script)
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(sh.Process.Pid); err != nil {
		sh.Process.Kill()
		g.Close()
		t.Fatalf("Add: %v", err)
	}
	in.Write([]byte("go\n"))
	return sh
}

// pollEmpty reports whether the group empties within d, without killing.
func pollEmpty(g *Group, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pids, err := g.allPids(); err == nil && len(pids) == 0 {
			return true
		}
	}
	return false
}
