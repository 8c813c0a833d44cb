//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// policyHome is a user's dsh-sandbox directories for one test: XDG config
// and state homes owned by the identity, outside every writable root, and
// the environment that points the CLI at them.
type policyHome struct {
	config, state string // the dsh-sandbox directories in them
	env           []string
}

func newPolicyHome(t *testing.T, id identity) policyHome {
	t.Helper()
	base := id.outside(t)
	for _, d := range []string{"config", "config/dsh-sandbox", "state"} {
		id.mkdirAt(t, filepath.Join(base, d))
	}
	return policyHome{
		config: filepath.Join(base, "config", "dsh-sandbox"),
		state:  filepath.Join(base, "state", "dsh-sandbox"),
		env:    []string{"XDG_CONFIG_HOME=" + filepath.Join(base, "config"), "XDG_STATE_HOME=" + filepath.Join(base, "state")},
	}
}

// TestPolicyFileProfiles: the user's config.toml sets the mode and, in a
// profile, an extra writable directory; the profile applies only when
// asked for, and a flag overrides the file's mode.
func TestPolicyFileProfiles(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ph := newPolicyHome(t, id)
		ws, extra := id.workspace(t), id.outside(t)
		id.writeOwned(t, filepath.Join(ph.config, "config.toml"), fmt.Sprintf(`mode = "workspace-write"

[profiles.base]
max_pids = 64

[profiles.extra]
extends = "base"
allow_write = [%q]
`, extra), 0o644)
		write := bash(`echo ws > in-ws; echo x > ` + extra + `/a`)
		r := id.run(t, runOpts{Flags: []string{"--workspace", ws}, Argv: write, Dir: ws, Env: ph.env})
		requireFailed(t, r)
		requireContent(t, filepath.Join(ws, "in-ws"), "ws\n")
		requireAbsent(t, filepath.Join(extra, "a"))
		requireDenial(t, r, "workspace-write", "write", filepath.Join(extra, "a"))

		r = id.run(t, runOpts{Flags: []string{"--workspace", ws, "--profile", "extra"}, Argv: write, Dir: ws, Env: ph.env})
		requireExit(t, r, 0)
		requireContent(t, filepath.Join(extra, "a"), "x\n")

		// A flag overrides the file: read-only writes nothing.
		r = id.run(t, runOpts{Flags: []string{"--workspace", ws, "--profile", "extra", "--mode", "read-only"}, Argv: bash(`echo y > ` + extra + `/b`), Dir: ws, Env: ph.env})
		requireFailed(t, r)
		requireAbsent(t, filepath.Join(extra, "b"))

		// `policy --json` names each setting's file and line.
		r = id.run(t, runOpts{Flags: []string{"policy", "--workspace", ws, "--profile", "extra", "--json"}, Dir: ws, Env: ph.env, NoReport: true})
		requireExit(t, r, 0)
		var doc struct {
			Files    []string `json:"files"`
			Settings []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
				From  []struct {
					File    string `json:"file"`
					Line    int    `json:"line"`
					Profile string `json:"profile"`
				} `json:"from"`
			} `json:"settings"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
			t.Fatalf("policy --json: %v: %q", err, r.Stdout)
		}
		cfg := filepath.Join(ph.config, "config.toml")
		got := map[string]string{}
		for _, s := range doc.Settings {
			var from []string
			for _, f := range s.From {
				from = append(from, fmt.Sprintf("%s:%d:%s", f.File, f.Line, f.Profile))
			}
			got[s.Key] = fmt.Sprintf("%v from %s", s.Value, strings.Join(from, ","))
		}
		for k, want := range map[string]string{
			"mode":        "workspace-write from " + cfg + ":1:",
			"max_pids":    "64 from " + cfg + ":4:base",
			"allow_write": "[" + extra + "] from " + cfg + ":8:extra",
			"workspace":   ws + " from :0:",
		} {
			if got[k] != want {
				t.Errorf("policy --json %s = %q, want %q", k, got[k], want)
			}
		}
	})
}

// TestPolicyFileBadInput: a policy file's bad input is one line naming
// the file, the line and the key; exit 125; the command never ran.
func TestPolicyFileBadInput(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ph := newPolicyHome(t, id)
		ws := id.workspace(t)
		cfg := filepath.Join(ph.config, "config.toml")
		for _, tc := range []struct{ content, want string }{
			{"mode = \"workspace-write\"\nallow_wirte = [\"/tmp\"]\n", cfg + ":2: allow_wirte: unknown key"},
			{"[profiles.a]\nnetwork = \"yes\"\n", cfg + ":2: profiles.a.network: wrong type: want true or false"},
			{"allow_write = [\"/nonexistent-dsh-it\"]\n", cfg + ":1: allow_write: stat /nonexistent-dsh-it: no such file or directory"},
		} {
			id.writeOwned(t, cfg, tc.content, 0o644)
			r := id.run(t, runOpts{Flags: []string{"--workspace", ws}, Argv: bash(`touch ran`), Dir: ws, Env: ph.env, NoReport: true})
			requireSetupRefused(t, r)
			if got := strings.TrimSpace(r.Stderr); got != cliPrefix+tc.want {
				t.Errorf("stderr = %q, want %q", got, cliPrefix+tc.want)
			}
			requireAbsent(t, filepath.Join(ws, "ran"))
		}
		r := id.run(t, runOpts{Flags: []string{"--workspace", ws, "--profile", "nope"}, Argv: bash(`touch ran`), Dir: ws, Env: ph.env, NoReport: true})
		requireSetupRefused(t, r)
		requireAbsent(t, filepath.Join(ws, "ran"))
	})
}

// TestProjectPolicyTrust: a workspace's .dsh-sandbox.toml applies only
// once the user trusted it outside the sandbox, and stops applying when it
// changes; a command can neither write it nor the user's policy and trust
// directories, even inside a writable root.
func TestProjectPolicyTrust(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ph := newPolicyHome(t, id)
		ws, extra := id.workspace(t), id.outside(t)
		project := filepath.Join(ws, ".dsh-sandbox.toml")
		content := fmt.Sprintf("mode = \"workspace-write\"\nallow_write = [%q]\n", extra)
		// Planted from outside, never trusted: not applied.
		id.writeOwned(t, project, content, 0o644)
		write := bash(`echo x > ` + extra + `/a`)
		r := id.run(t, runOpts{Flags: []string{"--mode", "workspace-write", "--workspace", ws}, Argv: write, Dir: ws, Env: ph.env})
		requireFailed(t, r)
		requireAbsent(t, filepath.Join(extra, "a"))
		if want := cliPrefix + project + " is not trusted (never trusted); to apply it, run: dsh-sandbox-run trust --workspace " + ws; !hasLine(r.Stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, r.Stderr)
		}

		r = id.run(t, runOpts{Flags: []string{"trust", "--workspace", ws}, Dir: ws, Env: ph.env, NoReport: true})
		requireExit(t, r, 0)
		r = id.run(t, runOpts{Flags: []string{"--workspace", ws}, Argv: write, Dir: ws, Env: ph.env})
		requireExit(t, r, 0)
		requireContent(t, filepath.Join(extra, "a"), "x\n")
		if strings.Contains(r.Stderr, "not trusted") {
			t.Errorf("trusted file reported untrusted: %q", r.Stderr)
		}

		// The command cannot rewrite the project file, nor reach the
		// policy and trust directories through a writable root holding them.
		base := filepath.Dir(filepath.Dir(ph.config))
		r = id.run(t, runOpts{
			Flags: []string{"--workspace", ws, "--allow-write", base},
			Argv: bash(`echo 'network = true' >> .dsh-sandbox.toml; rm -f .dsh-sandbox.toml
				echo 'mode = "danger-full-access"' > ` + ph.config + `/config.toml
				mkdir -p ` + ph.state + `/trusted && echo forged > ` + ph.state + `/trusted/x
				echo ok > ` + base + `/fine; true`),
			Dir: ws, Env: ph.env,
		})
		requireContent(t, project, content)
		requireAbsent(t, filepath.Join(ph.config, "config.toml"))
		if entries, _ := os.ReadDir(filepath.Join(ph.state, "trusted")); len(entries) != 1 {
			t.Errorf("trust records = %v, want the one the user made", entries)
		}
		if simulatedHostLacks("mount-view") && r.Exit == 125 && strings.Contains(r.Stderr, "cannot hide "+ph.state+" without a mount view") {
			// The trust directory is a secret too, and without a mount view
			// a secret inside a writable root cannot be hidden: the command
			// is refused (docs/policy.md, Secrets), and nothing ran.
			requireAbsent(t, filepath.Join(base, "fine"))
		} else {
			requireExit(t, r, 0)
			requireContent(t, filepath.Join(base, "fine"), "ok\n")
			requireDenial(t, r, "workspace-write", "write", project)
		}

		// Changed after trust (by anyone): untrusted again.
		id.writeOwned(t, project, content+"# changed\n", 0o644)
		r = id.run(t, runOpts{Flags: []string{"--mode", "workspace-write", "--workspace", ws}, Argv: bash(`echo y > ` + extra + `/b`), Dir: ws, Env: ph.env})
		requireFailed(t, r)
		requireAbsent(t, filepath.Join(extra, "b"))
		if !strings.Contains(r.Stderr, "is not trusted (changed since it was trusted)") {
			t.Errorf("stderr lacks the changed line: %q", r.Stderr)
		}
	})
}

// TestPresetFromToolConfig: --preset go allows the hosts `go env` names
// (a fake go on the caller's PATH), and the report says what it resolved
// to; a missing tool allows nothing, in one line.
func TestPresetFromToolConfig(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ph := newPolicyHome(t, id)
		ws, bin := id.workspace(t), id.outside(t)
		id.writeOwned(t, filepath.Join(bin, "go"), "#!/bin/sh\nprintf 'https://proxy.corp.test,direct\\noff\\n'\n", 0o755)
		env := append(slices.Clone(ph.env), "PATH="+bin+":"+testPATH)
		r := id.run(t, runOpts{Flags: []string{"policy", "--mode", "workspace-write", "--workspace", ws, "--preset", "go", "--json"}, Dir: ws, Env: env, NoReport: true})
		requireExit(t, r, 0)
		var doc struct {
			Settings []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
				From  []struct {
					Preset string `json:"preset"`
				} `json:"from"`
			} `json:"settings"`
			Presets []struct {
				Name    string   `json:"name"`
				Domains []string `json:"domains"`
			} `json:"presets"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
			t.Fatalf("policy --json: %v: %q", err, r.Stdout)
		}
		if len(doc.Presets) != 1 || doc.Presets[0].Name != "go" || strings.Join(doc.Presets[0].Domains, " ") != "proxy.corp.test" {
			t.Errorf("presets = %+v, want go: proxy.corp.test", doc.Presets)
		}
		found := false
		for _, s := range doc.Settings {
			if s.Key == "allow_domain" {
				found = fmt.Sprint(s.Value) == "[proxy.corp.test]" && len(s.From) == 1 && s.From[0].Preset == "go"
			}
		}
		if !found {
			t.Errorf("allow_domain is not proxy.corp.test from preset go: %s", r.Stdout)
		}

		// A run: the report says what the preset resolved to.
		r = id.run(t, runOpts{Flags: []string{"--mode", "workspace-write", "--workspace", ws, "--preset", "go"}, Argv: bash("true"), Dir: ws, Env: env})
		if simulatedHostFilters("pidfd_getfd") {
			// The preset makes an allowlist, which this host refuses.
			requireExit(t, r, 125)
			if got := strings.TrimSpace(r.Stderr); got != allowlistRefusal {
				t.Errorf("stderr = %q, want %q", got, allowlistRefusal)
			}
		} else {
			requireExit(t, r, 0)
			if rep := requireReport(t, r); !strings.Contains(r.ReportRaw, `"domains": [`+"\n"+`        "proxy.corp.test"`) || rep.Allowlist == nil {
				t.Errorf("the report lacks the preset or the allowlist: %s", trunc(r.ReportRaw))
			}
		}
		// No npm on this PATH: the node preset allows nothing, and says so.
		r = id.run(t, runOpts{Flags: []string{"--mode", "workspace-write", "--workspace", ws, "--preset", "node"}, Argv: []string{"/bin/true"}, Dir: ws,
			Env: append(slices.Clone(ph.env), "PATH="+bin)})
		requireExit(t, r, 0)
		if want := cliPrefix + "preset node allows nothing: npm is not installed (not on PATH)"; !hasLine(r.Stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, r.Stderr)
		}
	})
}
