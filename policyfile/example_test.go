package policyfile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/policyfile"
)

// A Go harness reads the user's policy file with a profile and turns it
// into the executor's configuration.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "policyfile-example")
	defer os.RemoveAll(dir)
	user := filepath.Join(dir, "config.toml")
	os.WriteFile(user, []byte(`mode = "workspace-write"
allow_domain = ["proxy.golang.org", "sum.golang.org"]

[profiles.node]
allow_domain = ["registry.npmjs.org"]
max_memory = "4G"
`), 0o644)

	// The user's file is policyfile.Dirs(os.Getenv)'s config.toml; a
	// workspace's .dsh-sandbox.toml applies once `dsh-sandbox-run trust`
	// recorded it (Options.ProjectDir, Options.TrustDir).
	p, err := policyfile.Load(policyfile.Options{UserFile: user, Profile: "node"})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := p.Config() // then executor.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Mode, cfg.Allowlist.Domains, cfg.Limits.MaxMemory>>30, "GiB")
	for _, o := range p.Origins["allow_domain"] {
		fmt.Printf("allow_domain from line %d, profile %q\n", o.Line, o.Profile)
	}
	// Output:
	// workspace-write [proxy.golang.org sum.golang.org registry.npmjs.org] 4 GiB
	// allow_domain from line 2, profile ""
	// allow_domain from line 5, profile "node"
}
