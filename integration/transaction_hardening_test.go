//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Transactions against a command that attacks them: nothing a
// confined command does may change what a later commit writes, except the
// contents of the upper layer as seen through its overlay.

// reachScript tries every way a command has to the transaction's directory
// through the runner's processes: each /proc/PID/fd/N of every process it
// can see (pid 1, the namespace's init, among them), read and written.
const reachScript = `
import os, sys
reached = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        continue
    for fd in fds:
        p = "/proc/%s/fd/%s" % (pid, fd)
        for name in ("transaction.json", "upper"):
            try:
                os.stat(p + "/" + name)
                reached.append(p)
            except OSError:
                pass
        try:
            with open(p + "/transaction.json", "a") as f:
                f.write("x")
            reached.append("wrote " + p)
        except OSError:
            pass
    # environ and mem count when they give bytes of the process: a process
    # without memory (a kernel thread; a zombie or an exiting process of
    # another test, visible without a pid namespace) opens but reads empty
    if pid == str(os.getpid()) or int(pid) > os.getpid():
        continue
    try:
        if open("/proc/%s/environ" % pid, "rb").read(1):
            reached.append("/proc/%s/environ" % pid)
    except OSError:
        pass
    try:
        # start_code (stat field 26) reads 0 unless the memory of the process may be read
        code = int(open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[23])
        with open("/proc/%s/mem" % pid, "rb") as m:
            if code and os.pread(m.fileno(), 1, code):
                reached.append("/proc/%s/mem" % pid)
    except (OSError, IndexError, ValueError):
        pass
    for f in ("cwd", "root"):
        try:
            os.stat("/proc/%s/%s/." % (pid, f))
            reached.append("/proc/%s/%s" % (pid, f))
        except OSError:
            pass
open("legit", "w").write("ok\n")
print("reached:", " ".join(reached))
`

// TestTransactionRunnerFDsUnreachable: the runner's processes keep the
// transaction's directory open (its lock) and its layers (the overlay's):
// none of it is reachable through /proc, nor their memory or environment;
// commit applies only what the command wrote through the overlay.
func TestTransactionRunnerFDsUnreachable(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		r := e.run(t, "python3 -c '"+reachScript+"'")
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if r.Stdout != "reached: \n" {
			t.Errorf("the command reached the runner's processes: stdout %q, want %q", r.Stdout, "reached: \n")
		}
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		if got := readFile(t, filepath.Join(e.ws, "legit")); got != "ok\n" {
			t.Errorf("legit = %q, want %q", got, "ok\n")
		}
	})
}

// TestRunnerProcessesUnreachable: without a transaction too, and without a
// pid namespace (where the runner's relay and keeper are visible), the
// command reaches none of the runner's processes through /proc.
func TestRunnerProcessesUnreachable(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		wrap := h.wrap()
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("workspace-write", ws), Argv: []string{"python3", "-c", reachScript}, Dir: ws})
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if r.Stdout != "reached: \n" {
			t.Errorf("the command reached the runner's processes: stdout %q, want %q", r.Stdout, "reached: \n")
		}
	})
}

// TestTransactionDirInWritableRoot: a transaction directory inside a
// writable root of the command (/tmp, the README's old example, or an
// --allow-write root) is refused before anything runs: the command, or any
// other with that root, could rewrite what the commit would apply.
func TestTransactionDirInWritableRoot(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		extra := id.mkdirOwned(t, "/var/tmp", "dsh-it-root-")
		for _, c := range []struct {
			name, dir, root string
			flags           []string
		}{
			{"tmp", filepath.Join(id.mkdirOwned(t, "/tmp", "dsh-it-tx-"), "tx"), "/tmp", nil},
			{"allow-write", filepath.Join(extra, "tx"), extra, []string{"--allow-write", extra}},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.fsEnv.run(t, "echo x > direct", append(c.flags, "--transaction", c.dir)...)
				requireSetupRefused(t, r)
				if want := "lies in the writable root " + c.root; !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, r.Stderr)
				}
				requireAbsent(t, c.dir)
				requireAbsent(t, filepath.Join(e.ws, "direct"))
			})
		}
	})
}

// TestTransactionTampered: another confined command whose writable root
// holds a transaction's directory edits the transaction — its manifest,
// its upper layer, the upper layer itself swapped for a symlink to a
// directory of the user's. Commit refuses (exit 1, one line, nothing
// applied), and so do the next command and the diff; the workspace and the
// user's directory are as they were.
func TestTransactionTampered(t *testing.T) {
	for _, c := range []struct {
		name, script string
	}{
		{"manifest", `python3 -c 'import json,sys; p=sys.argv[1]+"/transaction.json"; m=json.load(open(p)); m["workspace"]=sys.argv[2]; m["started_ctime_ns"]=9*10**18; json.dump(m,open(p,"w"))' "$TX" "$VICTIM"`},
		{"planted file", `printf '#!/bin/sh\ntouch /tmp/pwned\n' > "$TX/upper/authorized_keys"`},
		{"rewritten file", `echo evil > "$TX/upper/new"`},
		{"upper a symlink", `mv "$TX/upper" "$TX/upper.old" && ln -s "$VICTIM" "$TX/upper"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				e := newTxEnv(t, id)
				base := id.mkdirOwned(t, "/var/tmp", "dsh-it-txbase-")
				e.tx = filepath.Join(base, "tx")
				victim := id.outside(t)
				id.writeOwned(t, filepath.Join(victim, "keep"), "mine\n", 0o600)
				r := e.run(t, "echo new > new")
				if r.Exit != 0 {
					t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
				}
				before, victimBefore := treeHash(t, e.ws), treeHash(t, victim)

				// The attacker: any confined command with base writable.
				a := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", base),
					Argv:  bash(c.script),
					Env:   []string{"TX=" + e.tx, "VICTIM=" + victim},
					Dir:   base,
				})
				if a.Exit != 0 {
					t.Fatalf("the attacker: exit = %d, want 0 (%v)", a.Exit, a)
				}

				for _, sub := range []string{"commit", "diff", "changes"} {
					x := e.cli(t, sub, e.tx)
					if x.Exit != 1 {
						t.Errorf("%s: exit = %d, want 1 (%v)", sub, x.Exit, x)
					}
					if !strings.Contains(x.Stderr, "changed outside its commands") {
						t.Errorf("%s: stderr lacks %q: %q", sub, "changed outside its commands", x.Stderr)
					}
					if n := strings.Count(x.Stderr, "\n"); n != 1 {
						t.Errorf("%s: %d stderr lines, want 1: %q", sub, n, x.Stderr)
					}
				}
				r = e.run(t, "echo more > more")
				if r.Exit == 0 {
					t.Errorf("a command in the tampered transaction: exit = 0, want a failure (%v)", r)
				}
				if !strings.Contains(r.Stderr, "changed outside its commands") {
					t.Errorf("stderr lacks %q: %q", "changed outside its commands", r.Stderr)
				}
				requireTreeUnchanged(t, e.ws, before, "nothing applied")
				requireTreeUnchanged(t, victim, victimBefore, "the user's directory is untouched")
				requireAbsent(t, "/tmp/pwned")
			})
		})
	}
}

// TestTransactionReviewEscaped: names and lines a command wrote to drive
// the reviewer's terminal (cursor movement, carriage returns, a newline in
// a name faking a diff header, bidirectional overrides) are escaped in
// `diff` and `changes`.
func TestTransactionReviewEscaped(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		r := e.run(t, `printf 'seen\n\033[1A\033[2Kevil\r\n' > hidden; touch "$(printf 'ok.txt\n+++ innocent')"; touch "$(printf 'evil\342\200\256txt.sh')"`)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		d := e.cli(t, "diff", e.tx)
		if d.Exit != 0 {
			t.Fatalf("diff: exit = %d, want 0 (%v)", d.Exit, d)
		}
		for _, s := range []string{"\x1b", "\r", "\u202e", "\n+++ innocent"} {
			if strings.Contains(d.Stdout, s) {
				t.Errorf("diff has %q unescaped: %q", s, d.Stdout)
			}
		}
		if want := `+\x1b[1A\x1b[2Kevil\r`; !strings.Contains(d.Stdout, want) {
			t.Errorf("diff lacks %q: %q", want, d.Stdout)
		}
		c := e.cli(t, "changes", e.tx)
		if c.Exit != 0 {
			t.Fatalf("changes: exit = %d, want 0 (%v)", c.Exit, c)
		}
		if strings.Contains(c.Stdout, "\u202e") {
			t.Errorf("changes has %q unescaped: %q", "\u202e", c.Stdout)
		}
		var listed []Change
		if err := json.Unmarshal([]byte(c.Stdout), &listed); err != nil {
			t.Fatalf("changes: %v: %s", err, c.Stdout)
		}
		if len(listed) != 3 {
			t.Errorf("changes lists %d, want 3: %s", len(listed), c.Stdout)
		}
	})
}

// TestTransactionCommitStripsSetID: in a transaction as elsewhere, a
// command's chmod asking for set-ID bits goes through without them
// (setid_test.go); and a set-ID file of the workspace the command touched
// (copied up with its bits) reaches the workspace again without them, which
// commit says.
func TestTransactionCommitStripsSetID(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		id.writeOwned(t, filepath.Join(e.ws, "tool"), "#!/bin/sh\n", 0o755)
		if err := os.Chmod(filepath.Join(e.ws, "tool"), 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
		r := e.run(t, `cp /bin/true suid && chmod 4755 suid && stat -c '%a' suid && touch tool && stat -c '%a' tool`)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if want := "755\n4755\n"; r.Stdout != want {
			t.Errorf("stdout = %q, want %q: stripped at once; the workspace's own file keeps its bits in the overlay", r.Stdout, want)
		}
		if want := cliPrefix + "denied chmod " + filepath.Join(e.ws, "suid") + " (workspace-write mode, set-ID bits not applied); no confined mode allows it\n"; !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, r.Stderr)
		}
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		for _, name := range []string{"suid", "tool"} {
			fi, err := os.Stat(filepath.Join(e.ws, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o755 {
				t.Errorf("%s: mode %v, want %v", name, fi.Mode(), os.FileMode(0o755))
			}
		}
		if want := "applied without its set-user-ID, set-group-ID or capability bits: tool"; !strings.Contains(c.Stderr, want) {
			t.Errorf("commit: stderr lacks %q: %q", want, c.Stderr)
		}
	})
}

// helpersScript signals the command's ancestors — without a pid namespace
// the runner's keeper and relay — with SIGSTOP and SIGKILL, then its own
// child, printing what each kill answered.
const helpersScript = `
p=$PPID
for i in 1 2; do
  kill -STOP $p 2>/dev/null && echo "stopped $i"
  kill -KILL $p 2>/dev/null && echo "killed $i"
  p=$(awk '{print $4}' /proc/$p/stat)
done
sleep 5 & kill -KILL $! && echo "own child killed"
`

// TestRunnerHelpersOutOfReach: without a pid namespace the runner's relay
// and keeper are the command's visible ancestors, of its uid; neither can
// be stopped or killed by the command — from Landlock ABI 6 it sits in a
// nested domain whose signal scope keeps them out, below it the supervisor
// refuses them —, while its own processes can. The command ends as it
// would, its status reported.
func TestRunnerHelpersOutOfReach(t *testing.T) {
	hosts := []hostConfig{{"no user namespaces", &degradedNoUserNS}, {"Ubuntu 24.04 AppArmor", &degradedAppArmor}, {"docker seccomp profile", &degradedDocker}}
	forEachHostOf(t, hosts, func(t *testing.T, h hostConfig, id identity) {
		for _, abi := range []string{"", "5"} {
			flags := sandboxFlags("workspace-write", id.workspace(t))
			if abi != "" {
				flags = append(flags, "--landlock-abi", abi)
			}
			r := id.run(t, runOpts{Wrap: h.wrap(), Flags: flags, Argv: bash(helpersScript)})
			requireExit(t, r, 0)
			if r.Stdout != "own child killed\n" {
				t.Errorf("abi %q: stdout = %q, want %q (%v)", abi, r.Stdout, "own child killed\n", r)
			}
		}
	})
}
