package facts

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Suggestion says how a denial could be allowed: the one policy setting,
// and its value, that allows exactly it, as a flag and as a policy file
// line; or, when no setting of a confined mode allows it, why (Cannot).
type Suggestion struct {
	// Setting is the policy file key ("allow_write", "allow_domain",
	// "allow_host", "unprotect", "mode", "network", "max_memory", ...);
	// Value its value ("" for a limit: a size of the caller's choice).
	Setting string `json:"setting,omitempty"`
	Value   string `json:"value,omitempty"`
	// Flag and Config are Setting and Value as a flag ("--allow-write
	// /srv/data") and as a policy file line (`allow_write = ["/srv/data"]`).
	Flag   string `json:"flag,omitempty"`
	Config string `json:"config,omitempty"`
	// Cannot says why no setting of a confined mode allows it.
	Cannot string `json:"cannot,omitempty"`
}

// Text is the suggestion as the denial's line ends: "allow with FLAG", or
// why it cannot be.
func (s *Suggestion) Text() string {
	if s == nil {
		return ""
	}
	if s.Cannot != "" {
		return s.Cannot
	}
	return "allow with " + s.Flag
}

// allow is the suggestion of setting key to value.
func allow(key, value string) *Suggestion {
	s := &Suggestion{Setting: key, Value: value}
	flag := "--" + strings.ReplaceAll(key, "_", "-")
	switch key {
	case "mode":
		s.Flag, s.Config = flag+" "+value, fmt.Sprintf("%s = %q", key, value)
	case "network":
		s.Flag, s.Config = flag, key+" = true"
	case "max_pids":
		s.Flag, s.Config = flag+" N", key+" = N"
	case "max_memory":
		s.Flag, s.Config = flag+" SIZE", key+` = "SIZE"`
	case "max_cpu":
		s.Flag, s.Config = flag+" CORES", key+" = CORES"
	default:
		s.Flag, s.Config = flag+" "+value, fmt.Sprintf("%s = [%q]", key, value)
	}
	return s
}

func cannot(why string) *Suggestion { return &Suggestion{Cannot: why} }

// Suggest is how d, denied under policy p, could be allowed. It reads
// nothing the command could have written: only the policy, and whether
// directories outside every writable root exist (for the nearest one to
// make writable), never following a symlink.
func Suggest(d Denial, p modes.Policy) *Suggestion {
	switch {
	case d.Op == OpLimit:
		switch d.Address {
		case "memory":
			return allow("max_memory", "")
		case "pids":
			return allow("max_pids", "")
		case "cpu":
			return allow("max_cpu", "")
		}
		return nil // a fixed bound of the sandbox (proxy-connections)
	case d.Network():
		return suggestNetwork(d, p)
	case d.Op == "git-control":
		return cannot("git's control files run outside the sandbox later; no confined mode lets a command change them")
	case d.Path != "" && !strings.HasPrefix(d.Path, "@") && (d.Op == "connect" || d.Op == "send" || d.Op == "bind"):
		if d.Op == "bind" && p.Mode == modes.ReadOnly {
			return allow("mode", modes.WorkspaceWrite.String())
		}
		return cannot("the host's unix sockets (daemons, D-Bus) are out of reach of every confined mode")
	case d.Path != "":
		return suggestPath(d, p)
	}
	return cannot("no confined mode allows " + d.Op)
}

func suggestPath(d Denial, p modes.Policy) *Suggestion {
	path := d.Path
	switch {
	case slices.Contains(p.CredentialFiles, path):
		return cannot("a credential file: confined commands read a copy without its secrets, never writable (--allow-read shows the original, read-only)")
	case p.Masks(path):
		return cannot("a secret, hidden in every confined mode (--allow-read shows it, never writable)")
	case d.Reason != "":
		// Refused for what the call asked, not for where: set-ID bits, a
		// device node.
		return cannot("no confined mode allows it")
	case p.Writable(path) && d.Op != "protected-path":
		return cannot("no confined mode allows " + d.Op + " here")
	}
	if p.Protects(path) || d.Op == "protected-path" {
		for _, r := range p.AuditedRoots() {
			rel, err := filepath.Rel(r, path)
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				continue
			}
			name := strings.Split(rel, string(filepath.Separator))[0]
			if slices.Contains(modes.ProtectedNames(), name) {
				return allow("unprotect", name)
			}
		}
		return cannot("a protected path: programs run it outside the sandbox later")
	}
	if p.Mode == modes.ReadOnly {
		if modes.Within(path, p.Workspace) {
			return allow("mode", modes.WorkspaceWrite.String())
		}
	}
	dir := nearestDir(path)
	if dir == "" || dir == "/" {
		return cannot("outside every writable root, with no directory to allow but /")
	}
	if p.Mode == modes.ReadOnly {
		return cannot("outside the workspace: under workspace-write, --allow-write " + dir + " allows it")
	}
	return allow("allow_write", dir)
}

// nearestDir is the directory --allow-write would name for path: path
// itself when it is a directory, else its nearest ancestor that exists
// and is a directory (symlinks not followed).
func nearestDir(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			return p
		}
		if p == "/" || p == "." {
			return ""
		}
	}
}

func suggestNetwork(d Denial, p modes.Policy) *Suggestion {
	host := d.Address
	if h, _, ok := strings.Cut(d.Address, ":"); ok && !strings.HasPrefix(d.Address, "[") {
		host = h
	}
	if ap, err := netip.ParseAddrPort(d.Address); err == nil {
		host = ap.Addr().String()
		if ap.Addr().IsLoopback() && ap.Port() != 0 {
			if ap.Addr().Is4() {
				return allow("allow_host", "localhost:"+fmt.Sprint(ap.Port()))
			}
			return allow("allow_host", d.Address)
		}
	}
	switch {
	case strings.HasPrefix(d.Reason, ReasonPrivatePrefix):
		return allow("allow_domain", strings.TrimPrefix(d.Reason, ReasonPrivatePrefix))
	case strings.HasPrefix(d.Reason, ReasonDeniedPrefix), strings.HasPrefix(d.Reason, ReasonDeniedAddrPrefix):
		return cannot("refused by deny_domain, which wins over every allow_domain")
	case d.Op == "socket", d.Op == "bind", d.Op == "listen":
		if p.Network {
			return cannot("no confined mode allows this kind of socket")
		}
		return allow("network", "true")
	case host == "":
		return allow("network", "true")
	}
	return allow("allow_domain", host)
}

// The egress proxy's reasons for refusing a destination: a --deny-domain
// pattern matches its name (ReasonDeniedPrefix), or all of its addresses
// were refused, by the first one: not public and not allowed explicitly
// (ReasonPrivatePrefix), or covered by a --deny-domain IP or CIDR
// (ReasonDeniedAddrPrefix).
const (
	ReasonDeniedPrefix     = "denied by"
	ReasonPrivatePrefix    = "resolves to a private address "
	ReasonDeniedAddrPrefix = "resolves to a denied address "
)
