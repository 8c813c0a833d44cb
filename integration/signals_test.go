//go:build linux

package integration

import (
	"fmt"
	"strconv"
	"testing"
)

// Signals on hosts without a pid namespace. Landlock scopes signals from
// ABI 6; below it the supervisor judges kill, tkill, tgkill,
// rt_*sigqueueinfo and pidfd_send_signal
// (sandbox/internal/supervisor/signal_linux.go). Each
// case runs on the kernel's ABI and, where the kernel is newer, capped at
// ABI 5 and 2 with --landlock-abi: the very code path of Ubuntu 24.04
// (6.8, ABI 4) and Debian 12 (6.1, ABI 2), which make vm-test runs for real.

const pidfdSignalScript = `python3 - "$PID" <<'EOF'
import os, signal, sys
fd = os.pidfd_open(int(sys.argv[1]))
try:
    signal.pidfd_send_signal(fd, signal.SIGKILL)
except OSError as e:
    print("pidfd_send_signal", e.errno)
    sys.exit(1)
EOF`

// sigqueueScript sends SIGKILL to $PID with rt_sigqueueinfo and a real
// siginfo (SI_QUEUE), so the kernel would deliver it.
const sigqueueScript = `python3 - <<'EOF'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
info = ctypes.create_string_buffer(struct.pack("iii", 9, 0, -1) + bytes(116))
r = libc.syscall(129, int(os.environ["PID"]), 9, info)  # rt_sigqueueinfo
print("rt_sigqueueinfo", r, ctypes.get_errno())
sys.exit(r != 0)
EOF`

// abiCaps are the Landlock ABIs a test runs under: the kernel's ("") and,
// below it, 5 and 2.
func abiCaps(kernel int) []string {
	caps := []string{""}
	for _, c := range []int{5, 2} {
		if c < kernel {
			caps = append(caps, strconv.Itoa(c))
		}
	}
	return caps
}

// TestSignalsStayInTheSandbox: without a pid namespace, at any Landlock
// ABI, a command cannot signal a process of its user outside the sandbox
// (by pid, process group, -1 or pidfd) — the process is untouched
// afterwards, and below ABI 6 the report has the denial fact — while its
// own processes, itself included, can be signalled.
func TestSignalsStayInTheSandbox(t *testing.T) {
	t.Parallel()
	seen := map[*degradation]bool{}
	for _, h := range hostConfigs {
		// (Under DSH_IT_HOST the full host is the simulated one.)
		if h = h.onHost(); !h.d.lacks("pid-namespace") || seen[h.d] {
			continue // a pid namespace: host pids are not even nameable
		}
		seen[h.d] = true
		t.Run(h.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				h.d.need(t, id)
				kernel := requireLandlock(t)
				for _, abiCap := range abiCaps(kernel) {
					abi := kernel
					var capFlags []string
					name := "abi " + strconv.Itoa(kernel)
					if abiCap != "" {
						abi, _ = strconv.Atoi(abiCap)
						capFlags = []string{"--landlock-abi", abiCap}
						name = "abi capped at " + abiCap
					}
					t.Run(name, func(t *testing.T) {
						for _, mode := range confinedModes {
							denied := []struct {
								name, script, target string
							}{
								{"kill", `kill -TERM "$PID"`, "pid"},
								{"kill -KILL", `kill -KILL "$PID"`, "pid"},
								{"kill -STOP", `kill -STOP "$PID"`, "pid"},
								{"kill the process group", `kill -KILL -- "-$PID"`, "pgrp"},
								{"rt_sigqueueinfo", sigqueueScript, "pid"},
								{"tgkill", `python3 -c 'import ctypes,os,sys; l=ctypes.CDLL(None,use_errno=True); p=int(os.environ["PID"]); r=l.syscall(234, p, p, 9); print(r, ctypes.get_errno()); sys.exit(r != 0)'`, "pid"},
								{"pidfd_send_signal", pidfdSignalScript, "pid"},
							}
							if !id.isRoot() {
								// kill(-1) reaches every process the caller may
								// signal: as root, were it let through, the
								// whole machine's. Run it as the test user only.
								denied = append(denied, struct{ name, script, target string }{"kill -1", `kill -KILL -1`, "every"})
							}
							for _, c := range denied {
								t.Run(mode+"/"+c.name, func(t *testing.T) {
									hp := id.startHost(t, true)
									ws := id.workspace(t)
									r := id.run(t, runOpts{
										Wrap:  h.d.wrap(),
										Flags: sandboxFlags(mode, ws, capFlags...),
										Argv:  bash(c.script),
										Env:   []string{"PID=" + fmt.Sprint(hp.pid)},
										Dir:   ws,
									})
									if c.target == "every" && abi >= 6 {
										// kill(-1) answers 0 when every target
										// refused it with EPERM: the command's
										// nested domain reaches no process but
										// its own, and it has none here.
										requireExit(t, r, 0)
									} else {
										requireFailed(t, r)
									}
									hp.requireUntouched(t)
									if abi >= 6 {
										return // Landlock's scope denied it: no fact
									}
									target := map[string]string{"pid": "pid " + fmt.Sprint(hp.pid), "pgrp": "pgrp " + fmt.Sprint(hp.pid), "every": "every process"}[c.target]
									requireDenial(t, r, mode, "signal", target)
								})
							}
							t.Run(mode+"/no survivor after SIGKILL", func(t *testing.T) {
								// The runner kills the tree itself when the
								// supervisor is gone: its own signals must not
								// depend on the supervisor's answer.
								sigkillNoSurvivor(t, id, mode, h.d.wrap(), capFlags...)
							})
							t.Run(mode+"/own processes", func(t *testing.T) {
								ws := id.workspace(t)
								script := `
sleep 30 & p=$!; kill -TERM $p; wait $p; echo "kill $?"
trap 'echo usr1' USR1; kill -USR1 $$
python3 - <<'EOF'
import os, signal, subprocess
p = subprocess.Popen(["sleep", "30"])
signal.pidfd_send_signal(os.pidfd_open(p.pid), signal.SIGTERM)
print("pidfd", p.wait())
signal.signal(signal.SIGUSR2, lambda *a: print("usr2"))
os.kill(os.getpid(), signal.SIGUSR2)
EOF`
								r := id.run(t, runOpts{Wrap: h.d.wrap(), Flags: sandboxFlags(mode, ws, capFlags...), Argv: bash(script), Dir: ws})
								requireExit(t, r, 0)
								for _, want := range []string{"kill 143", "usr1", "pidfd -15", "usr2"} {
									if !hasLine(r.Stdout, want) {
										t.Errorf("stdout lacks %q: %q (stderr %q)", want, r.Stdout, r.Stderr)
									}
								}
								requireNoDenials(t, r)
							})
						}
					})
				}
			})
		})
	}
}
