//go:build linux

package integration

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

// patternStream is what `yes 0123456789abcdef | head -c n` writes.
type patternStream struct{ n, off int64 }

const patternLine = "0123456789abcdef\n"

func (p *patternStream) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := 0
	for k < len(b) && p.off < p.n {
		b[k] = patternLine[p.off%int64(len(patternLine))]
		k++
		p.off++
	}
	return k, nil
}

func patternTail(n int64, size int) string {
	p := &patternStream{n: n, off: n - int64(size)}
	b, _ := io.ReadAll(p)
	return string(b)
}

func sha256Of(t *testing.T, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// spillFiles lists the spill files of the harness's run n under dir (any depth).
func spillFiles(dir string, pid int, n int) []string {
	var out []string
	prefix := fmt.Sprintf("dsh-subprocess-%d-%d-", pid, n)
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasPrefix(info.Name(), prefix) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestExecutorBulkOutput: 100 MB of stdout through Run. The executor's memory
// grows by far less than the output (tail in memory, the rest in the spill
// file); the spill file holds the stream byte for byte, is private (0600 in a
// 0700 directory, owned by the identity) and named per the contract; the tail
// is the last 64000 bytes. Past the default 64 MiB cap the spill file is
// deleted and no longer advertised.
func TestExecutorBulkOutput(t *testing.T) {
	// Not parallel: it measures memory and moves 400 MB through pipes.
	const size = 100_000_000
	const maxGrowthKB = 16 << 10
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, c := range []struct {
			name     string
			spillCap int64
		}{{"spill-kept", 128 << 20}, {"spill-over-cap", 0}} {
			t.Run(c.name, func(t *testing.T) {
				cfg := id.execConfig(t, "workspace-write")
				cfg.SpillCap = c.spillCap
				out := id.harness(t, harnessproto.Spec{
					Config:  cfg,
					Action:  "run",
					Request: harnessproto.Request{Command: fmt.Sprintf("yes 0123456789abcdef | head -c %d", size), TimeoutMs: f64(testtime.Ms(60000))},
				})
				r := requireResult(t, out.Outcome)
				requireConfined(t, r, "workspace-write")
				if r.ExitCode != 0 || r.TimedOut {
					t.Errorf("exit=%d timedOut=%v, want 0 false", r.ExitCode, r.TimedOut)
				}
				if growth := out.HWMAfterKB - out.RSSBeforeKB; out.RSSBeforeKB <= 0 || growth >= maxGrowthKB {
					t.Errorf("the executor's peak RSS grew by %d kB (VmRSS before %d kB, VmHWM after %d kB), want < %d kB",
						growth, out.RSSBeforeKB, out.HWMAfterKB, maxGrowthKB)
				} else {
					t.Logf("peak RSS growth: %d kB", growth)
				}
				if !r.Stdout.Truncated {
					t.Errorf("stdout not truncated")
				}
				if want := patternTail(size, executor.DefaultTailBytes); r.Stdout.Text != want {
					t.Errorf("stdout tail: %d bytes ending %q, want the last %d bytes of the stream", len(r.Stdout.Text), r.Stdout.Text[max(0, len(r.Stdout.Text)-40):], len(want))
				}
				if r.Stderr.Text != "" || r.Stderr.Truncated || r.Stderr.SpillPath != "" {
					t.Errorf("stderr = %+v, want empty", r.Stderr)
				}
				files := spillFiles(cfg.SpillDir, out.Pid, 1)
				if c.spillCap == 0 {
					if r.Stdout.SpillPath != "" {
						t.Errorf("spill path %q advertised for a stream past the 64 MiB cap", r.Stdout.SpillPath)
					}
					if len(files) != 0 {
						t.Errorf("spill files left past the cap: %q", files)
					}
					return
				}
				p := r.Stdout.SpillPath
				if p == "" {
					t.Fatalf("no spill path under a 128 MiB cap")
				}
				if !slices.Equal(files, []string{p}) {
					t.Errorf("spill files of the run = %q, want exactly %q", files, p)
				}
				re := regexp.MustCompile(`^dsh-subprocess-` + strconv.Itoa(out.Pid) + `-1-[0-9a-f]{12}-stdout\.log$`)
				if !re.MatchString(filepath.Base(p)) {
					t.Errorf("spill file name %q does not match %s", filepath.Base(p), re)
				}
				if filepath.Dir(p) != out.SpillDir {
					t.Errorf("spill file %s is not in the executor's spill directory %s", p, out.SpillDir)
				}
				for _, c := range []struct {
					path string
					mode os.FileMode
				}{{filepath.Dir(p), os.ModeDir | 0o700}, {p, 0o600}} {
					fi, err := os.Lstat(c.path)
					if err != nil {
						t.Fatal(err)
					}
					if fi.Mode() != c.mode {
						t.Errorf("%s mode = %v, want %v", c.path, fi.Mode(), c.mode)
					}
					if st := fi.Sys().(*syscall.Stat_t); st.Uid != id.uid || st.Gid != id.gid {
						t.Errorf("%s owned by %d:%d, want %d:%d", c.path, st.Uid, st.Gid, id.uid, id.gid)
					}
				}
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if fi, _ := f.Stat(); fi.Size() != size {
					t.Errorf("spill file size = %d, want %d", fi.Size(), size)
				}
				if got, want := sha256Of(t, f), sha256Of(t, &patternStream{n: size}); got != want {
					t.Errorf("spill file sha256 %s, want %s (the stream written)", got, want)
				}
			})
		}
	})
}

// TestExecutorBackgroundReads: a background command's Reads are incremental
// (each returns only what came since the previous one), and a Read that
// missed more than the 64000-byte tail is Lossy and names the spill file,
// which holds the whole stream.
func TestExecutorBackgroundReads(t *testing.T) {
	t.Parallel()
	var full strings.Builder
	full.WriteString("one\ntwo\n")
	for i := 1; i <= 40000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	full.WriteString("end\n")
	want := full.String()
	forEachIdentity(t, func(t *testing.T, id identity) {
		out := id.harness(t, harnessproto.Spec{
			Config: id.execConfig(t, "workspace-write"),
			Action: "start",
			// The sleeps (scaled) give the reader, every 50 ms, time to read
			// between the pieces. The 229 kB come from cat, in writes of
			// 128 kB, each more than the tail: seq's own 4 kB writes, on a
			// slow machine, could trickle in below the tail per read.
			Request: harnessproto.Request{Command: fmt.Sprintf(`seq 1 40000 > .burst
echo one; echo e1 >&2; sleep %[1]s; echo two; sleep %[1]s
cat .burst; sleep %[1]s; echo end`, sleepArg(400*time.Millisecond))},
			ReadEveryMs: 50,
		})
		r := requireResult(t, out.Outcome)
		requireConfined(t, r, "workspace-write")
		if r.ExitCode != 0 || r.Killed {
			t.Errorf("exit=%d killed=%v", r.ExitCode, r.Killed)
		}
		var stderr strings.Builder
		var stdoutDeltas []string
		pos, lossy := 0, 0
		spill := ""
		for i, d := range out.Deltas {
			stderr.WriteString(d.Stderr)
			if d.Stdout == "" && !d.Lossy {
				continue
			}
			stdoutDeltas = append(stdoutDeltas, d.Stdout)
			if !d.Lossy {
				if len(d.SpillPaths) != 0 {
					t.Errorf("delta %d is not lossy but lists spill paths %q", i, d.SpillPaths)
				}
				if !strings.HasPrefix(want[pos:], d.Stdout) {
					t.Fatalf("delta %d = %q does not continue the stream at byte %d (%q)", i, trunc(d.Stdout), pos, trunc(want[pos:]))
				}
				pos += len(d.Stdout)
				continue
			}
			lossy++
			if len(d.Stdout) != executor.DefaultTailBytes {
				t.Errorf("lossy delta %d holds %d bytes, want the %d-byte tail", i, len(d.Stdout), executor.DefaultTailBytes)
			}
			k := strings.Index(want[pos:], d.Stdout)
			if k <= 0 {
				t.Fatalf("lossy delta %d is not a later part of the stream after byte %d (index %d)", i, pos, k)
			}
			pos += k + len(d.Stdout)
			if len(d.SpillPaths) != 1 {
				t.Errorf("lossy delta %d lists spill paths %q, want the stdout spill file", i, d.SpillPaths)
			} else {
				spill = d.SpillPaths[0]
			}
		}
		if pos != len(want) {
			t.Errorf("the deltas cover %d bytes of the %d-byte stream", pos, len(want))
		}
		if lossy == 0 {
			t.Errorf("no lossy delta although 229 kB came between two reads")
		}
		if len(stdoutDeltas) < 4 || stdoutDeltas[0] != "one\n" || stdoutDeltas[1] != "two\n" || stdoutDeltas[len(stdoutDeltas)-1] != "end\n" {
			t.Errorf("stdout deltas start %q and end %q, want one\\n, two\\n, ..., end\\n", stdoutDeltas[:min(2, len(stdoutDeltas))], stdoutDeltas[max(0, len(stdoutDeltas)-1):])
		}
		if stderr.String() != "e1\n" {
			t.Errorf("stderr deltas = %q, want %q", stderr.String(), "e1\n")
		}
		if spill == "" {
			return
		}
		if r.Stdout.SpillPath != spill || !r.Stdout.Truncated || !strings.HasSuffix(r.Stdout.Text, "39999\n40000\nend\n") {
			t.Errorf("final stdout = {spill %q truncated %v tail …%q}, want spill %q, truncated, ending with the stream",
				r.Stdout.SpillPath, r.Stdout.Truncated, r.Stdout.Text[max(0, len(r.Stdout.Text)-20):], spill)
		}
		if got := readFile(t, spill); got != want {
			t.Errorf("spill file %s: %d bytes, want the whole %d-byte stream", spill, len(got), len(want))
		}
	})
}

// TestExecutorTailSizes: StdoutMaxBytes raises the foreground stdout tail
// (never lowers it, never the stderr one), and a truncated tail starts at a
// character boundary.
func TestExecutorTailSizes(t *testing.T) {
	t.Parallel()
	var seq strings.Builder
	for i := 1; i <= 30000; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	seqOut := seq.String() // 168894 bytes
	// "a", 40000 two-byte characters, "b": the last 64000 bytes start with
	// the second byte of a character.
	utf := "a" + strings.Repeat("é", 40000) + "b"
	forEachIdentity(t, func(t *testing.T, id identity) {
		o := id.harness(t, harnessproto.Spec{Config: id.execConfig(t, "workspace-write"), Action: "concurrent", Requests: []harnessproto.Request{
			{Command: "seq 1 30000; seq 1 30000 >&2", StdoutMaxBytes: 200000},
			{Command: "seq 1 30000", StdoutMaxBytes: 10},
			{Command: `printf a; for i in $(seq 40000); do printf '\303\251'; done; printf b`},
		}})
		if len(o.Results) != 3 {
			t.Fatalf("%d results", len(o.Results))
		}
		r := requireResult(t, o.Results[0])
		if r.Stdout.Text != seqOut || r.Stdout.Truncated || r.Stdout.SpillPath != "" {
			t.Errorf("stdout with StdoutMaxBytes 200000: %d bytes, truncated %v, spill %q; want all %d bytes, no spill",
				len(r.Stdout.Text), r.Stdout.Truncated, r.Stdout.SpillPath, len(seqOut))
		}
		if r.Stderr.Text != seqOut[len(seqOut)-executor.DefaultTailBytes:] || !r.Stderr.Truncated || r.Stderr.SpillPath == "" {
			t.Errorf("stderr: %d bytes, truncated %v, spill %q; want the last %d bytes and a spill file",
				len(r.Stderr.Text), r.Stderr.Truncated, r.Stderr.SpillPath, executor.DefaultTailBytes)
		} else {
			if got := readFile(t, r.Stderr.SpillPath); got != seqOut {
				t.Errorf("stderr spill file: %d bytes, want %d", len(got), len(seqOut))
			}
			re := regexp.MustCompile(`^dsh-subprocess-` + strconv.Itoa(o.Pid) + `-[0-9]+-[0-9a-f]{12}-stderr\.log$`)
			if !re.MatchString(filepath.Base(r.Stderr.SpillPath)) {
				t.Errorf("stderr spill file name %q does not match %s", filepath.Base(r.Stderr.SpillPath), re)
			}
		}
		r = requireResult(t, o.Results[1])
		if r.Stdout.Text != seqOut[len(seqOut)-executor.DefaultTailBytes:] || !r.Stdout.Truncated {
			t.Errorf("stdout with StdoutMaxBytes 10: %d bytes, truncated %v; want the default %d-byte tail",
				len(r.Stdout.Text), r.Stdout.Truncated, executor.DefaultTailBytes)
		}
		r = requireResult(t, o.Results[2])
		if want := utf[len(utf)-executor.DefaultTailBytes+1:]; r.Stdout.Text != want || !r.Stdout.Truncated {
			t.Errorf("stdout tail of %d bytes starting %q, want %d bytes starting at the next character %q",
				len(r.Stdout.Text), r.Stdout.Text[:min(4, len(r.Stdout.Text))], len(want), want[:4])
		}
	})
}

// TestExecutorSpillDirProtected: a confined command cannot change, remove or
// add files in the executor's spill directory (it lies under /tmp, a
// writable root), not even its own spill file; the spill keeps the stream.
func TestExecutorSpillDirProtected(t *testing.T) {
	t.Parallel()
	var seq strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		cfg := id.execConfig(t, "workspace-write")
		script := fmt.Sprintf(`seq 1 20000
for i in $(seq %[2]s); do ls %[1]s/dsh-sandbox-spill-*/*stdout.log >/dev/null 2>&1 && break; sleep 0.02; done
for f in %[1]s/dsh-sandbox-spill-*/*; do
  echo "SAW $f" >&2
  echo tamper >> "$f" && echo "TAMPERED $f" >&2
  rm -f "$f" && [ ! -e "$f" ] && echo "REMOVED $f" >&2
done
for d in %[1]s/dsh-sandbox-spill-*; do touch "$d/planted" && echo "PLANTED $d" >&2; done
true`, cfg.SpillDir, tries(100))
		o := id.harness(t, harnessproto.Spec{Config: cfg, Action: "run", Request: harnessproto.Request{Command: script}})
		r := requireResult(t, o.Outcome)
		requireConfined(t, r, "workspace-write")
		for _, bad := range []string{"TAMPERED", "REMOVED", "PLANTED"} {
			if strings.Contains(r.Stderr.Text, bad) {
				t.Errorf("the command changed the spill directory: %q", r.Stderr.Text)
			}
		}
		if !strings.Contains(r.Stderr.Text, "SAW ") {
			t.Errorf("the command never saw its spill file (stderr %q): test precondition", r.Stderr.Text)
		}
		if !r.Sandbox.Denied {
			t.Errorf("no denial recorded for the attempts on the spill directory")
		}
		if r.Stdout.SpillPath == "" {
			t.Fatal("no stdout spill file")
		}
		if got := readFile(t, r.Stdout.SpillPath); got != seq.String() {
			t.Errorf("spill file changed: %d bytes, want the %d-byte stream", len(got), seq.Len())
		}
		requireAbsent(t, filepath.Join(o.SpillDir, "planted"))
	})
}
