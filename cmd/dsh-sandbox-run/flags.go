package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dsh-sandbox/dsh-sandbox/internal/policyflags"
	"github.com/dsh-sandbox/dsh-sandbox/policyfile"
)

// options is the parsed command line.
type options struct {
	// policyflags.Policy holds the flags shared with dsh-sandbox-mcp: the
	// mode, workspace, writable roots, protected paths, deny-read set,
	// network, allowlist and resource limits.
	policyflags.Policy
	report string
	quiet  bool
	// transaction is --transaction's directory ("": none).
	transaction string
	timeoutMs   int64
	// landlockABI caps the Landlock ABI (sandbox.Cmd.LandlockABI).
	landlockABI int
	setenv      []string
	unsetenv    []string
	keepEnv     []string
	clearenv    bool
	probe       bool
	json        bool
	help        bool
	version     bool
	args        []string
	flags       *pflag.FlagSet // for --help
	given       []string       // the flags given, for --probe's check
	// files is what the policy files set (nil with --probe), presets what
	// the toolchain presets resolved to.
	files   *policyflags.Files
	presets []policyfile.Preset
	// policy is set by the policy subcommand: print the effective policy.
	policy bool
}

// maxTimeoutMs is the largest --timeout a time.Duration holds.
const maxTimeoutMs = int64(math.MaxInt64 / time.Millisecond)

// timeout is --timeout as a duration (0: none).
func (o options) timeout() time.Duration { return time.Duration(o.timeoutMs) * time.Millisecond }

const usageHead = `usage: dsh-sandbox-run [OPTION]... -- COMMAND [ARG...]
       dsh-sandbox-run --probe [--json]
       dsh-sandbox-run policy [OPTION]... [--json]
       dsh-sandbox-run trust [--workspace DIR] [--revoke]
       dsh-sandbox-run completion bash|zsh|fish
       dsh-sandbox-run commit|discard|diff|changes DIR

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
func parse(argv, environ []string) (options, error) {
	getenv := func(k string) string { return lookupEnv(environ, k) }
	var o options
	if len(argv) > 0 && argv[0] == "policy" {
		o.policy, argv = true, argv[1:]
	}
	fs := policyflags.NewFlagSet(name)
	fs.SetInterspersed(false)
	o.AddPolicyFlags(fs, policyflags.Defaults{Mode: "read-only", Workspace: "the current directory"})
	fs.StringVar(&o.report, "report", "", "write the JSON report to `FILE` (also when setup fails)")
	fs.BoolVar(&o.quiet, "quiet", false, "print no denial lines")
	fs.StringVar(&o.transaction, "transaction", "", "run in the transaction in `DIR` (made when missing): the workspace's changes land there until `commit DIR` (confined modes)")
	fs.Var(policyflags.Millis(&o.timeoutMs), "timeout", "after `DURATION` (5s, 1500ms, 2m, or plain milliseconds) SIGTERM the command, SIGKILL it 3000 ms later")
	fs.StringArrayVar(&o.setenv, "setenv", nil, "set `NAME=VALUE` in the command's environment (repeatable)")
	fs.StringArrayVar(&o.unsetenv, "unsetenv", nil, "remove `NAME` from the command's environment (repeatable)")
	fs.StringArrayVar(&o.keepEnv, "keep-env", nil, "pass `NAME` through although it is scrubbed (or --clearenv; repeatable)")
	fs.BoolVar(&o.clearenv, "clearenv", false, "start the command's environment empty (then --keep-env, --setenv)")
	o.AddLimitFlags(fs)
	o.AddFileFlags(fs)
	fs.IntVar(&o.landlockABI, "landlock-abi", 0, "use at most Landlock ABI `N`, 1 or more: confine as on an older kernel (default: the kernel's)")
	fs.BoolVar(&o.probe, "probe", false, "print what this host can enforce")
	fs.BoolVar(&o.json, "json", false, "with --probe or policy: print JSON")
	fs.BoolVarP(&o.help, "help", "h", false, "print this help")
	fs.BoolVar(&o.version, "version", false, "print the version")
	o.flags = fs
	if err := fs.Parse(argv); err != nil {
		return o, fmt.Errorf("usage error: %w", policyflags.DidYouMean(fs, err))
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
	if !o.probe {
		files, err := o.LoadFiles(fs, getenv)
		if err != nil {
			return o, err
		}
		o.files = files
		o.presets = o.ApplyPresets(environ, files)
	}
	if err := o.CheckLimits(fs); err != nil {
		return o, err
	}
	if err := o.CheckNetwork(); err != nil {
		return o, err
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
	if o.policy {
		if len(o.args) > 0 || o.probe {
			return o, errors.New("usage error: policy takes no COMMAND and no --probe")
		}
		return o, nil
	}
	switch {
	case o.json:
		return o, errors.New("usage error: --json goes with --probe or policy")
	case fs.Changed("transaction") && o.transaction == "":
		return o, errors.New("usage error: --transaction needs a directory")
	case len(o.args) == 0:
		return o, errors.New("usage error: missing `-- COMMAND [ARG...]`")
	case o.timeoutMs < 0 || (o.timeoutMs == 0 && fs.Changed("timeout")) || o.timeoutMs > maxTimeoutMs:
		return o, fmt.Errorf("usage error: --timeout must be a positive duration up to %d ms, got %d ms", maxTimeoutMs, o.timeoutMs)
	}
	return o, nil
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
See man dsh-sandbox-run, docs/policy.md (the modes) and docs/report.md (the report and the probe).

A transaction (--transaction DIR) keeps the command's changes to the
workspace in DIR; then:
  dsh-sandbox-run changes DIR   the changes, as JSON
  dsh-sandbox-run diff DIR      a unified diff of the text files
  dsh-sandbox-run commit DIR    apply them to the workspace (exit 1, nothing
                                applied, when the workspace changed there since)
  dsh-sandbox-run discard DIR   drop them
`)
	return b.String()
}
