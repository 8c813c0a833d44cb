package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/dsh-sandbox/dsh-sandbox/internal/policyflags"
	"github.com/dsh-sandbox/dsh-sandbox/mcpserver"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
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
}

const usageHead = `usage: dsh-sandbox-mcp [OPTION]...

Serves the sandboxed bash tool and the background task tools (bash,
task_output, task_list, task_kill) to an MCP client: over stdio by default,
over streamable HTTP at http://ADDR/mcp with --http ADDR (every request
then needs "Authorization: Bearer $` + tokenEnv + `"; without that variable a
token is generated and printed on stderr).

Options:
`

func parse(argv []string) (options, error) {
	var o options
	fs := policyflags.NewFlagSet(name)
	o.AddPolicyFlags(fs, policyflags.Defaults{Mode: "read-only", Workspace: "the client's first file:// root, else the current directory"})
	o.AddLimitFlags(fs)
	fs.BoolVar(&o.noBackground, "no-background", false, "offer no background tasks (no run_in_background, no task tools)")
	fs.StringVar(&o.http, "http", "", "serve streamable HTTP on `ADDR` (host:port, loopback only) instead of stdio")
	fs.BoolVar(&o.allowRemote, "http-allow-remote", false, "let --http listen on an address that is not loopback")
	fs.BoolVarP(&o.help, "help", "h", false, "print this help")
	fs.BoolVar(&o.version, "version", false, "print the version")
	o.flags = fs
	if err := fs.Parse(argv); err != nil {
		return o, fmt.Errorf("usage error: %w", err)
	}
	if o.help || o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("usage error: unexpected argument %q (boolean flags take no value)", fs.Arg(0))
	}
	if err := o.CheckLimits(fs); err != nil {
		return o, err
	}
	if err := o.CheckNetwork(); err != nil {
		return o, err
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

// config is the executor's configuration the flags make.
func (o options) config() (sandbox.Config, error) {
	mode, err := modes.Parse(o.Mode)
	if err != nil {
		return sandbox.Config{}, fmt.Errorf("usage error: --mode: %w", err)
	}
	al, err := o.Allowlist()
	if err != nil {
		return sandbox.Config{}, fmt.Errorf("usage error: %w", err)
	}
	limits := o.Limits
	return sandbox.Config{
		Mode: mode, Workspace: o.Workspace, WritableRoots: o.AllowWrite, Protected: o.Protect,
		Unprotect: o.Unprotect, DenyRead: o.DenyRead, AllowRead: o.AllowRead,
		Network: o.Network, Allowlist: al, AllowBroadWorkspace: o.AllowBroad, Limits: &limits,
	}, nil
}

func run(argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
		return 2
	}
	o, err := parse(argv)
	if err != nil {
		return fail(err)
	}
	switch {
	case o.help:
		fmt.Fprint(stdout, usageHead+o.flags.FlagUsages())
		return 0
	case o.version:
		fmt.Fprintf(stdout, "%s %s (%s)\n", name, version(), runtime.Version())
		return 0
	}
	cfg, err := o.config()
	if err != nil {
		return fail(err)
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Config: cfg, Roots: o.Workspace == "", DisableBackground: o.noBackground,
		Implementation: &mcp.Implementation{Name: mcpserver.Name, Version: version()},
	})
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if o.http != "" {
		err = serveHTTP(ctx, srv, o.http, getenv(tokenEnv), stderr)
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

// serveHTTP serves the streamable HTTP transport at http://addr/mcp until
// ctx ends.
func serveHTTP(ctx context.Context, srv *mcpserver.Server, addr, token string, stderr io.Writer) error {
	if token == "" {
		token = rand.Text()
		fmt.Fprintf(stderr, "%s: %s is not set; requests need \"Authorization: Bearer %s\"\n", name, tokenEnv, token)
	}
	h, err := srv.HTTPHandler(token)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
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

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
