package modes

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllowlistNames(t *testing.T) {
	al := &Allowlist{Domains: []string{"example.com", "*.pkg.test", "10.1.0.0/16", "192.0.2.7"}, Deny: []string{"bad.pkg.test"}}
	c, err := al.canonical()
	require.NoError(t, err)
	for _, tc := range []struct {
		host string
		ok   bool
		why  string
	}{
		{"example.com", true, ""},
		{"www.example.com", false, "not in the allowlist"},
		{"a.pkg.test", true, ""},
		{"a.b.pkg.test", true, ""},
		{"pkg.test", false, "not in the allowlist"},
		{"bad.pkg.test", false, "denied by --deny-domain"},
		{"x.bad.pkg.test", true, ""},
		{"10.1.2.3", true, ""},
		{"10.2.0.1", false, "not in the allowlist"},
		{"192.0.2.7", true, ""},
		{"evilexample.com", false, "not in the allowlist"},
	} {
		ok, why := c.AllowsName(tc.host)
		assert.Equal(t, tc.ok, ok, tc.host)
		assert.Equal(t, tc.why, why, tc.host)
	}
	assert.True(t, c.AllowsIP(netip.MustParseAddr("10.1.9.9")))
	assert.True(t, c.AllowsIP(netip.MustParseAddr("::ffff:10.1.9.9")))
	assert.False(t, c.AllowsIP(netip.MustParseAddr("10.2.0.1")))
	assert.False(t, c.AllowsIP(netip.MustParseAddr("127.0.0.1")))
}

func TestAllowlistCanonical(t *testing.T) {
	c, err := Allowlist{
		Domains: []string{"Example.COM.", "*.b.test", "example.com", "[::1]", "10.0.0.0/8"},
		Hosts:   []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5432"), netip.MustParseAddrPort("127.0.0.1:5432")},
		Resolve: map[string][]netip.Addr{"Reg.Test": {netip.MustParseAddr("::ffff:127.0.0.1")}},
	}.canonical()
	require.NoError(t, err)
	assert.Equal(t, []string{"*.b.test", "10.0.0.0/8", "::1", "example.com"}, c.Domains)
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5432")}, c.Hosts)
	assert.Equal(t, map[string][]netip.Addr{"reg.test": {netip.MustParseAddr("127.0.0.1")}}, c.Resolve)

	for _, bad := range []Allowlist{
		{Domains: []string{"*"}},
		{Domains: []string{"*.com"}},
		{Domains: []string{"a..b"}},
		{Domains: []string{"a b.test"}},
		{Domains: []string{"foo.*.test"}},
		{Deny: []string{"-a.test"}},
		{Hosts: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:80")}},
		{Hosts: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}},
		{Resolve: map[string][]netip.Addr{"a.test": nil}},
	} {
		_, err := bad.canonical()
		assert.True(t, errors.Is(err, ErrAllowlist), "%+v: %v", bad, err)
	}
}

func TestParseHost(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:5432": "127.0.0.1:5432",
		"127.0.0.2:80":   "127.0.0.2:80",
		"[::1]:8080":     "[::1]:8080",
		"LOCALHOST:1":    "127.0.0.1:1",
	} {
		ap, err := ParseHost(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, ap.String())
	}
	for _, bad := range []string{"example.com:80", "10.0.0.1:80", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "::1:80", "[fe80::1%lo]:80", ":80"} {
		_, err := ParseHost(bad)
		assert.ErrorIs(t, err, ErrAllowlist, bad)
	}
}

func TestParseResolve(t *testing.T) {
	name, addrs, err := ParseResolve("Reg.Test=127.0.0.1,::1")
	require.NoError(t, err)
	assert.Equal(t, "reg.test", name)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, addrs)
	for _, bad := range []string{"reg.test", "=127.0.0.1", "reg.test=", "reg.test=nope", "a b=1.2.3.4"} {
		_, _, err := ParseResolve(bad)
		assert.ErrorIs(t, err, ErrAllowlist, bad)
	}
}

func TestDeriveAllowlist(t *testing.T) {
	ws := t.TempDir()
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowBroadWorkspace: true, Allowlist: &Allowlist{Domains: []string{"A.test"}}})
	require.NoError(t, err)
	require.NotNil(t, p.Allowlist)
	assert.Equal(t, []string{"a.test"}, p.Allowlist.Domains)
	assert.False(t, p.Network)
	require.NoError(t, p.Validate())

	_, err = Derive(Options{Mode: WorkspaceWrite, Workspace: ws, Network: true, Allowlist: &Allowlist{Domains: []string{"a.test"}}})
	assert.ErrorIs(t, err, ErrAllowlist)

	p, err = Derive(Options{Mode: DangerFullAccess, Workspace: ws, Allowlist: &Allowlist{Domains: []string{"a.test"}}})
	require.NoError(t, err)
	assert.Nil(t, p.Allowlist, "danger-full-access has the whole network")
	assert.True(t, p.Network)

	bad := Policy{Mode: ReadOnly, Workspace: p.Workspace, Network: true, Allowlist: &Allowlist{}, Limits: DefaultLimits()}
	assert.ErrorIs(t, bad.Validate(), ErrInvalidPolicy)
}
