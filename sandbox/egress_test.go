//go:build linux

package sandbox

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestNameservers(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "resolv.conf")
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, tc := range []struct {
		conf string
		want []netip.Addr
	}{
		{"nameserver 10.0.0.2\nsearch corp\nnameserver ::1\n", addrs("10.0.0.2", "::1")},
		{"# nameserver 1.1.1.1\nnameserver 127.0.0.53\noptions edns0\n", addrs("127.0.0.53")},
		{"nameserver fe80::1%eth0\nnameserver 0.0.0.0\nnameserver 10.0.0.2\nnameserver 10.0.0.2\n", addrs("10.0.0.2")},
		{"nameserver 1.1.1.1\nnameserver 1.0.0.1\nnameserver 8.8.8.8\nnameserver 8.8.4.4\n", addrs("1.1.1.1", "1.0.0.1", "8.8.8.8")},
		{"search corp\n", addrs("127.0.0.1")},
	} {
		assert.Equal(t, tc.want, nameservers(write(tc.conf)), tc.conf)
	}
	assert.Equal(t, addrs("127.0.0.1"), nameservers(filepath.Join(dir, "missing")))
}

// TestStubResolverSkipsWhatTheNamespaceRefuses: a nameserver the command's
// net namespace cannot take (a multicast address) costs only that
// resolver: the reason is reported, and the next nameservers answer.
func TestStubResolverSkipsWhatTheNamespaceRefuses(t *testing.T) {
	_, err := os.Stat("/usr/bin/getent")
	require.NoError(t, err, "getent (libc-bin) is missing")
	dir := t.TempDir()
	conf := filepath.Join(dir, "resolv.conf")
	// The command reads the host's resolv.conf: the stub must answer at
	// its nameservers, after the one it cannot take.
	host, _ := os.ReadFile(resolvConf)
	require.NoError(t, os.WriteFile(conf, append([]byte("nameserver ff02::1\n"), host...), 0o644))
	p, err := modes.Derive(modes.Options{Mode: modes.ReadOnly, Workspace: dir, Allowlist: &modes.Allowlist{
		Domains: []string{"a.test", "192.0.2.0/24"}, Resolve: map[string][]netip.Addr{"a.test": {netip.MustParseAddr("192.0.2.5")}}}})
	require.NoError(t, err)
	out, err := os.CreateTemp(dir, "out")
	require.NoError(t, err)
	defer out.Close()
	c := &Cmd{Policy: p, Args: []string{"getent", "ahostsv4", "a.test"}, Stdout: out}
	c.resolvConf = conf
	res, err := c.Run()
	require.NoError(t, err)
	if !slices.Contains(res.Enforcement.Layers, layerNetNS) {
		t.Skipf("no net namespace here (%v): no stub resolver", res.Enforcement.Reasons)
	}
	b, _ := os.ReadFile(out.Name())
	assert.Equal(t, 0, res.ExitCode, "%s", b)
	assert.Contains(t, string(b), "192.0.2.5")
	assert.Contains(t, strings.Join(res.Enforcement.Reasons, "; "), "no stub resolver at ff02::1")
}
