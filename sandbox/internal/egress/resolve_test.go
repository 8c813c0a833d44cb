package egress

import (
	"fmt"
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionResolve: a session's pins come before the proxy's resolver,
// and their addresses pass the same address check.
func TestSessionResolve(t *testing.T) {
	target := echoServer(t)
	p := fmt.Sprint(port(t, target.Addr()))
	pins := map[string][]netip.Addr{"pinned.test": {loopback}, "private.test": {loopback}, "meta.test": {netip.MustParseAddr("169.254.169.254")}}
	e := newEnv(t, policy([]string{"pinned.test", "private.test", "meta.test"}, nil, "127.0.0.1"), "")
	e.sv.Close()
	e.ln = &countingListener{Listener: listen(t)}
	e.sv = e.p.Serve(e.ln, Session{Policy: policy([]string{"pinned.test", "private.test", "meta.test"}, nil, "127.0.0.1"),
		Resolve: func(h string) ([]netip.Addr, bool) { a, ok := pins[h]; return a, ok },
		OnDeny:  func(d Denial) { e.mu.Lock(); e.denied = append(e.denied, d); e.mu.Unlock() }})

	for _, name := range []string{"pinned.test", "private.test"} { // private.test: the pin wins over the hook's 10.0.0.1
		resp, c, br := e.connect(name + ":" + p)
		require.Equal(t, 200, resp.StatusCode, name)
		io.WriteString(c, "ping")
		got := make([]byte, 4)
		_, err := io.ReadFull(br, got)
		require.NoError(t, err)
		assert.Equal(t, "ping", string(got))
		c.Close()
	}
	resp, c, _ := e.connect("meta.test:" + p)
	c.Close()
	assert.Equal(t, 403, resp.StatusCode, "a pinned metadata address is still refused")
	assert.Equal(t, []string{"127.0.0.1:" + p, "127.0.0.1:" + p}, e.dials.dialed())
	require.Len(t, e.denials(), 1)
	assert.Equal(t, "resolves to a private address 169.254.169.254", e.denials()[0].Reason)
}
