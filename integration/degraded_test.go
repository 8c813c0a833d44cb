//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Degraded hosts, simulated:
//   - "no user namespaces": `degrade nouserns` runs dsh-sandbox-run as the
//     caller (an unprivileged caller without any capability) in a user
//     namespace mapping only the caller's ids, whose max_user_namespaces is
//     0 (the limit is per user namespace);
//   - "no Landlock": `degrade nolandlock` makes landlock_* return ENOSYS;
//   - "Ubuntu 24.04's AppArmor restriction": `degrade apparmor` lets
//     unshare(CLONE_NEWUSER) succeed but its uid_map be refused (EPERM), and
//     refuses every other namespace and mount, as
//     kernel.apparmor_restrict_unprivileged_userns does;
//   - "user namespace only" (a nested sandbox): `degrade usernsonly` lets a
//     user namespace be created and mapped but no other namespace and no
//     mount;
//   - both of the first two.

// noUserNSWrap runs a program on a host without user namespaces. (It was
// `unshare -Ur sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && exec
// "$@"'`, which ran the unprivileged identity as the namespace's root, with
// every capability over its own files: a workspace it cannot read opened,
// the bounding set dropped, the supervisor chmod'ing as an owner-and-root.)
func noUserNSWrap() []string { return []string{degradeBin, "nouserns"} }

type degradation struct {
	name string
	wrap func() []string
	need func(t *testing.T, id identity)
}

func needUserNS(t *testing.T, id identity) {
	t.Helper()
	if err := id.userNamespacesWork(); err != nil {
		t.Skipf("cannot simulate a host without user namespaces: %v", err)
	}
}

func needHelper(t *testing.T) {
	t.Helper()
	if helperErr != nil {
		t.Fatalf("a degraded-host helper did not build: %v", helperErr)
	}
}

var (
	degradedNoUserNS = degradation{
		name: "no user namespaces",
		wrap: noUserNSWrap,
		need: func(t *testing.T, id identity) {
			needHelper(t)
			requireLandlock(t) // the only filesystem layer left
			needUserNS(t, id)
		},
	}
	degradedNoLandlock = degradation{
		name: "no Landlock",
		wrap: func() []string { return []string{degradeBin, "nolandlock"} },
		need: func(t *testing.T, id identity) {
			needHelper(t)
			needUserNS(t, id) // the mount view is the only filesystem layer left
		},
	}
	degradedAppArmor = degradation{
		name: "Ubuntu 24.04 AppArmor",
		wrap: func() []string { return []string{degradeBin, "apparmor"} },
		need: func(t *testing.T, id identity) {
			needHelper(t)
			requireLandlock(t) // the only filesystem layer left
		},
	}
	degradedUserNSOnly = degradation{
		name: "user namespace only",
		wrap: func() []string { return []string{degradeBin, "usernsonly"} },
		need: func(t *testing.T, id identity) {
			needHelper(t)
			requireLandlock(t) // the only filesystem layer left
			needUserNS(t, id)
		},
	}
	degradedNeither = degradation{
		name: "neither Landlock nor user namespaces",
		wrap: func() []string { return []string{degradeBin, "nouserns+nolandlock"} },
		need: func(t *testing.T, id identity) {
			needHelper(t)
			needUserNS(t, id)
		},
	}
)

// hostSimulations are the hosts DSH_IT_HOST may name.
var hostSimulations = map[string]*degradation{
	"nouserns":   &degradedNoUserNS,
	"nolandlock": &degradedNoLandlock,
	"apparmor":   &degradedAppArmor,
	"docker":     &degradedDocker,
	"nonotify":   &degradedNoNotify,
	"usernsonly": &degradedUserNSOnly,
}

// simulatedHost returns the wrap of the host DSH_IT_HOST names (nil when
// unset), which every command of the suite that names no degradation of its
// own runs under: the whole suite then runs on that host.
func simulatedHost(t *testing.T, id identity) []string {
	t.Helper()
	name := os.Getenv("DSH_IT_HOST")
	if name == "" {
		return nil
	}
	d, ok := hostSimulations[name]
	if !ok {
		t.Fatalf("DSH_IT_HOST=%s: not a simulated host (nouserns, nolandlock, apparmor, docker, nonotify, usernsonly)", name)
	}
	d.need(t, id)
	return d.wrap()
}

// namespaceLayers are the enforcement layers (the report's names) a host
// without user namespaces lacks: the mount view and every namespace.
var namespaceLayers = []string{"user-namespace", "mount-view", "pid-namespace", "net-namespace", "ipc-namespace", "uts-namespace"}

// hostLacks are the enforcement layers each simulated host lacks.
var hostLacks = map[*degradation][]string{
	&degradedNoUserNS:   namespaceLayers,
	&degradedNoLandlock: {"landlock"},
	&degradedAppArmor:   namespaceLayers,
	&degradedUserNSOnly: namespaceLayers[1:], // a user namespace, nothing in it
	&degradedNeither:    append(slices.Clone(namespaceLayers), "landlock"),
	&degradedDocker:     namespaceLayers,
	&degradedNoNotify:   append(slices.Clone(namespaceLayers), "seccomp-notify"),
}

// hostFilters are the system calls each simulated host's own seccomp filter
// answers (EPERM, or 0 for apparmor's unshare of a user namespace) before
// the sandbox's supervisor hears of them: in a filter chain an ERRNO action
// outranks USER_NOTIF, so the command's call fails, but without a denial
// fact. (On Docker that is the host's own behaviour; Ubuntu's AppArmor is
// no seccomp filter, so there the sandbox's filter reports them.) "unshare"
// is an unshare of any namespace but a user namespace, "unshare-user" one
// of a user namespace.
var hostFilters = map[*degradation][]string{
	&degradedAppArmor:   {"unshare", "unshare-user", "setns", "mount"},
	&degradedUserNSOnly: {"unshare", "setns", "mount"},
	&degradedDocker:     {"unshare", "unshare-user", "setns", "mount", "pidfd_getfd"},
	&degradedNoNotify:   {"unshare", "unshare-user", "setns", "mount", "pidfd_getfd"},
}

// simulated is the host DSH_IT_HOST names; nil when it is unset (this
// host as it is). simulatedHost fails a test on an unknown name.
func simulated() *degradation { return hostSimulations[os.Getenv("DSH_IT_HOST")] }

// onHost is the host the commands of a test run on that names degradation
// d: d itself, or for nil (no degradation of its own) the simulated host,
// nil again for this host as it is.
func onHost(d *degradation) *degradation {
	if d != nil {
		return d
	}
	return simulated()
}

// withAndWithoutSupervisor runs f as a subtest on this host (d nil) and
// under degradedNoNotify, where no supervisor judges the command.
func withAndWithoutSupervisor(t *testing.T, f func(t *testing.T, d *degradation)) {
	for _, d := range []*degradation{nil, &degradedNoNotify} {
		name := "host"
		if d != nil {
			name = d.name
		}
		t.Run(name, func(t *testing.T) { f(t, d) })
	}
}

// lacks says whether commands run under d lack the enforcement layer
// (user-namespace, mount-view, pid-namespace, net-namespace, ipc-namespace,
// uts-namespace, landlock, seccomp-notify); this host (nil) lacks none.
func (d *degradation) lacks(layer string) bool {
	return d != nil && slices.Contains(hostLacks[d], layer)
}

// simulatedHostLacks says whether the host DSH_IT_HOST simulates lacks the
// layer (see lacks); false on this host as it is.
func simulatedHostLacks(layer string) bool { return simulated().lacks(layer) }

// simulatedHostFilters says whether the simulated host's own seccomp
// filter answers the system call before the sandbox can report it.
func simulatedHostFilters(syscall string) bool {
	d := simulated()
	return d != nil && slices.Contains(hostFilters[d], syscall)
}

// wantMissing is the exact missing list (resource limits aside) of a
// confined mode on host d (nil: this host as it is) at Landlock ABI abi,
// from the layers d lacks, as docs/DESIGN.md's table of missing guarantees
// gives it (sandbox/enforcement.go's assess), for a policy with secrets
// that exist (the default ones of every home).
func wantMissing(d *degradation, mode string, abi int) []string {
	view, pidNS := !d.lacks("mount-view"), !d.lacks("pid-namespace")
	notify, landlock := !d.lacks("seccomp-notify"), !d.lacks("landlock")
	if !landlock {
		abi = 0
	}
	m := []string{}
	add := func(cond bool, name string) {
		if cond {
			m = append(m, name)
		}
	}
	// Without user notification Landlock carves the protected paths out.
	add(!view && !(landlock && !notify) && mode == "workspace-write", "protected-paths")
	add(!view && !notify, "metadata-writes")
	add(!landlock && !(view && pidNS), "device-writes")
	add(!pidNS, "process-visibility")
	add(!pidNS && abi < 6 && !notify, "signal-isolation")
	add(d.lacks("ipc-namespace") && !notify, "ipc-isolation")
	add(!notify, "denial-facts")
	add(!view, "secret-masks-mount")
	add(!landlock, "secret-masks-landlock")
	return m
}

// homeSecrets are the default secrets (modes.HomeSecrets) that exist in
// home.
func homeSecrets(home string) []string {
	var out []string
	for _, rel := range modes.HomeSecrets() {
		if p := filepath.Join(home, rel); exists(p) {
			out = append(out, p)
		}
	}
	return out
}

// hostsOnce maps each of ds through onHost and keeps the first of each
// host: under DSH_IT_HOST this host (nil) becomes the simulated one, which
// the list may name again.
func hostsOnce(ds ...*degradation) []*degradation {
	var out []*degradation
	for _, d := range ds {
		if d = onHost(d); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// simulatedHostName names the simulated host in messages ("" on this host).
func simulatedHostName() string {
	if d := simulated(); d != nil {
		return "DSH_IT_HOST=" + os.Getenv("DSH_IT_HOST") + " (" + d.name + ")"
	}
	return ""
}

// skipOnSimulatedHost skips a test whose whole subject does not exist on
// the simulated host, naming the host and why.
func skipOnSimulatedHost(t *testing.T, why string) {
	t.Helper()
	t.Skipf("%s: %s", simulatedHostName(), why)
}

// prepare checks what the simulation needs and returns its wrap; a nil
// degradation is this host as it is (Landlock required), or under
// DSH_IT_HOST the simulated host, whose wrap start adds.
func (d *degradation) prepare(t *testing.T, id identity) []string {
	t.Helper()
	if d == nil {
		requireLandlock(t)
		return nil
	}
	d.need(t, id)
	return d.wrap()
}

// TestNoLandlockHelper checks the simulation itself.
func TestNoLandlockHelper(t *testing.T) {
	needHelper(t)
	out, err := exec.Command(degradeBin, "nolandlock", "python3", "-c",
		`import ctypes; l=ctypes.CDLL(None,use_errno=True); r=l.syscall(444,0,0,1); print(r, ctypes.get_errno())`).CombinedOutput()
	if err != nil {
		t.Fatalf("nolandlock python3: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "-1 38" {
		t.Fatalf("landlock_create_ruleset under nolandlock = %q, want \"-1 38\" (ENOSYS)", out)
	}
}

// TestAppArmorSimulation checks the simulation of Ubuntu 24.04's AppArmor
// restriction: unshare -U works, unshare -Ur fails writing its uid_map with
// EPERM (bubblewrap's "setting up uid map: Permission denied"), and so does
// any other namespace.
func TestAppArmorSimulation(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		degradedAppArmor.need(t, id)
		for _, c := range []struct {
			argv []string
			ok   bool
			want string
		}{
			{[]string{"unshare", "-U", "true"}, true, ""},
			{[]string{"unshare", "-Ur", "true"}, false, "uid_map: Operation not permitted"},
			{[]string{"unshare", "-Urm", "true"}, false, "Operation not permitted"},
			{[]string{"unshare", "-n", "true"}, false, "Operation not permitted"},
		} {
			args := append(degradedAppArmor.wrap(), c.argv...)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = id.env()
			cmd.Dir = "/"
			cmd.SysProcAttr = id.sysProcAttr()
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.ok || !strings.Contains(string(out), c.want) {
				t.Errorf("%v under the simulation: %v %q, want ok=%v and %q", c.argv, err, out, c.ok, c.want)
			}
		}
	})
}

// TestDegradedUserNSHostWithLandlock is a sanity check of the simulation: no
// user namespace can be created under the wrapper.
func TestDegradedSimulationBlocksUserNS(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		needUserNS(t, id)
		needHelper(t)
		args := append(noUserNSWrap(), "unshare", "-Ur", "true")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = id.env()
		cmd.Dir = "/"
		cmd.SysProcAttr = id.sysProcAttr()
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("a user namespace could still be created under the simulation: %s", out)
		}
	})
}

// TestDegradedStillConfined: with one filesystem layer missing, confined
// modes still run, still deny writes outside the roots and the network, and
// the probe and report say partial.
func TestDegradedStillConfined(t *testing.T) {
	t.Parallel()
	for _, d := range []*degradation{&degradedNoUserNS, &degradedNoLandlock, &degradedAppArmor, &degradedUserNSOnly} {
		t.Run(d.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				d.need(t, id)
				for _, mode := range confinedModes {
					t.Run(mode+"/write outside denied", func(t *testing.T) {
						ws, out := id.workspace(t), id.outside(t)
						id.writeOwned(t, filepath.Join(out, "existing"), existingContent, 0o644)
						r := id.run(t, runOpts{
							Wrap:  d.wrap(),
							Flags: sandboxFlags(mode, ws),
							Argv:  bash(`echo pwned > "$OUT/new"; a=$?; echo pwned >> "$OUT/existing"; b=$?; rm -f "$OUT/existing"; c=$?; [ $a != 0 ] && [ $b != 0 ] && [ $c != 0 ] && exit 1; exit 0`),
							Env:   []string{"OUT=" + out},
							Dir:   ws,
						})
						requireFailed(t, r)
						requireAbsent(t, filepath.Join(out, "new"))
						requireContent(t, filepath.Join(out, "existing"), existingContent)
						requireDenial(t, r, mode, "write", filepath.Join(out, "new"))
						rep := requireReport(t, r)
						if d.name == "no Landlock" {
							// The mount view (nodev, read-only, fresh /proc and
							// devpts) and the namespaces give every guarantee;
							// only the secrets are hidden by one layer.
							if rep.Enforcement.Level != "partial" || !slices.Equal(withoutLimits(rep.Enforcement.Missing), []string{"secret-masks-landlock"}) {
								t.Errorf("report enforcement = %+v, want partial with only secret-masks-landlock missing", rep.Enforcement)
							}
						} else if rep.Enforcement.Level != "partial" || len(rep.Enforcement.Missing) == 0 {
							t.Errorf("report enforcement = %+v, want partial with missing guarantees", rep.Enforcement)
						}
						if d.name == "no Landlock" && contains(rep.Enforcement.Layers, "landlock") {
							t.Errorf("report claims the landlock layer on a host without Landlock: %v", rep.Enforcement.Layers)
						}
						if d.name == "no user namespaces" && contains(rep.Enforcement.Layers, "user-namespace") {
							t.Errorf("report claims a user namespace on a host without: %v", rep.Enforcement.Layers)
						}
						if d.name == "Ubuntu 24.04 AppArmor" && (contains(rep.Enforcement.Layers, "user-namespace") || !contains(rep.Enforcement.Layers, "landlock")) {
							t.Errorf("report layers = %v, want landlock and no user namespace", rep.Enforcement.Layers)
						}
						if d.name == "user namespace only" && (contains(rep.Enforcement.Layers, "mount-view") || !contains(rep.Enforcement.Layers, "landlock")) {
							t.Errorf("report layers = %v, want landlock and no mount-view", rep.Enforcement.Layers)
						}
					})
					if mode == "workspace-write" {
						t.Run(mode+"/write inside lands", func(t *testing.T) {
							ws := id.workspace(t)
							r := id.run(t, runOpts{
								Wrap:  d.wrap(),
								Flags: sandboxFlags(mode, ws),
								Argv:  bash(`echo ok > inside && mkdir d && mv inside d/`),
								Dir:   ws,
							})
							requireExit(t, r, 0)
							requireContent(t, filepath.Join(ws, "d/inside"), "ok\n")
							requireNoDenials(t, r)
						})
					} else {
						t.Run(mode+"/workspace write denied", func(t *testing.T) {
							ws := id.workspace(t)
							r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash(`echo x > new`), Dir: ws})
							requireFailed(t, r)
							requireAbsent(t, filepath.Join(ws, "new"))
							requireDenial(t, r, mode, "write", filepath.Join(ws, "new"))
						})
					}
					t.Run(mode+"/network denied", func(t *testing.T) {
						l := tcpListener(t, "tcp4", "127.0.0.1:0", d)
						ws := id.workspace(t)
						r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash(l.script), Dir: ws})
						requireFailed(t, r)
						if l.saw(queuedWait) {
							t.Errorf("the listener got a connection")
						}
						requireDenial(t, r, mode, l.op, l.target)
					})
					t.Run(mode+"/no survivor after SIGKILL", func(t *testing.T) {
						sigkillNoSurvivor(t, id, mode, d.wrap())
					})
					t.Run(mode+"/capabilities", func(t *testing.T) {
						ws := id.workspace(t)
						r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws), Argv: []string{"cat", "/proc/self/status"}, Dir: ws})
						requireExit(t, r, 0)
						st := procStatus(r.Stdout)
						if st["CapEff"] != "0000000000000000" || st["NoNewPrivs"] != "1" {
							t.Errorf("CapEff=%q NoNewPrivs=%q, want 0000000000000000 and 1", st["CapEff"], st["NoNewPrivs"])
						}
					})
				}
				t.Run("probe", func(t *testing.T) {
					r := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
					requireExit(t, r, 0)
					p := parseProbe(t, r)
					if !p.Confined {
						t.Errorf("confined = false")
					}
					level := "partial"
					for _, m := range confinedModes {
						if pm := p.Modes[m]; pm.Enforcement != level || len(pm.Missing) == 0 {
							t.Errorf("modes[%s] = %+v, want %s", m, pm, level)
						}
					}
					switch d.name {
					case "no user namespaces", "user namespace only", "Ubuntu 24.04 AppArmor":
						if pm := p.Modes["workspace-write"]; !contains(pm.Missing, "protected-paths") {
							t.Errorf("modes[workspace-write].missing = %v, want it to include protected-paths", pm.Missing)
						}
						if d.name != "user namespace only" && p.Namespaces["user"] == true {
							t.Errorf("namespaces.user = true on a host without usable user namespaces")
						}
						if p.Namespaces["mount"] == true {
							t.Errorf("namespaces.mount = true on a host that refuses mount namespaces")
						}
					default:
						if p.Landlock.ABI != 0 {
							t.Errorf("landlock.abi = %d on a host without Landlock", p.Landlock.ABI)
						}
						if p.Landlock.Error == "" {
							t.Errorf("landlock.error is empty on a host without Landlock")
						}
					}
					rt := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe"}, NoReport: true, Dir: id.workspace(t)})
					requireExit(t, rt, 0)
					for _, m := range confinedModes {
						if !strings.Contains(rt.Stdout, m+": "+level) {
							t.Errorf("text probe lacks %q:\n%s", m+": "+level, rt.Stdout)
						}
					}
				})
			})
		})
	}
}

// TestDegradedNoLayerRefuses: with neither Landlock nor user namespaces,
// confined modes refuse (125, one line) and never run the command; the probe
// exits 125.
func TestDegradedNoLayerRefuses(t *testing.T) {
	d := degradedNeither
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				marker := filepath.Join(id.workspace(t), "marker")
				r := id.run(t, runOpts{
					Wrap:  d.wrap(),
					Flags: sandboxFlags(mode, ws),
					Argv:  bash(fmt.Sprintf(`touch %q; touch %q/ws-marker`, marker, ws)),
					Dir:   ws,
				})
				requireSetupRefused(t, r)
				requireAbsent(t, marker)
				requireAbsent(t, filepath.Join(ws, "ws-marker"))
				rep := requireReport(t, r)
				if rep.Error == "" || rep.ExitCode == nil || *rep.ExitCode != 125 {
					t.Errorf("report = %+v, want error and exitCode 125", rep)
				}
			})
		}
		t.Run("danger-full-access still runs", func(t *testing.T) {
			ws := id.workspace(t)
			r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags("danger-full-access", ws), Argv: bash(`echo ran > marker`), Dir: ws})
			requireExit(t, r, 0)
			requireContent(t, filepath.Join(ws, "marker"), "ran\n")
		})
		t.Run("probe", func(t *testing.T) {
			r := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe"}, NoReport: true, Dir: id.workspace(t)})
			requireExit(t, r, 125)
			for _, m := range confinedModes {
				if !strings.Contains(r.Stdout, m+": unavailable") {
					t.Errorf("text probe lacks %q:\n%s", m+": unavailable", r.Stdout)
				}
			}
			rj := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
			requireExit(t, rj, 125)
			p := parseProbe(t, rj)
			if p.Confined {
				t.Errorf("confined = true on a host with no filesystem layer")
			}
			for _, m := range confinedModes {
				if pm := p.Modes[m]; pm.Enforcement != "unavailable" || pm.Error == "" {
					t.Errorf("modes[%s] = %+v, want unavailable with an error", m, pm)
				}
			}
		})
	})
}
