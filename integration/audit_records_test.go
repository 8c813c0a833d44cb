//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAuditRecordsBetweenCommands: dsh-sandbox-run keeps what the audit read
// of a workspace's directories (only those changed more than 2 s before) in
// the state directory, one file of the user's, mode 0600, which the command
// can neither read nor write; a later command whose audit starts from those
// records has what it plants in a recorded directory found all the same,
// and so does one run with a damaged file, which is then written anew.
func TestAuditRecordsBetweenCommands(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		id = withHome(t, id)
		ws := id.workspace(t)
		id.mkdirAt(t, filepath.Join(ws, "src"))
		id.mkdirAt(t, filepath.Join(ws, "src/a"))
		id.writeOwned(t, filepath.Join(ws, "src/a/f.txt"), "x\n", 0o644)
		// The records vouch only for directories changed more than 2 s
		// before a walk: wait for the clock.
		if fi, err := os.Stat(filepath.Join(ws, "src/a")); err == nil {
			time.Sleep(time.Until(fi.ModTime().Add(2100 * time.Millisecond)))
		}
		run := func(script string) result {
			return id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash(script), Env: gitEnv, Dir: ws})
		}
		// (A command that changes nothing may end before its start walk:
		// that walk is abandoned, and records nothing.)
		requireExit(t, run(`touch src/a/f.txt`), 0)
		files, _ := filepath.Glob(filepath.Join(id.home, ".local/state/dsh-sandbox/audit/*.records"))
		if len(files) != 1 {
			t.Fatalf("records files %q, want one", files)
		}
		records := files[0]
		fi, err := os.Lstat(records)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; fi.Mode() != 0o600 || uid != id.uid {
			t.Errorf("records %s: mode %v owner %d, want 0600 and %d", records, fi.Mode(), uid, id.uid)
		}
		if b, _ := os.ReadFile(records); !strings.Contains(string(b), "src/a") {
			t.Errorf("records %s do not name src/a", records)
		}

		// A bare repository made in the recorded src/a: its config is
		// found and set aside; the records are out of reach.
		const plant = `cat %s >/dev/null 2>&1 && echo read; : >> %s 2>/dev/null && echo wrote
echo ref > src/a/HEAD && mkdir src/a/objects src/a/refs && printf '[core]\n\tfsmonitor = false\n' > src/a/config`
		r := run(strings.ReplaceAll(plant, "%s", records))
		requireExit(t, r, 0)
		if strings.Contains(r.Stdout, "read") || strings.Contains(r.Stdout, "wrote") {
			t.Errorf("the command reached the records: %q", r.Stdout)
		}
		requireDenial(t, r, "workspace-write", "git-control", filepath.Join(ws, "src/a/config"))
		requireAbsent(t, filepath.Join(ws, "src/a/config"))

		// Damaged records: not used, the plant found, the file written anew.
		id.writeOwned(t, records, "damaged", 0o600)
		r = run(`printf '[core]\n\tfsmonitor = false\n' > src/a/config`)
		requireExit(t, r, 0)
		requireDenial(t, r, "workspace-write", "git-control", filepath.Join(ws, "src/a/config"))
		if b, _ := os.ReadFile(records); !strings.HasPrefix(string(b), "dsh-sandbox audit records 1\n") {
			t.Errorf("records %s not written anew: %q", records, b[:min(len(b), 40)])
		}
	})
}
