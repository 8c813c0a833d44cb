//go:build linux

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// queuedWait bounds the look for a connection or datagram a command made
// before it exited. None is in flight by then: the kernel queued a unix
// connection at connect, and on loopback a TCP connection before connect
// returned and a datagram before sendto returned. So it is not scaled: a
// longer look proves nothing more, and cost 3 s a check in the VM.
const queuedWait = 50 * time.Millisecond

// listener is a loopback endpoint started by the test process.
type listener struct {
	script string // the bash command that reaches it
	// saw reports whether the endpoint got a connection/datagram within
	// wait: testtime.Scale(d) for one that should come, queuedWait for
	// one the command made before it exited.
	saw func(wait time.Duration) bool
	// denial the report must name when it is blocked
	op, target string
}

// tcpListener listens on the host's loopback; the command runs on host d
// (nil: this host as it is), where its own loopback (ownLoopback) makes
// the denial a refused connect to the host's port, else a refused socket.
func tcpListener(t *testing.T, network, addr string, d *degradation) listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("cannot listen on %s %s on this host: %v", network, addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	host, family := "127.0.0.1", "AF_INET"
	if network == "tcp6" {
		host, family = "::1", "AF_INET6"
	}
	l := listener{
		script: fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d && echo hi >&3`, host, port),
		saw:    acceptSaw(ln),
		op:     "socket", target: family,
	}
	if ownLoopback(d) {
		l.op, l.target = "connect", net.JoinHostPort(host, strconv.Itoa(port))
	}
	return l
}

func udpListener(t *testing.T, d *degradation) listener {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	port := pc.LocalAddr().(*net.UDPAddr).Port
	l := listener{
		script: fmt.Sprintf(`python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"hi", ("127.0.0.1", %d))'`, port),
		saw: func(wait time.Duration) bool {
			_ = pc.SetReadDeadline(time.Now().Add(wait))
			buf := make([]byte, 64)
			n, _, err := pc.ReadFrom(buf)
			return err == nil && n > 0
		},
		op: "socket", target: "AF_INET",
	}
	if ownLoopback(d) {
		l.op, l.target = "send", fmt.Sprintf("127.0.0.1:%d", port)
	}
	return l
}

func unixListener(t *testing.T, path string, abstract bool) listener {
	t.Helper()
	addr := path
	if abstract {
		addr = "@" + path
	}
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatalf("listen unix %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	if !abstract {
		// the socket is the only thing between the sandbox and the listener:
		// make DAC allow the connect for any identity
		if err := os.Chmod(path, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	pyAddr := strconv.Quote(path)
	if abstract {
		pyAddr = `"\0" + ` + strconv.Quote(path)
	}
	return listener{
		script: fmt.Sprintf(`python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(%s); s.send(b"hi")'`, pyAddr),
		saw:    acceptSaw(ln),
		op:     "connect", target: addr,
	}
}

func acceptSaw(ln net.Listener) func(time.Duration) bool {
	return func(wait time.Duration) bool {
		type deadliner interface{ SetDeadline(time.Time) error }
		if d, ok := ln.(deadliner); ok {
			_ = d.SetDeadline(time.Now().Add(wait))
		}
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				panic(fmt.Sprintf("accept: %v", err))
			}
			return false
		}
		c.Close()
		return true
	}
}

// TestNetworkBlocked: loopback TCP v4/v6, UDP, a unix socket outside the
// writable roots and an abstract unix socket are unreachable from both
// confined modes; the listener saw nothing; the report names the denial. The
// same succeed with --network and in danger-full-access.
func TestNetworkBlocked(t *testing.T) {
	t.Parallel()
	type endpoint struct {
		name string
		make func(t *testing.T, id identity) listener
	}
	endpoints := []endpoint{
		{"tcp4 127.0.0.1", func(t *testing.T, _ identity) listener { return tcpListener(t, "tcp4", "127.0.0.1:0", simulated()) }},
		{"udp4 127.0.0.1", func(t *testing.T, _ identity) listener { return udpListener(t, simulated()) }},
		{"tcp6 ::1", func(t *testing.T, _ identity) listener { return tcpListener(t, "tcp6", "[::1]:0", simulated()) }},
		{"unix socket outside the roots", func(t *testing.T, id identity) listener {
			return unixListener(t, filepath.Join(id.outside(t), "s.sock"), false)
		}},
		{"unix socket outside via a symlink in the workspace", func(t *testing.T, id identity) listener {
			sock := filepath.Join(id.outside(t), "s.sock")
			l := unixListener(t, sock, false)
			// the symlink lives in a workspace the test shares through $LINKDIR
			dir := id.workspace(t)
			if err := os.Symlink(sock, filepath.Join(dir, "link.sock")); err != nil {
				t.Fatal(err)
			}
			l.script = strings.Replace(l.script, strconv.Quote(sock), strconv.Quote(filepath.Join(dir, "link.sock")), 1)
			return l
		}},
		{"abstract unix socket", func(t *testing.T, _ identity) listener {
			return unixListener(t, "dsh-it-"+nonce(), true)
		}},
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, ep := range endpoints {
			t.Run(ep.name, func(t *testing.T) {
				for _, mode := range confinedModes {
					t.Run(mode+" denied", func(t *testing.T) {
						l := ep.make(t, id)
						ws := id.workspace(t)
						r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: bash(l.script), Dir: ws})
						requireFailed(t, r)
						if l.saw(queuedWait) {
							t.Errorf("the listener got a connection/datagram from the sandbox")
						}
						requireDenial(t, r, mode, l.op, l.target)
					})
					t.Run(mode+" --network allowed", func(t *testing.T) {
						l := ep.make(t, id)
						ws := id.workspace(t)
						r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws, "--network"), Argv: bash(l.script), Dir: ws})
						requireExit(t, r, 0)
						if !l.saw(testtime.Scale(5 * time.Second)) {
							t.Errorf("the listener saw nothing with --network")
						}
						requireNoDenials(t, r)
						if rep := requireReport(t, r); !rep.Network {
							t.Errorf("report network = false with --network")
						}
					})
				}
				t.Run("danger-full-access allowed", func(t *testing.T) {
					l := ep.make(t, id)
					ws := id.workspace(t)
					r := id.run(t, runOpts{Flags: sandboxFlags("danger-full-access", ws), Argv: bash(l.script), Dir: ws})
					requireExit(t, r, 0)
					if !l.saw(testtime.Scale(5 * time.Second)) {
						t.Errorf("the listener saw nothing in danger-full-access")
					}
					requireNoDenials(t, r)
				})
			})
		}
	})
}

// TestUnixDatagramOutsideDenied: a datagram sent with an explicit address to
// a socket outside the writable roots (like /dev/log or journald) does not
// reach it — through sendto(), and through sendmsg(), whose address sits in
// a struct the seccomp filter cannot see.
func TestUnixDatagramOutsideDenied(t *testing.T) {
	t.Parallel()
	calls := []struct{ name, py string }{
		{"sendto", `s.sendto(b"hi", %s)`},
		{"sendmsg", `s.sendmsg([b"hi"], [], 0, %s)`},
		{"sendmsg two buffers", `s.sendmsg([b"h", b"i"], [], 0, %s)`},
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			for _, call := range calls {
				t.Run(mode+"/"+call.name, func(t *testing.T) {
					sock := filepath.Join(id.outside(t), "dgram.sock")
					pc, err := net.ListenPacket("unixgram", sock)
					if err != nil {
						t.Fatal(err)
					}
					defer pc.Close()
					if err := os.Chmod(sock, 0o777); err != nil {
						t.Fatal(err)
					}
					ws := id.workspace(t)
					py := "import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); " + fmt.Sprintf(call.py, strconv.Quote(sock))
					r := id.run(t, runOpts{
						Flags: sandboxFlags(mode, ws),
						Argv:  bash(fmt.Sprintf(`python3 -c '%s'`, py)),
						Dir:   ws,
					})
					requireFailed(t, r)
					_ = pc.SetReadDeadline(time.Now().Add(queuedWait))
					if n, _, err := pc.ReadFrom(make([]byte, 16)); err == nil {
						t.Errorf("the outside datagram socket received %d bytes", n)
					}
					rep := requireReport(t, r)
					found := false
					for _, d := range rep.Denials {
						found = found || (d.Op == "send" && d.target() == sock)
					}
					if !found {
						t.Errorf("no send denial names %s: %v", sock, rep.Denials)
					}
				})
			}
		}
	})
}

// TestUnixSendmsgInside: sendmsg keeps working inside the sandbox — to a
// datagram socket in the workspace, with several buffers, and passing an fd
// with SCM_RIGHTS over a socketpair — and records no denial. A host without
// pidfd_getfd refuses the SCM_RIGHTS part (TestDockerSocketDenials), so
// there only the first part is the subject.
func TestUnixSendmsgInside(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.workspace(t)
		script := `python3 - <<'EOF'
import array, os, socket, sys
p = os.path.join(os.getcwd(), "in.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); srv.bind(p)
cli = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n = cli.sendmsg([b"da", b"ta"], [], 0, p)
print(n, srv.recv(16).decode())
if sys.argv[1:] == ["no-rights"]:
    sys.exit(0)
a, b = socket.socketpair()
r, w = os.pipe()
a.sendmsg([b"fd"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
msg, anc, _, _ = b.recvmsg(16, socket.CMSG_SPACE(4))
fd = array.array("i", anc[0][2])[0]
os.write(fd, b"passed")
print(msg.decode(), os.read(r, 16).decode())
EOF`
		want := "4 data fd passed"
		if noFDCopies() {
			script = strings.Replace(script, "python3 -", "python3 - no-rights", 1)
			want = "4 data"
		}
		r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash(script), Dir: ws})
		requireExit(t, r, 0)
		if got := strings.Fields(r.Stdout); strings.Join(got, " ") != want {
			t.Errorf("stdout = %q, want %q", r.Stdout, want)
		}
		requireNoDenials(t, r)
	})
}

// TestUnixSocketsInsideWorkspace: a unix socket the command creates in the
// workspace works (server and client in one command). A listener the host
// put inside the workspace is not the command's: see
// TestHostSocketInWritableRootDenied.
func TestUnixSocketsInsideWorkspace(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		t.Run("command's own socket", func(t *testing.T) {
			ws := id.workspace(t)
			script := `python3 - <<'EOF'
import os, socket
p = os.path.join(os.getcwd(), "own.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(1)
cli = socket.socket(socket.AF_UNIX); cli.connect(p); cli.send(b"ping")
conn, _ = srv.accept(); print(conn.recv(4).decode())
EOF`
			r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash(script), Dir: ws})
			requireExit(t, r, 0)
			if strings.TrimSpace(r.Stdout) != "ping" {
				t.Errorf("stdout = %q, want ping", r.Stdout)
			}
			requireNoDenials(t, r)
		})
	})
}

// TestSocketFamiliesDenied: raw, packet, netlink and vsock sockets are denied
// in confined modes (even without a listener to talk to).
func TestSocketFamiliesDenied(t *testing.T) {
	own := ownLoopback(simulated())
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			for _, c := range []struct {
				name, py, family string
				// ownLoopback: the answer where the command has a loopback
				// of its own ("" denied as elsewhere): a raw socket is the
				// kernel's EPERM (no capability), a route netlink socket
				// reads the namespace's own interfaces.
				ownLoopback string
			}{
				{"AF_INET raw", `socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)`, "AF_INET", "EPERM"},
				{"AF_PACKET", `socket.socket(socket.AF_PACKET, socket.SOCK_RAW)`, "AF_PACKET", ""},
				{"AF_NETLINK route", `socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)`, "AF_NETLINK", "ok"},
				{"AF_NETLINK audit", `socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)`, "AF_NETLINK", ""},
				{"AF_VSOCK", `socket.socket(40, socket.SOCK_STREAM)`, "AF_VSOCK", ""},
				{"AF_INET with garbage in the upper 32 bits", `import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(ctypes.c_long(41), ctypes.c_long((1 << 32) | 2), ctypes.c_long(1), ctypes.c_long(0)); print(r, ctypes.get_errno()); sys.exit(0 if r >= 0 else 1)`, "AF_INET", ""},
			} {
				t.Run(mode+"/"+c.name, func(t *testing.T) {
					ws := id.workspace(t)
					r := id.run(t, runOpts{
						Flags: sandboxFlags(mode, ws),
						Argv:  []string{"python3", "-c", "import socket; " + c.py},
						Dir:   ws,
					})
					switch {
					case own && c.ownLoopback == "ok":
						requireExit(t, r, 0)
					case own && c.ownLoopback == "EPERM":
						requireFailed(t, r)
						if !strings.Contains(r.Stderr, "Operation not permitted") {
							t.Errorf("stderr %q, want EPERM", r.Stderr)
						}
					default:
						requireFailed(t, r)
						requireDenial(t, r, mode, "socket", c.family)
					}
				})
			}
		}
	})
}
