//go:build linux

package supervisor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// The supervisor performs every bind() of a confined command itself, for
// two reasons:
//
//   - Abstract unix names live in a network namespace. Where the command
//     shares the host's (--network, or a host without user namespaces), a
//     name it binds is one a host client may connect to, believing it
//     reaches a host service: squatting. Those binds are denied with a fact.
//     Autobind (an address of only the family, or the kernel's implicit one
//     on connect/sendto of a SO_PASSCRED socket) picks a random name no host
//     client expects, and stays allowed; in the sandbox's own network
//     namespace every abstract name is the sandbox's.
//   - While the network is off, the supervisor performs every connect and
//     send to a pathname socket, and reaches only the socket files the
//     sandbox's own processes bound during this run (their inodes, learnt
//     here): a host listener under /tmp (ssh-agent) is not the command's even
//     though /tmp is writable, whether it sits there under its own name, a
//     hard link or a renamed one.
//
// A bind checked and then continued could be raced (another thread swaps
// the address, or the descriptor with dup2, before the kernel runs it). So
// the supervisor binds its own copy of the command's socket, with only the
// address it read once, on the thread restricted like the command
// (restricted_linux.go: no capabilities, no_new_privs, the command's Landlock
// ruleset), with the command's umask and the pinned parent directory (inside
// the sandbox's mount namespace, so the mount view applies) as its working
// directory. The kernel then checks the bind exactly as for the command.

// sockID names a socket file.
type sockID struct{ dev, ino uint64 }

// ownSockets is the set of socket files the sandbox bound.
type ownSockets struct {
	mu  sync.Mutex
	ids map[sockID]struct{}
}

func (o *ownSockets) add(id sockID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids = map[sockID]struct{}{}
	}
	o.ids[id] = struct{}{}
}

func (o *ownSockets) has(st *unix.Stat_t) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.ids[sockID{uint64(st.Dev), st.Ino}]
	return ok
}

// sockaddrStorage is sizeof(struct sockaddr_storage), the kernel's bound on
// a bind address.
const sockaddrStorage = 128

func (n *Notifier) bind(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	pid := int(req.Pid)
	alen := int(int32(a[2]))
	if alen < 0 || alen > sockaddrStorage {
		return verdict{errno: unix.EINVAL}
	}
	var addr []byte
	if alen > 0 {
		var err error
		if addr, err = resolve.ReadBytes(pid, a[1], alen); err != nil {
			return verdict{errno: unix.EFAULT}
		}
	}
	sfd, dom, v, ok := n.targetSocket(req, int(int32(a[0])))
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	if dom != unix.AF_UNIX && n.egress != nil {
		if v, handled := n.bindInet(rule, addr); handled {
			return v
		}
	}
	umask := targetUmask(pid)
	if dom != unix.AF_UNIX || alen <= 2 {
		// Another family (its own checks are the kernel's: ports,
		// Landlock's TCP rules), or autobind / a too short address.
		return errnoVerdict(n.restrictedBind(sfd, -1, addr, umask), 0)
	}
	if binary.LittleEndian.Uint16(addr) != unix.AF_UNIX {
		return verdict{errno: unix.EINVAL}
	}
	name := addr[2:]
	if name[0] == 0 {
		if n.sharesNetNS(pid) {
			return n.deny(rule, unix.EPERM, "", abstractName(name[1:]))
		}
		return errnoVerdict(n.restrictedBind(sfd, -1, addr, umask), 0)
	}
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	p := string(name)
	if last := path.Base(p); last == "." || last == ".." || strings.HasSuffix(p, "/") {
		return verdict{errno: unix.EADDRINUSE}
	}
	t, err := n.target(req)
	if err != nil {
		return verdict{errno: unix.EACCES}
	}
	canon, err := t.ResolveEntry(unix.AT_FDCWD, p)
	if err != nil {
		var e unix.Errno
		if errors.As(err, &e) {
			return verdict{errno: e}
		}
		return verdict{errno: unix.EACCES}
	}
	if modes.Within(canon, "/proc") || !n.policy.Writable(canon) {
		return n.deny(rule, unix.EACCES, canon, "")
	}
	dir, base := path.Split(canon)
	dfd, err := unix.Openat2(t.RootFD, resolve.Rel(path.Clean(dir)), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return errnoVerdict(err, 0) // a component changed since the check
	}
	defer unix.Close(dfd)
	sa := append([]byte{unix.AF_UNIX & 0xff, unix.AF_UNIX >> 8}, base...)
	if err := n.restrictedBind(sfd, dfd, sa, umask); err != nil {
		return errnoVerdict(err, 0)
	}
	if !n.policy.Network {
		if id, ok := boundFile(sfd, dfd, base); ok {
			n.own.add(id)
		}
	}
	return verdict{}
}

// restrictedBind binds sfd to addr on the restricted thread
// (restricted_linux.go), with umask and, when dirfd is not -1, dirfd as its
// working directory.
func (n *Notifier) restrictedBind(sfd, dirfd int, addr []byte, umask int) error {
	return n.restricted.do(true, umask, dirfd, func() error {
		var p unsafe.Pointer
		if len(addr) > 0 {
			p = unsafe.Pointer(&addr[0])
		}
		_, _, e := unix.RawSyscall(unix.SYS_BIND, uintptr(sfd), uintptr(p), uintptr(len(addr)))
		runtime.KeepAlive(addr)
		if e != 0 {
			return e
		}
		return nil
	})
}

// boundFile returns the socket file sfd is bound to. SIOCUNIXFILE opens the
// very file (it needs CAP_NET_ADMIN over the socket's network namespace: the
// sandbox's own, whose user namespace the supervisor owns, or root's). Else
// (the sandbox shares the supervisor's network namespace) sock_diag reports
// the socket's (dev, 32-bit ino), which must match the name just bound; a
// name the command swapped in between matches nothing, and the socket is
// then not recorded (connecting to it is denied).
func boundFile(sfd, dfd int, base string) (sockID, bool) {
	var st unix.Stat_t
	if fd, err := unix.IoctlRetInt(sfd, siocUnixFile); err == nil {
		defer unix.Close(fd)
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return sockID{}, false
		}
		return sockID{uint64(st.Dev), st.Ino}, true
	}
	dev, ino, ok := diagVFS(sfd)
	if !ok {
		return sockID{}, false
	}
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFSOCK || uint32(st.Ino) != ino ||
		uint64(st.Dev) != unix.Mkdev(dev>>20, dev&0xfffff) {
		return sockID{}, false
	}
	return sockID{uint64(st.Dev), st.Ino}, true
}

// siocUnixFile is SIOCUNIXFILE (SIOCPROTOPRIVATE + 0, Linux 4.20).
const siocUnixFile = 0x89e0

// diagVFS asks sock_diag (in the supervisor's network namespace) for the
// socket file of unix socket sfd: the kernel's dev_t and the inode's low 32
// bits. The kernel answers while the request is sent, so nothing waits.
func diagVFS(sfd int) (dev, ino uint32, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return 0, 0, false
	}
	cookie, err := unix.GetsockoptUint64(sfd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return 0, 0, false
	}
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, 0, false
	}
	defer unix.Close(nl)
	le := binary.LittleEndian
	req := make([]byte, 16+24)
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	le.PutUint16(req[6:], unix.NLM_F_REQUEST)
	le.PutUint32(req[8:], 1)
	req[16] = unix.AF_UNIX
	le.PutUint32(req[20:], ^uint32(0))     // every state
	le.PutUint32(req[24:], uint32(st.Ino)) // the socket's inode
	le.PutUint32(req[28:], 2)              // UDIAG_SHOW_VFS
	le.PutUint32(req[32:], uint32(cookie)) // and its cookie
	le.PutUint32(req[36:], uint32(cookie>>32))
	if err := unix.Sendto(nl, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, 0, false
	}
	buf := make([]byte, 4096)
	m, _, err := unix.Recvfrom(nl, buf, unix.MSG_DONTWAIT)
	if err != nil || m < 16+16 {
		return 0, 0, false
	}
	buf = buf[:m]
	if l := int(le.Uint32(buf)); l < 32 || l > m || le.Uint16(buf[4:]) != unix.SOCK_DIAG_BY_FAMILY {
		return 0, 0, false
	} else {
		buf = buf[:l]
	}
	if le.Uint32(buf[20:]) != uint32(st.Ino) || le.Uint32(buf[24:]) != uint32(cookie) || le.Uint32(buf[28:]) != uint32(cookie>>32) {
		return 0, 0, false
	}
	for attrs := buf[32:]; len(attrs) >= 4; {
		l, typ := int(le.Uint16(attrs)), le.Uint16(attrs[2:])
		if l < 4 || l > len(attrs) {
			return 0, 0, false
		}
		if typ == 1 && l >= 12 { // UNIX_DIAG_VFS
			return le.Uint32(attrs[8:]), le.Uint32(attrs[4:]), true
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
	return 0, 0, false
}

// targetUmask reads the umask of process pid; 077 when it cannot be read.
func targetUmask(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(rest), 8, 32); err == nil {
					return int(m & 0o777)
				}
			}
		}
	}
	return 0o077
}

// nsID names a namespace.
type nsID struct{ dev, ino uint64 }

func nsOf(p string) (nsID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return nsID{}, false
	}
	return nsID{uint64(st.Dev), st.Ino}, true
}

// sharesNS reports whether the process of tid is in the supervisor's own
// namespace of the kind ("net", "pid"); when that cannot be read, yes (the
// stricter answer).
func sharesNS(tid int, kind string) bool {
	self, ok1 := nsOf("/proc/thread-self/ns/" + kind)
	its, ok2 := nsOf("/proc/" + strconv.Itoa(tid) + "/ns/" + kind)
	return !ok1 || !ok2 || self == its
}

func (n *Notifier) sharesNetNS(tid int) bool { return sharesNS(tid, "net") }
