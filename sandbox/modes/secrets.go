package modes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/credfiles"
)

// HomeSecrets returns the entries of a home directory that the confined
// modes leave unreadable by default: credentials, keys, tokens, password
// stores, keyrings, browser profiles and shell or REPL histories. Where a
// tool keeps its credentials in a file of their own beside its everyday
// configuration (git's XDG credential store beside ~/.config/git/config),
// only that file is listed, so the tool keeps working without them.
func HomeSecrets() []string {
	return []string{
		// keys, cloud and cluster credentials
		".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json",
		".config/containers/auth.json", ".vault-token", ".terraform.d/credentials.tfrc.json",
		// tokens of tools
		".netrc", ".git-credentials", ".config/git/credentials", ".npmrc", ".pypirc",
		".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
		".composer/auth.json", ".config/composer/auth.json", ".config/gh", ".config/glab-cli",
		// coding agents' own credentials, and dsh-sandbox's (HomeStateDir)
		".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json",
		HomeStateDir,
		// database clients' passwords
		".pgpass", ".my.cnf", ".mylogin.cnf",
		// password stores, keyrings
		".password-store", ".local/share/keyrings",
		// browser profiles
		".mozilla", ".config/google-chrome", ".config/chromium",
		// shell and REPL histories
		".bash_history", ".zsh_history", ".python_history", ".node_repl_history", ".psql_history",
		".mysql_history", ".rediscli_history", ".lesshst", ".local/share/fish/fish_history",
	}
}

// HomeStateDir is the entry of a home where dsh-sandbox keeps its own
// secrets — the key that seals transactions, dsh-sandbox-mcp's generated
// HTTP bearer tokens — and transaction directories: one of HomeSecrets, so
// no confined command of any dsh-sandbox reads it.
const HomeStateDir = ".local/state/dsh-sandbox"

// RootSecrets returns the files outside the homes that are unreadable by
// default when the caller is root (others cannot read them anyway): the
// shadow password files and the backups of them (shadow-utils' /etc/shadow-
// and /etc/gshadow-, Debian's daily /var/backups/*.bak), pam_pwhistory's
// old password hashes, the private-key directories of the TLS setups
// (Debian's /etc/ssl/private, Fedora's /etc/pki/tls/private), the host's
// Kerberos keytab, NetworkManager's connection secrets and the SSH host
// private keys (/etc/ssh/*_key, as they exist when the policy is derived).
// The first two are /etc/shadow and /etc/gshadow.
func RootSecrets() []string {
	out := []string{
		"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
		"/var/backups/shadow.bak", "/var/backups/gshadow.bak", "/etc/security/opasswd",
		"/etc/ssl/private", "/etc/pki/tls/private", "/etc/krb5.keytab",
		"/etc/NetworkManager/system-connections",
	}
	keys, _ := filepath.Glob("/etc/ssh/*_key") // the pattern is valid
	return append(out, keys...)
}

// ErrDenyRead is wrapped by Derive when a --deny-read or --allow-read path
// is unusable.
var ErrDenyRead = errors.New("bad deny-read set")

// denyReadSet derives the canonical deny-read set: HomeSecrets in each of
// homes, RootSecrets when root, plus deny, minus allow; and the credential
// files in it (credfiles.Files in each home, but those deny names itself),
// a pip.conf with a secret among them. An allow path must
// be an entry of the set or lie under one; under one, the entry is replaced
// by its existing entries other than the way down to the allowed path (so
// that only the allowed path becomes readable). Symlinks met on the way are
// left out: their targets are masked, or not, where they lie. Nothing is
// created or changed on the host.
func denyReadSet(r *resolver, homes []string, root bool, deny, allow []string) (set, creds []string, err error) {
	for _, h := range homes {
		for _, rel := range HomeSecrets() {
			set = append(set, r.canonical(filepath.Join(h, rel)))
		}
		for _, rel := range credfiles.Files() {
			c := r.canonical(filepath.Join(h, rel))
			if !slices.Contains(HomeSecrets(), rel) {
				// A pip.conf: hidden only when it holds a secret (or
				// cannot be read to tell).
				if _, err := os.Lstat(c); err != nil {
					continue
				}
				if data, err := credfiles.Read(c); err == nil {
					if _, removed, err := credfiles.Sanitize(c, data); err == nil && !removed {
						continue
					}
				}
				set = append(set, c)
			}
			creds = append(creds, c)
		}
	}
	// dsh-sandbox's own state where $XDG_STATE_HOME moves it (the
	// transaction key goes there: sandbox/transaction.KeyFile).
	if s := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(s) {
		set = append(set, r.canonical(filepath.Join(s, filepath.Base(HomeStateDir))))
	}
	if root {
		for _, p := range RootSecrets() {
			set = append(set, r.canonical(p))
		}
	}
	for _, d := range deny {
		c, err := secretInput(r, "--deny-read", d)
		if err != nil {
			return nil, nil, err
		}
		set = append(set, c)
		creds = slices.DeleteFunc(creds, func(p string) bool { return p == c })
	}
	set = outermost(set)
	for _, a := range allow {
		c, err := secretInput(r, "--allow-read", a)
		if err != nil {
			return nil, nil, err
		}
		var next []string
		found := false
		for _, e := range set {
			if !Within(c, e) {
				next = append(next, e)
				continue
			}
			found = true
			rest, err := splitAround(e, c)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: --allow-read %s: %w", ErrDenyRead, a, err)
			}
			next = append(next, rest...)
		}
		if !found {
			return nil, nil, fmt.Errorf("%w: --allow-read %s: not in the deny-read set, nor under an entry of it", ErrDenyRead, a)
		}
		set = next
	}
	set = outermost(set)
	// A credential file is copied only where it is an entry of its own
	// (not under a directory hidden whole, nor allowed).
	creds = slices.DeleteFunc(creds, func(p string) bool { return !slices.Contains(set, p) })
	slices.Sort(creds)
	return set, slices.Compact(creds), nil
}

// secretInput checks a --deny-read or --allow-read path and returns it
// canonical.
func secretInput(r *resolver, flag, p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: %s: empty path", ErrDenyRead, flag)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: %s %q: contains a NUL byte", ErrDenyRead, flag, p)
	case !filepath.IsAbs(p):
		return "", fmt.Errorf("%w: %s %s: not an absolute path", ErrDenyRead, flag, p)
	}
	c := r.canonical(p)
	if err := maskable(c); err != nil {
		return "", fmt.Errorf("%w: %s %s: %w", ErrDenyRead, flag, p, err)
	}
	return c, nil
}

// maskable fails for a canonical path that cannot be hidden: the root
// directory, and what the sandbox mounts or grants afresh (/proc, /dev).
func maskable(c string) error {
	switch {
	case c == "/":
		return errors.New("the root directory cannot be hidden")
	case Within(c, "/proc"), Within(c, "/dev"):
		return fmt.Errorf("%s cannot be hidden (the sandbox provides it afresh)", c)
	}
	return nil
}

// splitAround returns the existing entries that hide everything of entry
// but allowed (which lies in it): the entries of each directory from entry
// down to allowed's parent, less the one on the way.
func splitAround(entry, allowed string) ([]string, error) {
	if entry == allowed {
		return nil, nil
	}
	ents, err := os.ReadDir(entry)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // nothing there to hide
	}
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(entry, allowed) // allowed lies in entry
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	var out []string
	for _, e := range ents {
		child := filepath.Join(entry, e.Name())
		switch {
		case e.Name() == first:
			rest, err := splitAround(child, allowed)
			if err != nil {
				return nil, err
			}
			out = append(out, rest...)
		case e.Type()&os.ModeSymlink == 0:
			out = append(out, child)
		}
	}
	return out, nil
}

// outermost sorts and dedupes paths and drops those inside another.
func outermost(paths []string) []string { return minimalRoots(paths) }

// checkDenyRead fails when a deny-read entry of p is not absolute and clean,
// cannot be hidden, or would hide the workspace or a writable root.
func (p Policy) checkDenyRead() error {
	for _, d := range p.DenyRead {
		if err := checkClean(d); err != nil {
			return fmt.Errorf("deny-read path: %w", err)
		}
		if err := maskable(d); err != nil {
			return fmt.Errorf("deny-read path: %w", err)
		}
		if Within(p.Workspace, d) {
			return fmt.Errorf("deny-read path %s contains the workspace %s (--allow-read %s)", d, p.Workspace, d)
		}
		for _, r := range p.WritableRoots {
			if Within(r, d) {
				return fmt.Errorf("deny-read path %s contains the writable root %s (--allow-read %s)", d, r, d)
			}
		}
	}
	for _, c := range p.CredentialFiles {
		if !slices.Contains(p.DenyRead, c) {
			return fmt.Errorf("credential file %s is not a deny-read path", c)
		}
	}
	return nil
}

// Masks reports whether path is a deny-read entry of p or lies beneath one.
func (p Policy) Masks(path string) bool { return withinAny(path, p.DenyRead) }
