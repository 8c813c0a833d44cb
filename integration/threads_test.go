//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestThreadExhaustionIsOneLine: with only a few tasks left (a pids cgroup),
// dsh-sandbox-run either runs the command or ends with exit 125 and one line —
// never the Go runtime's crash dump — and nothing it started survives.
func TestThreadExhaustionIsOneLine(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		refused := 0
		for max := 2; max <= 12; max++ {
			t.Run(fmt.Sprintf("pids.max=%d", max), func(t *testing.T) {
				cg := newPidsCgroup(t, id, max)
				ws := id.workspace(t)
				// On a simulated host its wrapper (a Go program, whose own
				// threads would exhaust the group) runs first, outside.
				cwrap, cfd := cg.place(nil)
				if host := simulatedHost(t, id); host != nil {
					if cfd > 0 {
						skipOnSimulatedHost(t, "on cgroup v2 the command starts in the group (CLONE_INTO_CGROUP), the simulation's wrapper with it, whose own threads exhaust so few tasks")
					}
					cwrap = append(host, cwrap...)
				}
				r := id.run(t, runOpts{Wrap: cwrap, CgroupFD: cfd, Flags: sandboxFlags("workspace-write", ws), Argv: []string{"bash", "-c", "echo ok"},
					Dir: ws, NoReport: true, Timeout: 60 * time.Second})
				switch r.Exit {
				case 0:
					if r.Stdout != "ok\n" {
						t.Errorf("exit 0 but stdout %q", r.Stdout)
					}
				case 125:
					refused++
					ls := lines(r.Stderr)
					if len(ls) != 1 || !strings.HasPrefix(ls[0], cliPrefix) {
						t.Errorf("want exactly one line starting %q, got %q", cliPrefix, r.Stderr)
					}
				default:
					t.Errorf("exit %d (want 0 or 125); stderr=%q", r.Exit, trunc(r.Stderr))
				}
				if strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "SIGABRT") {
					t.Errorf("Go runtime crash dump on stderr: %q", trunc(r.Stderr))
				}
				// Nothing the CLI started outlives it: the cgroup empties.
				if err := pollCond(10*time.Second, func() bool { return len(cg.procs(t)) == 0 }); err != nil {
					t.Errorf("processes left in the cgroup after dsh-sandbox-run ended:%s", cg.survivors(t))
				}
			})
		}
		if refused == 0 {
			t.Errorf("no pids.max from 2 to 12 was refused: the limit was not exercised")
		}
	})
}
