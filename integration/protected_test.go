//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// protectedConfigs are the host configurations the protected names hold
// in: all of them. Where no layer stops a write while the command runs
// (without user notification a missing name is not carved), the post-run
// audit sets it aside.
func protectedConfigs() []degradation { return append(gitConfigs(), degradedDocker, degradedNoNotify) }

// TestProtectedNamesHeld: in every host configuration, as root and as the
// test user, a command can neither create nor change the protected names of
// the workspace (an .envrc, editor tasks, agent config, shell startup files),
// existing or not, by writing, appending, renaming or linking; what the
// kernel let through is set aside after the run and reported. Ordinary
// files, .gitignore and nested editor directories stay writable.
func TestProtectedNamesHeld(t *testing.T) {
	for _, cfg := range protectedConfigs() {
		t.Run(cfg.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				cfg.need(t, id)
				ws := id.workspace(t)
				id.mkdirAt(t, filepath.Join(ws, ".vscode"))
				id.writeOwned(t, filepath.Join(ws, ".vscode/settings.json"), "orig", 0o644)
				id.writeOwned(t, filepath.Join(ws, ".bashrc"), "orig", 0o644)
				id.mkdirAt(t, filepath.Join(ws, "src"))
				r := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", ws),
					Wrap:  cfg.wrap(),
					Argv: bash(`echo pwned > .envrc
						echo 'network = true' > .dsh-sandbox.toml
						mkdir .idea; echo x > .idea/workspace.xml
						echo '{"tasks":[]}' > .vscode/tasks.json
						echo pwned >> .vscode/settings.json
						echo pwned >> .bashrc
						echo pwned > src/m; mv src/m .mcp.json
						ln -s /tmp .claude
						mkdir -p .codex/x .agents .cursor .devcontainer
						echo '[submodule "x"]' > .gitmodules
						echo ok > src/main.go; mkdir -p src/.vscode && echo ok > src/.vscode/settings.json
						echo ok > README.md; echo ok > .gitignore
						true`),
					Dir: ws,
				})
				requireExit(t, r, 0)
				for _, n := range []string{".envrc", ".dsh-sandbox.toml", ".idea", ".vscode/tasks.json", ".mcp.json", ".claude", ".codex", ".agents", ".cursor", ".devcontainer", ".gitmodules"} {
					requireAbsent(t, filepath.Join(ws, n))
				}
				requireContent(t, filepath.Join(ws, ".vscode/settings.json"), "orig")
				requireContent(t, filepath.Join(ws, ".bashrc"), "orig")
				requireContent(t, filepath.Join(ws, "src/main.go"), "ok\n")
				requireContent(t, filepath.Join(ws, "src/.vscode/settings.json"), "ok\n")
				if cfg.name == degradedNoNotify.name {
					// .vscode and .bashrc exist: the carve-out keeps the
					// workspace's own entries from being created (the
					// documented cost).
					requireAbsent(t, filepath.Join(ws, "README.md"))
					requireNoQuarantine(t, ws)
					return
				}
				requireContent(t, filepath.Join(ws, "README.md"), "ok\n")
				requireContent(t, filepath.Join(ws, ".gitignore"), "ok\n")
				requireDenial(t, r, "workspace-write", "write", filepath.Join(ws, ".envrc"))
				requireDenial(t, r, "workspace-write", "mkdir", filepath.Join(ws, ".idea"))
				requireNoQuarantine(t, ws)
			})
		})
	}
}

// TestProtectedNamesAuditedWithoutNotify: without user notification
// (Linux < 5.0, Docker's seccomp profile) and with no protected name there at the start,
// nothing is carved, so the workspace keeps its new top-level files — and
// the protected names the command created are set aside after the run,
// each reported.
func TestProtectedNamesAuditedWithoutNotify(t *testing.T) {
	d := degradedNoNotify
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		ws := id.workspace(t)
		r := id.run(t, runOpts{
			Flags: sandboxFlags("workspace-write", ws),
			Wrap:  d.wrap(),
			Argv:  bash(`echo pwned > .envrc && mkdir .vscode && echo '{}' > .vscode/tasks.json && ln -s /tmp .claude && echo ok > README.md`),
			Dir:   ws,
		})
		requireExit(t, r, 0)
		requireContent(t, filepath.Join(ws, "README.md"), "ok\n")
		for _, n := range []string{".envrc", ".vscode", ".claude"} {
			requireAbsent(t, filepath.Join(ws, n))
			requireDenial(t, r, "workspace-write", "protected-path", filepath.Join(ws, n))
		}
		requireContent(t, filepath.Join(ws, ".envrc.dsh-quarantined"), "pwned\n")
		requireContent(t, filepath.Join(ws, ".vscode.dsh-quarantined/tasks.json"), "{}\n")
	})
}

// TestUnprotect: --unprotect makes one name writable, and keeps what the
// command wrote there; it refuses a path that is not a default name.
func TestUnprotect(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.workspace(t)
		r := id.run(t, runOpts{
			Flags: sandboxFlags("workspace-write", ws, "--unprotect", ".vscode"),
			Argv:  bash(`mkdir .vscode && echo '{}' > .vscode/settings.json; echo x > .envrc; true`),
			Dir:   ws,
		})
		requireExit(t, r, 0)
		requireContent(t, filepath.Join(ws, ".vscode/settings.json"), "{}\n")
		requireAbsent(t, filepath.Join(ws, ".envrc"))
		requireNoQuarantine(t, ws)

		r = id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--unprotect", ".git/hooks"), Argv: bash("touch ran"), Dir: ws})
		requireSetupRefused(t, r)
		if !strings.Contains(r.Stderr, `cannot unprotect ".git/hooks": not one of the default protected names`) {
			t.Errorf("stderr = %q, want it to name the path and the set", r.Stderr)
		}
		requireAbsent(t, filepath.Join(ws, "ran"))
	})
}

// requireNoQuarantine fails when anything under dir was set aside.
func requireNoQuarantine(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
		if strings.Contains(filepath.Base(p), ".dsh-quarantined") {
			t.Errorf("quarantined: %s", p)
		}
		return nil
	})
}

// TestProtectedRaceSetAside: the supervisor's pre-denial of a missing
// protected path is raceable — one thread flips the path between the check
// and the kernel's own read (integration/internal/racer wins this within
// milliseconds here) — and the post-run audit closes that gap: whatever the
// racer planted at .envrc is set aside after the run, and reported, in
// every host configuration with a supervisor. (Should the supervisor ever
// stop being raceable, the "won" requirement below fails: then this test
// must change, not be skipped.)
func TestProtectedRaceSetAside(t *testing.T) {
	if racerErr != nil {
		t.Fatalf("integration/internal/racer did not build: %v", racerErr)
	}
	for _, cfg := range gitConfigs() {
		t.Run(cfg.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				cfg.need(t, id)
				ws := id.workspace(t)
				r := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", ws),
					Wrap:  cfg.wrap(),
					Argv:  []string{racerBin, ".envrc", "decoy_", "20"},
					Dir:   ws,
				})
				requireExit(t, r, 0)
				if strings.TrimSpace(r.Stdout) != "won" {
					t.Fatalf("the racer did not plant .envrc (%v)", r)
				}
				requireAbsent(t, filepath.Join(ws, ".envrc"))
				requireContent(t, filepath.Join(ws, ".envrc.dsh-quarantined"), "planted\n")
				requireDenial(t, r, "workspace-write", "protected-path", filepath.Join(ws, ".envrc"))
			})
		})
	}
}
