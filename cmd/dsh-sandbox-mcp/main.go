package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/dsh-sandbox/dsh-sandbox/internal/policyflags"
	"github.com/dsh-sandbox/dsh-sandbox/mcpserver"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

const (
	name = "dsh-sandbox-mcp"
	// tokenEnv holds the HTTP bearer token. The executor scrubs it from
	// every command's environment (a DSH_* name, and it contains TOKEN).
	tokenEnv = "DSH_MCP_TOKEN"
	// closeTimeout bounds the killing of the task trees at shutdown.
	closeTimeout = 15 * time.Second
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// options is the parsed command line.
type options struct {
	policyflags.Policy
	noBackground bool
	http         string
	allowRemote  bool
	help         bool
	version      bool
	flags        *pflag.FlagSet
	// files is what the policy files set; notes are lines to say at start.
	files *policyflags.Files
	notes []string
	// timeoutDefault and timeoutMax are the bash tool's default and
	// largest timeouts in milliseconds (0: the contract's).
	timeoutDefault, timeoutMax int64
}

const usageHead = `usage: dsh-sandbox-mcp [OPTION]...

Serves the sandboxed bash tool and the background task tools (bash,
task_output, task_list, task_kill) to an MCP client: over stdio by default,
over streamable HTTP at http://ADDR/mcp with --http ADDR (every request
then needs "Authorization: Bearer $` + tokenEnv + `"; without that variable a
token is generated: printed on stderr when stderr is a terminal, else
written to ~/` + modes.HomeStateDir + `/mcp-PORT.token, mode 0600,
which no confined command can read, and only that path is printed).

Options:
`

func parse(argv []string, getenv func(string) string) (options, error) {
	var o options
	fs := policyflags.NewFlagSet(name)
	o.AddPolicyFlags(fs, policyflags.Defaults{Mode: "read-only", Workspace: "the client's first file:// root, else the current directory"})
	o.AddLimitFlags(fs)
	o.AddFileFlags(fs)
	fs.Var(policyflags.Millis(&o.timeoutDefault), "timeout-default", "the timeout of a bash call that gives none, a `DURATION` (5m, or milliseconds; default 120000 ms)")
	fs.Var(policyflags.Millis(&o.timeoutMax), "timeout-max", "the largest timeout a bash call may ask for, a `DURATION` (30m, or milliseconds; default 600000 ms)")
	fs.BoolVar(&o.noBackground, "no-background", false, "offer no background tasks (no run_in_background, no task tools)")
	fs.StringVar(&o.http, "http", "", "serve streamable HTTP on `ADDR` (host:port, loopback only) instead of stdio")
	fs.BoolVar(&o.allowRemote, "http-allow-remote", false, "let --http listen on an address that is not loopback")
	fs.BoolVarP(&o.help, "help", "h", false, "print this help")
	fs.BoolVar(&o.version, "version", false, "print the version")
	o.flags = fs
	if err := fs.Parse(argv); err != nil {
		return o, fmt.Errorf("usage error: %w", policyflags.DidYouMean(fs, err))
	}
	if o.help || o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("usage error: unexpected argument %q (boolean flags take no value)", fs.Arg(0))
	}
	files, err := o.LoadFiles(fs, getenv)
	if err != nil {
		return o, err
	}
	o.files = files
	// The toolchains' own configuration is read as the server's user sees
	// it, once, at start.
	for _, p := range o.ApplyPresets(os.Environ(), files) {
		if len(p.Domains) == 0 {
			o.notes = append(o.notes, fmt.Sprintf("preset %s allows nothing: %s", p.Name, p.Note))
		}
	}
	if err := o.CheckLimits(fs); err != nil {
		return o, err
	}
	if err := o.CheckNetwork(); err != nil {
		return o, err
	}
	for _, f := range []struct {
		name string
		ms   int64
	}{{"timeout-default", o.timeoutDefault}, {"timeout-max", o.timeoutMax}} {
		if fs.Changed(f.name) && (f.ms <= 0 || f.ms > int64(math.MaxInt64/time.Millisecond)) {
			return o, fmt.Errorf("usage error: --%s must be a positive duration, got %d ms", f.name, f.ms)
		}
	}
	if def, lim := o.timeouts(); def > lim {
		return o, fmt.Errorf("usage error: --timeout-default (%d ms) is over --timeout-max (%d ms)", def.Milliseconds(), lim.Milliseconds())
	}
	if o.allowRemote && o.http == "" {
		return o, errors.New("usage error: --http-allow-remote goes with --http")
	}
	if o.http != "" {
		if err := checkListen(o.http, o.allowRemote); err != nil {
			return o, fmt.Errorf("usage error: %w", err)
		}
	}
	return o, nil
}

// checkListen refuses an --http address that is not loopback, unless
// allowRemote.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", addr, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s: not a loopback address (--http-allow-remote allows it; every request still needs the bearer token)", addr)
}

// timeouts are the bash tool's default and largest timeouts the flags
// make (the contract's 120000 and 600000 ms where not given).
func (o options) timeouts() (def, lim time.Duration) {
	def, lim = executor.DefaultTimeout, executor.DefaultMaxTimeout
	if o.timeoutDefault > 0 {
		def = time.Duration(o.timeoutDefault) * time.Millisecond
	}
	if o.timeoutMax > 0 {
		lim = time.Duration(o.timeoutMax) * time.Millisecond
	}
	return def, lim
}

// config is the executor's configuration the flags make; getenv is the
// caller's environment (its upstream proxy).
func (o options) config(getenv func(string) string) (executor.Config, error) {
	mode, err := modes.Parse(o.Mode)
	if err != nil {
		return executor.Config{}, fmt.Errorf("usage error: --mode: %w", err)
	}
	al, err := o.Allowlist(getenv)
	if err != nil {
		return executor.Config{}, fmt.Errorf("usage error: %w", err)
	}
	limits := o.Limits
	def, lim := o.timeouts()
	return executor.Config{
		DefaultTimeout: def, MaxTimeout: lim,
		Mode: mode, Workspace: o.Workspace, AllowWrite: o.AllowWrite,
		// dsh-sandbox's own directories stay read-only wherever XDG puts them.
		Protect:   append(slices.Clip(o.Protect), o.files.Dirs()...),
		Unprotect: o.Unprotect, DenyRead: o.DenyRead, AllowRead: o.AllowRead,
		Network: o.Network, Allowlist: al, AllowBroadWorkspace: o.AllowBroadWorkspace, Limits: &limits,
		NoCaches: o.NoCaches, CacheDir: o.CacheDir,
	}, nil
}

func run(argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
		return 2
	}
	o, err := parse(argv, getenv)
	if err != nil {
		return fail(err)
	}
	if o.files != nil && o.files.Untrusted != "" {
		fmt.Fprintf(stderr, "%s: %s\n", name, o.files.Untrusted)
	}
	for _, n := range o.notes {
		fmt.Fprintf(stderr, "%s: %s\n", name, n)
	}
	switch {
	case o.help:
		fmt.Fprint(stdout, usageHead+o.flags.FlagUsages())
		return 0
	case o.version:
		fmt.Fprintf(stdout, "%s %s (%s)\n", name, version(), runtime.Version())
		return 0
	}
	cfg, err := o.config(getenv)
	if err != nil {
		return fail(err)
	}
	opts := mcpserver.Options{
		Config: cfg, Roots: o.Workspace == "", DisableBackground: o.noBackground,
		Implementation: &mcp.Implementation{Name: mcpserver.Name, Version: version()},
	}
	srv, err := mcpserver.New(opts)
	var broad *modes.BroadWorkspaceError
	if errors.As(err, &broad) && opts.Roots {
		// Started from / or a home (a client's default): each session's
		// workspace is its client's first file:// root, and a call without
		// one is refused; the executor's own workspace, never used, is the
		// temporary directory.
		fmt.Fprintf(stderr, "%s: %v: each session's workspace is its client's first file:// root\n", name, broad)
		opts.Config.Workspace, opts.RequireRoots = os.TempDir(), true
		srv, err = mcpserver.New(opts)
	}
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if o.http != "" {
		b := tokenSource{token: getenv(tokenEnv), home: getenv("HOME"), tmpdir: getenv("TMPDIR"),
			workspace: srv.Executor().Workspace(), allowWrite: cfg.AllowWrite}
		err = serveHTTP(ctx, srv, o.http, b, stderr)
	} else {
		err = srv.MCP().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	}
	cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	cerr := srv.Close(cctx) // every live task tree is killed
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF):
		return fail(err)
	case cerr != nil:
		return fail(cerr)
	}
	return 0 // stdin's end, or a termination signal: a normal shutdown
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// tokenSource is where the HTTP bearer token comes from: token ($DSH_MCP_TOKEN)
// when set, else a generated one, shown on stderr when it is a terminal and
// otherwise written to a file in home.
type tokenSource struct {
	token string // $DSH_MCP_TOKEN
	home  string // $HOME
	// The writable roots of the commands besides /tmp and /dev/shm: the
	// executor's workspace, --allow-write, $TMPDIR.
	workspace  string
	allowWrite []string
	tmpdir     string
}

// serveHTTP serves the streamable HTTP transport at http://addr/mcp until
// ctx ends.
func serveHTTP(ctx context.Context, srv *mcpserver.Server, addr string, b tokenSource, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	token := b.token
	if token == "" {
		token = rand.Text()
		file, err := showToken(token, ln.Addr().(*net.TCPAddr).Port, b, stderr)
		if err != nil {
			return err
		}
		if file != "" {
			defer os.Remove(file)
		}
	}
	h, err := srv.HTTPHandler(token)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	fmt.Fprintf(stderr, "%s: serving MCP at http://%s/mcp\n", name, ln.Addr())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx) // streams still open are cut when srv closes
	return nil
}

// showToken makes a generated token known to the user, and to no confined
// command: stderr may be a log file a command can read (a client's log of
// its servers), so the token goes on stderr only when it is a terminal;
// otherwise into ~/.local/state/dsh-sandbox/mcp-PORT.token (mode 0600, in
// a 0700 directory that modes.HomeSecrets hides from every confined
// command, outside every writable root of the executor's commands), and
// stderr gets its path. It returns the file written, or "".
func showToken(token string, port int, b tokenSource, stderr io.Writer) (string, error) {
	if isTerminal(stderr) {
		fmt.Fprintf(stderr, "%s: %s is not set; requests need \"Authorization: Bearer %s\"\n", name, tokenEnv, token)
		return "", nil
	}
	if !filepath.IsAbs(b.home) {
		return "", fmt.Errorf("%s is not set and stderr is not a terminal: cannot write the generated token to ~/%s ($HOME is not an absolute path)", tokenEnv, modes.HomeStateDir)
	}
	dir := filepath.Join(b.home, modes.HomeStateDir)
	if err := outsideRoots(dir, b); err != nil {
		return "", fmt.Errorf("%s is not set and stderr is not a terminal: %w; set %s", tokenEnv, err, tokenEnv)
	}
	file := filepath.Join(dir, fmt.Sprintf("mcp-%d.token", port))
	if err := writeSecret(file, token+"\n"); err != nil {
		return "", fmt.Errorf("%s is not set and stderr is not a terminal: cannot write the generated token: %w", tokenEnv, err)
	}
	fmt.Fprintf(stderr, "%s: %s is not set; the generated token is in %s (mode 0600, unreadable in the sandbox); requests need \"Authorization: Bearer <its contents>\"\n", name, tokenEnv, file)
	return file, nil
}

// outsideRoots fails when dir lies in a writable root of the executor's
// commands under workspace-write (its workspace, /tmp, /dev/shm, $TMPDIR,
// --allow-write): a command could replace the token file there, and only
// a mount view could hide it.
func outsideRoots(dir string, b tokenSource) error {
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: b.workspace, AllowWrite: b.allowWrite,
		TempDir: b.tmpdir, AllowBroadWorkspace: true, Homes: []string{b.home}})
	if err != nil {
		return err
	}
	c := dir
	if r, err := filepath.EvalSymlinks(b.home); err == nil {
		c = filepath.Join(r, modes.HomeStateDir)
	}
	for _, r := range p.WritableRoots {
		if modes.Within(c, r) {
			return fmt.Errorf("~/%s lies in the writable root %s", modes.HomeStateDir, r)
		}
	}
	return nil
}

// writeSecret writes data to path, mode 0600, in a directory of the
// effective user's that only they can use (made 0700 when missing): through
// a temporary file renamed over path, so a symlink planted at path is
// replaced, never followed.
func writeSecret(path, data string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	// Only the owner may chmod: this also fails on a directory of
	// someone else's.
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".mcp-token-*") // 0600
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
