package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newQuotaEnv is newEnv with the session's Quota q.
func newQuotaEnv(t *testing.T, q *Quota) *env {
	t.Helper()
	e := newEnv(t, policy([]string{"allowed.test"}, nil, "127.0.0.1"), "workspace-write mode")
	e.sv.Close()
	e.ln = &countingListener{Listener: listen(t)}
	e.sv = e.p.Serve(e.ln, Session{Policy: policy([]string{"allowed.test"}, nil, "127.0.0.1"), Mode: "workspace-write mode", Quota: q,
		OnDeny: func(d Denial) { e.mu.Lock(); e.denied = append(e.denied, d); e.mu.Unlock() }})
	return e
}

// tunnel opens a CONNECT tunnel to dest and checks it with a round trip.
func (e *env) tunnel(dest string) net.Conn {
	e.t.Helper()
	resp, c, br := e.connect(dest)
	require.Equal(e.t, 200, resp.StatusCode)
	io.WriteString(c, "x")
	_, err := io.ReadFull(br, make([]byte, 1))
	require.NoError(e.t, err)
	return c
}

// TestQuotaRefusesOverTheLimit: a command holding its Quota's connections
// gets the next refused with a clear answer — 503 naming the limit to a
// CONNECT and to a plain-HTTP request, SOCKS5 reply 1 — and one Denial
// with OverLimit each; the destination sees nothing of them. Once a
// connection closes, the next one is served.
func TestQuotaRefusesOverTheLimit(t *testing.T) {
	target := echoServer(t)
	p := port(t, target.Addr())
	dest := fmt.Sprintf("allowed.test:%d", p)
	e := newQuotaEnv(t, NewQuota(3))
	var open []net.Conn
	for range 3 {
		open = append(open, e.tunnel(dest))
	}
	require.Equal(t, int32(3), target.n.Load())

	resp, c, _ := e.connect(dest)
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a tunnel's body never ends
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	want := "dsh-sandbox: connect to " + dest + " denied (workspace-write mode, over the egress proxy's limit of 3 open connections per command); close some of the command's connections, then retry\n"
	assert.Equal(t, want, string(body))
	assert.Equal(t, dest, resp.Header.Get("X-Dsh-Sandbox-Denied"))

	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})}
	defer tr.CloseIdleConnections()
	// (The echo server answers no HTTP: a request that gets through fails.)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + dest + "/plain")
	if assert.NoError(t, err) {
		io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}

	reply, sc := socksDial(t, e.addr(), []byte{0}, 1, domain("allowed.test"), p)
	sc.Close()
	assert.Equal(t, byte(socksGeneralFailure), reply[1])

	reason := "over the egress proxy's limit of 3 open connections per command"
	assert.Equal(t, []Denial{
		{Host: "allowed.test", Port: p, Reason: reason, Proto: "connect", OverLimit: true},
		{Host: "allowed.test", Port: p, Reason: reason, Proto: "http", OverLimit: true},
		{Host: "allowed.test", Port: p, Reason: reason, Proto: "socks5", OverLimit: true},
	}, e.denials())
	assert.Equal(t, int32(3), target.n.Load(), "the refused connections reached nothing")
	assert.Len(t, e.dials.dialed(), 3)

	open[0].Close()
	require.Eventually(t, func() bool { return e.sv.Conns() == 2 }, 5*time.Second, time.Millisecond)
	open[0] = e.tunnel(dest)
	for _, c := range open {
		c.Close()
	}
}

// TestQuotaShared: the Serve and Forward calls of one command share its
// Quota; a forwarded connection over it is closed at once, reported at
// the forwarded address, and never reaches the service.
func TestQuotaShared(t *testing.T) {
	target := echoServer(t)
	to := target.Addr().(*net.TCPAddr).AddrPort()
	q := NewQuota(2)
	e := newQuotaEnv(t, q)
	fl := listen(t)
	fwd := e.p.Forward(fl, to, Session{Quota: q, OnDeny: func(d Denial) { e.mu.Lock(); e.denied = append(e.denied, d); e.mu.Unlock() }})
	defer fwd.Close()

	t1 := e.tunnel(fmt.Sprintf("allowed.test:%d", to.Port()))
	defer t1.Close()
	f1, err := net.Dial("tcp", fl.Addr().String())
	require.NoError(t, err)
	defer f1.Close()
	io.WriteString(f1, "y")
	_, err = io.ReadFull(f1, make([]byte, 1))
	require.NoError(t, err)

	f2, err := net.Dial("tcp", fl.Addr().String())
	require.NoError(t, err)
	defer f2.Close()
	f2.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := f2.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF, "closed at once")
	assert.Equal(t, []Denial{{Host: to.Addr().String(), Port: int(to.Port()), Reason: "over the egress proxy's limit of 2 open connections per command", Proto: ProtoTCP, OverLimit: true}}, e.denials())
	assert.Equal(t, int32(2), target.n.Load())
}

// TestQuotaFlood: past its Quota a command's connections are refused with
// an answer while they are no more than the Quota again; beyond, each is
// closed at once, reported at the address it reached, so refusing costs a
// bounded number of goroutines too.
func TestQuotaFlood(t *testing.T) {
	target := echoServer(t)
	dest := fmt.Sprintf("allowed.test:%d", port(t, target.Addr()))
	e := newQuotaEnv(t, NewQuota(1))
	t1 := e.tunnel(dest)
	defer t1.Close()
	// Over the quota, not sending its request yet: waits for it.
	waiting, err := net.Dial("tcp", e.addr())
	require.NoError(t, err)
	defer waiting.Close()
	require.Eventually(t, func() bool { return e.sv.Conns() == 2 }, 5*time.Second, time.Millisecond)
	// Beyond twice the quota: closed at once (EOF, not the deadline).
	gone, err := net.Dial("tcp", e.addr())
	require.NoError(t, err)
	defer gone.Close()
	gone.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = gone.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	la := e.ln.Addr().(*net.TCPAddr)
	assert.Equal(t, []Denial{{Host: la.IP.String(), Port: la.Port, Reason: "over the egress proxy's limit of 1 open connections per command", Proto: ProtoTCP, OverLimit: true}}, e.denials())

	waiting.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(waiting, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	resp, err := http.ReadResponse(bufio.NewReader(waiting), &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, int32(1), target.n.Load())
}

// TestRelayIdleHoldsNoBuffer: an open tunnel that moves no bytes holds no
// copy buffer: the relay waits for readable data before it borrows one,
// and gives it back after each write.
func TestRelayIdleHoldsNoBuffer(t *testing.T) {
	target := echoServer(t)
	dest := fmt.Sprintf("allowed.test:%d", port(t, target.Addr()))
	q := NewQuota(64)
	e := newQuotaEnv(t, q)
	var open []net.Conn
	for range 20 {
		open = append(open, e.tunnel(dest))
	}
	require.Eventually(t, func() bool { return q.lentBuffers() == 0 }, 5*time.Second, time.Millisecond,
		"idle tunnels hold %d buffers", q.lentBuffers())
	// Bytes still flow both ways afterwards.
	for _, c := range open {
		io.WriteString(c, "again")
		got := make([]byte, 5)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		assert.Equal(t, "again", string(got))
		c.Close()
	}
}

// TestQuotaBuffers: a command's relays borrow at most bigBuffers buffers
// of relayBuffer bytes at once; past them, small ones.
func TestQuotaBuffers(t *testing.T) {
	p := New(Config{})
	defer p.Close()
	q := NewQuota(DefaultMaxConns)
	var bufs [][]byte
	var bigs []bool
	for range bigBuffers + 3 {
		b, big := p.borrow(q)
		bufs, bigs = append(bufs, b), append(bigs, big)
	}
	for i, b := range bufs {
		if i < bigBuffers {
			assert.True(t, bigs[i])
			assert.Len(t, b, relayBuffer)
		} else {
			assert.False(t, bigs[i])
			assert.Len(t, b, smallBuffer)
		}
	}
	assert.Equal(t, bigBuffers+3, q.lentBuffers())
	p.giveBack(q, bufs[0], bigs[0])
	b, big := p.borrow(q)
	assert.True(t, big, "a big buffer given back is lent again")
	p.giveBack(q, b, big)
	for i := 1; i < len(bufs); i++ {
		p.giveBack(q, bufs[i], bigs[i])
	}
	assert.Zero(t, q.lentBuffers())
}
