package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dnsEnv is a ServeDNS on a loopback UDP socket and a Go resolver that
// asks it (a real client of the wire format).
type dnsEnv struct {
	sv     *Served
	r      *net.Resolver
	mu     sync.Mutex
	denied []Denial
}

func newDNSEnv(t *testing.T, pol Policy) *dnsEnv {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	p := New(Config{Resolve: resolveHook})
	t.Cleanup(func() { p.Close() })
	e := &dnsEnv{}
	e.sv = p.ServeDNS(pc, Session{Policy: pol, OnDeny: func(d Denial) {
		e.mu.Lock()
		e.denied = append(e.denied, d)
		e.mu.Unlock()
	}})
	addr := pc.LocalAddr().String()
	e.r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
	return e
}

func (e *dnsEnv) denials() []Denial {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Denial(nil), e.denied...)
}

func TestServeDNS(t *testing.T) {
	e := newDNSEnv(t, policy([]string{"allowed.test", "private.test", "both.test", "meta.test"}, []string{"blocked.test"}, "127.0.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ips, err := e.r.LookupNetIP(ctx, "ip", "allowed.test")
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{loopback}, ips, "allowed, and 127.0.0.1 allowed explicitly")

	ips, err = e.r.LookupNetIP(ctx, "ip", "both.test")
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{loopback}, ips, "10.0.0.1 is never revealed")

	for _, name := range []string{"denied.test", "blocked.test", "private.test", "meta.test"} {
		_, err := e.r.LookupNetIP(ctx, "ip4", name)
		var de *net.DNSError
		require.True(t, errors.As(err, &de), "%s: %v", name, err)
		assert.True(t, de.IsNotFound, "%s: NXDOMAIN, got %v", name, err)
	}
	var reasons = map[string]string{}
	for _, d := range e.denials() {
		assert.Equal(t, ProtoDNS, d.Proto)
		assert.Equal(t, 53, d.Port)
		reasons[d.Host] = d.Reason
	}
	assert.Equal(t, map[string]string{
		"denied.test":  "not in the allowlist",
		"blocked.test": "denied by --deny-domain",
		"private.test": "resolves to a private address 10.0.0.1",
		"meta.test":    "resolves to a private address 169.254.169.254",
	}, reasons)
}

func TestDNSWire(t *testing.T) {
	e := newDNSEnv(t, policy([]string{"allowed.test"}, nil, "127.0.0.1"))
	query := func(id uint16, flags uint16, qd uint16, name []byte, qtype uint16) []byte {
		b := []byte{byte(id >> 8), byte(id), byte(flags >> 8), byte(flags), 0, byte(qd), 0, 0, 0, 0, 0, 0}
		b = append(b, name...)
		return append(b, byte(qtype>>8), byte(qtype), 0, 1)
	}
	name := []byte("\x07allowed\x04test\x00")
	for _, tc := range []struct {
		what  string
		q     []byte
		rcode byte
		an    int
	}{
		{"A", query(1, 0x0100, 1, name, dnsTypeA), rcodeOK, 1},
		{"AAAA of an IPv4-only name", query(2, 0x0100, 1, name, dnsTypeAAAA), rcodeOK, 0},
		{"MX of an allowed name", query(3, 0x0100, 1, name, 15), rcodeOK, 0},
		{"two questions", query(4, 0x0100, 2, name, dnsTypeA), rcodeFormErr, 0},
		{"a compression pointer", query(5, 0x0100, 1, []byte{0xc0, 0x0c}, dnsTypeA), rcodeFormErr, 0},
		{"an inverse query", query(6, 0x0800, 1, name, dnsTypeA), rcodeNotImp, 0},
		{"an IP literal", query(7, 0x0100, 1, []byte("\x03127\x010\x010\x011\x00"), dnsTypeA), rcodeRefused, 0},
	} {
		r := e.sv.answer(tc.q)
		require.NotNil(t, r, tc.what)
		require.GreaterOrEqual(t, len(r), dnsHeaderLen, tc.what)
		assert.Equal(t, tc.q[:2], r[:2], "%s: id", tc.what)
		assert.Equal(t, byte(0x80), r[2]&0x80, "%s: QR", tc.what)
		assert.Equal(t, tc.rcode, r[3]&0x0f, "%s: rcode", tc.what)
		assert.Equal(t, tc.an, int(r[7]), "%s: answers", tc.what)
	}
	assert.Nil(t, e.sv.answer(query(8, 0x8000, 1, name, dnsTypeA)), "a response is never answered")
	assert.Nil(t, e.sv.answer([]byte{1, 2, 3}), "a runt is never answered")
}

func TestServeDNSClose(t *testing.T) {
	e := newDNSEnv(t, policy([]string{"allowed.test"}, nil, "127.0.0.1"))
	require.NoError(t, e.sv.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := e.r.LookupNetIP(ctx, "ip4", "allowed.test")
	assert.Error(t, err, "no answer once closed")
}
