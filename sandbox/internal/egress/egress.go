package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
)

// Policy decides which destinations a session may reach; modes.Allowlist
// implements it. Host names arrive lowercased without a trailing dot, IP
// literals in their netip string form.
type Policy interface {
	// AllowsName reports whether the host the client asked for (a name or
	// an IP literal) may be reached, and when not, why: "not in the
	// allowlist" or "denied by --deny-domain". Each address a name
	// resolves to is asked about too, as an IP literal: a "denied by"
	// answer refuses the address (a --deny-domain IP or CIDR wins over
	// everything), any other leaves it to AllowsIP and the address check.
	AllowsName(host string) (ok bool, why string)
	// AllowsIP reports whether ip was allowed explicitly (by an IP or CIDR
	// pattern): only then may a destination resolve to, or be, a non-public
	// address.
	AllowsIP(ip netip.Addr) bool
}

// Denial is one refused destination, reported to the session's OnDeny.
type Denial struct {
	Host   string // as the client asked (a normalised name or IP literal)
	Port   int
	Reason string // e.g. "not in the allowlist", "denied by --deny-domain", "resolves to a private address 10.0.0.1", "resolves to a denied address 10.0.0.1", "not a public address"
	Proto  string // "http", "connect", "socks5", ProtoDNS or ProtoTCP
	// OverLimit marks a refusal by the command's Quota, not by the
	// policy: the destination may well be allowed.
	OverLimit bool
}

// ProtoTCP is the Proto of a Denial of a connection refused before any
// protocol was read: a forwarded one (Forward), or one closed at once
// (Host and Port are then the address the client connected to).
const ProtoTCP = "tcp"

// Address is Host:Port, an IPv6 host in brackets (net.JoinHostPort).
func (d Denial) Address() string {
	return net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
}

// message is the one line a refusal answers with (the HTTP body).
func (d Denial) message(mode string) string {
	why := d.Reason
	if mode != "" {
		why = mode + ", " + why
	}
	return "dsh-sandbox: connect to " + d.Address() + " denied (" + why + "); " + d.hint() + "\n"
}

// hint says which flag would let the refused destination through.
func (d Denial) hint() string {
	switch {
	case d.OverLimit:
		return "close some of the command's connections, then retry"
	case strings.HasPrefix(d.Reason, deniedPrefix):
		return "a --deny-domain pattern matches it"
	case strings.HasPrefix(d.Reason, deniedAddrPrefix):
		return "a --deny-domain pattern matches " + strings.TrimPrefix(d.Reason, deniedAddrPrefix)
	case strings.HasPrefix(d.Reason, privatePrefix):
		return "allow the address with --allow-domain " + strings.TrimPrefix(d.Reason, privatePrefix)
	}
	return "allow it with --allow-domain " + d.Host
}

// The reasons' prefixes, shared with the denial facts' suggestions.
const (
	deniedPrefix     = facts.ReasonDeniedPrefix
	privatePrefix    = facts.ReasonPrivatePrefix
	deniedAddrPrefix = facts.ReasonDeniedAddrPrefix
)

// Config configures a Proxy. The zero value resolves with
// net.DefaultResolver and dials with a net.Dialer.
type Config struct {
	// Resolve resolves a host name; nil uses
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host). Tests pin names to
	// loopback addresses with it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a resolved address ("ip:port", or the fixed address
	// of Forward); nil uses a net.Dialer with DialTimeout. The context
	// bounds the dial only, never the connection it returns.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds one resolution and each dial attempt; 0 means 30 s.
	DialTimeout time.Duration
}

const (
	defaultDialTimeout = 30 * time.Second
	// handshakeTimeout bounds the first byte, the SOCKS5 handshake and
	// each HTTP request's headers.
	handshakeTimeout = 30 * time.Second
	// idleTimeout closes a plain-HTTP keep-alive connection left idle.
	idleTimeout = 2 * time.Minute
)

// Proxy is the egress proxy. It has no global state and is safe for
// concurrent use; one Proxy serves any number of sessions.
type Proxy struct {
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	timeout time.Duration

	mu     sync.Mutex
	closed bool
	served map[*Served]struct{}
	srv    *http.Server // started with the first HTTP connection

	httpq chan *clientConn // connections handed to srv
	done  chan struct{}    // closed by Close: srv's listener fails
	wg    sync.WaitGroup   // srv.Serve

	// The copy buffers (*[]byte) of the relays (borrow) and of the
	// plain-HTTP forwarder (bufferPool).
	bigBufs, smallBufs sync.Pool
}

// New returns a Proxy using cfg.
func New(cfg Config) *Proxy {
	p := &Proxy{
		resolve: cfg.Resolve,
		dial:    cfg.Dial,
		timeout: cfg.DialTimeout,
		served:  make(map[*Served]struct{}),
		httpq:   make(chan *clientConn),
		done:    make(chan struct{}),
	}
	if p.timeout <= 0 {
		p.timeout = defaultDialTimeout
	}
	if p.resolve == nil {
		p.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if p.dial == nil {
		d := &net.Dialer{Timeout: p.timeout}
		p.dial = d.DialContext
	}
	return p
}

// Session is what one sandboxed command's connections are served under.
type Session struct {
	// Policy decides the destinations; it must not be nil for Serve and
	// ServeConn.
	Policy Policy
	// OnDeny may be nil; it is called once per refused request, from any
	// goroutine.
	OnDeny func(Denial)
	// Mode names the sandbox mode in refusal texts, before the reason:
	// "denied (workspace-write mode, not in the allowlist)". Empty leaves
	// it out.
	Mode string
	// Resolve, when not nil, pins names for this session (as curl
	// --resolve): a name it knows resolves to its addresses, others with
	// the proxy's resolver.
	Resolve ResolveFunc
	// Quota bounds the connections and buffers of the command; give the
	// same one to all the Serve, Forward and ServeConn calls of a
	// command. Nil gives each call a Quota of its own of
	// DefaultMaxConns.
	Quota *Quota
	// Upstream, when not nil, is the caller's proxy: an allowed
	// destination it covers is reached through it (see Upstream).
	Upstream *Upstream
}

// DefaultMaxConns is how many connections one command may hold open to
// the proxy at once (the sandbox's Quota for each command, and the one of
// a Session without one): far more than package managers open in
// parallel (npm 15 per registry, pip 10, cargo and go one or a few
// multiplexed ones), few enough that what the command makes the
// supervisor hold for them stays small (see Quota).
const DefaultMaxConns = 256

// bigBuffers is how many relayBuffer-sized copy buffers one command's
// relays may have borrowed at once; other copies go through
// smallBuffer-sized ones.
const bigBuffers = 8

// Quota bounds what one sandboxed command makes the proxy hold at once:
// at most MaxConns open connections to it (accepted and not yet closed:
// tunnels, forwarded connections, plain-HTTP keep-alive connections,
// handshakes in progress), and at most bigBuffers relay buffers of
// relayBuffer bytes (an idle connection holds none; see Proxy.borrow). A
// connection over MaxConns is refused with an answer — HTTP 503 naming
// the limit, SOCKS5 reply 1 (general failure), a forwarded one closed —
// and a Denial with OverLimit set; while MaxConns connections are already
// being refused so, a further one is closed at once and reported at the
// address it reached. It is safe for concurrent use.
type Quota struct {
	max int

	mu       sync.Mutex
	served   int // connections admitted
	refusing int // connections over max, being refused
	big      int // relayBuffer-sized buffers lent
	lent     int // buffers lent, either size
}

// NewQuota returns a Quota of maxConns connections (DefaultMaxConns when
// not positive).
func NewQuota(maxConns int) *Quota {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	return &Quota{max: maxConns}
}

// MaxConns is how many connections the Quota admits at once.
func (q *Quota) MaxConns() int { return q.max }

// admission is what a Quota makes of a new connection.
type admission int

const (
	admitted  admission = iota // served
	overQuota                  // refused with an answer
	full                       // closed at once
)

func (q *Quota) admit() admission {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.served < q.max:
		q.served++
		return admitted
	case q.refusing < q.max:
		q.refusing++
		return overQuota
	}
	return full
}

// release ends a connection admitted as a.
func (q *Quota) release(a admission) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if a == admitted {
		q.served--
	} else {
		q.refusing--
	}
}

// reason is the Reason of a Denial by q.
func (q *Quota) reason() string {
	return fmt.Sprintf("over the egress proxy's limit of %d open connections per command", q.max)
}

// lentBuffers is how many copy buffers q's relays hold right now.
func (q *Quota) lentBuffers() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lent
}

// ResolveFunc returns the pinned addresses of a host name, and whether it
// has any.
type ResolveFunc func(host string) ([]netip.Addr, bool)

// Serve accepts connections from l (one sandboxed command's listener) in
// the background, under session s, until the returned Served is closed or
// l fails. Each connection speaks SOCKS5 or the HTTP proxy protocol.
func (p *Proxy) Serve(l net.Listener, s Session) *Served {
	sv := p.newServed(l, s)
	sv.startAccept(sv.serveClient)
	return sv
}

// ServeConn serves one already-accepted connection under s (for a sandbox
// that accepts on a shared listener and attributes the peer itself). It
// returns at once; Close closes the connection.
func (p *Proxy) ServeConn(c net.Conn, s Session) {
	sv := p.newServed(nil, s)
	sv.oneConn = true
	cc, isFull := sv.track(c)
	if cc == nil {
		if isFull {
			sv.refuseAtOnce(c)
		} else {
			c.Close()
		}
		sv.Close()
		return
	}
	go sv.serveClient(cc)
}

// Forward accepts from l and relays each connection byte for byte to the
// fixed address to (a loopback service such as a development database: no
// policy check, no protocol), until the returned Served is closed or l
// fails. s is kept for symmetry; its Policy may be nil.
func (p *Proxy) Forward(l net.Listener, to netip.AddrPort, s Session) *Served {
	sv := p.newServed(l, s)
	sv.startAccept(func(c *clientConn) { sv.forwardConn(c, to) })
	return sv
}

// Close closes every listener and connection of every Served and waits for
// their goroutines. Serve, ServeConn and Forward after Close close what
// they are given at once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	all := make([]*Served, 0, len(p.served))
	for sv := range p.served {
		all = append(all, sv)
	}
	p.mu.Unlock()
	var errs []error
	for _, sv := range all {
		errs = append(errs, sv.Close())
	}
	p.wg.Wait()
	return errors.Join(errs...)
}

func (p *Proxy) newServed(l net.Listener, s Session) *Served {
	ctx, cancel := context.WithCancel(context.Background())
	q := s.Quota
	if q == nil {
		q = NewQuota(DefaultMaxConns)
	}
	sv := &Served{
		p:        p,
		l:        l,
		s:        s,
		q:        q,
		ctx:      ctx,
		cancel:   cancel,
		conns:    make(map[net.Conn]struct{}),
		upstream: make(map[net.Conn]struct{}),
	}
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.served[sv] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		sv.Close()
	}
	return sv
}

func (p *Proxy) forget(sv *Served) {
	p.mu.Lock()
	delete(p.served, sv)
	p.mu.Unlock()
}

// handoff gives an HTTP connection to the Proxy's http.Server, starting it
// the first time; false when the proxy or c's Served is closing (c is then
// the caller's to release).
func (p *Proxy) handoff(c *clientConn) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	if p.srv == nil {
		p.srv = &http.Server{
			Handler:           http.HandlerFunc(serveHTTP),
			ReadHeaderTimeout: handshakeTimeout,
			IdleTimeout:       idleTimeout,
			ErrorLog:          log.New(io.Discard, "", 0),
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, c.(*clientConn))
			},
			ConnState: func(c net.Conn, st http.ConnState) {
				if st == http.StateClosed {
					c.(*clientConn).release()
				}
			},
		}
		p.wg.Add(1)
		go func(srv *http.Server) {
			defer p.wg.Done()
			srv.Serve(queueListener{p})
		}(p.srv)
	}
	p.mu.Unlock()
	select {
	case p.httpq <- c:
		return true
	case <-p.done:
	case <-c.sv.ctx.Done():
	}
	return false
}

// queueListener is the http.Server's listener: it accepts what handoff
// queues, until the Proxy is closed.
type queueListener struct{ p *Proxy }

func (q queueListener) Accept() (net.Conn, error) {
	select {
	case c := <-q.p.httpq:
		return c, nil
	case <-q.p.done:
		return nil, net.ErrClosed
	}
}

func (q queueListener) Close() error { return nil }

func (q queueListener) Addr() net.Addr { return queueAddr{} }

type queueAddr struct{}

func (queueAddr) Network() string { return "egress" }
func (queueAddr) String() string  { return "egress" }

type connKey struct{}

// Served is one Serve, Forward or ServeConn call.
type Served struct {
	p       *Proxy
	l       net.Listener   // nil for ServeConn and ServeDNS
	pc      net.PacketConn // ServeDNS's socket, or nil
	s       Session
	q       *Quota // s.Quota, or one of its own
	oneConn bool   // ServeConn: closes itself when its connection ends

	ctx    context.Context // cancelled by Close: pending resolutions and dials end
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	conns    map[net.Conn]struct{} // accepted, until released
	upstream map[net.Conn]struct{} // dialed, until their relay or pool ends
	tr       *http.Transport       // plain HTTP, made with the first request
	rp       *httputil.ReverseProxy

	// wg counts the accept loop and every accepted connection until it is
	// released (which its last goroutine does on the way out).
	wg sync.WaitGroup
}

// Close stops accepting, closes the listener and every connection it
// accepted or dialed (closing never blocks on a client), and waits for its
// goroutines. It may be called more than once and from any goroutine.
func (sv *Served) Close() error {
	var err error
	sv.mu.Lock()
	if !sv.closed {
		sv.closed = true
		sv.cancel()
		if sv.l != nil {
			if e := sv.l.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
				err = e
			}
		}
		if sv.pc != nil {
			sv.pc.Close()
		}
		for c := range sv.conns {
			c.Close()
		}
		for c := range sv.upstream {
			c.Close()
		}
	}
	tr := sv.tr
	sv.mu.Unlock()
	sv.wg.Wait()
	if tr != nil {
		tr.CloseIdleConnections()
	}
	sv.p.forget(sv)
	return err
}

// Conns reports how many accepted connections are open right now.
func (sv *Served) Conns() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return len(sv.conns)
}

func (sv *Served) isClosed() bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.closed
}

// track registers an accepted connection under sv's Quota (it may come
// back admitted over the quota, to be refused). It returns nil once sv is
// closed, or when the quota has no room even to refuse c (isFull: c is
// then the caller's to refuse at once).
func (sv *Served) track(c net.Conn) (cc *clientConn, isFull bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed {
		return nil, false
	}
	adm := sv.q.admit()
	if adm == full {
		return nil, true
	}
	sv.conns[c] = struct{}{}
	sv.wg.Add(1)
	return &clientConn{Conn: c, sv: sv, adm: adm}, false
}

// overLimit is the Denial of a connection to t refused by sv's Quota.
func (sv *Served) overLimit(t target, proto string) Denial {
	return Denial{Host: t.host, Port: t.port, Reason: sv.q.reason(), Proto: proto, OverLimit: true}
}

// refuseAtOnce closes c, accepted beyond sv's Quota, and reports it at
// the address it reached.
func (sv *Served) refuseAtOnce(c net.Conn) {
	var t target
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		t = target{host: ap.Addr().Unmap().String(), port: int(ap.Port())}
	}
	// Reported first: the refused client sees EOF only once the fact is
	// recorded.
	sv.report(sv.overLimit(t, ProtoTCP))
	c.Close()
}

// trackUp registers a dialed connection; false once sv is closed.
func (sv *Served) trackUp(c net.Conn) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed {
		return false
	}
	sv.upstream[c] = struct{}{}
	return true
}

func (sv *Served) dropUp(c net.Conn) {
	c.Close()
	sv.mu.Lock()
	delete(sv.upstream, c)
	sv.mu.Unlock()
}

// startAccept runs the accept loop, handing each connection to handle in a
// goroutine of its own.
func (sv *Served) startAccept(handle func(*clientConn)) {
	sv.mu.Lock()
	if sv.closed {
		sv.mu.Unlock()
		if sv.l != nil {
			sv.l.Close()
		}
		return
	}
	sv.wg.Add(1)
	sv.mu.Unlock()
	go func() {
		defer sv.wg.Done()
		var delay time.Duration
		for {
			c, err := sv.l.Accept()
			if err != nil {
				if sv.isClosed() || !temporary(err) {
					return
				}
				// Out of descriptors or an aborted handshake: retry,
				// backing off up to a second.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-sv.ctx.Done():
					t.Stop()
					return
				}
				continue
			}
			delay = 0
			cc, isFull := sv.track(c)
			if cc == nil {
				if !isFull {
					c.Close()
					return
				}
				sv.refuseAtOnce(c)
				continue
			}
			go handle(cc)
		}
	}()
}

func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// clientConn is an accepted connection: the first byte read to tell the
// protocols apart is put back in front of it for net/http.
type clientConn struct {
	net.Conn // the accepted connection itself (a *net.TCPConn)
	sv       *Served
	adm      admission // admitted, or overQuota: to be refused
	pre      []byte
	once     sync.Once
}

func (c *clientConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// CloseWrite lets net/http half-close the connection before it closes it.
func (c *clientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// release closes the connection and ends its count in sv, once.
func (c *clientConn) release() {
	c.once.Do(func() {
		c.Conn.Close()
		sv := c.sv
		sv.mu.Lock()
		delete(sv.conns, c.Conn)
		sv.mu.Unlock()
		sv.q.release(c.adm)
		sv.wg.Done()
		if sv.oneConn {
			sv.Close()
		}
	})
}

// serveClient tells SOCKS5 from HTTP by the first byte.
func (sv *Served) serveClient(c *clientConn) {
	c.Conn.SetDeadline(time.Now().Add(handshakeTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c.Conn, first[:]); err != nil {
		c.release()
		return
	}
	if first[0] == socksVersion {
		sv.serveSOCKS(c)
		c.release()
		return
	}
	c.Conn.SetDeadline(time.Time{}) // net/http sets its own
	c.pre = []byte{first[0]}
	if !sv.p.handoff(c) {
		c.release()
	}
}

// forwardConn relays c to the fixed address to.
func (sv *Served) forwardConn(c *clientConn, to netip.AddrPort) {
	defer c.release()
	if c.adm == overQuota {
		sv.report(sv.overLimit(target{host: to.Addr().String(), port: int(to.Port())}, ProtoTCP))
		return
	}
	ctx, cancel := sv.bind(context.Background())
	up, err := sv.p.dial(ctx, "tcp", to.String())
	cancel()
	if err != nil {
		return
	}
	if !sv.trackUp(up) {
		up.Close()
		return
	}
	sv.relay(c.Conn, up)
	sv.dropUp(up)
}

// bind returns ctx, also cancelled when sv closes, bounded by the dial
// timeout.
func (sv *Served) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, sv.p.timeout)
	stop := context.AfterFunc(sv.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// relay copies a to b and b to a until both directions end. The end of one
// direction half-closes the other side's write half (where the connection
// has one); an error closes both connections.
func (sv *Served) relay(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sv.p.pipe(b, a, sv.q)
	}()
	sv.p.pipe(a, b, sv.q)
	<-done
	a.Close()
	b.Close()
}

// pipe copies src to dst, one read and one write at a time, through a
// buffer borrowed for them only: it waits until src has bytes (or its end)
// before it borrows, so an idle connection holds no buffer, only a writer
// blocked by a reader that does not read holds one. Not io.Copy's
// splice(2): measured on loopback here, a 1 MiB userspace buffer moves
// 10-30% more than splice through a 64 KiB pipe (the proxy is a third
// copy-bound party on the same cores as client and server, and fewer,
// larger calls win), so q lends its command up to bigBuffers of those.
func (p *Proxy) pipe(dst, src net.Conn, q *Quota) {
	for {
		if err := waitReadable(src); err != nil {
			break
		}
		buf, big := p.borrow(q)
		n, rerr := src.Read(buf)
		var werr error
		if n > 0 {
			_, werr = dst.Write(buf[:n])
		}
		p.giveBack(q, buf, big)
		if werr != nil {
			break
		}
		if rerr == io.EOF {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			break
		}
		if rerr != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

const (
	// relayBuffer is the size of the copy buffers a command's relays
	// borrow while it has fewer than bigBuffers of them.
	relayBuffer = 1 << 20
	// smallBuffer is the size of the other copy buffers: the relays'
	// past bigBuffers, and the plain-HTTP forwarder's.
	smallBuffer = 32 << 10
)

// borrow lends a copy buffer for one read and write of a relay of q's
// command: relayBuffer bytes while q has fewer than bigBuffers of those
// out (big is then true), smallBuffer bytes otherwise.
func (p *Proxy) borrow(q *Quota) (buf []byte, big bool) {
	q.mu.Lock()
	big = q.big < bigBuffers
	if big {
		q.big++
	}
	q.lent++
	q.mu.Unlock()
	if big {
		return p.bigBuffer(), true
	}
	return p.smallBuffer(), false
}

// giveBack returns a buffer borrow lent.
func (p *Proxy) giveBack(q *Quota, buf []byte, big bool) {
	q.mu.Lock()
	if big {
		q.big--
	}
	q.lent--
	q.mu.Unlock()
	if big {
		p.bigBufs.Put(&buf)
	} else {
		p.smallBufs.Put(&buf)
	}
}

func (p *Proxy) bigBuffer() []byte {
	if bp, ok := p.bigBufs.Get().(*[]byte); ok {
		return *bp
	}
	return make([]byte, relayBuffer)
}

func (p *Proxy) smallBuffer() []byte {
	if bp, ok := p.smallBufs.Get().(*[]byte); ok {
		return *bp
	}
	return make([]byte, smallBuffer)
}

// bufferPool lends the small buffers to httputil.ReverseProxy, which holds
// one while it copies a response body (at most one per client connection).
type bufferPool struct{ p *Proxy }

func (b bufferPool) Get() []byte  { return b.p.smallBuffer() }
func (b bufferPool) Put(x []byte) { b.p.smallBufs.Put(&x) }
