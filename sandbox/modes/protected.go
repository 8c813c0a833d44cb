package modes

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ProtectedNames returns the entries of every audited root (see
// Policy.AuditedRoots) that stay read-only under workspace-write whether or
// not they exist when the command starts, because programs the user runs
// later, outside the sandbox, execute or load what they hold: shell startup
// files, git's per-user config and submodule map, editor and IDE task and
// settings directories, agent configuration (MCP servers, commands, hooks)
// direnv's .envrc and dsh-sandbox's own project policy file. Options.Unprotect
// takes names out of the set.
func ProtectedNames() []string {
	return []string{
		".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile",
		".gitconfig", ".gitmodules", ".ripgreprc", ".mcp.json", ".envrc", ".dsh-sandbox.toml",
		".vscode", ".idea", ".devcontainer", ".cursor",
		".claude", ".codex", ".agents",
	}
}

// ErrUnprotect is wrapped by Derive when an Options.Unprotect entry is not
// one of ProtectedNames.
var ErrUnprotect = errors.New("cannot unprotect")

// protectedNames returns ProtectedNames less unprotect, each entry of which
// must be one of them (a name, or the name relative to the workspace with a
// trailing slash or a leading "./").
func protectedNames(unprotect []string) ([]string, error) {
	names := ProtectedNames()
	for _, u := range unprotect {
		n := strings.TrimSuffix(strings.TrimPrefix(u, "./"), "/")
		i := slices.Index(names, n)
		if i < 0 {
			if slices.Contains(ProtectedNames(), n) {
				continue // named twice
			}
			return nil, fmt.Errorf("%w %q: not one of the default protected names (%s); git's control files are never unprotected (run such a command in danger-full-access)",
				ErrUnprotect, u, strings.Join(ProtectedNames(), " "))
		}
		names = slices.Delete(names, i, i+1)
	}
	return names, nil
}

// AuditedRoots returns the roots whose repositories and protected names the
// sandbox audits after a workspace-write command (nil in the other modes):
// the workspace, or the writable root that holds it, and every other
// writable root except the shared scratch ones (/tmp, /dev/shm), which are
// nobody's project.
func (p Policy) AuditedRoots() []string {
	if p.Mode != WorkspaceWrite {
		return nil
	}
	roots := []string{p.Workspace}
	for _, r := range p.WritableRoots {
		if Within(p.Workspace, r) {
			if !scratchRoot(r) {
				roots[0] = r // a root that holds the workspace covers it
			}
			continue
		}
		if scratchRoot(r) || Within(r, p.Workspace) {
			continue
		}
		roots = append(roots, r)
	}
	return roots
}

func scratchRoot(r string) bool { return r == "/tmp" || r == "/dev/shm" }

// namedProtected returns the protected entries for names in each audited
// root of the workspace-write policy p being derived: the entry itself and,
// where it is a symlink, where it points.
func namedProtected(r *resolver, p Policy, names []string) []string {
	var out []string
	for _, root := range p.AuditedRoots() {
		for _, n := range names {
			e := filepath.Join(root, n)
			out = append(out, r.canonical(e), r.entry(e))
		}
	}
	return out
}

// PolicyDirs returns dsh-sandbox's own directories in home: the user's
// policy (config.toml) and the state that records which project files the
// user trusted. Every confined mode keeps them read-only, wherever a
// writable root lies: a command that could write them could widen the
// policy of the next one.
func PolicyDirs(home string) []string {
	return []string{filepath.Join(home, ".config", "dsh-sandbox"), filepath.Join(home, ".local", "state", "dsh-sandbox")}
}
