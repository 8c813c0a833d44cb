package modes_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// A workspace-write policy keeps the workspace's protected names read-only
// whether or not they exist; Unprotect opts one out.
func ExampleDerive_protectedNames() {
	ws, _ := os.MkdirTemp("/var/tmp", "example-ws-")
	defer os.RemoveAll(ws)
	ws, _ = filepath.EvalSymlinks(ws)
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Unprotect: []string{".vscode"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range []string{"main.go", ".envrc", ".claude/settings.json", ".vscode/settings.json"} {
		fmt.Printf("%s writable: %v\n", f, p.Writable(filepath.Join(ws, f)))
	}
	_, err = modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Unprotect: []string{".git/hooks"}})
	fmt.Println(err != nil)
	// Output:
	// main.go writable: true
	// .envrc writable: false
	// .claude/settings.json writable: false
	// .vscode/settings.json writable: true
	// true
}

// An allowlist lets a command reach names through the egress proxy: a
// wildcard covers the names below a domain, a deny pattern wins, and only
// an IP or CIDR pattern lets a name resolve to a private address.
func ExampleAllowlist() {
	ws, _ := os.MkdirTemp("/var/tmp", "example-ws-")
	defer os.RemoveAll(ws)
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Allowlist: &modes.Allowlist{
		Domains: []string{"registry.npmjs.org", "*.github.com", "10.8.0.0/16"},
		Deny:    []string{"gist.github.com"},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, host := range []string{"registry.npmjs.org", "api.github.com", "gist.github.com", "github.com", "example.com"} {
		if ok, why := p.Allowlist.AllowsName(host); ok {
			fmt.Println(host, "allowed")
		} else {
			fmt.Println(host, "refused:", why)
		}
	}
	fmt.Println(p.Allowlist.AllowsIP(netip.MustParseAddr("10.8.1.2")), p.Allowlist.AllowsIP(netip.MustParseAddr("169.254.169.254")))
	// Output:
	// registry.npmjs.org allowed
	// api.github.com allowed
	// gist.github.com refused: denied by --deny-domain
	// github.com refused: not in the allowlist
	// example.com refused: not in the allowlist
	// true false
}
