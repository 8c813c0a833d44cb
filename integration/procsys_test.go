//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// globalKnob is a global kernel setting the tests try to change from inside
// the sandbox. Each is harmless to change and restored if a run changed it.
type globalKnob struct {
	path, value string // value: what the command writes
}

// globalKnobs reads the knobs that exist here and registers their restore.
func globalKnobs(t *testing.T) []globalKnob {
	t.Helper()
	var out []globalKnob
	add := func(path string, next func(cur string) string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		cur := strings.TrimSpace(string(b))
		t.Cleanup(func() {
			if now, _ := os.ReadFile(path); strings.TrimSpace(string(now)) != cur {
				if err := os.WriteFile(path, []byte(cur+"\n"), 0); err != nil {
					t.Errorf("restore %s to %q: %v", path, cur, err)
				}
			}
		})
		out = append(out, globalKnob{path, next(cur)})
	}
	inc := func(cur string) string {
		n, err := strconv.Atoi(cur)
		if err != nil {
			t.Fatalf("not a number: %q", cur)
		}
		return strconv.Itoa(n + 1)
	}
	add("/proc/sys/fs/lease-break-time", inc)
	// The escape of the issue: a "|program" core_pattern runs as root on
	// the next crash. The value written here is inert.
	add("/proc/sys/kernel/core_pattern", func(string) string { return "dsh-core-" + nonce() })
	add("/sys/kernel/mm/ksm/sleep_millisecs", inc)
	return out
}

func (k globalKnob) unchanged(t *testing.T, before string) {
	t.Helper()
	b, err := os.ReadFile(k.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != before {
		t.Errorf("%s = %q after the run, want %q: the sandbox changed a global kernel setting", k.path, got, before)
	}
}

// TestProcSysReadOnly: no confined mode on any host configuration can change
// a sysctl or another global /proc or /sys setting — not by its path, not
// through /proc/self/root — while the command's own /proc files (its fd
// magic links; oom_score_adj where Landlock does not deny every /proc write)
// keep working. The supervisor reports the sysctl write.
func TestProcSysReadOnly(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				knobs := globalKnobs(t)
				before := map[string]string{}
				var script strings.Builder
				for _, k := range knobs {
					b, _ := os.ReadFile(k.path)
					before[k.path] = strings.TrimSpace(string(b))
					fmt.Fprintf(&script, "echo %q > %q; echo %q > /proc/self/root%s; ", k.value, k.path, k.value, k.path)
				}
				own := "own-" + nonce()
				fmt.Fprintf(&script, "(echo %s > /proc/self/fd/1) | cat; ", own) // a pipe of its own
				script.WriteString(`echo 500 > /proc/self/oom_score_adj && echo "oom=$(cat /proc/self/oom_score_adj)"; exit 0`)
				ws := id.workspace(t)
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash(script.String()), Dir: ws})
				requireExit(t, r, 0)
				for _, k := range knobs {
					k.unchanged(t, before[k.path])
				}
				if !strings.Contains(r.Stdout, own) {
					t.Errorf("a write through the command's own /proc/self/fd/1 failed: stdout=%q", r.Stdout)
				}
				if h.d == &degradedNoLandlock && !strings.Contains(r.Stdout, "oom=500") {
					t.Errorf("the command's own oom_score_adj is not writable without Landlock: stdout=%q", r.Stdout)
				}
				requireDenial(t, r, mode, "write", "/proc/sys/fs/lease-break-time")
			})
		}
	})
}

// TestProbeMissingExact: the probe's missing list of each confined mode is
// exactly what the host configuration cannot guarantee, at the kernel's
// Landlock ABI and capped below it (--landlock-abi: the older kernels'
// lists); the probe says which ABI it used and the kernel's.
func TestProbeMissingExact(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		kernel, _ := landlockABI()
		for _, abiCap := range abiCaps(kernel) {
			abi, flags := kernel, []string{"--probe", "--json"}
			if abiCap != "" {
				abi, _ = strconv.Atoi(abiCap)
				flags = append(flags, "--landlock-abi", abiCap)
			}
			t.Run("abi "+strconv.Itoa(abi), func(t *testing.T) {
				var want []string
				if !h.mountView() {
					// (signal-isolation holds below ABI 6 too: the
					// supervisor judges signals there; no "truncate" below
					// ABI 3 either: the supervisor refuses truncation
					// without a mount view, openguard_test.go; nor
					// "metadata-writes": the supervisor performs them,
					// metadata_test.go; nor "ipc-isolation": it judges
					// IPC ids, ipc_test.go.)
					want = []string{"protected-paths", "process-visibility", "secret-masks-mount"}
				}
				if h.d == &degradedNoLandlock {
					want = append(want, "secret-masks-landlock") // the mount view alone hides the secrets
				}
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: flags, NoReport: true, Dir: id.workspace(t)})
				requireExit(t, r, 0)
				p := parseProbe(t, r)
				if h.d != &degradedNoLandlock {
					if p.Landlock.ABI != abi {
						t.Errorf("landlock.abi = %d, want %d", p.Landlock.ABI, abi)
					}
					wantKernel := 0
					if abi != kernel {
						wantKernel = kernel
					}
					if p.Landlock.KernelABI != wantKernel {
						t.Errorf("landlock.kernelAbi = %d, want %d", p.Landlock.KernelABI, wantKernel)
					}
				}
				for _, m := range confinedModes {
					w := []string{}
					for _, x := range want {
						if m == "workspace-write" || x != "protected-paths" { // a workspace-write guarantee
							w = append(w, x)
						}
					}
					if got := withoutLimits(p.Modes[m].Missing); !reflect.DeepEqual(got, w) { // limits: limits_test.go
						t.Errorf("modes[%s].missing = %q, want %q", m, got, w)
					}
				}
			})
		}
	})
}

// procEntryMode returns the mode of a /proc entry as a fresh procfs instance
// shows it (a chmod of a proc entry changes it for every instance, while an
// already cached inode may still show the old mode).
func procEntryMode(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("unshare", "-rmpf", "--mount-proc", "stat", "-c", "%a", path).CombinedOutput()
	if err != nil {
		t.Fatalf("stat %s in a fresh procfs: %v: %s", path, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestProcEntryModesUnchanged: root in the sandbox (CapEff 0, but the owner
// of every /proc entry) cannot chmod a global /proc entry, which would change
// it on the host too: the mount view binds them read-only; without one the
// supervisor, which performs every metadata change there, refuses it.
func TestProcEntryModesUnchanged(t *testing.T) {
	const entry = "/proc/kmsg"
	if !exists(entry) {
		t.Skip("no " + entry)
	}
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		before := procEntryMode(t, entry)
		t.Cleanup(func() {
			if procEntryMode(t, entry) != before {
				m, _ := strconv.ParseUint(before, 8, 32)
				if err := os.Chmod(entry, os.FileMode(m)); err != nil {
					t.Errorf("restore the mode of %s: %v", entry, err)
				}
			}
		})
		for _, mode := range confinedModes {
			ws := id.workspace(t)
			r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash("chmod 0444 " + entry + "; exit 0"), Dir: ws})
			requireExit(t, r, 0)
			if got := procEntryMode(t, entry); got != before {
				t.Errorf("%s: the mode of %s is %s after the run, want %s: the sandbox changed a global proc entry", mode, entry, got, before)
			}
		}
	})
}
