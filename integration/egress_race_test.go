//go:build linux

package integration

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// raceToHostPy races the supervisor under an allowlist: one thread calls
// connect (or sendto) with a loopback inet address on descriptor N while
// another swaps a unix socket onto N and rewrites the address to the host
// socket's path (argv[1]), over and over. A supervisor that lets a checked
// call continue to the kernel can be raced that way into the host's socket.
const raceToHostPy = `import ctypes, os, socket, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
target, call, secs = sys.argv[1].encode(), sys.argv[2], float(sys.argv[3])
N = 100
typ = socket.SOCK_STREAM if call == "connect" else socket.SOCK_DGRAM
inet = (struct.pack("<H", socket.AF_INET) + struct.pack(">H", 1) + bytes([127, 0, 0, 1])).ljust(110, b"\0")
un = (struct.pack("<H", socket.AF_UNIX) + target).ljust(110, b"\0")
buf = ctypes.create_string_buffer(inet, 110)
stop = False
def flipper():
    while not stop:
        u = socket.socket(socket.AF_UNIX, typ)
        ctypes.memmove(buf, un, 110)
        os.dup2(u.fileno(), N); u.close()
        ctypes.memmove(buf, inet, 110)
        s = socket.socket(socket.AF_INET, typ)
        os.dup2(s.fileno(), N); s.close()
threading.Thread(target=flipper, daemon=True).start()
tries, t0 = 0, time.time()
while time.time() - t0 < secs:
    tries += 1
    if call == "connect":
        libc.connect(N, buf, 110)
    else:
        libc.sendto(N, b"escaped", 7, 0, buf, 110)
stop = True
print("tries", tries)
`

// TestEgressRaceToHostSocket: under an allowlist the supervisor performs a
// loopback connect or sendto on its copy of the socket, never by letting
// the call continue — or a command could swap a unix socket onto the
// descriptor and the address to a host socket's path after the check (as
// it could before: the host listener accepted connections). The host's
// stream listener and datagram socket, outside the roots, see nothing.
func TestEgressRaceToHostSocket(t *testing.T) {
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		dir := id.outside(t)
		for _, call := range []string{"connect", "sendto"} {
			t.Run(call, func(t *testing.T) {
				sock := filepath.Join(dir, call+".sock")
				// What reached the host socket waits in it (queued
				// connections, datagrams) until drained afterwards.
				var drain func() int
				if call == "connect" {
					ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
					if err != nil {
						t.Fatal(err)
					}
					defer ln.Close()
					drain = func() int {
						n := 0
						for ln.SetDeadline(time.Now().Add(50*time.Millisecond)) == nil {
							c, err := ln.Accept()
							if err != nil {
								return n
							}
							n++
							c.Close()
						}
						return n
					}
				} else {
					pc, err := net.ListenPacket("unixgram", sock)
					if err != nil {
						t.Fatal(err)
					}
					defer pc.Close()
					drain = func() int {
						n, b := 0, make([]byte, 64)
						for pc.SetReadDeadline(time.Now().Add(50*time.Millisecond)) == nil {
							if _, _, err := pc.ReadFrom(b); err != nil {
								return n
							}
							n++
						}
						return n
					}
				}
				if err := os.Chmod(sock, 0o777); err != nil {
					t.Fatal(err)
				}
				// Not scaled: the tries are the subject, and a slower host
				// (the TCG VM) makes fewer in the same time, not weaker ones.
				secs := strconv.FormatFloat((3 * time.Second).Seconds(), 'f', 2, 64)
				r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("workspace-write", ws, "--allow-domain", "registry.test"),
					Argv: []string{"python3", "-c", raceToHostPy, sock, call, secs}, Dir: ws, Timeout: 2 * time.Minute})
				requireExit(t, r, 0)
				if !strings.HasPrefix(r.Stdout, "tries ") {
					t.Fatalf("the race did not run: %v", r)
				}
				if n := drain(); n != 0 {
					t.Errorf("the host's %s socket outside the roots was reached %d times (%s)", call, n, strings.TrimSpace(r.Stdout))
				}
			})
		}
	})
}
