package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// benchBytes is what one BenchmarkThroughput op moves:
// DSH_BENCH_EGRESS_BYTES (a size as modes.ParseSize reads it), 256 MiB
// unless set.
func benchBytes(b *testing.B) int64 {
	s := os.Getenv("DSH_BENCH_EGRESS_BYTES")
	if s == "" {
		return 256 << 20
	}
	n, err := modes.ParseSize(s)
	if err != nil || n <= 0 {
		b.Fatalf("DSH_BENCH_EGRESS_BYTES=%q: %v", s, err)
	}
	return n
}

// benchProxy serves a policy allowing 127.0.0.1 (name and address).
func benchProxy(b *testing.B) (*Proxy, string) {
	p := New(Config{})
	l := listen(b)
	p.Serve(l, Session{Policy: policy([]string{"127.0.0.1"}, nil, "127.0.0.1")})
	b.Cleanup(func() { p.Close() })
	return p, l.Addr().String()
}

// dialVia opens a connection to dest: directly, through a CONNECT tunnel
// or through SOCKS5; the reader is where the connection's bytes come from.
func dialVia(b *testing.B, how, proxy, dest string) (net.Conn, io.Reader) {
	switch how {
	case "Direct":
		c, err := net.Dial("tcp", dest)
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	case "Proxy":
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, "CONNECT "+dest+" HTTP/1.1\r\nHost: "+dest+"\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c, br
	case "SOCKS5":
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			b.Fatal(err)
		}
		ap := netip.MustParseAddrPort(dest)
		a4 := ap.Addr().As4()
		req := []byte{5, 1, 0, 5, 1, 0, 1, a4[0], a4[1], a4[2], a4[3], byte(ap.Port() >> 8), byte(ap.Port())}
		c.Write(req)
		reply := make([]byte, 2+10)
		if _, err := io.ReadFull(c, reply); err != nil || reply[3] != 0 {
			b.Fatalf("SOCKS5: %v %v", reply, err)
		}
		return c, c
	}
	panic(how)
}

// BenchmarkThroughput moves benchBytes from a loopback server to the
// client per op: directly, and through the proxy's CONNECT and SOCKS5
// tunnels (splice between the raw connections).
func BenchmarkThroughput(b *testing.B) {
	size := benchBytes(b)
	src := listen(b)
	defer src.Close()
	go func() {
		buf := make([]byte, 1<<20)
		for {
			c, err := src.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; {
					n := min(left, int64(len(buf)))
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
					left -= n
				}
			}()
		}
	}()
	_, proxy := benchProxy(b)
	var direct float64
	for _, how := range []string{"Direct", "Proxy", "SOCKS5"} {
		b.Run(how, func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, 256<<10)
			for b.Loop() {
				c, r := dialVia(b, how, proxy, src.Addr().String())
				n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
				c.Close()
				if err != nil || n != size {
					b.Fatalf("read %d of %d: %v", n, size, err)
				}
			}
			perOp := float64(b.Elapsed()) / float64(b.N)
			if how == "Direct" {
				direct = perOp
			} else if direct > 0 {
				b.ReportMetric(perOp/direct, "x-direct")
			}
		})
	}
}

// BenchmarkNewConnection is one connection per op: the dial (and CONNECT
// or SOCKS5 handshake), a 1-byte round trip and the close.
func BenchmarkNewConnection(b *testing.B) {
	echo := echoServer(b)
	_, proxy := benchProxy(b)
	var direct float64
	for _, how := range []string{"Direct", "Proxy", "SOCKS5"} {
		b.Run(how, func(b *testing.B) {
			one := make([]byte, 1)
			for b.Loop() {
				c, r := dialVia(b, how, proxy, echo.Addr().String())
				c.Write([]byte{'x'})
				if _, err := io.ReadFull(r, one); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			perOp := float64(b.Elapsed()) / float64(b.N)
			if how == "Direct" {
				direct = perOp
			} else if direct > 0 {
				b.ReportMetric(perOp/direct, "x-direct")
			}
		})
	}
}

// BenchmarkIdle reports what an idle Proxy with one Served costs: heap
// bytes, RSS and goroutines per pair, measured over idlePairs pairs per op.
// "fresh" has served nothing; "after-connect" has served one CONNECT
// tunnel, now closed (its http.Server is running).
func BenchmarkIdle(b *testing.B) {
	const idlePairs = 100
	echo := echoServer(b)
	for _, variant := range []string{"fresh", "after-connect"} {
		b.Run(variant, func(b *testing.B) {
			var heap, rss, gor float64
			for b.Loop() {
				h0, r0, g0 := idleSample()
				ps := make([]*Proxy, idlePairs)
				for i := range ps {
					p, addr := benchProxyNoCleanup(b)
					ps[i] = p
					if variant == "after-connect" {
						c, r := dialVia(b, "Proxy", addr, echo.Addr().String())
						c.Write([]byte{'x'})
						io.ReadFull(r, make([]byte, 1))
						c.Close()
					}
				}
				if variant == "after-connect" {
					// Wait for the tunnels' goroutines to end.
					for _, p := range ps {
						for sv := range servedOf(p) {
							for sv.Conns() > 0 {
								time.Sleep(time.Millisecond)
							}
						}
					}
				}
				h1, r1, g1 := idleSample()
				heap += float64(h1-h0) / idlePairs
				rss += float64(r1-r0) / idlePairs
				gor += float64(g1-g0) / idlePairs
				for _, p := range ps {
					p.Close()
				}
			}
			n := float64(b.N)
			b.ReportMetric(heap/n, "heap-B/served")
			b.ReportMetric(rss/n/1024, "rss-KiB/served")
			b.ReportMetric(gor/n, "goroutines/served")
		})
	}
}

func benchProxyNoCleanup(b *testing.B) (*Proxy, string) {
	p := New(Config{})
	l := listen(b)
	p.Serve(l, Session{Policy: policy([]string{"127.0.0.1"}, nil, "127.0.0.1")})
	return p, l.Addr().String()
}

func servedOf(p *Proxy) map[*Served]struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[*Served]struct{}, len(p.served))
	for sv := range p.served {
		m[sv] = struct{}{}
	}
	return m
}

// idleSample is the live heap after a GC, the RSS and the goroutine count.
func idleSample() (heap, rss int64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, res int64
		fmt.Sscan(string(b), &size, &res)
		rss = res * int64(os.Getpagesize())
	}
	return int64(ms.HeapAlloc), rss, runtime.NumGoroutine()
}

// BenchmarkIdleRelays reports what idleRelays open, idle connections cost
// the process that relays them, per connection: live memory (heap and
// goroutine stacks) and RSS after one round trip each (so every relay has
// run), for the client's and server's ends alone (Direct, the baseline),
// through Forward (an --allow-host) and through CONNECT tunnels; x-direct
// is the live memory per connection over Direct's, run alongside.
func BenchmarkIdleRelays(b *testing.B) {
	const idleRelays = 150
	echo := echoServer(b)
	to := echo.Addr().(*net.TCPAddr).AddrPort()
	var direct float64
	for _, how := range []string{"Direct", "Forward", "Proxy"} {
		b.Run(how, func(b *testing.B) {
			var heap, rss float64
			one := make([]byte, 1)
			for b.Loop() {
				p := New(Config{})
				l := listen(b)
				switch how {
				case "Forward":
					p.Forward(l, to, Session{})
				case "Proxy":
					p.Serve(l, Session{Policy: policy([]string{"127.0.0.1"}, nil, "127.0.0.1")})
				}
				h0, r0 := liveSample()
				conns := make([]net.Conn, 0, idleRelays)
				for range idleRelays {
					var c net.Conn
					var r io.Reader
					if how == "Forward" {
						var err error
						if c, err = net.Dial("tcp", l.Addr().String()); err != nil {
							b.Fatal(err)
						}
						r = c
					} else {
						c, r = dialVia(b, how, l.Addr().String(), to.String())
					}
					c.Write([]byte{'x'})
					if _, err := io.ReadFull(r, one); err != nil {
						b.Fatal(err)
					}
					conns = append(conns, c)
				}
				h1, r1 := liveSample()
				heap += float64(h1-h0) / idleRelays
				rss += float64(r1-r0) / idleRelays
				for _, c := range conns {
					c.Close()
				}
				p.Close()
				l.Close()
			}
			n := float64(b.N)
			b.ReportMetric(heap/n/1024, "live-KiB/conn")
			b.ReportMetric(rss/n/1024, "rss-KiB/conn")
			if how == "Direct" {
				direct = heap / n
			} else if direct > 0 {
				b.ReportMetric(heap/n/direct, "x-direct")
			}
		})
	}
}

// liveSample is the live heap and goroutine stacks after a GC, and the RSS.
func liveSample() (live, rss int64) {
	heap, rss, _ := idleSample()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heap + int64(ms.StackInuse), rss
}
