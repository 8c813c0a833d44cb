package mcpserver

import (
	"crypto/subtle"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPHandler serves the server over MCP's streamable HTTP transport
// (stateful: one MCP session per Mcp-Session-Id). Every request must carry
// "Authorization: Bearer <token>": any process that can reach the address
// could otherwise drive the tools, and answer its own escalation
// elicitations — a sandboxed command given the network among them. So keep
// the token where no sandboxed command can read it: not in a log file of the
// user's (confined commands read everything but the secrets); under
// ~/.local/state/dsh-sandbox (modes.HomeStateDir, one of modes.HomeSecrets)
// for instance, where dsh-sandbox-mcp writes a generated one. Requests
// with a Host that is not loopback while arriving on a loopback address are
// refused too (the SDK's DNS-rebinding protection).
func (s *Server) HTTPHandler(token string) (http.Handler, error) {
	if len(token) < 16 {
		return nil, errors.New("mcpserver: the HTTP bearer token must be at least 16 characters")
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh-sandbox"`)
			http.Error(w, "dsh-sandbox: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}
