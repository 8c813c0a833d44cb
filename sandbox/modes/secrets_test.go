package modes

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecretsSiblings: the standard credential locations beside the
// obvious ones are in the deny-read set — the XDG file of git's credential
// store, the database clients' password files, the registries' and
// agents' tokens, and for root the backups of the shadow files, the old
// passwords of pam_pwhistory and the private-key directories — while the
// files everyday tools read next to them (git's XDG config, ignore and
// attributes, the CA certificates) stay readable.
func TestSecretsSiblings(t *testing.T) {
	h := fakeHome(t)
	tests := []struct {
		path   string // relative: in the home
		root   bool   // the set of uid 0
		masked bool
	}{
		{path: ".config/git/credentials", masked: true},
		{path: ".config/git/config"},
		{path: ".config/git/ignore"},
		{path: ".config/git/attributes"},
		{path: ".gitconfig"},
		{path: ".git-credentials", masked: true},
		{path: ".pgpass", masked: true},
		{path: ".my.cnf", masked: true},
		{path: ".mylogin.cnf", masked: true},
		{path: ".vault-token", masked: true},
		{path: ".config/containers/auth.json", masked: true},
		{path: ".config/containers/registries.conf"},
		{path: ".terraform.d/credentials.tfrc.json", masked: true},
		{path: ".terraform.d/plugin-cache/x"},
		{path: ".gem/credentials", masked: true},
		{path: ".gem/specs/x"},
		{path: ".config/glab-cli/config.yml", masked: true},
		{path: ".composer/auth.json", masked: true},
		{path: ".config/composer/auth.json", masked: true},
		{path: ".config/composer/composer.json"},
		{path: ".claude/.credentials.json", masked: true},
		{path: ".claude/settings.json"},
		{path: ".codex/auth.json", masked: true},
		{path: ".codex/config.toml"},
		{path: ".gemini/oauth_creds.json", masked: true},
		{path: ".rediscli_history", masked: true},
		{path: ".local/state/dsh-sandbox/mcp-8765.token", masked: true},
		{path: ".local/state/other"},
		{path: "/etc/shadow", root: true, masked: true},
		{path: "/etc/shadow-", root: true, masked: true},
		{path: "/etc/gshadow-", root: true, masked: true},
		{path: "/etc/security/opasswd", root: true, masked: true},
		{path: "/var/backups/shadow.bak", root: true, masked: true},
		{path: "/var/backups/gshadow.bak", root: true, masked: true},
		{path: "/etc/ssl/private/server.key", root: true, masked: true},
		{path: "/etc/pki/tls/private/server.key", root: true, masked: true},
		{path: "/etc/krb5.keytab", root: true, masked: true},
		{path: "/etc/NetworkManager/system-connections/wifi.nmconnection", root: true, masked: true},
		{path: "/etc/passwd", root: true},
		{path: "/etc/group", root: true},
		{path: "/etc/ssl/certs/ca-certificates.crt", root: true},
		{path: "/etc/security/limits.conf", root: true},
		{path: "/var/backups/passwd.bak", root: true},
		{path: "/etc/NetworkManager/NetworkManager.conf", root: true},
		// Others cannot read root's files anyway: not in their set.
		{path: "/etc/shadow-"},
		{path: "/etc/security/opasswd"},
	}
	for _, tc := range tests {
		p := tc.path
		if !filepath.IsAbs(p) {
			p = filepath.Join(h, p)
		}
		set, _, err := denyReadSet(newResolver(), []string{h}, tc.root, nil, nil)
		require.NoError(t, err)
		pol := Policy{DenyRead: set}
		// The set is canonical: /etc/ssl/private may be a symlink's
		// target on some hosts, so compare what the policy would mask.
		assert.Equal(t, tc.masked, pol.Masks(newResolver().canonical(p)), "%s (root %v)", tc.path, tc.root)
	}
}
