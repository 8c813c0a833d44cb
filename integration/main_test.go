//go:build linux

// Package integration is the adversarial integration suite for dsh-sandbox-run
// and the sandbox Executor.
//
// It builds the CLI and the executor harness (internal/harness, a small
// program driving an Executor from a JSON spec) once (TestMain) and runs them
// on the real kernel, as root (when
// the test process is root) and as an unprivileged user (env DSH_TEST_USER,
// default "dshtest"). Every denial test checks the state of the world afterwards
// and the denial facts of the --report JSON; every "allowed" twin checks that the
// effect happened.
//
// Environment:
//
//	DSH_TEST_USER          unprivileged account to run the CLI as (default dshtest)
//	DSH_REQUIRE_LANDLOCK=1 fail (instead of skip) tests that need Landlock when it is absent
//	DSH_SANDBOX_RUN        use this prebuilt dsh-sandbox-run instead of building one
//	DSH_IT_BIN             a directory with prebuilt dsh-sandbox-run, degrade, harness,
//	                       toolrepl and rawcmd binaries (make vm-test) instead of building them
//	DSH_TEST_TIME_SCALE    multiply the tests' deadlines (make vm-test sets it under TCG)
//	DSH_IT_HOST            run every command of the suite on a simulated host:
//	                       nouserns, nolandlock, apparmor (Ubuntu 24.04), docker
//	                       (Docker's default seccomp profile) or usernsonly (a
//	                       nested sandbox); see degraded_test.go and make test-hosts
//	CI=true                a missing test user is a failure, not a skip
package integration

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testhost"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

const (
	cliPrefix = "dsh-sandbox-run: "
	// The PATH every sandboxed command gets: system directories only, so that
	// python3 is /usr/bin/python3 (not a per-user shim the test user cannot read).
	testPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

var (
	binDir     string // 0755 directory holding the built binaries
	cliPath    string // dsh-sandbox-run
	degradeBin string // integration/internal/degrade
	buildErr   error  // why the CLI could not be built
	helperErr  error  // why the degrade helper could not be built
	rawcmdBin  string // integration/internal/rawcmd
	rawcmdErr  error  // why it could not be built
	racerBin   string // integration/internal/racer
	racerErr   error  // why it could not be built
	gounixBin  string // integration/internal/gounix
	gounixErr  error  // why it could not be built
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	defer watchHang()()
	dir, err := os.MkdirTemp("/tmp", "dsh-it-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot create the build directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	binDir = dir

	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot find the module root:", err)
		return 1
	}

	// DSH_IT_BIN: binaries built beforehand (make vm-test builds them on the
	// host, where go build is ~20x faster than in a TCG guest).
	prebuilt := os.Getenv("DSH_IT_BIN")
	build := func(name, pkg string) (string, error) {
		if prebuilt != "" {
			p := filepath.Join(prebuilt, name)
			if _, err := os.Stat(p); err != nil {
				return p, fmt.Errorf("DSH_IT_BIN=%s: %w", prebuilt, err)
			}
			return p, nil
		}
		p := filepath.Join(binDir, name)
		return p, goBuild(root, p, pkg)
	}
	if p := os.Getenv("DSH_SANDBOX_RUN"); p != "" {
		cliPath = p
	} else if cliPath, buildErr = build("dsh-sandbox-run", "./cmd/dsh-sandbox-run"); buildErr != nil {
		fmt.Fprintln(os.Stderr, "integration: BUILD OF dsh-sandbox-run FAILED, every test will fail:\n", buildErr)
	}
	if degradeBin, helperErr = build("degrade", "./integration/internal/degrade"); helperErr != nil {
		fmt.Fprintln(os.Stderr, "integration: build of the degrade helper failed:\n", helperErr)
	}
	if harnessBin, harnessErr = build("harness", "./integration/internal/harness"); harnessErr != nil {
		fmt.Fprintln(os.Stderr, "integration: build of the executor harness failed:\n", harnessErr)
	}
	if toolreplBin, toolreplErr = build("toolrepl", "./examples/toolrepl"); toolreplErr != nil {
		fmt.Fprintln(os.Stderr, "integration: build of examples/toolrepl failed:\n", toolreplErr)
	}
	if rawcmdBin, rawcmdErr = build("rawcmd", "./integration/internal/rawcmd"); rawcmdErr != nil {
		fmt.Fprintln(os.Stderr, "integration: build of integration/internal/rawcmd failed:\n", rawcmdErr)
	}
	if racerBin, racerErr = build("racer", "./integration/internal/racer"); racerErr != nil {
		fmt.Fprintln(os.Stderr, "integration: build of integration/internal/racer failed:\n", racerErr)
	}
	if gounixBin, gounixErr = build("gounix", "./integration/internal/gounix"); gounixErr != nil {
		fmt.Fprintln(os.Stderr, "integration: build of integration/internal/gounix failed:\n", gounixErr)
	}
	return m.Run()
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	abs, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		return "", err
	}
	return abs, nil
}

func goBuild(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return os.Chmod(out, 0o755)
}

// needCLI fails the test when the CLI did not build.
func needCLI(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("dsh-sandbox-run did not build: %v", buildErr)
	}
}

// ---------------------------------------------------------------------------
// Identities

type identity struct {
	name     string // "root" or "user"
	uid, gid uint32
	home     string
	username string
	switchTo bool // start the CLI with SysProcAttr.Credential
}

func (id identity) isRoot() bool { return id.uid == 0 }

// forEachIdentity runs f as a "root" subtest (only when the test process is
// root) and as a "user" subtest (the unprivileged DSH_TEST_USER account, or the
// current account when the test process is not root).
func forEachIdentity(t *testing.T, f func(t *testing.T, id identity)) {
	t.Helper()
	needCLI(t)
	if os.Geteuid() == 0 {
		t.Run("root", func(t *testing.T) {
			f(t, identity{name: "root", uid: 0, gid: 0, home: "/root", username: "root"})
		})
	}
	t.Run("user", func(t *testing.T) {
		id, ok := unprivileged(t)
		if !ok {
			return
		}
		f(t, id)
	})
}

func unprivileged(t *testing.T) (identity, bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Fatalf("current user: %v", err)
		}
		return identity{name: "user", uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), home: u.HomeDir, username: u.Username}, true
	}
	u := testhost.TestUser(t)
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return identity{name: "user", uid: uint32(uid), gid: uint32(gid), home: u.HomeDir, username: u.Username, switchTo: true}, true
}

// env is the environment the CLI (and so the command) gets: minimal and
// deterministic, no TMPDIR (so /tmp is the only temp root).
func (id identity) env(extra ...string) []string {
	e := []string{
		"PATH=" + testPATH,
		"HOME=" + id.home,
		"USER=" + id.username,
		"LOGNAME=" + id.username,
		"LANG=C",
		"LC_ALL=C",
	}
	return append(e, extra...)
}

func (id identity) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if id.switchTo {
		a.Credential = &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: []uint32{}}
	}
	return a
}

// ---------------------------------------------------------------------------
// Directories and files owned by the identity

func canon(t *testing.T, p string) string {
	t.Helper()
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("EvalSymlinks(%s): %v", p, err)
	}
	return c
}

// mkdirOwned creates a fresh 0755 directory under parent owned by the identity
// and removes it when the test ends.
func (id identity) mkdirOwned(t *testing.T, parent, pattern string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		t.Fatalf("MkdirTemp(%s): %v", parent, err)
	}
	t.Cleanup(func() { forceRemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(d, int(id.uid), int(id.gid)); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	return canon(t, d)
}

// forceRemoveAll removes a tree even when the sandboxed command left
// read-only directories behind.
func forceRemoveAll(d string) {
	if err := os.RemoveAll(d); err == nil {
		return
	}
	_ = filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(d)
}

// workspace is a fresh workspace under /tmp owned by the identity.
func (id identity) workspace(t *testing.T) string {
	t.Helper()
	return id.mkdirOwned(t, "/tmp", "dsh-it-ws-")
}

// outside is a fresh directory owned by the identity (so DAC allows writes)
// that is outside every writable root (/tmp, /dev/shm, $TMPDIR, the workspace):
// under /var/lib when the test is root, /var/tmp otherwise.
func (id identity) outside(t *testing.T) string {
	t.Helper()
	parent := "/var/lib"
	if os.Geteuid() != 0 {
		parent = "/var/tmp"
	}
	d := id.mkdirOwned(t, parent, "dsh-it-out-")
	for _, root := range []string{"/tmp", "/dev/shm", os.Getenv("TMPDIR")} {
		if root != "" && (d == root || strings.HasPrefix(d, canonOrSelf(root)+"/")) {
			t.Fatalf("outside dir %s lies under writable root %s", d, root)
		}
	}
	return d
}

func canonOrSelf(p string) string {
	if c, err := filepath.EvalSymlinks(p); err == nil {
		return c
	}
	return p
}

// writeOwned writes a file owned by the identity.
func (id identity) writeOwned(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, int(id.uid), int(id.gid)); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func nonce() string {
	return fmt.Sprintf("%d%06d", time.Now().UnixNano()%1000, rand.IntN(1000000))
}

// ---------------------------------------------------------------------------
// Running the CLI

type runOpts struct {
	Bin        string   // the program to run (default cliPath; e.g. its landlock-run symlink)
	Flags      []string // dsh-sandbox-run flags (before "--")
	Argv       []string // the command; nil means no "--" and no command
	Wrap       []string // argv prefix in front of the CLI (unshare, degrade)
	Env        []string // extra environment
	Dir        string   // working directory (default "/")
	Stdin      *os.File // the CLI's stdin (default /dev/null)
	Stdout     *os.File // the CLI's stdout (default a file, read into result.Stdout)
	ExtraFiles []*os.File
	NoReport   bool
	Timeout    time.Duration
	// CgroupFD, when positive, is a cgroup v2 directory the CLI (or its
	// Wrap) starts in (CLONE_INTO_CGROUP, by the root test process).
	CgroupFD int
}

type result struct {
	Exit      int
	Signal    syscall.Signal // the signal that ended the CLI (Exit is then 128+N), or 0
	Stdout    string
	Stderr    string
	Report    *Report
	ReportRaw string
	ReportErr error
	Cmdline   []string
}

// Report is the --report JSON (docs/report.md). What the sandbox saw is
// nested under "sandbox" (ReportSandbox, embedded so that its fields read as
// the report's; nil when the command never ran).
type Report struct {
	Version        int            `json:"version"`
	Network        bool           `json:"network"`
	Allowlist      *allowlistJSON `json:"allowlist"`
	Workspace      string         `json:"workspace"`
	Transaction    string         `json:"transaction"`
	Argv           []string       `json:"argv"`
	Cwd            string         `json:"cwd"`
	DurationMs     *int64         `json:"durationMs"`
	ExitCode       *int           `json:"exitCode"`
	Signal         string         `json:"signal"`
	TimedOut       *bool          `json:"timedOut"`
	Error          string         `json:"error"`
	*ReportSandbox `json:"sandbox"`
}

// ReportSandbox is the "sandbox" object of a report: the library's Facts.
type ReportSandbox struct {
	Mode        string `json:"mode"`
	Enforcement struct {
		Level       string   `json:"level"`
		Layers      []string `json:"layers"`
		Missing     []string `json:"missing"`
		LandlockABI int      `json:"landlockAbi"`
		Limits      string   `json:"limits"`
		Masked      []struct {
			Path      string   `json:"path"`
			Layers    []string `json:"layers"`
			Sanitized bool     `json:"sanitized"`
		} `json:"masked"`
		Caches []string `json:"caches"`
	} `json:"enforcement"`
	Denied               bool           `json:"denied"`
	Denials              []Denial       `json:"denials"`
	DenialsDropped       *int           `json:"denialsDropped"`
	Changes              []Change       `json:"changes"`
	ChangesDropped       *int           `json:"changesDropped"`
	ChangesDroppedByRoot map[string]int `json:"changesDroppedByRoot"`
	Usage                *struct {
		PeakMemoryBytes *int64 `json:"peakMemoryBytes"`
		CPUTimeMs       *int64 `json:"cpuTimeMs"`
		PeakPids        *int64 `json:"peakPids"`
	} `json:"usage"`
}

// Denial is one denial fact.
type Denial struct {
	Op      string `json:"op"`
	Path    string `json:"path"`
	Address string `json:"address"`
	Syscall string `json:"syscall"`
	Errno   string `json:"errno"`
	Count   int    `json:"count"`
	Reason  string `json:"reason"`
	Suggest *struct {
		Setting string `json:"setting"`
		Value   string `json:"value"`
		Flag    string `json:"flag"`
		Config  string `json:"config"`
		Cannot  string `json:"cannot"`
	} `json:"suggest"`
}

// suffix is how the denial's stderr line ends after "(<mode> mode...)":
// "; allow with FLAG", "; WHY NOT", or nothing without a suggestion.
func (d Denial) suffix() string {
	switch {
	case d.Suggest == nil:
		return ""
	case d.Suggest.Cannot != "":
		return "; " + d.Suggest.Cannot
	}
	return "; allow with " + d.Suggest.Flag
}

// Change is one change fact.
type Change struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	From string `json:"from,omitempty"`
	Type string `json:"type,omitempty"`
	Size int64  `json:"size,omitempty"`
	Mode string `json:"mode,omitempty"`
	Root string `json:"root,omitempty"`
}

func (d Denial) target() string {
	if d.Path != "" {
		return d.Path
	}
	return d.Address
}

func (d Denial) String() string {
	return fmt.Sprintf("{op=%s target=%s syscall=%s errno=%s count=%d}", d.Op, d.target(), d.Syscall, d.Errno, d.Count)
}

func sandboxFlags(mode, ws string, more ...string) []string {
	f := []string{"--mode", mode}
	if ws != "" {
		f = append(f, "--workspace", ws)
	}
	return append(f, more...)
}

func bash(script string) []string { return []string{"bash", "-c", script} }

// tries is n rounds of a command's own polling loop (`for i in $(seq N)`),
// scaled by testtime: the loop's cap stands for "enough time".
func tries(n int) string { return strconv.Itoa(int(testtime.Ms(float64(n)))) }

// sleepArg is d scaled by testtime as an argument of sleep(1) (seconds), for
// a command's sleeps that stand for "the other side had time to act".
func sleepArg(d time.Duration) string {
	return strconv.FormatFloat(testtime.Scale(d).Seconds(), 'f', -1, 64)
}

// start launches the CLI as the identity; the caller must Wait. stdout/stderr go
// to files (not pipes) so that a surviving process holding them cannot block Wait.
type started struct {
	cmd        *exec.Cmd
	outF, errF *os.File
	reportPath string
	args       []string
}

func (id identity) start(t *testing.T, o runOpts) *started {
	t.Helper()
	needCLI(t)
	if o.Wrap == nil {
		o.Wrap = simulatedHost(t, id)
	}
	tmp := id.mkdirOwned(t, "/tmp", "dsh-it-run-")
	s := &started{}
	args := append([]string{}, o.Wrap...)
	if o.Bin != "" {
		args = append(args, o.Bin)
	} else {
		args = append(args, cliPath)
	}
	args = append(args, o.Flags...)
	if !o.NoReport {
		s.reportPath = filepath.Join(tmp, "report.json")
		args = append(args, "--report", s.reportPath)
	}
	if o.Argv != nil {
		args = append(args, "--")
		args = append(args, o.Argv...)
	}
	s.args = args
	var err error
	if s.outF, err = os.Create(filepath.Join(tmp, "stdout")); err != nil {
		t.Fatal(err)
	}
	if s.errF, err = os.Create(filepath.Join(tmp, "stderr")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = id.env(o.Env...)
	cmd.Dir = o.Dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	if o.Stdin != nil {
		cmd.Stdin = o.Stdin
	}
	cmd.Stdout = s.outF
	if o.Stdout != nil {
		cmd.Stdout = o.Stdout
	}
	cmd.Stderr = s.errF
	cmd.ExtraFiles = o.ExtraFiles
	cmd.SysProcAttr = id.sysProcAttr()
	if o.CgroupFD > 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, o.CgroupFD
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", args, err)
	}
	s.cmd = cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			// Waited for a bounded time: a process that SIGKILL cannot
			// end (wait says so) must not hang the suite here.
			reaped := make(chan struct{})
			go func() { _, _ = cmd.Process.Wait(); close(reaped) }()
			select {
			case <-reaped:
			case <-time.After(testtime.Scale(10 * time.Second)):
			}
		}
	})
	return s
}

// watchHang prints, a minute before go test's -timeout panics, what this
// process and every process it started are doing in the kernel (the panic
// shows only the goroutines): a hang's only trace in a CI log. The
// returned function stops it.
func watchHang() (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	d, ok := f.Value.(flag.Getter).Get().(time.Duration)
	if !ok || d <= 2*time.Minute {
		return func() {}
	}
	t := time.AfterFunc(d-time.Minute, func() {
		fmt.Fprintf(os.Stderr, "integration: go test's timeout is a minute away; the processes of this test:%s\nand every process in uninterruptible sleep:%s\n",
			processTree(os.Getpid()), uninterruptible())
	})
	return func() { t.Stop() }
}

// statFields are the fields of dir/stat (dir: /proc/PID or a task's
// directory) after the command's name: state, ppid, ... (nil when it
// cannot be read).
func statFields(dir string) []string {
	st, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
}

// kernelStack is dir/stack on one line ("" when it cannot be read: root
// only).
func kernelStack(dir string) string {
	st, _ := os.ReadFile(dir + "/stack")
	return strings.ReplaceAll(strings.TrimSpace(string(st)), "\n", " | ")
}

// cmdlineOf is the command line of the process at dir (/proc/PID), read
// for at most a second: reading it waits for the process's memory map,
// which a process stuck in the kernel may hold.
func cmdlineOf(dir string) string {
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(dir + "/cmdline")
		got <- b
	}()
	select {
	case b := <-got:
		return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
	case <-time.After(time.Second):
		return "(cmdline unreadable: its memory map is held)"
	}
}

// uninterruptible describes every process with a thread in uninterruptible
// sleep (state D), with its kernel stack (root).
func uninterruptible() string {
	var b strings.Builder
	procs, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	for _, tdir := range procs {
		if f := statFields(tdir); len(f) == 0 || f[0] != "D" {
			continue
		}
		fmt.Fprintf(&b, "\n  %s %q: %s\n    stack: %s", tdir, cmdlineOf(filepath.Dir(filepath.Dir(tdir))), procSummary(tdir), kernelStack(tdir))
	}
	return b.String()
}

// processTree describes the process pid and its descendants, a line per
// thread: state, wait channel, signal masks and (root) the kernel stack of
// each — what a process that will not end leaves to read.
func processTree(pid int) string {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields("/proc/" + e.Name()); len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	var b strings.Builder
	var walk func(p, depth int)
	walk = func(p, depth int) {
		if depth > 8 {
			return
		}
		dir := "/proc/" + strconv.Itoa(p)
		fmt.Fprintf(&b, "\n  %d %q", p, cmdlineOf(dir))
		tasks, _ := os.ReadDir(dir + "/task")
		for _, task := range tasks {
			tdir := dir + "/task/" + task.Name()
			fmt.Fprintf(&b, "\n    task %s: %s", task.Name(), procSummary(tdir))
			if sc, err := os.ReadFile(tdir + "/syscall"); err == nil {
				fmt.Fprintf(&b, " syscall=%s", strings.TrimSpace(string(sc)))
			}
			if st := kernelStack(tdir); st != "" {
				fmt.Fprintf(&b, "\n      stack: %s", st)
			}
		}
		for _, c := range children[p] {
			walk(c, depth+1)
		}
	}
	walk(pid, 0)
	return b.String()
}

// wait waits for the CLI with a timeout (0: 30 s; scaled by testtime: it
// only bounds a hang) — SIGKILL and test failure on timeout — and collects
// output and report.
func (s *started) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	timeout = testtime.Scale(timeout)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		// What it was doing, read before the kill: a hang's only trace.
		hung := processTree(s.cmd.Process.Pid)
		_ = s.cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(testtime.Scale(10 * time.Second)):
			// SIGKILL did not end it: a thread sleeps in the kernel
			// uninterruptibly. Fail now, with what each thread waits for,
			// rather than wait for go test's timeout.
			t.Fatalf("dsh-sandbox-run did not finish within %v, nor after SIGKILL: %q\nbefore the kill:%s\nafter it:%s",
				timeout, s.args, hung, processTree(s.cmd.Process.Pid))
		}
		t.Errorf("dsh-sandbox-run did not finish within %v: %q (killed)\nwhat it was doing:%s", timeout, s.args, hung)
	}
	r := result{Cmdline: s.args, Exit: -1}
	if st := s.cmd.ProcessState; st != nil {
		ws := st.Sys().(syscall.WaitStatus)
		switch {
		case ws.Exited():
			r.Exit = ws.ExitStatus()
		case ws.Signaled():
			r.Exit, r.Signal = 128+int(ws.Signal()), ws.Signal()
		}
	}
	_ = s.outF.Close()
	_ = s.errF.Close()
	r.Stdout = readFile(t, s.outF.Name())
	r.Stderr = readFile(t, s.errF.Name())
	if s.reportPath != "" {
		b, err := os.ReadFile(s.reportPath)
		if err != nil {
			r.ReportErr = fmt.Errorf("no report: %w", err)
		} else {
			r.ReportRaw = string(b)
			var rep Report
			dec := json.NewDecoder(bytes.NewReader(b))
			if err := dec.Decode(&rep); err != nil {
				r.ReportErr = fmt.Errorf("bad report JSON: %w: %s", err, b)
			} else {
				r.Report = &rep
			}
		}
	}
	t.Logf("ran %q\n  exit=%d\n  stdout=%q\n  stderr=%q\n  report=%s", s.args, r.Exit, trunc(r.Stdout), trunc(r.Stderr), trunc(r.ReportRaw))
	return r
}

func trunc(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

func (id identity) run(t *testing.T, o runOpts) result {
	t.Helper()
	return id.start(t, o).wait(t, o.Timeout)
}

// ---------------------------------------------------------------------------
// Assertions

func (r result) String() string {
	return fmt.Sprintf("exit=%d stdout=%q stderr=%q report=%s", r.Exit, trunc(r.Stdout), trunc(r.Stderr), trunc(r.ReportRaw))
}

func requireReport(t *testing.T, r result) *Report {
	t.Helper()
	if r.Report == nil {
		t.Fatalf("no usable --report: %v", r.ReportErr)
	}
	if r.Report.Version != 2 {
		t.Errorf("report version = %d, want 2", r.Report.Version)
	}
	return r.Report
}

// requireDenial asserts a denial fact with the op and one of the targets, and
// (unless quiet) its stderr line.
func requireDenial(t *testing.T, r result, mode, op string, targets ...string) {
	t.Helper()
	rep := requireReport(t, r)
	for _, d := range rep.Denials {
		if d.Op != op {
			continue
		}
		for _, tg := range targets {
			if d.target() == tg {
				if d.Count < 1 {
					t.Errorf("denial %v has count %d", d, d.Count)
				}
				if d.Errno == "" || d.Syscall == "" {
					t.Errorf("denial %v lacks errno or syscall", d)
				}
				line := fmt.Sprintf("%sdenied %s %s (%s mode)", cliPrefix, op, tg, mode)
				withReason := strings.TrimSuffix(line, ")") + ", " + d.Reason + ")"
				line, withReason = line+d.suffix(), withReason+d.suffix()
				if !hasLine(r.Stderr, line) && (d.Reason == "" || !hasLine(r.Stderr, withReason)) {
					t.Errorf("stderr lacks the denial line %q; stderr=%q", line, r.Stderr)
				}
				return
			}
		}
	}
	t.Errorf("report lacks denial op=%q target in %q; denials=%v", op, targets, rep.Denials)
}

func requireNoDenials(t *testing.T, r result) {
	t.Helper()
	rep := requireReport(t, r)
	if len(rep.Denials) != 0 {
		t.Errorf("want no denial facts, got %v", rep.Denials)
	}
	for _, l := range lines(r.Stderr) {
		if strings.HasPrefix(l, cliPrefix+"denied ") {
			t.Errorf("unexpected denial line on stderr: %q", l)
		}
	}
}

func requireExit(t *testing.T, r result, want int) {
	t.Helper()
	if r.Exit != want {
		t.Errorf("exit = %d, want %d (%v)", r.Exit, want, r)
	}
	if r.Report != nil {
		if r.Report.ExitCode == nil {
			t.Errorf("report has no exitCode")
		} else if *r.Report.ExitCode != want {
			t.Errorf("report exitCode = %d, want %d", *r.Report.ExitCode, want)
		}
	}
}

func requireFailed(t *testing.T, r result) {
	t.Helper()
	if r.Exit == 0 {
		t.Errorf("command succeeded, want failure (%v)", r)
	}
	if r.Exit == 125 && strings.Contains(r.Stderr, cliPrefix) && r.Report != nil && r.Report.Error != "" {
		t.Errorf("sandbox setup failed instead of running the command: %v", r.Report.Error)
	}
}

// requireSetupRefused: exit 125, exactly one stderr line, starting with the prefix.
func requireSetupRefused(t *testing.T, r result) {
	t.Helper()
	if r.Exit != 125 {
		t.Errorf("exit = %d, want 125 (%v)", r.Exit, r)
	}
	ls := lines(r.Stderr)
	if len(ls) != 1 || !strings.HasPrefix(ls[0], cliPrefix) {
		t.Errorf("stderr must be exactly one line starting %q, got %q", cliPrefix, r.Stderr)
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// hasDenialLine reports whether s has the denial line want, alone or
// followed by its suggestion ("; allow with ...", "; <why not>").
func hasDenialLine(s, want string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == want || strings.HasPrefix(l, want+"; ") {
			return true
		}
	}
	return false
}

func hasLine(s, want string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == want {
			return true
		}
	}
	return false
}

func requireAbsent(t *testing.T, path string) {
	t.Helper()
	if exists(path) {
		b, _ := os.ReadFile(path)
		t.Errorf("%s exists after the run (content %q), want absent", path, b)
	}
}

func requireContent(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v, want content %q", path, err, want)
		return
	}
	if string(b) != want {
		t.Errorf("%s content = %q, want %q", path, b, want)
	}
}

// ---------------------------------------------------------------------------
// Host capabilities

// landlockABI returns the host's Landlock ABI version, or an error.
func landlockABI() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// requireLandlock skips (or fails under DSH_REQUIRE_LANDLOCK=1) when the
// host has no Landlock.
func requireLandlock(t *testing.T) int {
	t.Helper()
	abi, err := landlockABI()
	if err != nil {
		msg := fmt.Sprintf("Landlock unavailable on this host (landlock_create_ruleset: %v)", err)
		if os.Getenv("DSH_REQUIRE_LANDLOCK") == "1" {
			t.Fatal(msg + " and DSH_REQUIRE_LANDLOCK=1")
		}
		t.Skip(msg + "; set DSH_REQUIRE_LANDLOCK=1 to make this a failure")
	}
	return abi
}

// userNamespacesWork reports whether the identity can create a user namespace
// with unshare(1) (needed by the degraded-host simulations).
func (id identity) userNamespacesWork() error {
	cmd := exec.Command("unshare", "-Ur", "true")
	cmd.Env = id.env()
	cmd.Dir = "/"
	cmd.SysProcAttr = id.sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("unshare -Ur true: %v: %s", err, out)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Host processes

// procsWithCmdline returns the pids of host processes whose NUL-separated
// cmdline equals argv.
func procsWithCmdline(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(b) != want {
			continue
		}
		// skip zombies: they are dead, only not reaped yet
		if f := statFields(filepath.Join("/proc", e.Name())); len(f) > 0 && f[0] == "Z" {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// uniqueSleep is a sleep command line nobody else runs; killSurvivors is registered.
func uniqueSleep(t *testing.T) (arg string) {
	arg = "1000" + nonce()
	t.Cleanup(func() {
		for _, pid := range procsWithCmdline("sleep", arg) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return arg
}

// requireGone polls until no process runs `sleep arg` (grace period, scaled
// by testtime: the kernel needs a moment to tear down a killed tree).
func requireGone(t *testing.T, arg string, grace time.Duration) {
	t.Helper()
	grace = testtime.Scale(grace)
	deadline := time.Now().Add(grace)
	for {
		pids := procsWithCmdline("sleep", arg)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("survivor: `sleep %s` still running as pid(s) %v %v after dsh-sandbox-run ended", arg, pids, grace)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var confinedModes = []string{"read-only", "workspace-write"}
var allModes = []string{"read-only", "workspace-write", "danger-full-access"}

// mkdirAt creates a 0755 directory owned by the identity.
func (id identity) mkdirAt(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, int(id.uid), int(id.gid)); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
}

func readAll(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// requireSyscallDenial asserts a denial of one of the ops whose target is a
// system call name (ptrace, keyring, namespace, mount, bpf, ioctl ...). The
// README says the target is "the system call name"; the name may be in
// path/address or only in the syscall field. The stderr line may omit the
// target when it is only the system call name.
func requireSyscallDenial(t *testing.T, r result, mode string, ops []string, names []string) {
	t.Helper()
	rep := requireReport(t, r)
	for _, d := range rep.Denials {
		if !contains(ops, d.Op) || !(contains(names, d.target()) || (d.target() == "" && contains(names, d.Syscall))) {
			continue
		}
		if d.Count < 1 || d.Errno == "" {
			t.Errorf("denial %v lacks count or errno", d)
		}
		want := []string{fmt.Sprintf("%sdenied %s %s (%s mode)", cliPrefix, d.Op, d.Syscall, mode)}
		if d.target() != "" {
			want = append(want, fmt.Sprintf("%sdenied %s %s (%s mode)", cliPrefix, d.Op, d.target(), mode))
		} else {
			want = append(want, fmt.Sprintf("%sdenied %s (%s mode)", cliPrefix, d.Op, mode))
		}
		for _, w := range want {
			if hasLine(r.Stderr, w+d.suffix()) {
				return
			}
		}
		t.Errorf("stderr lacks a denial line among %q; stderr=%q", want, r.Stderr)
		return
	}
	t.Errorf("report lacks a denial with op in %q naming a system call in %q; denials=%v", ops, names, rep.Denials)
}
