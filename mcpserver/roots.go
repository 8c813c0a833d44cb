//lint:file-ignore SA1019 roots are how MCP clients name their workspace; deprecated only from protocol 2026-07-28, which this server does not negotiate.

package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// workspace is the session's workspace: "" (the executor's) unless the
// server takes workspaces from the client's roots. The roots are read at
// the session's first call and again after each roots/list_changed.
func (s *Server) workspace(ctx context.Context, x *session) (string, error) {
	if !s.roots {
		return "", nil
	}
	x.mu.Lock()
	if x.rootsRead {
		ws := x.workspace
		x.mu.Unlock()
		return ws, nil
	}
	gen := x.gen
	x.mu.Unlock()

	ws := ""
	if ip := x.ss.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.RootsV2 != nil {
		lctx, cancel := context.WithTimeout(ctx, rootsTimeout)
		res, err := x.ss.ListRoots(lctx, nil)
		cancel()
		if err != nil {
			return "", fmt.Errorf("cannot read the client's MCP roots (roots/list): %w", err)
		}
		if ws, err = firstFileRoot(res.Roots); err != nil {
			return "", err
		}
	}
	if ws == "" && s.needRoot {
		// Asked again at the next call: the client may add a root.
		return "", errNoRoot
	}
	x.mu.Lock()
	if x.gen == gen {
		x.workspace, x.rootsRead = ws, true
	}
	x.mu.Unlock()
	return ws, nil
}

// errNoRoot refuses a call of a server without a workspace of its own
// (Options.RequireRoots) whose client gives no file:// root.
var errNoRoot = errors.New("no workspace: the server was started in a directory too broad to be one, and this client gives no file:// root (MCP roots); start the server with --workspace DIR, or in the project")

// rootsChanged makes the session read its roots again at its next call.
func (s *Server) rootsChanged(_ context.Context, r *mcp.RootsListChangedRequest) {
	s.mu.Lock()
	x := s.byConn[r.Session]
	s.mu.Unlock()
	if x == nil {
		return
	}
	x.mu.Lock()
	x.gen++
	x.rootsRead = false
	x.mu.Unlock()
}

// firstFileRoot is the path of the first file:// root ("" when there is
// none). A file:// root that is not a local absolute path is an error: the
// client meant a workspace the server cannot use, and guessing another
// could make the wrong directory writable.
func firstFileRoot(roots []*mcp.Root) (string, error) {
	for _, r := range roots {
		if r == nil {
			continue
		}
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" {
			continue
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("MCP root %q: not a local file URI", r.URI)
		}
		if !filepath.IsAbs(u.Path) {
			return "", fmt.Errorf("MCP root %q: not an absolute path", r.URI)
		}
		return filepath.Clean(u.Path), nil
	}
	return "", nil
}
