package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// options is the parsed command line.
type options struct {
	mode       string
	workspace  string
	allowWrite []string
	protect    []string
	unprotect  []string
	denyRead   []string
	allowRead  []string
	network    bool
	// allowDomain, denyDomain, allowHost and resolve make the network
	// allowlist (modes.Allowlist): the command's only way out is then the
	// egress proxy.
	allowDomain []string
	denyDomain  []string
	allowHost   []string
	resolve     []string
	allowBroad  bool
	report      string
	quiet       bool
	timeoutMs   int64
	// landlockABI caps the Landlock ABI (sandbox.Cmd.LandlockABI).
	landlockABI int
	// limits are the command's resource limits: the defaults, with each
	// --max-* flag given replacing its field (0: unlimited).
	limits    modes.Limits
	maxPids   int
	maxMemory string
	maxCPU    float64
	setenv    []string
	unsetenv  []string
	keepEnv   []string
	clearenv  bool
	probe     bool
	json      bool
	help      bool
	version   bool
	args      []string
	flags     *pflag.FlagSet // for --help
	given     []string       // the flags given, for --probe's check
}

// maxTimeoutMs is the largest --timeout a time.Duration holds.
const maxTimeoutMs = int64(math.MaxInt64 / time.Millisecond)

// timeout is --timeout as a duration (0: none).
func (o options) timeout() time.Duration { return time.Duration(o.timeoutMs) * time.Millisecond }

const usageHead = `usage: dsh-sandbox-run [OPTION]... -- COMMAND [ARG...]
       dsh-sandbox-run --probe [--json]

Runs COMMAND confined by a dsh-sandbox mode. COMMAND must follow "--".
Exit status: the command's; 128+N when it died of signal N; 125 when the
sandbox could not be set up (one stderr line says why; the command never
ran); 127/126 when COMMAND could not be executed.

Options:
`

// parse parses argv (without the program name). A COMMAND is only ever
// taken after "--": anything else that is not a flag is refused, so a
// boolean flag given a value ("--network false") or a forgotten "--" can
// never turn an argument into the command or the command into flags.
func parse(argv []string) (options, error) {
	var o options
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.SetInterspersed(false)
	fs.StringVar(&o.mode, "mode", "read-only", "`MODE`: read-only, workspace-write or danger-full-access")
	fs.StringVar(&o.workspace, "workspace", "", "the workspace `DIR`, writable under workspace-write (default: the current directory)")
	fs.StringArrayVar(&o.allowWrite, "allow-write", nil, "an extra writable `DIR` (workspace-write; repeatable)")
	fs.StringArrayVar(&o.protect, "protect", nil, "a `PATH` kept read-only inside the writable roots (workspace-write; repeatable)")
	fs.StringArrayVar(&o.unprotect, "unprotect", nil, "make `NAME`, one of the default protected names (.vscode, .envrc, ...), writable (workspace-write; repeatable)")
	fs.StringArrayVar(&o.denyRead, "deny-read", nil, "an absolute `PATH` the command cannot read, besides the default secrets (confined modes; repeatable)")
	fs.StringArrayVar(&o.allowRead, "allow-read", nil, "make an absolute `PATH` of the deny-read set, or under one of its entries, readable (confined modes; repeatable)")
	fs.BoolVar(&o.network, "network", false, "allow the network, all of it")
	fs.StringArrayVar(&o.allowDomain, "allow-domain", nil, "reach `PATTERN` through the sandbox's egress proxy: example.com, *.example.com (subdomains), an IP or CIDR (confined modes; repeatable)")
	fs.StringArrayVar(&o.denyDomain, "deny-domain", nil, "never reach `PATTERN`, even when allowed (repeatable)")
	fs.StringArrayVar(&o.allowHost, "allow-host", nil, "reach the host's loopback service `HOST:PORT` (localhost:5432) at the same address inside the sandbox (repeatable)")
	fs.StringArrayVar(&o.resolve, "resolve", nil, "make the egress proxy resolve `NAME=ADDR[,ADDR]` so (repeatable)")
	fs.BoolVar(&o.allowBroad, "allow-broad-workspace", false, "allow a workspace or --allow-write DIR that is /, your home directory or an ancestor of it")
	fs.StringVar(&o.report, "report", "", "write the JSON report to `FILE` (also when setup fails)")
	fs.BoolVar(&o.quiet, "quiet", false, "print no denial lines")
	fs.Int64Var(&o.timeoutMs, "timeout", 0, "after `MS` milliseconds SIGTERM the command, SIGKILL it 3000 ms later")
	fs.StringArrayVar(&o.setenv, "setenv", nil, "set `NAME=VALUE` in the command's environment (repeatable)")
	fs.StringArrayVar(&o.unsetenv, "unsetenv", nil, "remove `NAME` from the command's environment (repeatable)")
	fs.StringArrayVar(&o.keepEnv, "keep-env", nil, "pass `NAME` through although it is scrubbed (or --clearenv; repeatable)")
	fs.BoolVar(&o.clearenv, "clearenv", false, "start the command's environment empty (then --keep-env, --setenv)")
	fs.IntVar(&o.maxPids, "max-pids", modes.DefaultPids, "at most `N` processes and threads at once (0: unlimited)")
	fs.StringVar(&o.maxMemory, "max-memory", "", "at most `SIZE` bytes of memory+swap, e.g. 256M, 2G (K, M, G, T; 0: unlimited; default: half the RAM)")
	fs.Float64Var(&o.maxCPU, "max-cpu", 0, "at most `CORES` of CPU time per second, e.g. 1.5 (0: unlimited)")
	fs.IntVar(&o.landlockABI, "landlock-abi", 0, "use at most Landlock ABI `N` (confine as on an older kernel; 0: the kernel's)")
	fs.BoolVar(&o.probe, "probe", false, "print what this host can enforce")
	fs.BoolVar(&o.json, "json", false, "with --probe: print JSON")
	fs.BoolVarP(&o.help, "help", "h", false, "print this help")
	fs.BoolVar(&o.version, "version", false, "print the version")
	o.flags = fs
	if err := fs.Parse(argv); err != nil {
		return o, fmt.Errorf("usage error: %w", err)
	}
	fs.Visit(func(f *pflag.Flag) { o.given = append(o.given, f.Name) })
	if o.help || o.version {
		return o, nil
	}
	// Parsing stops at the first argument that is not a flag: unless it
	// is "--", what follows is not taken as the command.
	if args := fs.Args(); len(args) > 0 && fs.ArgsLenAtDash() != 0 {
		return o, fmt.Errorf("usage error: unexpected argument %q (COMMAND must follow \"--\"; boolean flags take no value)", args[0])
	}
	o.args = fs.Args()
	if o.landlockABI < 0 || (o.landlockABI == 0 && fs.Changed("landlock-abi")) {
		return o, fmt.Errorf("usage error: --landlock-abi must be a Landlock ABI version (1 or more), got %d", o.landlockABI)
	}
	o.limits = modes.DefaultLimits()
	if fs.Changed("max-pids") {
		o.limits.MaxPids = o.maxPids
	}
	if fs.Changed("max-memory") {
		n, err := modes.ParseSize(o.maxMemory)
		if err != nil {
			return o, fmt.Errorf("usage error: --max-memory: %w", err)
		}
		o.limits.MaxMemory = n
	}
	if fs.Changed("max-cpu") {
		o.limits.MaxCPU = o.maxCPU
	}
	if err := o.limits.Validate(); err != nil {
		return o, fmt.Errorf("usage error: --max-*: %w", err)
	}
	if o.network && (len(o.allowDomain) > 0 || len(o.denyDomain) > 0 || len(o.allowHost) > 0 || len(o.resolve) > 0) {
		return o, errors.New("usage error: --allow-domain, --deny-domain, --allow-host and --resolve make an allowlist, and --network allows everything: give one or the other")
	}
	if len(o.allowDomain) == 0 && len(o.allowHost) == 0 && (len(o.denyDomain) > 0 || len(o.resolve) > 0) {
		return o, errors.New("usage error: --deny-domain and --resolve refine an allowlist: give --allow-domain or --allow-host too")
	}
	if o.probe {
		for _, f := range o.given {
			if f != "probe" && f != "json" && f != "workspace" && f != "landlock-abi" {
				return o, errors.New("usage error: --probe takes only --json (and --workspace, --landlock-abi)")
			}
		}
		if len(o.args) > 0 {
			return o, errors.New("usage error: --probe takes no COMMAND")
		}
		return o, nil
	}
	switch {
	case o.json:
		return o, errors.New("usage error: --json goes with --probe")
	case len(o.args) == 0:
		return o, errors.New("usage error: missing `-- COMMAND [ARG...]`")
	case o.timeoutMs < 0 || (o.timeoutMs == 0 && fs.Changed("timeout")) || o.timeoutMs > maxTimeoutMs:
		return o, fmt.Errorf("usage error: --timeout must be a positive number of milliseconds up to %d, got %d", maxTimeoutMs, o.timeoutMs)
	}
	return o, nil
}

// allowlist is the network allowlist the flags make, or nil.
func (o options) allowlist() (*modes.Allowlist, error) {
	if len(o.allowDomain) == 0 && len(o.allowHost) == 0 {
		return nil, nil
	}
	al := &modes.Allowlist{Domains: o.allowDomain, Deny: o.denyDomain}
	for _, h := range o.allowHost {
		ap, err := modes.ParseHost(h)
		if err != nil {
			return nil, err
		}
		al.Hosts = append(al.Hosts, ap)
	}
	for _, r := range o.resolve {
		name, addrs, err := modes.ParseResolve(r)
		if err != nil {
			return nil, err
		}
		if al.Resolve == nil {
			al.Resolve = map[string][]netip.Addr{}
		}
		al.Resolve[name] = append(al.Resolve[name], addrs...)
	}
	return al, nil
}

// usage is the full --help text.
func (o options) usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	b.WriteString(o.flags.FlagUsages())
	b.WriteString(`
The command's environment is the caller's without every variable whose name
contains KEY, PASSWORD, SECRET or TOKEN (any case) or starts with DSH_;
then --keep-env, --unsetenv and --setenv apply, in that order.
See the README for the modes, the report and the probe.
`)
	return b.String()
}
