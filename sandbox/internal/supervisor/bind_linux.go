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
// the supervisor binds its own copy of the command's socket (without
// pidfd_getfd: a replacement of a fresh one, installed in its place once
// bound, replace_linux.go), with only the address it read once, on the
// thread restricted like the command (restricted_linux.go: no capabilities,
// no_new_privs, the command's Landlock ruleset), with the command's umask
// and the pinned parent directory (inside the sandbox's mount namespace, so
// the mount view applies) as its working directory — or, where the host
// refuses the thread a filesystem context of its own (unshare(CLONE_FS):
// Docker's default seccomp profile), through /proc/self/fd/DIR/NAME, the
// umask applied to the socket's mode first. The kernel then checks the bind
// exactly as for the command.

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
	fd := int(int32(a[0]))
	if v, ok := n.rebound(req, fd, addr); ok {
		return v
	}
	v := n.bindFor(req, rule, fd, addr)
	if !v.cont && !v.abandon && v.errno == 0 {
		v.lost = n.bound(req, fd, addr)
	}
	return v
}

// bindFor binds the command's descriptor fd to addr, the address it gave,
// or answers why not.
func (n *Notifier) bindFor(req *seccomp.Notif, rule seccomp.Rule, fd int, addr []byte) verdict {
	pid := int(req.Pid)
	alen := len(addr)
	sock, v, ok := n.bindSocket(req, rule, fd, addr)
	if !ok {
		return v
	}
	defer unix.Close(sock.fd)
	sfd, dom := sock.fd, sock.dom
	if dom != unix.AF_UNIX && n.emulated() {
		return n.bindOwn(req, rule, sock, addr)
	}
	if dom != unix.AF_UNIX && n.egress != nil {
		if v, handled := n.bindInet(rule, addr); handled {
			return v
		}
	}
	umask := targetUmask(pid)
	if dom != unix.AF_UNIX || alen <= 2 {
		// Another family (its own checks are the kernel's: ports,
		// Landlock's TCP rules), or autobind / a too short address.
		v, _ := n.bindOn(req, rule, sock, -1, addr, umask, "", "")
		return v
	}
	if binary.LittleEndian.Uint16(addr) != unix.AF_UNIX {
		return verdict{errno: unix.EINVAL}
	}
	name := addr[2:]
	if name[0] == 0 {
		if n.sharesNetNS(pid) {
			return n.deny(rule, unix.EPERM, "", abstractName(name[1:]))
		}
		v, _ := n.bindOn(req, rule, sock, -1, addr, umask, "", abstractName(name[1:]))
		return v
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
	// The socket file is a change like any other (its state before the
	// bind recorded first).
	n.changes.Touch(t.RootFD, canon)
	sa := append([]byte{unix.AF_UNIX & 0xff, unix.AF_UNIX >> 8}, base...)
	if v, ok := n.bindOn(req, rule, sock, dfd, sa, umask, canon, ""); !ok {
		return v
	}
	if !n.policy.Network {
		if id, ok := boundFile(sfd, dfd, base); ok {
			n.own.add(id)
		}
	}
	return verdict{}
}

// boundSocket is the socket the supervisor binds for the command's
// descriptor: its copy, or a replacement to install in the command's place
// before it is bound (without pidfd_getfd).
type boundSocket struct {
	fd, dom int
	replace bool
	cmdFD   int       // the command's descriptor (replace)
	cmd     cmdSocket // what it was (replace)
}

// bindSocket returns the socket to bind for the command's descriptor fd,
// addr being the address the command asked for (for a fact); ok false: v
// is the answer. Without pidfd_getfd only a fresh unix socket is replaced:
// a bound one gets the kernel's EINVAL, a connected one or another family a
// refusal with a fact.
func (n *Notifier) bindSocket(req *seccomp.Notif, rule seccomp.Rule, fd int, addr []byte) (boundSocket, verdict, bool) {
	if !n.nocopy {
		sfd, dom, v, ok := n.targetSocket(req, fd)
		return boundSocket{fd: sfd, dom: dom}, v, ok
	}
	path, address := bindTargetName(addr)
	s, v, ok := n.inspectSocket(req, rule, fd, path, address)
	switch {
	case !ok:
		return boundSocket{}, v, false
	case s.bound:
		return boundSocket{}, verdict{errno: unix.EINVAL}, false // the kernel's answer
	case s.peer:
		return boundSocket{}, n.unemulated(rule, path, address, "only an unconnected socket can be replaced"), false
	}
	sfd, err := s.replacement()
	if err != nil {
		return boundSocket{}, errnoVerdict(err, 0), false
	}
	return boundSocket{fd: sfd, dom: unix.AF_UNIX, replace: true, cmdFD: fd, cmd: s}, verdict{}, true
}

// bindTargetName renders a bind address for a fact: a path, or an address
// (an abstract "@name", an inet "ip:port").
func bindTargetName(addr []byte) (path, address string) {
	if len(addr) < 3 {
		return "", ""
	}
	switch binary.LittleEndian.Uint16(addr) {
	case unix.AF_UNIX:
		name := addr[2:]
		if name[0] == 0 {
			return "", abstractName(name[1:])
		}
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		return string(name), ""
	case unix.AF_INET, unix.AF_INET6:
		return "", inetAddress(addr)
	}
	return "", ""
}

// bindOn binds sock to addr for the command (restrictedBind, dirfd and
// umask as there), a replacement once it is installed in the command's
// place. path and address name the target in a fact. ok: bound; else v is
// the answer.
func (n *Notifier) bindOn(req *seccomp.Notif, rule seccomp.Rule, sock boundSocket, dirfd int, addr []byte, umask int, path, address string) (v verdict, ok bool) {
	if sock.replace {
		if v, ok := n.install(req, rule, sock.fd, sock.cmdFD, sock.cmd, path, address); !ok {
			return v, false
		}
	}
	err := n.restrictedBind(sock.fd, dirfd, addr, umask)
	var ue unemulatedError
	switch {
	case errors.As(err, &ue):
		v := n.deny(rule, unix.EACCES, path, address)
		v.fact.Reason = string(ue)
		return v, false
	case err != nil:
		return errnoVerdict(err, 0), false
	}
	return verdict{}, true
}

// unemulatedError is a call the supervisor cannot perform on this host; it
// says why.
type unemulatedError string

func (e unemulatedError) Error() string { return string(e) }

// errLongName: without a filesystem context of its own the restricted
// thread names the directory as /proc/self/fd/N, which leaves less room
// for the socket's name than the command had.
const errLongName = unemulatedError("no unshare(CLONE_FS) on this host: a socket name this long cannot be bound for the command")

// restrictedBind binds sfd to addr on the restricted thread
// (restricted_linux.go), with umask and, when dirfd is not -1, dirfd as its
// working directory (addr then holds the name in it). Where the thread has
// no filesystem context of its own the name is bound as
// /proc/self/fd/DIRFD/NAME, and the umask is applied to the socket's mode
// for the bind (the socket file gets that mode, less the process's umask).
func (n *Notifier) restrictedBind(sfd, dirfd int, addr []byte, umask int) error {
	return n.restricted.doFS(umask, dirfd, func(private bool) error {
		if !private && dirfd >= 0 {
			a := append(addr[:2:2], "/proc/self/fd/"+strconv.Itoa(dirfd)+"/"...)
			a = append(a, addr[2:]...)
			if len(a)-2 > len(unix.RawSockaddrUnix{}.Path) {
				return errLongName
			}
			var st unix.Stat_t
			if err := unix.Fstat(sfd, &st); err != nil {
				return err
			}
			mode := st.Mode & 0o777
			if err := unix.Fchmod(sfd, mode&^uint32(umask)); err != nil {
				return err
			}
			defer unix.Fchmod(sfd, mode)
			addr = a
		}
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
	const udiagShowVFS, unixDiagVFS = 2, 1
	msg, attrs, err := unixDiagQuery(uint32(st.Ino), [2]uint32{uint32(cookie), uint32(cookie >> 32)}, udiagShowVFS)
	le := binary.LittleEndian
	if err != nil || le.Uint32(msg[8:]) != uint32(cookie) || le.Uint32(msg[12:]) != uint32(cookie>>32) {
		return 0, 0, false
	}
	err = eachAttr(attrs, func(typ uint16, val []byte) {
		if typ == unixDiagVFS && len(val) >= 8 {
			ino, dev, ok = le.Uint32(val), le.Uint32(val[4:]), true
		}
	})
	return dev, ino, ok && err == nil
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
