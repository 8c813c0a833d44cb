package policyflags

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// NewFlagSet is a flag set as the commands parse theirs: errors are
// returned, never printed, and flags are listed in the order they are
// registered.
func NewFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// Policy is the parsed value of the policy flags.
type Policy struct {
	Mode       string
	Workspace  string
	AllowWrite []string
	Protect    []string
	Unprotect  []string
	DenyRead   []string
	AllowRead  []string
	Network    bool
	// AllowDomain, DenyDomain, AllowHost and Resolve make the network
	// allowlist (modes.Allowlist): the command's only way out is then the
	// egress proxy.
	AllowDomain         []string
	DenyDomain          []string
	AllowHost           []string
	Resolve             []string
	AllowBroadWorkspace bool
	// NoCaches and CacheDir are modes.Options.NoCaches and CacheDir.
	NoCaches bool
	CacheDir string
	// Limits are the resource limits, set by CheckLimits: the defaults,
	// with each --max-* flag given replacing its field (0: unlimited).
	Limits modes.Limits

	// Preset names toolchains whose configured registries are allowed
	// (ApplyPresets).
	Preset []string
	// Profile, Config and NoConfig choose the policy files (LoadFiles).
	Profile  string
	Config   string
	NoConfig bool

	maxPids   int
	maxMemory string
	maxCPU    float64
	// fromFile are the limit flags' names a policy file set.
	fromFile map[string]bool
}

// Defaults are what differs between the commands in the policy flags.
type Defaults struct {
	// Mode is --mode's default.
	Mode string
	// Workspace describes --workspace's default in the usage text.
	Workspace string
}

// AddPolicyFlags registers --mode, --workspace, --allow-write, --protect,
// --unprotect, --deny-read, --allow-read, --network, --allow-domain,
// --deny-domain, --allow-host, --resolve, --allow-broad-workspace,
// --no-caches and --cache-dir on fs, in this order.
func (p *Policy) AddPolicyFlags(fs *pflag.FlagSet, d Defaults) {
	fs.StringVar(&p.Mode, "mode", d.Mode, "`MODE`: read-only, workspace-write or danger-full-access")
	fs.StringVar(&p.Workspace, "workspace", "", "the workspace `DIR`, writable under workspace-write (default: "+d.Workspace+")")
	fs.StringArrayVar(&p.AllowWrite, "allow-write", nil, "an extra writable `DIR` (workspace-write; repeatable)")
	fs.StringArrayVar(&p.Protect, "protect", nil, "a `PATH` kept read-only inside the writable roots (workspace-write; repeatable)")
	fs.StringArrayVar(&p.Unprotect, "unprotect", nil, "make `NAME`, one of the default protected names (.vscode, .envrc, ...), writable (workspace-write; repeatable)")
	fs.StringArrayVar(&p.DenyRead, "deny-read", nil, "an absolute `PATH` the command cannot read, besides the default secrets (confined modes; repeatable)")
	fs.StringArrayVar(&p.AllowRead, "allow-read", nil, "make an absolute `PATH` of the deny-read set, or under one of its entries, readable (confined modes; repeatable)")
	fs.BoolVar(&p.Network, "network", false, "allow the network, all of it")
	fs.StringArrayVar(&p.AllowDomain, "allow-domain", nil, "reach `PATTERN` through the sandbox's egress proxy: example.com, *.example.com (subdomains), an IP or CIDR (confined modes; repeatable)")
	fs.StringArrayVar(&p.DenyDomain, "deny-domain", nil, "never reach `PATTERN`, even when allowed (repeatable)")
	fs.StringArrayVar(&p.AllowHost, "allow-host", nil, "reach the host's loopback service `HOST:PORT` (localhost:5432) at the same address inside the sandbox (repeatable)")
	fs.StringArrayVar(&p.Resolve, "resolve", nil, "make the egress proxy resolve `NAME=ADDR[,ADDR]` so (repeatable)")
	fs.BoolVar(&p.AllowBroadWorkspace, "allow-broad-workspace", false, "allow a workspace or --allow-write DIR that is /, your home directory or an ancestor of it")
	fs.BoolVar(&p.NoCaches, "no-caches", false, "leave the toolchain caches (~/.cache/go-build, ~/.npm, ~/.cargo/registry, ...) read-only; by default a workspace-write command writes them through an overlay kept in --cache-dir, never into yours")
	fs.StringVar(&p.CacheDir, "cache-dir", "", "keep what commands add to the toolchain caches in `DIR`, outside every writable root (default: ~/"+modes.HomeCacheDir+")")
}

// AddLimitFlags registers --max-pids, --max-memory and --max-cpu on fs, in
// this order.
func (p *Policy) AddLimitFlags(fs *pflag.FlagSet) {
	fs.IntVar(&p.maxPids, "max-pids", modes.DefaultPids, "at most `N` processes and threads at once (0: unlimited)")
	fs.StringVar(&p.maxMemory, "max-memory", "", "at most `SIZE` bytes of memory+swap, e.g. 256M, 2G (K, M, G, T; 0: unlimited; default: half the RAM)")
	fs.Float64Var(&p.maxCPU, "max-cpu", 0, "at most `CORES` of CPU time per second, e.g. 1.5 (0: unlimited)")
}

// CheckLimits sets p.Limits from the limit flags fs parsed, or returns a
// "usage error: " error.
func (p *Policy) CheckLimits(fs *pflag.FlagSet) error {
	p.Limits = modes.DefaultLimits()
	given := func(f string) bool { return fs.Changed(f) || p.fromFile[f] }
	if given("max-pids") {
		p.Limits.MaxPids = p.maxPids
	}
	if given("max-memory") {
		n, err := modes.ParseSize(p.maxMemory)
		if err != nil {
			return fmt.Errorf("usage error: --max-memory: %w", err)
		}
		p.Limits.MaxMemory = n
	}
	if given("max-cpu") {
		p.Limits.MaxCPU = p.maxCPU
	}
	if err := p.Limits.Validate(); err != nil {
		return fmt.Errorf("usage error: --max-*: %w", err)
	}
	return nil
}

// CheckNetwork refuses --network together with an allowlist, and
// --deny-domain or --resolve without one ("usage error: " errors).
func (p *Policy) CheckNetwork() error {
	if p.Network && (len(p.AllowDomain) > 0 || len(p.DenyDomain) > 0 || len(p.AllowHost) > 0 || len(p.Resolve) > 0) {
		return errors.New("usage error: --allow-domain, --deny-domain, --allow-host and --resolve make an allowlist, and --network allows everything: give one or the other")
	}
	if len(p.AllowDomain) == 0 && len(p.AllowHost) == 0 && (len(p.DenyDomain) > 0 || len(p.Resolve) > 0) {
		return errors.New("usage error: --deny-domain and --resolve refine an allowlist: give --allow-domain or --allow-host too")
	}
	return nil
}

// Allowlist is the network allowlist the flags make, or nil; getenv is the
// caller's environment, which names its upstream proxy.
func (p *Policy) Allowlist(getenv func(string) string) (*modes.Allowlist, error) {
	al, err := modes.NewAllowlist(p.AllowDomain, p.DenyDomain, p.AllowHost, p.Resolve)
	if al == nil || err != nil {
		return al, err
	}
	// The egress proxy reaches what it allows through the caller's own
	// proxy, if any (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY).
	if al.Upstream, err = modes.UpstreamFromEnv(getenv); err != nil {
		return nil, err
	}
	return al, nil
}

// DidYouMean adds to a parse error of fs about an unknown flag the flag of
// fs it most likely meant: the only one it is a prefix of, else the nearest
// one at most two edits away ("--alow-write": "did you mean
// --allow-write?"). Other errors are returned as they are.
func DidYouMean(fs *pflag.FlagSet, err error) error {
	msg := err.Error()
	const prefix = "unknown flag: --"
	if !strings.HasPrefix(msg, prefix) {
		return err
	}
	given := strings.TrimPrefix(msg, prefix)
	best, bestDist, prefixOf := "", 3, []string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, given) {
			prefixOf = append(prefixOf, f.Name)
		}
		if d := editDistance(given, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if len(prefixOf) == 1 {
		best = prefixOf[0]
	}
	if best == "" {
		return err
	}
	return fmt.Errorf("%w (did you mean --%s?)", err, best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Millis is a flag value kept in milliseconds in *ms that takes a Go
// duration ("5s", "1500ms", "2m") or a plain number of milliseconds.
func Millis(ms *int64) pflag.Value { return millis{ms} }

type millis struct{ ms *int64 }

func (v millis) String() string {
	if v.ms == nil || *v.ms == 0 {
		return ""
	}
	return strconv.FormatInt(*v.ms, 10) + "ms"
}

func (v millis) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*v.ms = n
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q: want a duration (5s, 1500ms, 2m) or milliseconds", s)
	}
	if d > 0 && d < time.Millisecond {
		return fmt.Errorf("%q: under a millisecond", s)
	}
	*v.ms = d.Milliseconds()
	return nil
}

func (millis) Type() string { return "duration" }
