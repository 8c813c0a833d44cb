package facts

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestSuggest(t *testing.T) {
	base := t.TempDir()
	ws, home := filepath.Join(base, "ws"), filepath.Join(base, "home")
	ww := modes.Policy{
		Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws, "/tmp"},
		Protected:       []string{filepath.Join(ws, ".envrc"), filepath.Join(ws, ".git/hooks")},
		DenyRead:        []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".npmrc")},
		CredentialFiles: []string{filepath.Join(home, ".npmrc")},
	}
	ro := ww
	ro.Mode, ro.WritableRoots, ro.Protected = modes.ReadOnly, nil, nil
	allowWrite := func(dir string) *Suggestion {
		return &Suggestion{Setting: "allow_write", Value: dir, Flag: "--allow-write " + dir, Config: `allow_write = ["` + dir + `"]`}
	}
	allowDomain := func(v string) *Suggestion {
		return &Suggestion{Setting: "allow_domain", Value: v, Flag: "--allow-domain " + v, Config: `allow_domain = ["` + v + `"]`}
	}
	for _, tc := range []struct {
		name   string
		d      Denial
		p      modes.Policy
		want   *Suggestion
		cannot string
	}{
		{"write outside the roots", Denial{Op: "write", Path: "/etc/dsh-x"}, ww, allowWrite("/etc"), ""},
		{"mkdir deep outside", Denial{Op: "mkdir", Path: "/var/lib/dsh-none/a/b"}, ww, allowWrite("/var/lib"), ""},
		{"nothing but /", Denial{Op: "write", Path: "/dsh-none/x"}, ww, nil, "no directory to allow but /"},
		{"read-only, in the workspace", Denial{Op: "write", Path: filepath.Join(ws, "a")}, ro,
			&Suggestion{Setting: "mode", Value: "workspace-write", Flag: "--mode workspace-write", Config: `mode = "workspace-write"`}, ""},
		{"read-only, outside", Denial{Op: "write", Path: "/etc/dsh-x"}, ro, nil, "under workspace-write, --allow-write /etc allows it"},
		{"protected name", Denial{Op: "write", Path: filepath.Join(ws, ".envrc")}, ww,
			&Suggestion{Setting: "unprotect", Value: ".envrc", Flag: "--unprotect .envrc", Config: `unprotect = [".envrc"]`}, ""},
		{"protected after the run", Denial{Op: "protected-path", Path: filepath.Join(ws, ".envrc")}, ww,
			&Suggestion{Setting: "unprotect", Value: ".envrc", Flag: "--unprotect .envrc", Config: `unprotect = [".envrc"]`}, ""},
		{"set-ID bits in the workspace", Denial{Op: "chmod", Path: filepath.Join(ws, "suid"), Reason: "set-ID bits not applied"}, ww, nil, "no confined mode allows it"},
		{"git hooks", Denial{Op: "write", Path: filepath.Join(ws, ".git/hooks/pre-commit")}, ww, nil, "a protected path"},
		{"git control", Denial{Op: "git-control", Path: filepath.Join(ws, ".git/config")}, ww, nil, "git's control files"},
		{"secret", Denial{Op: "write", Path: filepath.Join(home, ".ssh/known_hosts")}, ww, nil, "a secret"},
		{"credential file's copy", Denial{Op: "write", Path: filepath.Join(home, ".npmrc")}, ww, nil, "a copy without its secrets"},
		{"domain refused", Denial{Op: "connect", Syscall: SyscallProxy, Address: "evil.test:443", Reason: "not in the allowlist"}, ww, allowDomain("evil.test"), ""},
		{"name refused by the resolver", Denial{Op: OpResolve, Syscall: SyscallDNS, Address: "evil.test"}, ww, allowDomain("evil.test"), ""},
		{"private address", Denial{Op: "connect", Syscall: SyscallProxy, Address: "mirror.corp.test:443", Reason: ReasonPrivatePrefix + "10.1.2.3"}, ww, allowDomain("10.1.2.3"), ""},
		{"deny-domain", Denial{Op: "connect", Syscall: SyscallProxy, Address: "x.test:443", Reason: "denied by --deny-domain x.test"}, ww, nil, "deny_domain"},
		{"host loopback service", Denial{Op: "connect", Syscall: "connect", Address: "127.0.0.1:5432"}, ww,
			&Suggestion{Setting: "allow_host", Value: "localhost:5432", Flag: "--allow-host localhost:5432", Config: `allow_host = ["localhost:5432"]`}, ""},
		{"direct connect, network off", Denial{Op: "connect", Syscall: "connect", Address: "192.0.2.7:443"}, ww, allowDomain("192.0.2.7"), ""},
		{"raw socket", Denial{Op: "socket", Syscall: "socket", Address: "AF_PACKET"}, ww,
			&Suggestion{Setting: "network", Value: "true", Flag: "--network", Config: "network = true"}, ""},
		{"host unix socket", Denial{Op: "connect", Syscall: "connect", Path: "/run/docker.sock"}, ww, nil, "unix sockets"},
		{"signal", Denial{Op: "signal", Syscall: "kill"}, ww, nil, "no confined mode allows signal"},
		{"ptrace", Denial{Op: "ptrace", Syscall: "ptrace"}, ww, nil, "no confined mode allows ptrace"},
		{"memory limit", Denial{Op: OpLimit, Address: "memory", Syscall: "oom-kill", Errno: "SIGKILL"}, ww,
			&Suggestion{Setting: "max_memory", Flag: "--max-memory SIZE", Config: `max_memory = "SIZE"`}, ""},
		{"proxy connections", Denial{Op: OpLimit, Address: "proxy-connections"}, ww, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Suggest(tc.d, tc.p)
			if tc.cannot != "" {
				require.NotNil(t, got)
				assert.Empty(t, got.Setting)
				assert.Contains(t, got.Cannot, tc.cannot)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLineWithSuggestion(t *testing.T) {
	d := Denial{Op: "write", Path: "/etc/x", Suggest: &Suggestion{Setting: "allow_write", Value: "/etc", Flag: "--allow-write /etc"}}
	assert.Equal(t, "denied write /etc/x (workspace-write mode); allow with --allow-write /etc", d.Line(modes.WorkspaceWrite))
	d.Suggest = &Suggestion{Cannot: "a secret, hidden in every confined mode"}
	assert.Equal(t, "denied write /etc/x (workspace-write mode); a secret, hidden in every confined mode", d.Line(modes.WorkspaceWrite))
	d.Suggest = nil
	assert.Equal(t, "denied write /etc/x (workspace-write mode)", d.Line(modes.WorkspaceWrite))
}
