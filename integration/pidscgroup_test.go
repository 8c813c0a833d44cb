//go:build linux

package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidsCgroup is a pids cgroup (v1 or v2) made for one test, limited to max
// tasks; its cgroup.procs belongs to the identity, so a wrapper running as the
// identity can move itself in (wrap).
type pidsCgroup struct {
	dir string
	fd  int // cgroup v2: the directory, for CLONE_INTO_CGROUP (0: v1)
}

func newPidsCgroup(t *testing.T, id identity, max int) *pidsCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("!!! a pids cgroup of its own needs a root test process: test NOT RUN")
	}
	var base string
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "pids") {
		_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+pids"), 0)
		base = "/sys/fs/cgroup"
	} else if fi, err := os.Stat("/sys/fs/cgroup/pids"); err == nil && fi.IsDir() {
		base = "/sys/fs/cgroup/pids"
	} else {
		t.Fatalf("no pids cgroup controller (neither v2 nor v1): this test cannot run safely on this machine")
	}
	c := &pidsCgroup{dir: filepath.Join(base, "dsh-it-pids-"+nonce())}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		t.Fatalf("pids cgroup: %v", err)
	}
	procsDir := c.dir
	if base == "/sys/fs/cgroup" {
		// The CLI starts in a leaf of the test's group: a command's own
		// cgroup (resource limits) is made next to the CLI's, inside the
		// test's group and so under its pids.max, which needs the
		// controllers in the group's subtree_control (and a group with
		// processes cannot enable them).
		for _, ctl := range []string{"+pids", "+memory", "+cpu"} {
			_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte(ctl), 0)
			_ = os.WriteFile(filepath.Join(c.dir, "cgroup.subtree_control"), []byte(ctl), 0)
		}
		procsDir = filepath.Join(c.dir, "cli")
		if err := os.Mkdir(procsDir, 0o755); err != nil {
			os.Remove(c.dir)
			t.Fatalf("pids cgroup: %v", err)
		}
		fd, err := syscall.Open(procsDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(c.dir)
			t.Fatalf("pids cgroup: %v", err)
		}
		c.fd = fd
		t.Cleanup(func() { syscall.Close(fd) })
	}
	if err := os.WriteFile(filepath.Join(c.dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		os.Remove(c.dir)
		t.Fatalf("pids cgroup: pids.max: %v", err)
	}
	if err := os.Chown(filepath.Join(procsDir, "cgroup.procs"), int(id.uid), int(id.gid)); err != nil {
		os.Remove(c.dir)
		t.Fatalf("pids cgroup: %v", err)
	}
	t.Cleanup(func() {
		// Whatever survived dies here.
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			procs := c.procs(t)
			if len(procs) == 0 {
				break
			}
			for _, p := range procs {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		// Groups below (the CLI's leaf, a command's group left by a
		// SIGKILLed CLI), deepest first.
		dirs := c.dirs()
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				t.Errorf("pids cgroup %s: %v", dirs[i], err)
			}
		}
	})
	return c
}

// dirs is the group and every group below it, parents first.
func (c *pidsCgroup) dirs() []string {
	out := []string{c.dir}
	for i := 0; i < len(out); i++ {
		ents, _ := os.ReadDir(out[i])
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(out[i], e.Name()))
			}
		}
	}
	return out
}

// procs lists the processes in the group and in every group below it (a
// command's own cgroup, made by the sandbox for its resource limits).
func (c *pidsCgroup) procs(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, d := range c.dirs() {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			if d != c.dir && errors.Is(err, os.ErrNotExist) {
				continue // removed meanwhile
			}
			t.Fatalf("pids cgroup: %v", err)
		}
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

func (c *pidsCgroup) current(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.current"))
	if err != nil {
		t.Fatalf("pids cgroup: %v", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// wrap puts the CLI (and so everything it starts) into the cgroup.
func (c *pidsCgroup) wrap(more []string) []string {
	w := []string{"sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(c.dir, "cgroup.procs")}
	return append(w, more...)
}

// place returns how to start a process in the cgroup: behind the wrap
// (cgroup v1, where the chowned cgroup.procs lets the identity move itself),
// or, on cgroup v2, where moving needs write access to the common ancestor's
// cgroup.procs too (the root's: not the test user's), started there by the
// root test process with CLONE_INTO_CGROUP (runOpts.CgroupFD).
func (c *pidsCgroup) place(more []string) (wrap []string, cgroupFD int) {
	if c.fd > 0 {
		return more, c.fd
	}
	return c.wrap(more), 0
}

// survivors describes the processes left in the cgroup: the runner's own
// processes first, each with its state, parent, wait channel, signal masks
// and (root) kernel stack — what a kill that did not happen leaves to read —
// then the first of the rest.
func (c *pidsCgroup) survivors(t *testing.T) string {
	var b strings.Builder
	procs := c.procs(t)
	shown := 0
	for pass := 0; pass < 2; pass++ {
		for _, p := range procs {
			dir := "/proc/" + strconv.Itoa(p)
			cmd, _ := os.ReadFile(dir + "/cmdline")
			runner := strings.HasPrefix(string(cmd), "dsh-sandbox-runner")
			if runner != (pass == 0) || (!runner && shown >= 10) {
				continue
			}
			shown++
			fmt.Fprintf(&b, "\n  %d %s", p, procSummary(dir))
			if runner {
				if st := kernelStack(dir); st != "" {
					fmt.Fprintf(&b, "\n    stack: %s", st)
				}
				if sc := sampleSyscalls(dir); sc != "" {
					fmt.Fprintf(&b, "\n    syscalls: %s", sc)
				}
				if fds, err := os.ReadDir(dir + "/fd"); err == nil {
					b.WriteString("\n    fds:")
					for _, fd := range fds {
						l, _ := os.Readlink(dir + "/fd/" + fd.Name())
						fmt.Fprintf(&b, " %s=%s", fd.Name(), l)
					}
				}
			}
		}
	}
	return fmt.Sprintf("%s\n  (%d in all)", b.String(), len(procs))
}

// procSummary is the comm, state, parent, wait channel and signal fields of
// the process at dir (/proc/PID).
func procSummary(dir string) string {
	stat, _ := os.ReadFile(dir + "/stat")
	s := string(stat)
	comm, rest := "?", s
	if i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')'); i >= 0 && j > i {
		comm, rest = s[i+1:j], s[j+1:]
	}
	f := strings.Fields(rest) // state ppid pgrp session ...
	state, ppid := "?", "?"
	if len(f) > 1 {
		state, ppid = f[0], f[1]
	}
	wchan, _ := os.ReadFile(dir + "/wchan")
	var sig []string
	status, _ := os.ReadFile(dir + "/status")
	for _, line := range strings.Split(string(status), "\n") {
		for _, k := range []string{"SigPnd:", "ShdPnd:", "SigBlk:", "Threads:"} {
			if strings.HasPrefix(line, k) {
				sig = append(sig, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return fmt.Sprintf("%s %s ppid=%s wchan=%s %s", comm, state, ppid, wchan, strings.Join(sig, " "))
}

// sampleSyscalls reads dir/syscall (root only) a hundred times and counts
// what it saw: the call a spinning process keeps making, or the one a
// blocked process sits in.
func sampleSyscalls(dir string) string {
	seen := map[string]int{}
	var order []string
	for i := 0; i < 100; i++ {
		sc, err := os.ReadFile(dir + "/syscall")
		if err != nil {
			break
		}
		f := strings.Fields(string(sc))
		if len(f) == 0 {
			continue
		}
		k := f[0]
		if k != "running" && len(f) > 1 {
			k += "(" + f[1] + ")"
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
		time.Sleep(time.Millisecond)
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("%s×%d", k, seen[k]))
	}
	return strings.Join(out, " ")
}
