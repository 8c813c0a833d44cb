//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// The command's own loopback (docs/DESIGN.md, "A loopback of its own"):
// with the network off, a command in a net namespace of its own binds,
// listens and connects on that namespace's loopback — a dev server started
// with & and polled with curl, Go's httptest — while the host's loopback
// services stay out of reach (a connect to a port the host listens on fails
// with ECONNREFUSED and a fact) and nothing else is reachable (denied with
// a fact). Without a net namespace the supervisor gives the command an
// address of its own on the host's loopback (127.64.0.0/10) and performs its
// binds, connects and sends there; where it cannot (no pidfd_getfd: Docker's
// profile) inet sockets stay refused, with facts.

// ownLoopbackScript starts a server on the sandbox's loopback, polls it
// with curl until it answers, then tries the host's listener (argv port)
// and an address off the host.
const ownLoopbackScript = `python3 -c '
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(s):
        s.send_response(200); s.end_headers(); s.wfile.write(b"served")
    def log_message(s, *a):
        pass
h.HTTPServer(("127.0.0.1", 18765), H).serve_forever()' 2>/dev/null & pid=$!
for i in $(seq 400); do
  if out=$(curl -s --max-time 5 http://127.0.0.1:18765/); then echo "own: $out"; break; fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
kill $pid 2>/dev/null
if (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo "host: reached"; else echo "host: refused"; fi
if (exec 4<>/dev/tcp/192.0.2.1/80) 2>/dev/null; then echo "off-host: reached"; else echo "off-host: refused"; fi
true`

// TestOwnLoopback: see above; as root and unprivileged, in both confined
// modes, on every host with a supervisor.
func TestOwnLoopback(t *testing.T) {
	t.Parallel()
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		own := ownLoopback(h.d)
		want := "refused"
		switch {
		case own && !h.d.lacks("net-namespace"):
			want = "net-namespace"
		case own:
			want = "own-address"
		}
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
		if p := parseProbe(t, r); p.Loopback != want {
			t.Errorf("probe loopback = %q, want %q", p.Loopback, want)
		}
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ln, port := hostLoopbackTCP(t)
				ws := id.workspace(t)
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash(fmt.Sprintf(ownLoopbackScript, port)), Dir: ws, Timeout: 2 * time.Minute})
				if own {
					requireExit(t, r, 0)
					requireServedOwn(t, r)
					for _, d := range []struct{ addr, why string }{
						{fmt.Sprintf("127.0.0.1:%d", port), "the sandbox's loopback is its own: the host's listener on this port is out of reach"},
						{"192.0.2.1:80", "the network is off: only the sandbox's own loopback is reachable"},
					} {
						if line := fmt.Sprintf("%sdenied connect %s (%s mode, %s)", cliPrefix, d.addr, mode, d.why); !hasDenialLine(r.Stderr, line) {
							t.Errorf("stderr lacks %q: %q", line, r.Stderr)
						}
					}
				} else {
					if hasLine(r.Stdout, "own: served") || !hasLine(r.Stdout, "host: refused") {
						t.Errorf("without a loopback of its own, stdout %q: want no server and the host refused", r.Stdout)
					}
					requireDenial(t, r, mode, "socket", "AF_INET")
				}
				if c := acceptSaw(ln); c(queuedWait) {
					t.Error("the host's loopback listener got a connection from the sandbox")
				}
			})
		}
	})
}

// hostLoopbackTCP is a listener of the host's on its loopback, and its
// port: what the sandbox must not reach.
func hostLoopbackTCP(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// requireServedOwn checks ownLoopbackScript's lines: its own server
// served, the host's listener and an address off the host refused.
func requireServedOwn(t *testing.T, r result) {
	t.Helper()
	for _, w := range []string{"own: served", "host: refused", "off-host: refused"} {
		if !hasLine(r.Stdout, w) {
			t.Errorf("stdout lacks %q: %q (stderr %q)", w, r.Stdout, r.Stderr)
		}
	}
}

// ownLoopback says whether a command with the network off on host d (nil:
// this host as it is) gets a loopback of its own: a supervisor to bind and
// connect its inet sockets, in a net namespace or, without one, on an
// address of its own of the host's loopback (which needs copies of its
// sockets: pidfd_getfd).
func ownLoopback(d *degradation) bool {
	return !d.lacks("seccomp-notify") && (!d.lacks("net-namespace") || !slices.Contains(hostFilters[d], "pidfd_getfd"))
}

// ownLoopbackUDPScript sends with sendmsg and an explicit destination (as
// libuv and Go's WriteMsgUDP do) to a UDP server on the sandbox's loopback,
// to the host's UDP socket (argv port) and off the host.
const ownLoopbackUDPScript = `python3 -c '
import errno, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.sendmsg([b"own"], [], 0, s.getsockname()); print("own:", s.recv(10).decode())
for name, a in (("host", ("127.0.0.1", %d)), ("off-host", ("192.0.2.1", 9))):
    try:
        c.sendmsg([b"x"], [], 0, a); print(name + ": sent")
    except OSError as e:
        print(name + ":", errno.errorcode[e.errno])
'`

// TestOwnLoopbackUDPSendmsg: a datagram sent with sendmsg to an explicit
// address reaches a server on the sandbox's own loopback; the host's UDP
// socket on the loopback gets nothing (ECONNREFUSED, a fact), nor does an
// address off the host (EACCES, a fact). Where the sandbox has no loopback
// of its own inet sockets stay refused.
func TestOwnLoopbackUDPSendmsg(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(fmt.Sprintf(ownLoopbackUDPScript, port)), Dir: ws})
		if ownLoopback(h.d) {
			requireExit(t, r, 0)
			if want := "own: own\nhost: ECONNREFUSED\noff-host: EACCES\n"; r.Stdout != want {
				t.Errorf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
			}
			requireDenial(t, r, "workspace-write", "send", fmt.Sprintf("127.0.0.1:%d", port))
			requireDenial(t, r, "workspace-write", "send", "192.0.2.1:9")
		} else {
			requireDenial(t, r, "workspace-write", "socket", "AF_INET")
		}
		_ = pc.SetReadDeadline(time.Now().Add(queuedWait))
		if n, _, err := pc.ReadFrom(make([]byte, 64)); err == nil {
			t.Errorf("the host's UDP socket got %d bytes from the sandbox", n)
		}
	})
}

// TestOwnLoopbackUnderAllowlist: under a network allowlist too, a command
// in a net namespace of its own runs a server on its loopback and reaches
// it (Landlock leaves binds to the supervisor: SupervisedBinds); the host's
// listener stays out of reach, with a fact, and so does an address off the
// host. Without a net namespace the same holds on the command's own
// address of the host's loopback.
func TestOwnLoopbackUnderAllowlist(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		if slices.Contains(hostFilters[h.d], "pidfd_getfd") {
			requireAllowlistRefused(t, id, h.wrap())
			return
		}
		ln, port := hostLoopbackTCP(t)
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws, "--allow-domain", "example.com"),
			Argv: bash(fmt.Sprintf(ownLoopbackScript, port)), Dir: ws, Timeout: 2 * time.Minute})
		requireExit(t, r, 0)
		requireServedOwn(t, r)
		requireDenial(t, r, "workspace-write", "connect", fmt.Sprintf("127.0.0.1:%d", port))
		requireDenial(t, r, "workspace-write", "connect", "192.0.2.1:80")
		if c := acceptSaw(ln); c(queuedWait) {
			t.Error("the host's loopback listener got a connection from the sandbox")
		}
	})
}

// TestOwnLoopbackNotReachedFromHost: a server the command runs on the
// loopback (127.0.0.1 and every interface, TCP and UDP, at a fixed port, as
// a dev server does) is not what a host client reaches at that port while
// the command runs: no port of the host is squatted, with or without a net
// namespace, with the network off or under an allowlist.
func TestOwnLoopbackNotReachedFromHost(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		if !ownLoopback(h.d) {
			t.Skip("no loopback of its own on this host: inet sockets refused (TestOwnLoopback)")
		}
		for _, extra := range [][]string{nil, {"--allow-domain", "a.test"}} {
			t.Run(fmt.Sprint(extra), func(t *testing.T) { notReachedFromHost(t, h, id, extra) })
		}
	})
}

func notReachedFromHost(t *testing.T, h hostConfig, id identity, extra []string) {
	port := freePort(t)
	ws := id.workspace(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	script := fmt.Sprintf(`python3 -c '
import socket, sys
a = socket.socket(); a.bind(("127.0.0.1", %[1]d)); a.listen()
b = socket.socket(); b.bind(("0.0.0.0", %[1]d + 1)); b.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", %[1]d))
print("listening", flush=True)
sys.stdin.read()
'`, port)
	s := id.start(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws, extra...), Argv: bash(script), Dir: ws, Stdin: pr})
	pr.Close()
	if err := waitOutput(s, "listening", testtime.Scale(time.Minute)); err != nil {
		s.cmd.Process.Kill()
		t.Fatalf("the command did not listen: %v", err)
	}
	for _, p := range []int{port, port + 1} {
		if c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", p), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("a host client reached the command's server on 127.0.0.1:%d", p)
		}
	}
	// The UDP port is free for the host: a host socket binds it.
	if pc, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Errorf("the command's UDP socket took the host's 127.0.0.1:%d: %v", port, err)
	} else {
		pc.Close()
	}
	pw.Close()
	r := s.wait(t, testtime.Scale(time.Minute))
	requireExit(t, r, 0)
	if d := requireReport(t, r).Denials; len(d) != 0 {
		t.Errorf("denials = %v, want none", d)
	}
}

// freePort is a TCP and UDP port of the host's loopback nothing uses now,
// nor the next one.
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ok := p < 65535
		for _, q := range []int{p, p + 1} {
			if l, err := net.Listen("tcp4", fmt.Sprintf(":%d", q)); err == nil {
				l.Close()
			} else {
				ok = false
			}
			if u, err := net.ListenPacket("udp4", fmt.Sprintf(":%d", q)); err == nil {
				u.Close()
			} else {
				ok = false
			}
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free pair of ports on the loopback")
	return 0
}

// ownLoopbackControlScript sends to its own UDP server with a TTL (passed
// on) and with a loose source route whose first hop is off the host (IP
// options: the supervisor, which sends for the command, would lend it
// CAP_NET_RAW as root).
const ownLoopbackControlScript = `python3 -c '
import errno, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.sendmsg([b"ttl"], [(socket.IPPROTO_IP, socket.IP_TTL, (64).to_bytes(4, "little"))], 0, s.getsockname())
print("ttl:", s.recv(10).decode())
lsrr = bytes([131, 7, 4, 192, 0, 2, 1, 0])
try:
    c.sendmsg([b"route"], [(socket.IPPROTO_IP, socket.IP_RETOPTS, lsrr)], 0, s.getsockname()); print("route: sent")
except OSError as e:
    print("route:", errno.errorcode[e.errno])
'`

// TestOwnLoopbackControlData: control data that keeps a datagram on its
// route (a TTL) is passed on; IP options (a source route) are refused with
// a fact, as root too, on every host with a loopback of its own.
func TestOwnLoopbackControlData(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		if !ownLoopback(h.d) {
			t.Skip("no loopback of its own on this host: inet sockets refused (TestOwnLoopback)")
		}
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(ownLoopbackControlScript), Dir: ws})
		requireExit(t, r, 0)
		if want := "ttl: ttl\nroute: EACCES\n"; r.Stdout != want {
			t.Errorf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
		}
		found := false
		for _, d := range requireReport(t, r).Denials {
			found = found || d.Op == "send" && strings.HasPrefix(d.target(), "127.0.0.1:") && strings.Contains(d.Reason, "control data")
		}
		if !found {
			t.Errorf("no send denial of the source route: %v", r)
		}
	})
}
