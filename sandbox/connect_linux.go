//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// connect decides a connect() made while the network is off. Only pathname
// unix sockets inside the writable roots may be reached, and the supervisor
// connects the target's socket itself: it takes a copy of the socket with
// pidfd_getfd, pins the checked socket file with an O_PATH open that refuses
// symlinks, and connects through /proc/self/fd. The target's memory is read
// once; changing it afterwards changes nothing. On kernels without Landlock
// ABI 9 this is what keeps docker.sock, D-Bus and ssh-agent out of reach.
func (n *notifier) connect(req *libseccomp.ScmpNotifReq, rule seccomp.Rule) verdict {
	pid := int(req.Pid)
	a := req.Data.Args
	sockfd, addr, alen := int(int32(a[0])), a[1], int(uint32(a[2]))
	if alen < 2 || alen > 128 {
		return verdict{errno: unix.EINVAL}
	}
	b, err := readBytes(pid, addr, alen)
	if err != nil {
		return verdict{errno: unix.EFAULT}
	}
	switch fam := binary.LittleEndian.Uint16(b); fam {
	case unix.AF_UNIX:
	case unix.AF_INET, unix.AF_INET6:
		return n.deny(rule, unix.EACCES, "", inetAddress(b))
	default:
		return verdict{errno: unix.EINVAL}
	}
	name := b[2:]
	if len(name) == 0 {
		return verdict{errno: unix.EINVAL}
	}
	if name[0] == 0 {
		// Abstract sockets live in the host's (or the sandbox's empty)
		// network namespace; none may be reached without network.
		return n.deny(rule, unix.EPERM, "", abstractName(name[1:]))
	}
	if i := indexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	t, err := openTarget(pid)
	if err != nil {
		return verdict{errno: unix.EACCES}
	}
	defer t.close()
	canon, err := t.resolve(unix.AT_FDCWD, string(name), true)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return verdict{errno: err.(unix.Errno)}
		}
		return n.deny(rule, unix.EACCES, string(name), "")
	}
	if modes.Within(canon, "/proc") || !n.policy.Writable(canon) {
		return n.deny(rule, unix.EACCES, canon, "")
	}
	return emulateConnect(t, tgid(pid), sockfd, canon)
}

func emulateConnect(t *target, tgid, sockfd int, canon string) verdict {
	pin, err := unix.Openat2(t.rootfd, rel(canon), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return verdict{errno: unix.ENOENT}
		}
		return verdict{errno: unix.EACCES} // a symlink appeared after the check
	}
	defer unix.Close(pin)
	var st unix.Stat_t
	if err := unix.Fstat(pin, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return verdict{errno: unix.ECONNREFUSED}
	}
	pidfd, err := unix.PidfdOpen(tgid, 0)
	if err != nil {
		return verdict{errno: unix.EACCES}
	}
	defer unix.Close(pidfd)
	sfd, err := unix.PidfdGetfd(pidfd, sockfd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return verdict{errno: unix.EBADF}
		}
		return verdict{errno: unix.EACCES}
	}
	defer unix.Close(sfd)
	if err := unix.Connect(sfd, &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(pin)}); err != nil {
		var e unix.Errno
		if errors.As(err, &e) {
			return verdict{errno: e}
		}
		return verdict{errno: unix.ECONNREFUSED}
	}
	return verdict{}
}

// inetAddress renders a sockaddr_in/sockaddr_in6 as "ip:port".
func inetAddress(b []byte) string {
	fam := binary.LittleEndian.Uint16(b)
	switch {
	case fam == unix.AF_INET && len(b) >= 8:
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
	case fam == unix.AF_INET6 && len(b) >= 24:
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
	}
	return fmt.Sprintf("family %d", fam)
}
